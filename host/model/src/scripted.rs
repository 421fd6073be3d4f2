//! [`ScriptedModel`]: a model that answers from a JSON script, one reply
//! per request in order. Deterministic, so demos and end-to-end tests of the
//! run loop need no network and no key.
//!
//! ```json
//! {
//!   "schemaVersion": 1,
//!   "kind": "toolhost.modelScript",
//!   "replies": [
//!     { "text": "Reading the chat first.",
//!       "toolCalls": [ { "id": "call_1", "name": "chat_read_messages",
//!                        "arguments": { "messages": [ { "index": 0 } ] } } ] },
//!     { "text": "A reply with no tool call is drift." }
//!   ]
//! }
//! ```
//!
//! A run with several agents (delegated tasks, handoffs) gives each agent
//! its own replies under `agents`, by profile id; `replies` answers every
//! agent not listed there (the root agent, usually):
//!
//! ```json
//! { "schemaVersion": 1, "kind": "toolhost.modelScript",
//!   "replies": [ ... ],
//!   "agents": { "researcher": [ { "toolCalls": [ ... ] } ] } }
//! ```
//!
//! Call ids must be unique across the whole script: a run stores each
//! call's arguments under its id and refuses a second call with the same.
//!
//! A tool call names the tool as the model would: by the request's alias
//! (`chat_read_messages`), decoded through the request's turn like a
//! provider's reply — a canonical name or an alias of another request fails
//! the same way. `arguments` may be a JSON string, as providers send them;
//! a string that is not JSON reaches the tool as is and gets a recoverable
//! `tool.invalid_arguments`. Replies without `id` test the missing-call-id
//! path. A request past the last reply is `model.script_exhausted`.
//!
//! `"delayMs": N` on a reply makes the model take that long to answer (at
//! most a minute): the latency of a real model, for tests and benchmarks of
//! runs that overlap.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::Value;
use toolhost_core::turn::ProviderToolCall;
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelResponse,
    AgentModelRole, FinishReason,
};
use toolhost_providers::DecodeError;

use crate::{AgentModel, ModelError, ModelFuture, ModelReply, ModelSource};

/// `kind` of a script file.
pub const SCRIPT_KIND: &str = "toolhost.modelScript";

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScriptFile {
    schema_version: u32,
    kind: String,
    replies: Vec<Value>,
    #[serde(default)]
    agents: BTreeMap<String, Vec<Value>>,
}

/// One scripted reply.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ScriptedReply {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    /// How long the answer takes, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
}

/// The longest a scripted answer may take.
const MAX_DELAY_MS: u64 = 60_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug)]
pub struct ScriptedModel {
    source: String,
    /// Each reply parsed, and kept raw for the audit copy.
    replies: Vec<(ScriptedReply, Value)>,
    next: Mutex<usize>,
}

/// A whole script file: the default replies and each agent's own.
#[derive(Debug)]
pub struct ScriptBook {
    default: Arc<ScriptedModel>,
    agents: BTreeMap<String, Arc<ScriptedModel>>,
}

impl ScriptBook {
    /// Read and check a script file.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            ModelError::ScriptInvalid(format!("cannot read {}: {error}", path.display()))
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Check a script given as JSON text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, ModelError> {
        let invalid = |message: String| ModelError::ScriptInvalid(format!("{source}: {message}"));
        let deserializer = &mut serde_json::Deserializer::from_str(text);
        let file: ScriptFile = serde_path_to_error::deserialize(deserializer)
            .map_err(|error| invalid(format!("at `{}`: {}", error.path(), error.inner())))?;
        if file.schema_version != 1 {
            return Err(invalid(format!(
                "schemaVersion {} is not supported (this toolhost reads 1)",
                file.schema_version
            )));
        }
        if file.kind != SCRIPT_KIND {
            return Err(invalid(format!(
                "kind is `{}`, expected `{SCRIPT_KIND}`",
                file.kind
            )));
        }
        let default = ScriptedModel::from_raw(source, "replies", file.replies).map_err(&invalid)?;
        let mut agents = BTreeMap::new();
        for (agent, replies) in file.agents {
            let model = ScriptedModel::from_raw(
                &format!("{source}#{agent}"),
                &format!("agents.{agent}"),
                replies,
            )
            .map_err(&invalid)?;
            agents.insert(agent, Arc::new(model));
        }
        Ok(Self {
            default: Arc::new(default),
            agents,
        })
    }

