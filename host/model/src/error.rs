//! [`ModelError`]: why a model call produced no usable reply.

use toolhost_core::{Classified, ErrorClass};
use toolhost_providers::{DecodeError, EncodeError};

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The script has no reply left for this request.
    #[error(
        "model.script_exhausted: the script has {replies} replies and the run asked for reply {requested}"
    )]
    ScriptExhausted { replies: usize, requested: usize },

    /// A script file that cannot be used (found when it is loaded).
    #[error("model.script_invalid: {0}")]
    ScriptInvalid(String),

    /// The request could not be expressed in the provider's format.
    #[error(transparent)]
    Encode(#[from] EncodeError),

    /// The reply broke the wire format or the request's turn contract.
    #[error(transparent)]
    Decode(#[from] DecodeError),

    /// No HTTP answer: connection refused, reset, DNS, TLS.
    #[error("model.transport_failed: {provider}: {message}")]
    Transport { provider: String, message: String },

    /// No answer within the client's timeout.
    #[error("model.timeout: {provider} did not answer within {seconds} s")]
    Timeout { provider: String, seconds: u64 },

    /// An HTTP answer other than 2xx.
    #[error("{code}: {provider} answered HTTP {status}: {body}", code = status_code(*.status))]
    Status {
        provider: String,
        status: u16,
        /// The start of the error body (at most 2,000 characters).
        body: String,
    },

    /// A 2xx answer whose body is not JSON.
    #[error("model.invalid_response: {provider} sent a body that is not JSON: {message}")]
    NotJson { provider: String, message: String },

    /// A reply body larger than the client reads.
    #[error("model.response_too_large: {provider} sent a reply of more than {limit} bytes")]
    TooLarge { provider: String, limit: usize },

    /// The model's configuration is unusable (missing API key variable).
    #[error("model.configuration_invalid: {0}")]
    Configuration(String),
}

fn status_code(status: u16) -> &'static str {
    match status {
        401 | 403 => "model.unauthorized",
        429 => "model.rate_limited",
        500..=599 => "model.upstream_failed",
        _ => "model.request_rejected",
    }
}

impl ModelError {
    /// Trying the same call again may work (rate limits, server errors,
    /// broken connections). Decoding and contract errors never are.
    pub fn retryable(&self) -> bool {
        match self {
            ModelError::Transport { .. } | ModelError::Timeout { .. } => true,
            ModelError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

impl Classified for ModelError {
    fn code(&self) -> &'static str {
        match self {
            ModelError::ScriptExhausted { .. } => "model.script_exhausted",
            ModelError::ScriptInvalid(_) => "model.script_invalid",
            ModelError::Encode(error) => error.code(),
            ModelError::Decode(error) => error.code(),
            ModelError::Transport { .. } => "model.transport_failed",
            ModelError::Timeout { .. } => "model.timeout",
            ModelError::Status { status, .. } => status_code(*status),
            ModelError::NotJson { .. } => "model.invalid_response",
            ModelError::TooLarge { .. } => "model.response_too_large",
            ModelError::Configuration(_) => "model.configuration_invalid",
        }
    }

    /// A model call that fails ends the run (after the runtime's retries).
    fn class(&self) -> ErrorClass {
        match self {
            ModelError::Decode(error) => error.class(),
            _ => ErrorClass::SystemFailure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16) -> ModelError {
        ModelError::Status {
            provider: "openai_chat".into(),
            status,
            body: "nope".into(),
        }
    }

    #[test]
    fn http_statuses_map_to_codes_and_retryability() {
        assert_eq!(status(401).code(), "model.unauthorized");
        assert_eq!(status(429).code(), "model.rate_limited");
        assert_eq!(status(503).code(), "model.upstream_failed");
        assert_eq!(status(400).code(), "model.request_rejected");
        assert!(status(429).retryable());
        assert!(status(502).retryable());
        assert!(!status(400).retryable());
        assert!(!status(401).retryable());
        assert!(status(429).to_string().starts_with("model.rate_limited: "));
    }
}
