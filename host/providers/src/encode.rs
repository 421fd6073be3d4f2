//! What every request encoder shares: the history checked and resolved
//! against the current turn ([`prepare`]), the tool choice ([`choice`]),
//! argument rendering, and merging adjacent same-role messages.
//!
//! The checks are the ones every provider makes in its own words (a 400
//! after the request is sent); making them here turns them into a typed
//! `provider.*` error before anything leaves the host:
//!
//! - a past call is sent under the CURRENT request's alias of its ToolId; a
//!   ToolId the request no longer offers fails (`provider.historical_tool_missing`);
//! - every call has exactly one result, in the tool messages right after
//!   its assistant message, and the result's `call_id + tool_id` equal the
//!   call's (SPEC §2);
//! - metadata another provider produced is refused (`provider.lost_metadata`).

use std::collections::HashSet;

use serde_json::Value;
use toolhost_core::turn::ModelTurn;
use toolhost_core::{
    AgentModelContentPart, AgentModelRequest, AgentModelRole, AgentModelTool, AgentToolResult,
    ToolChoice, ToolInvocation,
};

use crate::error::EncodeError;
use crate::json::{Object, kind};
use crate::metadata;

/// One message of the history, ready to put in a provider's shape.
pub(crate) struct Turn<'a> {
    pub role: AgentModelRole,
    pub items: Vec<Item<'a>>,
    /// This provider's fields of the message's metadata, if any.
    pub metadata: Option<&'a Object>,
}

impl Turn<'_> {
    /// The text parts of the message, concatenated (what a provider with
    /// one string per message sends).
    pub fn text(&self) -> String {
        self.items
            .iter()
            .filter_map(|item| match item {
                Item::Text { text, .. } => Some(*text),
                _ => None,
            })
            .collect()
    }
}

pub(crate) enum Item<'a> {
    /// `part` is the index in the message's parts (Gemini keys text
    /// signatures by it).
    Text { text: &'a str, part: usize },
    Call {
        call: &'a ToolInvocation,
        alias: &'a str,
        metadata: Option<&'a Object>,
    },
    Result {
        result: &'a AgentToolResult,
        alias: &'a str,
    },
}

/// Check the history of `request` and resolve it against its turn.
pub(crate) fn prepare<'a>(
    provider: &'static str,
    request: &'a AgentModelRequest,
) -> Result<Vec<Turn<'a>>, EncodeError> {
    if request.messages.is_empty() {
        return Err(EncodeError::InvalidHistory(
            "a request needs at least one message".into(),
        ));
    }
    let turn = &request.turn;
    let mut seen_calls = HashSet::new();
    // Calls of the last assistant message still waiting for their result.
    let mut pending: Vec<&ToolInvocation> = Vec::new();
    let mut turns = Vec::with_capacity(request.messages.len());
    for (index, message) in request.messages.iter().enumerate() {
        if message.parts.is_empty() {
            return Err(EncodeError::InvalidHistory(format!(
                "message {index} has no parts"
            )));
        }
        if message.role != AgentModelRole::Tool && !pending.is_empty() {
            return Err(EncodeError::InvalidHistory(format!(
                "calls {} have no result before message {index}",
                call_list(&pending)
            )));
        }
        let metadata = metadata::own(provider, &message.provider_metadata, || {
            format!("message {index}")
        })?;
        let mut items = Vec::with_capacity(message.parts.len());
        for (part, content) in message.parts.iter().enumerate() {
            let item = match (message.role, content) {
                (
                    AgentModelRole::User | AgentModelRole::Assistant,
                    AgentModelContentPart::Text { text },
                ) => Item::Text { text, part },
                (AgentModelRole::Assistant, AgentModelContentPart::ToolCall { call }) => {
                    if !seen_calls.insert(call.call_id.as_str()) {
                        return Err(EncodeError::InvalidHistory(format!(
                            "call id `{}` appears twice in the history",
                            call.call_id
                        )));
                    }
                    pending.push(call);
                    Item::Call {
                        call,
                        alias: alias(turn, call)?,
                        metadata: metadata::own(provider, &call.provider_metadata, || {
                            format!("tool call `{}`", call.call_id)
                        })?,
                    }
                }
                (AgentModelRole::Tool, AgentModelContentPart::ToolResult { result }) => {
                    let position = pending
                        .iter()
                        .position(|call| call.call_id == result.call_id)
                        .ok_or_else(|| {
                            EncodeError::InvalidHistory(format!(
                                "message {index} holds a result for call `{}`, which no earlier assistant message is waiting for",
                                result.call_id
                            ))
                        })?;
                    let call = pending.remove(position);
                    result
                        .check_identity(call)
                        .map_err(|mismatch| EncodeError::InvalidHistory(mismatch.to_string()))?;
                    Item::Result {
                        result,
                        alias: alias(turn, call)?,
                    }
                }
                (role, content) => {
                    return Err(EncodeError::InvalidHistory(format!(
                        "message {index} ({}) cannot hold a {} part",
                        role_name(role),
                        part_name(content)
                    )));
                }
            };
            items.push(item);
        }
        turns.push(Turn {
            role: message.role,
            items,
            metadata,
        });
    }
    if !pending.is_empty() {
        return Err(EncodeError::InvalidHistory(format!(
            "calls {} have no result at the end of the history",
            call_list(&pending)
        )));
    }
    Ok(turns)
}

