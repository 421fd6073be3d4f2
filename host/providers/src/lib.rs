//! Provider adapters (SPEC §9): pure format conversion between toolhost's
//! model boundary ([`AgentModelRequest`], [`AgentModelResponse`]) and four
//! wire formats — OpenAI Chat Completions ([`openai_chat`]), OpenAI
//! Responses ([`openai_responses`]), Anthropic Messages ([`anthropic`]) and
//! Gemini `generateContent` ([`gemini`]). No network code: an HTTP client
//! sends what [`Provider::encode_request`] builds and hands back the body
//! (or the framed SSE events) to decode.
//!
//! Every adapter:
//! - declares the request's tools under their model aliases, within the
//!   provider's name and schema rules (module `schema`);
//! - re-encodes the history under the CURRENT request's aliases, with tool
//!   results as the model reads them (`AgentToolResult::model_text`), and
//!   puts back the provider metadata earlier replies carried (module
//!   `metadata`);
//! - decodes replies through the request's `ModelTurn` only, failing fast
//!   on anything that breaks the wire or turn contract ([`DecodeError`]);
//! - assembles streams into the same reply ([`StreamAssembler`]).
//!
//! `docs/providers.md` shows each format and lists the rules and codes.

pub mod anthropic;
mod decode;
mod encode;
pub mod error;
pub mod gemini;
mod json;
mod metadata;
pub mod openai_chat;
pub mod openai_responses;
mod schema;
pub mod sse;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_core::turn::ModelTurn;
use toolhost_core::{AgentModelRequest, AgentModelResponse, AgentModelTool};

pub use error::{DecodeError, EncodeError, SchemaIssue};
pub use gemini::GeminiSchemaMode;
pub use sse::{SseEvent, SseFramer, StreamAssembler, frame_sse};

/// The wire formats toolhost speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "format")]
pub enum Provider {
    OpenaiChat,
    OpenaiResponses,
    Anthropic,
    Gemini {
        #[serde(default)]
        schema: GeminiSchemaMode,
    },
}

impl Provider {
    /// The name used in errors and as the tag of provider metadata.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenaiChat => openai_chat::PROVIDER,
            Self::OpenaiResponses => openai_responses::PROVIDER,
            Self::Anthropic => anthropic::PROVIDER,
            Self::Gemini { .. } => gemini::PROVIDER,
        }
    }

    /// The provider's tool declarations (the value of its `tools` field).
    pub fn encode_tools(self, tools: &[AgentModelTool]) -> Result<Value, EncodeError> {
        match self {
            Self::OpenaiChat => openai_chat::encode_tools(tools),
            Self::OpenaiResponses => openai_responses::encode_tools(tools),
            Self::Anthropic => anthropic::encode_tools(tools),
            Self::Gemini { schema } => gemini::encode_tools(tools, schema),
        }
        .map(Value::Array)
    }

    /// The request body. `stream` asks for server-sent events where the
    /// body says so (Gemini streams through another endpoint,
    /// `:streamGenerateContent?alt=sse`, with the same body; its model name
    /// is in the URL too).
    pub fn encode_request(
        self,
        request: &AgentModelRequest,
        stream: bool,
    ) -> Result<Value, EncodeError> {
        match self {
            Self::OpenaiChat => openai_chat::encode_request(request, stream),
            Self::OpenaiResponses => openai_responses::encode_request(request, stream),
            Self::Anthropic => anthropic::encode_request(request, stream),
            Self::Gemini { schema } => gemini::encode_request(request, schema),
        }
    }

    /// A whole (non-streaming) response body.
    pub fn decode_response(
        self,
        turn: &ModelTurn,
        body: &Value,
    ) -> Result<AgentModelResponse, DecodeError> {
        match self {
            Self::OpenaiChat => openai_chat::decode_response(turn, body),
            Self::OpenaiResponses => openai_responses::decode_response(turn, body),
            Self::Anthropic => anthropic::decode_response(turn, body),
            Self::Gemini { .. } => gemini::decode_response(turn, body),
        }
    }

    /// An assembler for one streamed response to a request of `turn`.
    pub fn stream_assembler<'t>(self, turn: &'t ModelTurn) -> Box<dyn StreamAssembler + Send + 't> {
        match self {
            Self::OpenaiChat => Box::new(openai_chat::ChatStream::new(turn)),
            Self::OpenaiResponses => Box::new(openai_responses::ResponsesStream::new(turn)),
            Self::Anthropic => Box::new(anthropic::AnthropicStream::new(turn)),
            Self::Gemini { .. } => Box::new(gemini::GeminiStream::new(turn)),
        }
    }
}
