//! [`HttpModel`]: the four provider formats over HTTP. The adapters of
//! `toolhost-providers` build every body and decode every reply; this
//! module only knows each provider's endpoint and key header.
//!
//! | provider | endpoint (below the base URL) | key header |
//! |---|---|---|
//! | OpenAI Chat | `POST /chat/completions` | `Authorization: Bearer` |
//! | OpenAI Responses | `POST /responses` | `Authorization: Bearer` |
//! | Anthropic Messages | `POST /messages` (+ `anthropic-version`) | `x-api-key` |
//! | Gemini | `POST /models/<model>:generateContent` (`:streamGenerateContent?alt=sse` streaming) | `x-goog-api-key` |
//!
//! The base URL is the provider's API root as its documentation gives it
//! (`https://api.openai.com/v1`, `https://api.anthropic.com/v1`,
//! `https://generativelanguage.googleapis.com/v1beta`), or a loopback
//! server's. Retrying is the caller's decision ([`ModelError::retryable`]).

use std::time::Duration;

use serde_json::Value;
use toolhost_core::AgentModelRequest;
use toolhost_net::{ClientOptions, Endpoint, TrustRoots};
use toolhost_providers::{Provider, SseEvent, SseFramer};

use crate::{AgentModel, ModelError, ModelFuture, ModelReply};

/// `anthropic-version` sent with every Anthropic request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How much of an error body an error message keeps.
const ERROR_BODY_CHARS: usize = 2_000;

/// Largest reply body read (a whole JSON reply, or all of a stream's
/// bytes): a provider's answer is read into memory, so it is bounded.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct HttpModelConfig {
    pub provider: Provider,
    /// The API root, without a trailing slash.
    pub base_url: String,
    /// Sent with every request; `None` sends no key header (a local server).
    pub api_key: Option<String>,
    /// Ask for server-sent events and assemble the reply from them.
    pub stream: bool,
    /// The whole call, connection to last byte.
    pub timeout: Duration,
}

#[derive(Debug)]
pub struct HttpModel {
    config: HttpModelConfig,
    client: reqwest::Client,
}

impl HttpModel {
    /// The base URL is parsed (no user name or password in it); the client
    /// follows no redirect to another origin, so the key is only ever sent
    /// where the base URL points.
    pub fn new(mut config: HttpModelConfig) -> Result<Self, ModelError> {
        let endpoint = Endpoint::parse(&config.base_url)
            .map_err(|error| ModelError::Configuration(format!("the model URL: {error}")))?;
        config.base_url = endpoint.as_str().to_owned();
        while config.base_url.ends_with('/') {
            config.base_url.pop();
        }
        let client = toolhost_net::client(&ClientOptions {
            timeout: Some(config.timeout),
            roots: TrustRoots::System,
        })
        .map_err(|error| ModelError::Configuration(error.to_string()))?;
        Ok(Self { config, client })
    }

    fn provider_name(&self) -> String {
        self.config.provider.name().to_owned()
    }

    /// The endpoint for a request with this model name.
    fn url(&self, model: &str) -> String {
        let base = &self.config.base_url;
        match self.config.provider {
            Provider::OpenaiChat => format!("{base}/chat/completions"),
            Provider::OpenaiResponses => format!("{base}/responses"),
            Provider::Anthropic => format!("{base}/messages"),
            Provider::Gemini { .. } if self.config.stream => {
                format!("{base}/models/{model}:streamGenerateContent?alt=sse")
            }
            Provider::Gemini { .. } => format!("{base}/models/{model}:generateContent"),
        }
    }

    fn with_headers(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let builder = match self.config.provider {
            Provider::Anthropic => builder.header("anthropic-version", ANTHROPIC_VERSION),
            _ => builder,
        };
        let Some(key) = &self.config.api_key else {
            return builder;
        };
        match self.config.provider {
            Provider::OpenaiChat | Provider::OpenaiResponses => builder.bearer_auth(key),
            Provider::Anthropic => builder.header("x-api-key", key),
            Provider::Gemini { .. } => builder.header("x-goog-api-key", key),
        }
    }

