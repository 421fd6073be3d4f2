//! The audit side of the call path: a call's arguments recorded before
//! anything acts on them, its result stored create-only and its outcome
//! journalled, a failure that ends the run journalled first; and the
//! invocation's read-state, stored with each call so a reopened run keeps
//! what it has read.

use std::time::Instant;

use serde_json::{Value, json};
use toolhost_capabilities::Settlement;
use toolhost_core::{AgentToolResult, Classified, ToolCall, ToolFailure, ToolOutcome};
use toolhost_journal::{
    ToolCallCompleted, ToolCallFailed, ToolCallOutcome, ToolCallRequested, ToolCallSystemFailed,
    ToolResultStored,
};
use toolhost_sandbox::CallReport;

use super::{CallOutcome, ExecutedCall, Invocation};
use crate::failure::RunFailure;

impl Invocation {
    /// Take over what an earlier process of this invocation had read.
    pub(crate) fn with_read_state(mut self, stored: Vec<u8>) -> Result<Self, RunFailure> {
        let file: ReadStateFile = serde_json::from_slice(&stored).map_err(|error| {
            RunFailure::State(format!(
                "the stored read-state of `{}` does not load: {error}",
                self.invocation_id
            ))
        })?;
        self.workspace.restore_states(file.states);
        self.stored_read_state = Some(stored);
        Ok(self)
    }