    /// The model answering `agent_id`'s requests.
    pub fn agent(&self, agent_id: &str) -> Arc<ScriptedModel> {
        Arc::clone(self.agents.get(agent_id).unwrap_or(&self.default))
    }
}

impl ModelSource for ScriptBook {
    fn model_for(&self, agent_id: &str) -> Arc<dyn AgentModel> {
        self.agent(agent_id)
    }

    fn describe(&self) -> String {
        self.default.describe()
    }
}

impl ScriptedModel {
    /// Read a script file and take its default replies.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        Ok(Self::unshared(ScriptBook::load(path)?.default))
    }

    /// Check a script given as JSON text and take its default replies.
    pub fn parse(text: &str, source: &str) -> Result<Self, ModelError> {
        Ok(Self::unshared(ScriptBook::parse(text, source)?.default))
    }

    fn unshared(model: Arc<ScriptedModel>) -> Self {
        Arc::try_unwrap(model).unwrap_or_else(|shared| Self {
            source: shared.source.clone(),
            replies: shared.replies.clone(),
            next: Mutex::new(0),
        })
    }

    fn from_raw(source: &str, place: &str, raw: Vec<Value>) -> Result<Self, String> {
        let mut replies = Vec::with_capacity(raw.len());
        for (index, raw) in raw.into_iter().enumerate() {
            let reply: ScriptedReply = serde_path_to_error::deserialize(&raw).map_err(|error| {
                format!("at `{place}[{index}].{}`: {}", error.path(), error.inner())
            })?;
            if reply.delay_ms > MAX_DELAY_MS {
                return Err(format!(
                    "at `{place}[{index}].delayMs`: at most {MAX_DELAY_MS}"
                ));
            }
            replies.push((reply, raw));
        }
        Ok(Self {
            source: source.to_owned(),
            replies,
            next: Mutex::new(0),
        })
    }

    /// Replies not given yet.
    pub fn remaining(&self) -> usize {
        let next = *self.next.lock().unwrap_or_else(|p| p.into_inner());
        self.replies.len().saturating_sub(next)
    }

    /// The next reply, and how long it takes.
    fn answer(&self, request: &AgentModelRequest) -> (Result<ModelReply, ModelError>, u64) {
        let index = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let index = *next;
            *next += 1;
            index
        };
        let delay = self
            .replies
            .get(index)
            .map_or(0, |(reply, _)| reply.delay_ms);
        (self.reply(index, request), delay)
    }

    fn reply(&self, index: usize, request: &AgentModelRequest) -> Result<ModelReply, ModelError> {
        let Some((reply, raw)) = self.replies.get(index) else {
            return Err(ModelError::ScriptExhausted {
                replies: self.replies.len(),
                requested: index + 1,
            });
        };
        let mut parts = Vec::new();
        if let Some(text) = reply.text.as_ref().filter(|text| !text.is_empty()) {
            parts.push(AgentModelContentPart::Text { text: text.clone() });
        }
        let mut seen = HashSet::new();
        for call in &reply.tool_calls {
            if let Some(id) = &call.id
                && !seen.insert(id.clone())
            {
                return Err(DecodeError::DuplicateCallId(id.clone()).into());
            }
            // Decoded as a provider's reply is: an unknown name comes back
            // as an `UnknownToolCall` part for the run loop to answer.
            let part = request
                .turn
                .decode_part(ProviderToolCall {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    provider_metadata: Value::Null,
                })
                .map_err(DecodeError::from)?;
            parts.push(part);
        }
        let finish_reason = if reply.tool_calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        Ok(ModelReply {
            response: AgentModelResponse {
                message: AgentModelMessage {
                    role: AgentModelRole::Assistant,
                    parts,
                    provider_metadata: Value::Null,
                },
                finish_reason,
                usage: None,
                response_id: Some(format!("script-reply-{}", index + 1)),
            },
            raw: raw.clone(),
        })
    }
}

impl AgentModel for ScriptedModel {
    fn describe(&self) -> String {
        format!("script:{}", self.source)
    }

    fn skip_reply(&self) {
        *self.next.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let (answer, delay_ms) = self.answer(request);
            if delay_ms > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
            }
            answer
        })
    }
}
