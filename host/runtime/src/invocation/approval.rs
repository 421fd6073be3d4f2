//! The approval step of the call path: a call whose binding asks for a
//! person's approval is journalled as asked, decided — by the resumed run's
//! record, an earlier "for the run", or the run's approver — and journalled
//! as decided; a denial is a result the model reads.

use toolhost_core::{AgentToolResult, ToolBinding, ToolCall, ToolFailure, ToolOutcome};
use toolhost_journal::{Event as _, ToolCallApprovalDecided, ToolCallApprovalRequested};

use super::Invocation;
use crate::approval::{ApprovalDecision, ApprovalRequest, ArgumentsSummary, Verdict};
use crate::failure::RunFailure;

impl Invocation {
    /// Ask for a person's approval of `call` (its binding requires
    /// one, for `reason`): journalled, decided by the journal (a resumed
    /// run), an earlier "for the run", or the run's approver. `Some`: the
    /// denied call's result, an `agent.tool_denied_by_user` the model reads.
    pub(super) async fn seek_approval(
        &mut self,
        call: &ToolCall,
        binding: &ToolBinding,
        reason: &str,
        round: u32,
    ) -> Result<Option<AgentToolResult>, RunFailure> {
        let tool_id = &call.tool_id;
        let shown = ArgumentsSummary::of(&call.arguments);
        let request = ApprovalRequest {
            run_id: self.run.run_id().to_owned(),
            invocation_id: self.invocation_id.clone(),
            call_id: call.call_id.clone(),
            round,
            tool_id: tool_id.clone(),
            title: binding.descriptor.title.clone(),
            arguments_summary: shown.to_string(),
            arguments_shown: shown,
            annotations: binding.descriptor.annotations.clone(),
            source: tool_id.provider_str().to_owned(),
            reason: reason.to_owned(),
        };
        self.run.record(&ToolCallApprovalRequested {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: request.call_id.clone(),
            tool_id: tool_id.clone(),
            name: tool_id.native_name().to_owned(),
            title: request.title.clone(),
            arguments_shown: serde_json::to_value(&request.arguments_shown).unwrap_or_default(),
            arguments_summary: request.arguments_summary.clone(),
            annotations: request.annotations.clone(),
            source: request.source.clone(),
            reason: request.reason.clone(),
        })?;
        let recorded = self
            .run
            .resume_log()
            .and_then(|log| log.peek(&self.invocation_id))
            .filter(|next| {
                next.kind == ToolCallApprovalDecided::TYPE
                    && next.payload["callId"] == request.call_id.as_str()
            });
        let decision = if let Some(recorded) = recorded {
            // Decided before the run was interrupted: not asked again.
            let text = |key: &str| recorded.payload[key].as_str().map(str::to_owned);
            ApprovalDecision {
                verdict: text("decision")
                    .as_deref()
                    .and_then(Verdict::parse)
                    .unwrap_or(Verdict::Denied),
                by: text("by").unwrap_or_default(),
                note: text("note"),
            }
        } else if self.run.approved_for_run(tool_id) {
            ApprovalDecision {
                verdict: Verdict::Approved,
                by: "approved for the rest of the run".into(),
                note: None,
            }
        } else {
            let approver = self.run.approver();
            approver.decide(self.run.root(), &request).await
        };
        if decision.verdict == Verdict::ApprovedForRun {
            self.run.approve_for_run(tool_id);
        }
        self.run.record(&ToolCallApprovalDecided {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: request.call_id.clone(),
            tool_id: tool_id.clone(),
            decision: decision.verdict.as_str().to_owned(),
            by: decision.by.clone(),
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            note: decision.note.clone(),
        })?;
        if decision.verdict.allows() {
            return Ok(None);
        }
        let mut message = match decision.verdict {
            Verdict::TimedOut => format!(
                "no one approved this call of {} in time, so it did not run",
                self.snapshot
                    .binding(tool_id)
                    .map_or(tool_id.native_name(), |b| b.model_alias.as_str())
            ),
            _ => format!(
                "a person did not approve this call of {}, so it did not run",
                self.snapshot
                    .binding(tool_id)
                    .map_or(tool_id.native_name(), |b| b.model_alias.as_str())
            ),
        };
        if let Some(note) = &decision.note {
            message.push_str(&format!("; their note: {note}"));
        }
        let (result, _) = AgentToolResult::from_outcome(
            call,
            ToolOutcome::Error(ToolFailure::new("agent.tool_denied_by_user", message)),
        );
        Ok(Some(result))
    }
}
