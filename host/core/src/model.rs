//! The model boundary: what the runtime sends a model and what comes back,
//! in toolhost's own terms. Provider adapters (`toolhost-providers`) turn an
//! [`AgentModelRequest`] into a provider's wire format and a provider's reply
//! into an [`AgentModelResponse`]; nothing above them sees wire JSON.
//!
//! Tool calls in a response are already canonical [`ToolCall`]s,
//! resolved through the request's [`ModelTurn`]; tool results in the history
//! are [`AgentToolResult`]s, which an adapter sends under the current
//! request's alias of their ToolId (and refuses when that ToolId is not in
//! the request any more).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::turn::{ModelCallError, ModelTurn};
use crate::{AgentToolResult, ToolCall};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentModelRole {
    /// Instructions inside the conversation: a chat app's preset, character
    /// card or world info, in the place the app put them. The agent's own
    /// system prompt is [`AgentModelRequest::system`], not one of these.
    System,
    User,
    Assistant,
    /// Tool results going back to the model.
    Tool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AgentModelContentPart {
    Text {
        text: String,
    },
    /// A call the model made (assistant messages).
    ToolCall {
        call: ToolCall,
    },
    /// A call's result (tool messages). Only `content` reaches the model,
    /// with `## Tool error` above it when `is_error`.
    ToolResult {
        result: AgentToolResult,
    },
    /// A call under a name the request did not offer (assistant messages):
    /// kept as the model made it, never resolved to a tool.
    UnknownToolCall {
        call: UnknownToolCall,
    },
    /// The error that answers an [`UnknownToolCall`] (tool messages).
    UnknownToolResult {
        result: UnknownToolResult,
    },
}

impl AgentModelContentPart {
    /// The call a call or result part belongs to.
    pub fn call_id(&self) -> Option<&str> {
        match self {
            Self::Text { .. } => None,
            Self::ToolCall { call } => Some(&call.call_id),
            Self::ToolResult { result } => Some(&result.call_id),
            Self::UnknownToolCall { call } => Some(&call.call_id),
            Self::UnknownToolResult { result } => Some(&result.call_id),
        }
    }
}

/// A call the model made under a name its request did not offer: a name it
/// invented, a canonical id, another invocation's alias. Decoding keeps it
/// typed instead of failing the reply, and the run loop decides what it
/// becomes (a recoverable, budget-charged error the model reads). Nothing
/// ever maps it to a tool: no fuzzy match, no global lookup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownToolCall {
    pub call_id: String,
    /// The name exactly as the model sent it; sent back under it.
    pub name: String,
    pub arguments: Value,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub provider_metadata: Value,
    /// What the decoder could say about the name without accepting it (a
    /// canonical name's alias in this request), or empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hint: String,
}

impl UnknownToolCall {
    /// The typed error this call stands for.
    pub fn error(&self) -> ModelCallError {
        ModelCallError::UnknownToolCall {
            name: self.name.clone(),
            hint: self.hint.clone(),
        }
    }
}

/// The answer to an [`UnknownToolCall`]: always an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownToolResult {
    pub call_id: String,
    /// The call's name, as the model sent it.
    pub name: String,
    /// `model.unknown_tool_call`, or `agent.tool_budget_exhausted` once the
    /// invocation's total is spent.
    pub error_code: String,
    pub content: String,
}

impl UnknownToolResult {
    /// Exactly the text the model sees, headed like any tool error.
    pub fn model_text(&self) -> String {
        crate::result::error_text(&self.content)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentModelMessage {
    pub role: AgentModelRole,
    pub parts: Vec<AgentModelContentPart>,
    /// Provider data this message must carry back on later requests
    /// (reasoning signatures, response ids); opaque to the runtime.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub provider_metadata: Value,
}

impl AgentModelMessage {
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::text_of(AgentModelRole::User, text)
    }

    pub fn system_text(text: impl Into<String>) -> Self {
        Self::text_of(AgentModelRole::System, text)
    }

    /// One text message from `role`.
    pub fn text_of(role: AgentModelRole, text: impl Into<String>) -> Self {
        Self {
            role,
            parts: vec![AgentModelContentPart::Text { text: text.into() }],
            provider_metadata: Value::Null,
        }
    }

    /// The concatenated text parts.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|part| match part {
                AgentModelContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The calls resolved to a tool of the request.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|part| match part {
            AgentModelContentPart::ToolCall { call } => Some(call),
            _ => None,
        })
    }

    /// Every call, known or not, in the order the model made them.
    pub fn calls(&self) -> impl Iterator<Item = ModelCall<'_>> {
        self.parts.iter().filter_map(|part| match part {
            AgentModelContentPart::ToolCall { call } => Some(ModelCall::Tool(call)),
            AgentModelContentPart::UnknownToolCall { call } => Some(ModelCall::Unknown(call)),
            _ => None,
        })
    }
}

/// One call of an assistant message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ModelCall<'a> {
    Tool(&'a ToolCall),
    Unknown(&'a UnknownToolCall),
}

/// Sampling settings for one request (from the profile's `model` section).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentModelSettings {
    /// The provider's model name.
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

/// One model call.
#[derive(Debug, Clone)]
pub struct AgentModelRequest {
    pub settings: AgentModelSettings,
    /// The system prompt.
    pub system: Option<String>,
    /// The conversation so far, oldest first.
    pub messages: Vec<AgentModelMessage>,
    /// This request's tools, their aliases and the tool choice: what the
    /// adapter advertises and the only map it decodes calls through.
    pub turn: ModelTurn,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FinishReason {
    /// A natural end of the reply.
    Stop,
    /// The reply asks for tool calls.
    ToolCalls,
    /// The output token limit cut the reply.
    Length,
    /// The provider filtered the reply.
    ContentFilter,
    /// A reason this adapter does not know, kept verbatim.
    Other(String),
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// One model reply, decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentModelResponse {
    /// The assistant message: text parts and tool calls, in the order the
    /// provider gave them. Goes into the history of the next request as is.
    pub message: AgentModelMessage,
    pub finish_reason: FinishReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The provider's response id, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
}
