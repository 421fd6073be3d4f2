//! What every request encoder shares: the history checked and resolved
//! against the current turn ([`prepare`]), the tool choice ([`choice`]),
//! argument rendering, merging adjacent same-role messages, and the leading
//! System turns lifted into the system prompt of formats whose messages
//! have no system role ([`system_head`]).
//!
//! The checks are the ones every provider makes in its own words (a 400
//! after the request is sent); making them here turns them into a typed
//! `provider.*` error before anything leaves the host:
//!
//! - a past call is sent under the CURRENT request's alias of its ToolId; a
//!   ToolId the request no longer offers fails (`provider.historical_tool_missing`);
//!   a call under a name no request offered goes back under that name, with
//!   the error that answered it;
//! - every call has exactly one result, in the tool messages right after
//!   its assistant message, and the result's `call_id + tool_id` equal the
//!   call's (SPEC §2);
//! - metadata another provider produced is refused (`provider.lost_metadata`).

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;
use toolhost_core::turn::ModelTurn;
use toolhost_core::{
    AgentModelContentPart, AgentModelRequest, AgentModelRole, AgentModelTool, ToolCall, ToolChoice,
};

use crate::error::EncodeError;
use crate::json::{Object, kind};
use crate::metadata;
use crate::schema::EVERY_PROVIDER;

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
        call: CallView<'a>,
        alias: Cow<'a, str>,
        metadata: Option<&'a Object>,
    },
    Result {
        result: ResultView<'a>,
        alias: Cow<'a, str>,
    },
}

/// A past call as the wire needs it. `alias` beside it is the current
/// alias of its tool, or — for a call under a name the request did not
/// offer — that name as the model sent it, so its answer pairs with it.
pub(crate) struct CallView<'a> {
    pub call_id: &'a str,
    pub arguments: &'a Value,
}

/// A past result as the wire needs it.
pub(crate) struct ResultView<'a> {
    pub call_id: &'a str,
    pub is_error: bool,
    text: String,
}

impl ResultView<'_> {
    /// Exactly what the model reads.
    pub fn model_text(&self) -> &str {
        &self.text
    }
}

/// A call of the last assistant message still waiting for its result.
struct Pending<'a> {
    call_id: &'a str,
    /// The name the call goes out under.
    alias: Cow<'a, str>,
    /// `None` for an unknown call, which has `name`: the one the model sent.
    known: Option<&'a ToolCall>,
    name: &'a str,
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
    let mut pending: Vec<Pending<'a>> = Vec::new();
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
                // A System message (a chat app's preset, card or world info
                // in its place in the conversation) holds text only.
                (
                    AgentModelRole::System | AgentModelRole::User | AgentModelRole::Assistant,
                    AgentModelContentPart::Text { text },
                ) => Item::Text { text, part },
                (AgentModelRole::Assistant, AgentModelContentPart::ToolCall { call }) => {
                    let alias = alias(turn, call)?;
                    expect_new(&mut seen_calls, &call.call_id)?;
                    pending.push(Pending {
                        call_id: &call.call_id,
                        alias: Cow::Borrowed(alias),
                        known: Some(call),
                        name: alias,
                    });
                    Item::Call {
                        call: CallView {
                            call_id: &call.call_id,
                            arguments: &call.arguments,
                        },
                        alias: Cow::Borrowed(alias),
                        metadata: metadata::own(provider, &call.provider_metadata, || {
                            format!("tool call `{}`", call.call_id)
                        })?,
                    }
                }
                // A name the request did not offer goes back as the model
                // sent it when the wire takes it: it resolves to nothing,
                // now as then.
                (AgentModelRole::Assistant, AgentModelContentPart::UnknownToolCall { call }) => {
                    expect_new(&mut seen_calls, &call.call_id)?;
                    let wire = unknown_wire_name(turn, &call.name);
                    pending.push(Pending {
                        call_id: &call.call_id,
                        alias: wire.clone(),
                        known: None,
                        name: &call.name,
                    });
                    Item::Call {
                        call: CallView {
                            call_id: &call.call_id,
                            arguments: &call.arguments,
                        },
                        alias: wire,
                        metadata: metadata::own(provider, &call.provider_metadata, || {
                            format!("tool call `{}`", call.call_id)
                        })?,
                    }
                }
                (AgentModelRole::Tool, AgentModelContentPart::ToolResult { result }) => {
                    let call = take_pending(&mut pending, &result.call_id, index)?;
                    let Some(invocation) = call.known else {
                        return Err(EncodeError::InvalidHistory(format!(
                            "message {index} answers call `{}`, whose name was unknown, with a tool's result",
                            result.call_id
                        )));
                    };
                    result
                        .check_identity(invocation)
                        .map_err(|mismatch| EncodeError::InvalidHistory(mismatch.to_string()))?;
                    Item::Result {
                        result: ResultView {
                            call_id: &result.call_id,
                            is_error: result.is_error,
                            text: result.model_text(),
                        },
                        alias: call.alias,
                    }
                }
                (AgentModelRole::Tool, AgentModelContentPart::UnknownToolResult { result }) => {
                    let call = take_pending(&mut pending, &result.call_id, index)?;
                    if call.known.is_some() || call.name != result.name {
                        return Err(EncodeError::InvalidHistory(format!(
                            "message {index} answers call `{}` as the unknown `{}`, which it is not",
                            result.call_id, result.name
                        )));
                    }
                    Item::Result {
                        result: ResultView {
                            call_id: &result.call_id,
                            is_error: true,
                            text: result.model_text(),
                        },
                        alias: call.alias,
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

/// The system prompt of a format whose messages have no system role
/// (Anthropic's top-level `system`, Gemini's `systemInstruction`).
pub(crate) struct SystemHead<'a> {
    /// The request's own prompt, then the text parts of the leading System
    /// turns in order, their empty ones left out (both APIs refuse an empty
    /// text block).
    pub texts: Vec<&'a str>,
    /// How many turns `texts` took: the encoder sends the turns after them,
    /// where a later System turn becomes user text.
    pub turns: usize,
}

/// Split off the leading run of System turns — those before the first
/// other turn — as SillyTavern's Claude and Gemini converters do: they
/// stay instructions, ahead of the conversation. The last turn is never
/// taken, so a history of System turns alone still sends a message.
pub(crate) fn system_head<'a>(
    request: &'a AgentModelRequest,
    turns: &[Turn<'a>],
) -> SystemHead<'a> {
    let leading = turns
        .iter()
        .take(turns.len().saturating_sub(1))
        .take_while(|turn| turn.role == AgentModelRole::System)
        .count();
    let texts = request
        .system
        .as_deref()
        .into_iter()
        .chain(turns[..leading].iter().flat_map(|turn| {
            turn.items.iter().filter_map(|item| match item {
                Item::Text { text, .. } if !text.is_empty() => Some(*text),
                _ => None,
            })
        }))
        .collect();
    SystemHead {
        texts,
        turns: leading,
    }
}