/// The current alias of a past call's tool, or the fail-fast error.
fn alias<'a>(turn: &'a ModelTurn, call: &ToolInvocation) -> Result<&'a str, EncodeError> {
    turn.alias_of(&call.tool_id)
        .ok_or_else(|| EncodeError::HistoricalToolMissing {
            call_id: call.call_id.clone(),
            tool_id: call.tool_id.clone(),
        })
}

fn call_list(calls: &[&ToolInvocation]) -> String {
    calls
        .iter()
        .map(|call| format!("`{}`", call.call_id))
        .collect::<Vec<_>>()
        .join(", ")
}

fn role_name(role: AgentModelRole) -> &'static str {
    match role {
        AgentModelRole::User => "user",
        AgentModelRole::Assistant => "assistant",
        AgentModelRole::Tool => "tool",
    }
}

fn part_name(part: &AgentModelContentPart) -> &'static str {
    match part {
        AgentModelContentPart::Text { .. } => "text",
        AgentModelContentPart::ToolCall { .. } => "tool call",
        AgentModelContentPart::ToolResult { .. } => "tool result",
    }
}

/// A list this provider stored in a message's metadata (reasoning items,
/// thinking blocks, text signatures): empty when there is none, an error
/// when it is not a list.
pub(crate) fn metadata_list<'a>(
    provider: &'static str,
    index: usize,
    turn: &Turn<'a>,
    key: &str,
) -> Result<&'a [Value], EncodeError> {
    match turn.metadata.and_then(|fields| fields.get(key)) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(EncodeError::LostProviderMetadata {
            provider,
            holder: format!("message {index}"),
            reason: format!("its `{key}` is not a list"),
        }),
    }
}

/// The request's tool choice, in terms every provider has.
pub(crate) enum Choice<'a> {
    /// No tools in the request: send neither tools nor a choice (providers
    /// refuse a choice without tools).
    NoTools,
    None,
    Auto,
    Required,
    Specific(&'a str),
}

pub(crate) fn choice(turn: &ModelTurn) -> Result<Choice<'_>, EncodeError> {
    if turn.tools().is_empty() {
        return Ok(Choice::NoTools);
    }
    Ok(match turn.contract().choice() {
        ToolChoice::None => Choice::None,
        ToolChoice::Auto => Choice::Auto,
        ToolChoice::Required => Choice::Required,
        // The contract checked the tool is in the turn; say so if a turn
        // was ever built otherwise rather than send a choice without it.
        ToolChoice::Specific(tool) => Choice::Specific(turn.alias_of(tool).ok_or_else(|| {
            EncodeError::InvalidHistory(format!(
                "the specific tool choice `{tool}` is not a tool of this request"
            ))
        })?),
    })
}

/// A call's arguments as the JSON text OpenAI sends. Arguments the model
/// sent as invalid JSON were kept as a string (`normalize_arguments`): that
/// string is the text it sent, so it goes back verbatim. Anything else is
/// serialized (keys in serde_json's order: the text may differ from the
/// model's bytes, never its meaning).
pub(crate) fn arguments_text(call: &ToolInvocation) -> String {
    match &call.arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A call's arguments for providers whose wire form is an object.
pub(crate) fn arguments_object(
    provider: &'static str,
    call: &ToolInvocation,
) -> Result<Value, EncodeError> {
    match &call.arguments {
        Value::Object(_) => Ok(call.arguments.clone()),
        other => Err(EncodeError::ArgumentsNotObject {
            provider,
            call_id: call.call_id.clone(),
            found: kind(other),
        }),
    }
}

/// Append `blocks` to the last message when it has the same role, else start
/// a new one. Anthropic and Gemini need this: tool results travel in a user
/// message, and all results of one assistant message must be in one.
pub(crate) fn push_merged(
    messages: &mut Vec<(&'static str, Vec<Value>)>,
    role: &'static str,
    blocks: Vec<Value>,
) {
    if blocks.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some((last, existing)) if *last == role => existing.extend(blocks),
        _ => messages.push((role, blocks)),
    }
}

/// The model name, for providers that put it in the body.
pub(crate) fn model(
    provider: &'static str,
    request: &AgentModelRequest,
) -> Result<Value, EncodeError> {
    if request.settings.model.trim().is_empty() {
        return Err(EncodeError::SettingMissing {
            provider,
            setting: "a model name (settings.model)",
        });
    }
    Ok(Value::String(request.settings.model.clone()))
}

/// A tool's description, left out when empty (every provider makes it
/// optional; an empty one says nothing).
pub(crate) fn insert_description(declaration: &mut Object, tool: &AgentModelTool) {
    if !tool.description.is_empty() {
        declaration.insert("description".into(), tool.description.clone().into());
    }
}

/// Insert `value` under `key` when there is one.
pub(crate) fn insert_some(body: &mut Object, key: &str, value: Option<impl Into<Value>>) {
    if let Some(value) = value {
        body.insert(key.into(), value.into());
    }
}