    fn transport(&self, error: reqwest::Error) -> ModelError {
        if error.is_timeout() {
            ModelError::Timeout {
                provider: self.provider_name(),
                seconds: self.config.timeout.as_secs(),
            }
        } else {
            ModelError::Transport {
                provider: self.provider_name(),
                // The chain says why (refused, reset, a redirect elsewhere);
                // the top says where.
                message: toolhost_net::error_chain(&error),
            }
        }
    }

    async fn send(&self, request: &AgentModelRequest) -> Result<ModelReply, ModelError> {
        let provider = self.config.provider;
        let body = provider.encode_request(request, self.config.stream)?;
        let url = self.url(&request.settings.model);
        tracing::debug!(%url, provider = provider.name(), "model request");
        let mut response = self
            .with_headers(self.client.post(&url).json(&body))
            .send()
            .await
            .map_err(|error| self.transport(error))?;
        let status = response.status();
        if !status.is_success() {
            // Only the start of an error body is kept, so only that is read.
            let bytes = self
                .read_body(&mut response, ERROR_BODY_CHARS * 4)
                .await
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            return Err(ModelError::Status {
                provider: self.provider_name(),
                status: status.as_u16(),
                body: text.chars().take(ERROR_BODY_CHARS).collect(),
            });
        }
        if self.config.stream {
            self.assemble(request, response).await
        } else {
            let bytes = self.read_body(&mut response, MAX_RESPONSE_BYTES).await?;
            if bytes.len() > MAX_RESPONSE_BYTES {
                return Err(self.too_large());
            }
            let raw: Value =
                serde_json::from_slice(&bytes).map_err(|error| ModelError::NotJson {
                    provider: self.provider_name(),
                    message: error.to_string(),
                })?;
            let response = provider.decode_response(&request.turn, &raw)?;
            Ok(ModelReply { response, raw })
        }
    }

    /// At most `limit` bytes of the body, and one chunk more when there is
    /// more (so the caller can tell a body over the limit).
    async fn read_body(
        &self,
        response: &mut reqwest::Response,
        limit: usize,
    ) -> Result<Vec<u8>, ModelError> {
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.transport(error))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > limit {
                break;
            }
        }
        Ok(body)
    }

    fn too_large(&self) -> ModelError {
        ModelError::TooLarge {
            provider: self.provider_name(),
            limit: MAX_RESPONSE_BYTES,
        }
    }

    /// Read a server-sent-event body chunk by chunk into the provider's
    /// assembler; the raw copy is the list of events.
    async fn assemble(
        &self,
        request: &AgentModelRequest,
        mut response: reqwest::Response,
    ) -> Result<ModelReply, ModelError> {
        let mut framer = SseFramer::new();
        let mut assembler = self.config.provider.stream_assembler(&request.turn);
        let mut events: Vec<Value> = Vec::new();
        let mut received = 0_usize;
        let mut feed = |batch: Vec<SseEvent>| -> Result<(), ModelError> {
            for event in batch {
                assembler.push(&event)?;
                events.push(serde_json::json!({"event": event.event, "data": event.data}));
            }
            Ok(())
        };
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.transport(error))?
        {
            received += chunk.len();
            if received > MAX_RESPONSE_BYTES {
                return Err(self.too_large());
            }
            feed(framer.push(&chunk)?)?;
        }
        // A last event without its blank line is dropped, as the SSE rules
        // say; the assembler then reports the stream incomplete.
        let response = assembler.finish()?;
        Ok(ModelReply {
            response,
            raw: Value::Array(events),
        })
    }
}

impl AgentModel for HttpModel {
    fn describe(&self) -> String {
        format!("{}:{}", self.config.provider.name(), self.config.base_url)
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        Box::pin(self.send(request))
    }
}