/// The longest tool name every provider takes.
fn wire_name_max() -> usize {
    EVERY_PROVIDER
        .iter()
        .map(|rule| rule.max_len)
        .min()
        .unwrap_or_default()
}

/// Whether every provider takes `name` as a tool name, in the tool list and
/// in the history alike (OpenAI checks each
/// `messages[i].tool_calls[j].function.name` and answers 400 otherwise).
fn wire_safe(name: &str) -> bool {
    EVERY_PROVIDER.iter().all(|rule| rule.accepts(name))
}

/// The name an invented call goes back under. As the model sent it when
/// the wire takes it and it is none of this request's aliases; otherwise
/// (a canonical id with a dot or a colon, a space, 200 characters, or a
/// name this turn now offers) each character the wire refuses becomes `_`,
/// cut to 64, and `unknown_N_` goes in front if it would be an alias —
/// so the next request is not refused for the model's own mistake, and
/// the history never shows a real tool answering "unknown". What the model
/// reads in the answer quotes the name it sent.
fn unknown_wire_name<'a>(turn: &ModelTurn, name: &'a str) -> Cow<'a, str> {
    let offered = |candidate: &str| turn.offers(candidate);
    if wire_safe(name) && !offered(name) {
        return Cow::Borrowed(name);
    }
    let max = wire_name_max();
    let mut wire: String = name
        .chars()
        .map(|c| match u8::try_from(c) {
            Ok(byte) if EVERY_PROVIDER.iter().all(|rule| rule.allows(byte)) => c,
            _ => '_',
        })
        .take(max)
        .collect();
    if !wire_safe(&wire) {
        // Empty, or a digit or `-` first.
        wire.insert_str(0, "unknown_");
        wire.truncate(max);
    }
    if !offered(&wire) {
        return Cow::Owned(wire);
    }
    // One more candidate than there are aliases, each with its own prefix
    // (distinct after the cut too): one of them is free.
    (0..=turn.tools().len())
        .map(|n| {
            let mut candidate = format!("unknown_{n}_{wire}");
            candidate.truncate(max);
            candidate
        })
        .find(|candidate| !offered(candidate))
        .map_or(Cow::Borrowed("unknown"), Cow::Owned)
}

/// The current alias of a past call's tool, or the fail-fast error.
fn alias<'a>(turn: &'a ModelTurn, call: &ToolCall) -> Result<&'a str, EncodeError> {
    turn.alias_of(&call.tool_id)
        .ok_or_else(|| EncodeError::HistoricalToolMissing {
            call_id: call.call_id.clone(),
            tool_id: call.tool_id.clone(),
        })
}

fn call_list(calls: &[Pending<'_>]) -> String {
    calls
        .iter()
        .map(|call| format!("`{}`", call.call_id))
        .collect::<Vec<_>>()
        .join(", ")
}

fn expect_new<'a>(seen: &mut HashSet<&'a str>, call_id: &'a str) -> Result<(), EncodeError> {
    if seen.insert(call_id) {
        Ok(())
    } else {
        Err(EncodeError::InvalidHistory(format!(
            "call id `{call_id}` appears twice in the history"
        )))
    }
}

/// The waiting call `call_id` answers, taken off the list.
fn take_pending<'a>(
    pending: &mut Vec<Pending<'a>>,
    call_id: &str,
    index: usize,
) -> Result<Pending<'a>, EncodeError> {
    let position = pending
        .iter()
        .position(|call| call.call_id == call_id)
        .ok_or_else(|| {
            EncodeError::InvalidHistory(format!(
                "message {index} holds a result for call `{call_id}`, which no earlier assistant message is waiting for"
            ))
        })?;
    Ok(pending.remove(position))
}

fn role_name(role: AgentModelRole) -> &'static str {
    match role {
        AgentModelRole::System => "system",
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
        AgentModelContentPart::UnknownToolCall { .. } => "unknown tool call",
        AgentModelContentPart::UnknownToolResult { .. } => "unknown tool result",
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
pub(crate) fn arguments_text(call: &CallView<'_>) -> String {
    match call.arguments {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A call's arguments for providers whose wire form is an object.
pub(crate) fn arguments_object(
    provider: &'static str,
    call: &CallView<'_>,
) -> Result<Value, EncodeError> {
    match call.arguments {
        Value::Object(_) => Ok(call.arguments.clone()),
        other => Err(EncodeError::ArgumentsNotObject {
            provider,
            call_id: call.call_id.to_owned(),
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
