//! A call under a name the request did not offer — one the model invented,
//! a canonical id, another invocation's alias. The decoder kept it typed
//! (`UnknownToolCall`); here it becomes a recoverable error the model reads,
//! listing this turn's aliases, charged to the invocation's total budget so
//! invented names are never free (spent: refused like any call), and
//! journalled as `tool_call_unknown`. Nothing is guessed: no fuzzy match,
//! no lookup beyond this turn.

use toolhost_core::model_path::escaped;
use toolhost_core::{
    Classified, ModelCall, ModelTurn, ToolCall, UnknownToolCall, UnknownToolResult,
};
use toolhost_journal::ToolCallUnknown;

use crate::failure::RunFailure;

use super::InvocationLoop;

/// How much of an invented name the journal keeps (the stored reply keeps
/// it whole): the model's text, shown in one line.
const SHOWN_NAME_CHARS: usize = 128;

/// One call of a reply, owned: resolved to a tool of the turn, or not.
pub(super) enum ReplyCall {
    Tool(ToolCall),
    Unknown(UnknownToolCall),
}

impl From<ModelCall<'_>> for ReplyCall {
    fn from(call: ModelCall<'_>) -> Self {
        match call {
            ModelCall::Tool(call) => Self::Tool(call.clone()),
            ModelCall::Unknown(call) => Self::Unknown(call.clone()),
        }
    }
}

impl InvocationLoop<'_> {
    /// The answer to `call`, charged and journalled.
    pub(super) fn answer_unknown(
        &mut self,
        turn: &ModelTurn,
        call: &UnknownToolCall,
        round: u32,
    ) -> Result<UnknownToolResult, RunFailure> {
        let limit = self.session.snapshot().max_calls_per_invocation();
        let (code, message, charged) = match self.session.charge_unknown() {
            Ok(_) => (call.error().code(), turn.unknown_call_message(call), true),
            Err(rejection) => {
                let message = match rejection.to_tool_failure() {
                    Some(failure) => failure.message,
                    // Only a spent budget refuses a charge.
                    None => return Err(RunFailure::Gate(rejection)),
                };
                (rejection.code(), message, false)
            }
        };
        let content = format!("{code}: {message}");
        self.shared.run.record(&ToolCallUnknown {
            round,
            invocation_id: self.id().to_owned(),
            call_id: call.call_id.clone(),
            name: escaped(&call.name, SHOWN_NAME_CHARS),
            code: code.to_owned(),
            message: content.clone(),
            charged,
            total_used: self.session.gate().total_used(),
            total_limit: limit,
        })?;
        Ok(UnknownToolResult {
            call_id: call.call_id.clone(),
            name: call.name.clone(),
            error_code: code.to_owned(),
            content,
        })
    }
}
