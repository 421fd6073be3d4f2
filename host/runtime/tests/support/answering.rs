//! An executor that answers every call at once with a dice roll's result:
//! only the control plane runs. Shared by the tests and the
//! `control_plane` bench (by path).

use serde_json::json;
use toolhost_core::{AgentToolResult, ToolBinding, ToolCall, ToolOutcome, ToolSuccess};
use toolhost_runtime::{CallContext, ExecuteError, Execution, ToolExecutor};
use toolhost_sandbox::{CallEntropy, CallReport};

/// Answers at once, so only the control plane is measured or tested.
pub struct Answering;

impl ToolExecutor for Answering {
    async fn execute(
        &self,
        invocation: &ToolCall,
        _binding: &ToolBinding,
        entropy: CallEntropy,
        _context: CallContext,
    ) -> Result<Execution, ExecuteError> {
        let (result, effect) = AgentToolResult::from_outcome(
            invocation,
            ToolOutcome::Success(ToolSuccess {
                content: "Rolled 1d6: 4.".into(),
                structured: json!({"total": 4}),
                ..ToolSuccess::default()
            }),
        );
        Ok(Execution {
            result,
            effect,
            report: Some(CallReport::not_run(
                entropy,
                Ok(ToolOutcome::Success(ToolSuccess::default())),
            )),
        })
    }
}
