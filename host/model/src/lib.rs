//! Model clients behind one trait, [`AgentModel`]: what the run loop asks
//! for the next assistant message.
//!
//! - [`scripted`]: [`ScriptedModel`], replies read from a JSON script —
//!   deterministic, for demos and end-to-end tests. Its tool calls are
//!   decoded through the request's turn exactly like a provider's.
//! - [`http`]: [`HttpModel`], one client for the four wire formats of
//!   `toolhost-providers` (OpenAI Chat Completions, OpenAI Responses,
//!   Anthropic Messages, Gemini `generateContent`). The adapters do all the
//!   format work; this module only sends and receives.
//! - [`spec`]: [`ModelSpec`], the `--model KIND:WHERE` strings of the CLI.
//!
//! Every reply comes back as a [`ModelReply`]: the decoded
//! [`AgentModelResponse`] and the raw body, which the runtime keeps as an
//! audit fact (`model-responses/`).

pub mod error;
pub mod http;
pub mod scripted;
pub mod spec;
#[cfg(feature = "testing")]
pub mod testing;

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use toolhost_core::{AgentModelRequest, AgentModelResponse};

pub use error::ModelError;
pub use http::{HttpModel, HttpModelConfig};
pub use scripted::{ScriptBook, ScriptedModel};
pub use spec::{HttpOptions, ModelKind, ModelSpec};

/// One answered model call.
#[derive(Debug, Clone)]
pub struct ModelReply {
    pub response: AgentModelResponse,
    /// The provider's body as received (for the scripted model: the script
    /// entry), stored by the runtime beside the decoded response.
    pub raw: Value,
}

/// The future of one model call; boxed so models can be chosen at run time
/// (`Arc<dyn AgentModel>`) and driven from spawned tasks.
pub type ModelFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ModelReply, ModelError>> + Send + 'a>>;

/// Something that answers model requests.
pub trait AgentModel: Send + Sync {
    /// What this model is, for progress lines and the journal
    /// (`script:demo.json`, `openai:http://127.0.0.1:8080/v1 gpt-x`).
    fn describe(&self) -> String;

    /// Answer `request`. Tool calls in the reply must be decoded through
    /// `request.turn` (aliases of this request only).
    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a>;

    /// A resumed run took one reply of this model from its record instead
    /// of asking: a model answering from a sequence (a script) moves past
    /// one reply, so the next request gets the reply after it.
    fn skip_reply(&self) {}
}

/// Where each agent of a run gets its model: one model for all (an HTTP
/// provider, [`SameModel`]) or one per agent (a [`ScriptBook`]).
pub trait ModelSource: Send + Sync {
    fn model_for(&self, agent_id: &str) -> std::sync::Arc<dyn AgentModel>;

    /// For progress lines.
    fn describe(&self) -> String;
}

/// Every agent talks to the same model.
pub struct SameModel(pub std::sync::Arc<dyn AgentModel>);

impl ModelSource for SameModel {
    fn model_for(&self, _agent_id: &str) -> std::sync::Arc<dyn AgentModel> {
        std::sync::Arc::clone(&self.0)
    }

    fn describe(&self) -> String {
        self.0.describe()
    }
}
