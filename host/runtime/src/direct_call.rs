//! A call no model asked for: `toolhost call`, an MCP client of `toolhost
//! mcp serve` or `/mcp`, `POST /v1/runs/{id}/calls`. Each goes the way a
//! model's call goes — a turn that offers only that tool, the arguments
//! decoded through it exactly as a provider's reply is, then the gate,
//! the executor, the audit files and the journal — so the three front ends
//! share one path and differ only in how they answer.

use serde_json::Value;
use toolhost_core::{ModelCallError, ProviderToolCall, ToolId};
use toolhost_sandbox::CallEntropy;

use crate::executor::ToolExecutor;
use crate::failure::RunFailure;
use crate::invocation::{CallOutcome, Invocation};

/// Why a direct call did not give an outcome.
#[derive(Debug, thiserror::Error)]
pub enum DirectCallError {
    /// The caller's arguments do not decode: nothing ran, the run goes on.
    #[error(transparent)]
    Arguments(ModelCallError),
    /// The turn or the call failed the run (a journal that cannot be
    /// written, a host fault, an identity mismatch, …).
    #[error(transparent)]
    Run(#[from] RunFailure),
}

/// For a front end that answers both the same way (the CLI, the API): the
/// arguments' error is the run's `model.*` failure it always was.
impl From<DirectCallError> for RunFailure {
    fn from(error: DirectCallError) -> Self {
        match error {
            DirectCallError::Arguments(error) => RunFailure::from(error),
            DirectCallError::Run(failure) => failure,
        }
    }
}

/// Who is calling: the `requester` of the journal's
/// `model_request_created`, and the prefix of the call id it makes.
#[derive(Debug, Clone, Copy)]
pub struct DirectCaller {
    pub requester: &'static str,
    pub call_id_prefix: &'static str,
}

impl Invocation {
    /// Call `tool` with `arguments` (a JSON object, or a string holding
    /// one, as providers send them) outside a model's reply.
    pub async fn call_directly<E: ToolExecutor>(
        &mut self,
        executor: &E,
        caller: DirectCaller,
        tool: &ToolId,
        arguments: Option<Value>,
        entropy: CallEntropy,
    ) -> Result<CallOutcome, DirectCallError> {
        let turn = self.begin_direct_turn(tool, caller.requester)?;
        let invocation = turn
            .decode_call(ProviderToolCall {
                call_id: Some(format!(
                    "{}_{}",
                    caller.call_id_prefix,
                    uuid::Uuid::new_v4().simple()
                )),
                name: turn.alias_of(tool).map(str::to_owned),
                arguments,
                provider_metadata: Value::Null,
            })
            .map_err(DirectCallError::Arguments)?;
        Ok(self.call(executor, &turn, invocation, entropy).await?)
    }
}