    /// Store the read-state when it changed, so a reopened run's invocation
    /// keeps what it has read (every later edit still re-checks the sha).
    pub(super) fn store_read_state(&mut self) -> Result<(), RunFailure> {
        let file = ReadStateFile {
            schema_version: 1,
            states: self.workspace.states_snapshot(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|error| {
            RunFailure::State(format!("read-state does not serialize: {error}"))
        })?;
        if self.stored_read_state.as_deref() == Some(bytes.as_slice()) {
            return Ok(());
        }
        let path = self
            .run
            .manifest_layout()
            .read_state(&self.invocation_id)
            .map_err(|error| RunFailure::State(error.to_string()))?;
        self.run.dir().replace_state_file(&path.relative, &bytes)?;
        self.stored_read_state = Some(bytes);
        Ok(())
    }

    /// Answer a call without running it (a call after a terminal tool in
    /// the same round): stored and journalled like any call, never charged
    /// to the budgets.
    pub fn refuse(
        &mut self,
        call: ToolCall,
        failure: ToolFailure,
    ) -> Result<CallOutcome, RunFailure> {
        let started = Instant::now();
        let stored = self.prior(&call)?.into_stored();
        self.record_request(&call)?;
        let (result, _) = AgentToolResult::from_outcome(&call, ToolOutcome::Error(failure));
        self.store(ExecutedCall {
            call,
            result,
            effect: None,
            report: None,
            round: self.round,
            started,
            settlement: Settlement::default(),
            stored,
        })
    }

    /// The arguments are an audit fact before anything acts on them. A
    /// duplicate call id fails here, before any file is overwritten.
    pub(super) fn record_request(&mut self, call: &ToolCall) -> Result<(), RunFailure> {
        let dir = self.run.dir();
        let arguments_ref = if self.run.resume_log().is_some() {
            dir.store_tool_args_again(
                &call.call_id,
                &call.tool_id,
                &self.invocation_id,
                self.round,
                &call.arguments,
            )?
        } else {
            dir.store_tool_args(
                &call.call_id,
                &call.tool_id,
                &self.invocation_id,
                self.round,
                &call.arguments,
            )?
        };
        drop(dir);
        // Written with what the gate decides next (`tool_call_started`, or
        // the refusal's result): nothing acts on the call in between.
        self.run.hold(&ToolCallRequested {
            round: self.round,
            invocation_id: self.invocation_id.clone(),
            call_id: call.call_id.clone(),
            tool_id: call.tool_id.clone(),
            snapshot_id: self.snapshot.id().to_owned(),
            name: call.tool_id.native_name().to_owned(),
            arguments_ref,
        })?;
        Ok(())
    }

    /// The second half of [`call`](Self::call): the result stored
    /// (create-only) and the call's outcome journalled.
    pub fn store(&mut self, executed: ExecutedCall) -> Result<CallOutcome, RunFailure> {
        let ExecutedCall {
            call,
            result,
            effect,
            report,
            round,
            started,
            settlement,
            stored,
        } = executed;
        let replayed = stored.is_some();
        let result = stored.unwrap_or(result);
        if let Err(mismatch) = result.check_identity(&call) {
            return Err(self.system_failure(&call, round, mismatch.into()));
        }
        let stored = if replayed {
            Ok(self
                .run
                .manifest_layout()
                .tool_result(&call.call_id)
                .relative)
        } else {
            self.run
                .dir()
                .store_tool_result(&self.invocation_id, round, &result)
        };
        let result_ref = match stored {
            Ok(path) => path,
            Err(error) => return Err(self.system_failure(&call, round, error.into())),
        };
        // Written with the call's outcome below: between them only the
        // read-state is stored, and a resumed run goes by the result file.
        self.run.hold(&ToolResultStored {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: call.call_id.clone(),
            tool_id: call.tool_id.clone(),
            path: result_ref.clone(),
        })?;
        let elapsed = started.elapsed();
        let elapsed_ms = elapsed.as_millis() as u64;
        let sandbox = report.as_ref().map(sandbox_summary);
        let outcome = ToolCallOutcome::from_result(
            round,
            &self.invocation_id,
            self.snapshot.id().to_owned(),
            &result,
            elapsed_ms,
            sandbox,
        )
        .with_elapsed_us(elapsed.as_micros() as u64)
        .with_skill_read_chars(settlement.skill_read_chars)
        .with_recorded(settlement.recorded);
        // Read-state first: a crash after the completion leaves the file
        // matching the journal, so a resumed run knows what this call read
        // or wrote.
        self.store_read_state()?;
        if outcome.is_error {
            self.run.record(&ToolCallFailed(outcome))?;
        } else {
            self.run.record(&ToolCallCompleted(outcome))?;
        }
        Ok(CallOutcome {
            result,
            effect,
            report,
            result_ref,
        })
    }

    /// Journal a failure that ends the run from the run loop, inside a call
    /// (an effect the host could not apply).
    pub fn fail_call(&self, executed: &ExecutedCall, failure: RunFailure) -> RunFailure {
        self.system_failure(&executed.call, executed.round, failure)
    }

    /// Journal a failure that ends the run (best effort: if the journal
    /// itself is what failed, the original failure is still returned).
    pub(super) fn system_failure(
        &self,
        call: &ToolCall,
        round: u32,
        failure: RunFailure,
    ) -> RunFailure {
        let event = ToolCallSystemFailed {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: call.call_id.clone(),
            tool_id: call.tool_id.clone(),
            snapshot_id: self.snapshot.id().to_owned(),
            name: call.tool_id.native_name().to_owned(),
            code: failure.code().to_owned(),
            message: failure.to_string(),
        };
        if let Err(journal) = self.run.record(&event) {
            tracing::error!(%journal, %failure, "could not journal a failed tool call");
        }
        failure
    }
}

/// `input/invocations/<id>/read_state.json`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadStateFile {
    schema_version: u32,
    states: std::collections::BTreeMap<String, toolhost_workspace::ReadState>,
}

/// The replayable facts of a sandboxed call: rerun with the same seed and
/// clock to get the same result.
fn sandbox_summary(report: &CallReport) -> Value {
    json!({
        "seed": report.entropy.seed,
        "clockMs": report.entropy.clock_ms,
        "fuelConsumed": report.fuel_consumed,
        "elapsedUs": report.elapsed_us,
        "peakMemoryBytes": report.peak_memory_bytes,
        "randomDraws": report.random_draws,
    })
}
