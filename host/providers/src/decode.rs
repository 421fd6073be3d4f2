//! What every response decoder shares: turning the calls read off the wire
//! into canonical [`ToolCall`]s through the request's turn only, and
//! assembling the reply.

use std::collections::HashSet;

use serde_json::Value;
use toolhost_core::turn::ModelTurn;
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelResponse, AgentModelRole, FinishReason,
    ProviderToolCall, TokenUsage,
};

use crate::error::DecodeError;
use crate::json::kind;

/// How a provider's wire contract types a call's arguments.
#[derive(Clone, Copy)]
pub(crate) enum Arguments {
    /// OpenAI: a JSON text. Text that does not parse stays a string, so the
    /// tool answers a recoverable `tool.invalid_arguments` (what the
    /// reference does); absent or `null` is `{}`.
    JsonText,
    /// Anthropic `input`: an object, always present.
    Object,
    /// Gemini `args`: an object, absent for a call without arguments.
    OptionalObject,
}

/// Builds one reply: text and calls in wire order, call ids unique.
pub(crate) struct Reply<'t> {
    turn: &'t ModelTurn,
    arguments: Arguments,
    parts: Vec<AgentModelContentPart>,
    call_ids: HashSet<String>,
}

impl<'t> Reply<'t> {
    pub(crate) fn new(turn: &'t ModelTurn, arguments: Arguments) -> Self {
        Self {
            turn,
            arguments,
            parts: Vec::new(),
            call_ids: HashSet::new(),
        }
    }

    pub(crate) fn text(&mut self, text: &str) {
        self.parts
            .push(AgentModelContentPart::Text { text: text.into() });
    }

    /// Decode one call: its arguments against the wire contract, then id,
    /// name and alias through [`ModelTurn::decode_part`], then uniqueness.
    pub(crate) fn call(&mut self, mut call: ProviderToolCall) -> Result<(), DecodeError> {
        // An empty argument text is no arguments, as `null` is: a call
        // without parameters, streamed or not, decodes to `{}`.
        if matches!(self.arguments, Arguments::JsonText)
            && matches!(&call.arguments, Some(Value::String(text)) if text.trim().is_empty())
        {
            call.arguments = None;
        }
        let who = || call.call_id.clone().unwrap_or_else(|| "(no id)".into());
        match (self.arguments, &call.arguments) {
            (Arguments::JsonText, None | Some(Value::Null | Value::String(_))) => {}
            (Arguments::Object, Some(Value::Object(_))) => {}
            (Arguments::OptionalObject, None | Some(Value::Object(_))) => {}
            (Arguments::JsonText, Some(other)) => {
                return Err(DecodeError::InvalidToolCall(format!(
                    "the arguments of call `{}` must be a JSON text, got {}",
                    who(),
                    kind(other)
                )));
            }
            (_, other) => {
                return Err(DecodeError::InvalidToolCall(format!(
                    "the arguments of call `{}` must be a JSON object, got {}",
                    who(),
                    other.as_ref().map_or("nothing", |value| kind(value))
                )));
            }
        }
        // A name the request did not offer comes back typed, as an
        // `UnknownToolCall` part: the run loop decides what it becomes.
        let part = self.turn.decode_part(call)?;
        if let Some(call_id) = part.call_id()
            && !self.call_ids.insert(call_id.to_owned())
        {
            return Err(DecodeError::DuplicateCallId(call_id.to_owned()));
        }
        self.parts.push(part);
        Ok(())
    }

    /// How many parts the reply has so far (the index the next one gets).
    pub(crate) fn part_count(&self) -> usize {
        self.parts.len()
    }

    pub(crate) fn has_calls(&self) -> bool {
        !self.call_ids.is_empty()
    }

    pub(crate) fn finish(
        self,
        provider_metadata: Value,
        finish_reason: FinishReason,
        usage: Option<TokenUsage>,
        response_id: Option<&str>,
    ) -> AgentModelResponse {
        AgentModelResponse {
            message: AgentModelMessage {
                role: AgentModelRole::Assistant,
                parts: self.parts,
                provider_metadata,
            },
            finish_reason,
            usage,
            response_id: response_id.map(str::to_owned),
        }
    }
}
