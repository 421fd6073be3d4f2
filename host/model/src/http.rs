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
use toolhost_providers::{Provider, SseEvent, SseFramer};

use crate::{AgentModel, ModelError, ModelFuture, ModelReply};

/// `anthropic-version` sent with every Anthropic request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How much of an error body an error message keeps.
const ERROR_BODY_CHARS: usize = 2_000;

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
    pub fn new(mut config: HttpModelConfig) -> Result<Self, ModelError> {
        while config.base_url.ends_with('/') {
            config.base_url.pop();
        }
        // reqwest is built without a default crypto provider; install ring
        // once per process (a second install is refused and harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|error| ModelError::Configuration(format!("HTTP client: {error}")))?;
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
                // The chain says why (refused, reset); the top says where.
                message: error_chain(&error),
            }
        }
    }

    async fn send(&self, request: &AgentModelRequest) -> Result<ModelReply, ModelError> {
        let provider = self.config.provider;
        let body = provider.encode_request(request, self.config.stream)?;
        let url = self.url(&request.settings.model);
        tracing::debug!(%url, provider = provider.name(), "model request");
        let response = self
            .with_headers(self.client.post(&url).json(&body))
            .send()
            .await
            .map_err(|error| self.transport(error))?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(ModelError::Status {
                provider: self.provider_name(),
                status: status.as_u16(),
                body: text.chars().take(ERROR_BODY_CHARS).collect(),
            });
        }
        if self.config.stream {
            self.assemble(request, response).await
        } else {
            let bytes = response
                .bytes()
                .await
                .map_err(|error| self.transport(error))?;
            let raw: Value =
                serde_json::from_slice(&bytes).map_err(|error| ModelError::NotJson {
                    provider: self.provider_name(),
                    message: error.to_string(),
                })?;
            let response = provider.decode_response(&request.turn, &raw)?;
            Ok(ModelReply { response, raw })
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

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl AgentModel for HttpModel {
    fn describe(&self) -> String {
        format!("{}:{}", self.config.provider.name(), self.config.base_url)
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        Box::pin(self.send(request))
    }
}
