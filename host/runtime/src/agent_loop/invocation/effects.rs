//! Effect handlers and their policy, in one place: what each control
//! tool's effect does to the run (commit, finish, handoff), what it must
//! satisfy first, and auto-publishing a successful write.

use std::sync::Arc;

use serde_json::{Value, json};
use toolhost_core::{
    CommitMode, ToolEffect, ToolFailure, ToolOutcome, ToolSuccess, profile::Presentation,
};
use toolhost_journal::AgentHandoffAccepted;

use crate::agent_loop::shared::CommitOrigin;
use crate::agents::refusal;
use crate::failure::RunFailure;
use crate::invocation::ExecutedCall;

use super::prompt::{handoff_brief, message_body};
use super::*;

impl InvocationLoop<'_> {
    /// Apply a control tool's effect; the call's stored result says what
    /// happened (a recoverable error when the effect was refused).
    pub(super) async fn apply(
        &mut self,
        executed: &mut ExecutedCall,
        effect: ToolEffect,
        round: u32,
    ) -> Result<Applied, RunFailure> {
        let outcome = match effect {
            ToolEffect::Commit { path, mode, reason } => {
                // No path: the profile's message body (`output/main.md`
                // unless it names another).
                let path = path.unwrap_or_else(|| self.spec.profile.output.message_body.clone());
                let workspace = Arc::clone(self.session.workspace().workspace());
                let origin = CommitOrigin {
                    invocation_id: self.id(),
                    workspace: &workspace,
                    call_id: Some(executed.call().call_id.clone()),
                    reason,
                    round,
                };
                match self.shared.commit(&path, mode, origin).await? {
                    Ok(record) => {
                        let count = self.shared.ledger().commits.len();
                        success(
                            format!(
                                // The commit count is structured only: the
                                // model does not act on it (seed §4).
                                "Committed {} to the chat ({}): your message is #{} now. You may revise it and commit again; end the run with {} as the last call of a reply.",
                                record.path,
                                record.mode,
                                record.message_index,
                                self.alias("workspace.finish")
                            ),
                            json!({"path": record.path, "mode": record.mode,
                                   "messageIndex": record.message_index, "commitCount": count}),
                        )
                    }
                    Err(refused) => Err(refused),
                }
            }
            ToolEffect::Finish { reason } => return Ok(self.finish(executed, reason)),
            ToolEffect::Delegate { agent_id, task } => {
                let call_id = executed.call().call_id.clone();
                // A replayed delegation that was accepted is accepted again:
                // the checks read a task board that is still replaying.
                let accepted_then = executed.stored_result().is_some();
                match self.shared.parts.agents.get(&agent_id).cloned() {
                    Some(target) if accepted_then => {
                        Ok(self.start_child(&agent_id, target, task, &call_id)?)
                    }
                    _ => self.delegate(&agent_id, task, &call_id)?,
                }
            }
            ToolEffect::AwaitTasks {
                task_ids,
                mode,
                timeout_ms,
            } => match executed.stored_result() {
                Some(stored) => {
                    let stored = stored.clone();
                    self.await_replayed(&stored).await?;
                    Ok(ToolSuccess::default())
                }
                None => self.await_tasks(&task_ids, mode, timeout_ms).await?,
            },
            ToolEffect::Handoff { agent_id, brief } => {
                let applied = self.handoff(executed, &agent_id, brief)?;
                if matches!(applied, Applied::Ends(_)) {
                    self.end_reason = Some(format!("handed off to {agent_id}"));
                }
                return Ok(applied);
            }
            ToolEffect::TaskReturn { report } => {
                let status = report["status"].as_str().unwrap_or("completed").to_owned();
                let applied = self.task_return(executed, report)?;
                if matches!(applied, Applied::Ends(_)) {
                    self.end_reason = Some(format!("task returned ({status})"));
                }
                return Ok(applied);
            }
        };
        executed.replace_outcome(match outcome {
            Ok(success) => ToolOutcome::Success(success),
            Err(failure) => ToolOutcome::Error(failure),
        });
        Ok(Applied::Nothing)
    }

    pub(super) fn finish(
        &mut self,
        executed: &mut ExecutedCall,
        reason: Option<String>,
    ) -> Applied {
        if !self.foreground() {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.child_finish_denied",
                format!(
                    "a delegated task ends with {}, not {}",
                    self.alias("task.return"),
                    self.alias("workspace.finish")
                ),
            )));
            return Applied::Nothing;
        }
        let foreground = self.spec.profile.run.presentation == Presentation::Foreground;
        if foreground && self.shared.ledger().explicit_commits() == 0 {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.foreground_commit_required",
                format!(
                    "commit your reply before finishing: write it to {}, call {}, then {}",
                    message_body(&self.spec.profile, &self.session).unwrap_or("a file"),
                    self.alias("workspace.commit"),
                    self.alias("workspace.finish")
                ),
            )));
            return Applied::Nothing;
        }
        let cancelled = self.shared.tasks.cancel(&self.shared.run, Some(self.id()));
        let mut content = "Finished. The run ends here.".to_owned();
        if !cancelled.is_empty() {
            content.push_str(&format!(
                " Cancelled unfinished task(s): {}.",
                cancelled.join(", ")
            ));
        }
        let commits = self.shared.ledger().commits.len();
        self.end_reason = Some(reason.clone().unwrap_or_else(|| "finished".into()));
        executed.replace_outcome(ToolOutcome::Success(ToolSuccess {
            content,
            structured: json!({"reason": reason, "commitCount": commits, "cancelledTasks": cancelled}),
            resource_refs: Vec::new(),
            effect: None,
        }));
        Applied::Ends(InvocationEnd::Finished)
    }

    pub(super) fn handoff(
        &self,
        executed: &mut ExecutedCall,
        agent_id: &str,
        brief: Value,
    ) -> Result<Applied, RunFailure> {
        let refuse = |executed: &mut ExecutedCall, code: &str, message: String| {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(code, message)));
            Ok(Applied::Nothing)
        };
        let caller = &self.spec.profile;
        // A replayed handoff that was accepted is accepted again.
        let accepted_then = executed.stored_result().is_some();
        if !accepted_then && (!self.foreground() || !caller.delegation.can_handoff) {
            return refuse(
                executed,
                "agent.handoff_policy_denied",
                format!("{} may not hand off the run", caller.id),
            );
        }
        let Some(target) = self.shared.parts.agents.get(agent_id).cloned() else {
            return refuse(
                executed,
                "agent.target_profile_not_found",
                format!("no agent profile is called {agent_id}"),
            );
        };
        if !accepted_then && let Some(reason) = refusal(caller, &target, true) {
            return refuse(executed, "agent.handoff_policy_denied", reason);
        }
        let pending = self.shared.tasks.running_of(self.id());
        if !accepted_then && !pending.is_empty() {
            return refuse(
                executed,
                "agent.handoff_pending_tasks",
                format!(
                    "your delegated task(s) {} are unfinished; {} them first",
                    pending.join(", "),
                    self.alias("agent.await")
                ),
            );
        }
        let depth = {
            let mut ledger = self.shared.ledger();
            if !accepted_then && ledger.handoffs >= caller.delegation.max_handoff_depth {
                drop(ledger);
                return refuse(
                    executed,
                    "agent.handoff_depth_exhausted",
                    format!(
                        "this run was already handed off {} time(s), the most {} allows",
                        caller.delegation.max_handoff_depth, caller.id
                    ),
                );
            }
            ledger.handoffs += 1;
            ledger.handoffs
        };
        let call_id = executed.call().call_id.clone();
        let task_id = self
            .shared
            .record
            .derive_id("handoff", &[self.id(), &call_id]);
        let next_id = self.shared.record.derive_id("inv", &[self.id(), &call_id]);
        self.shared.run.record(&AgentHandoffAccepted {
            task_id: task_id.clone(),
            source_invocation_id: self.id().to_owned(),
            new_invocation_id: next_id.clone(),
            target_profile_id: agent_id.to_owned(),
            depth,
        })?;
        let name = target
            .display_name
            .clone()
            .unwrap_or_else(|| target.id.clone());
        executed.replace_outcome(ToolOutcome::Success(ToolSuccess {
            content: format!("Handoff accepted for Agent {name}. Your part is complete."),
            structured: json!({"handoffId": task_id, "taskId": task_id, "status": "accepted", "agentId": agent_id}),
            resource_refs: Vec::new(),
            effect: None,
        }));
        Ok(Applied::Ends(InvocationEnd::HandedOff(InvocationSpec {
            invocation_id: next_id,
            max_rounds: target.tools.max_rounds.max(1),
            first_message: handoff_brief(caller, &brief),
            profile: target,
            role: InvocationRole::Foreground,
        })))
    }

    /// The round's last write of the profile's message body reaches the chat before
    /// the first explicit commit (foreground, once per run) — unless the
    /// policy holds commits back: when `workspace.commit` needs a person's
    /// approval, only an approved commit reaches the chat, and when a
    /// policy layer denied it, nothing does.
    pub(super) async fn auto_publish(
        &self,
        last_write: Option<&str>,
        round: u32,
    ) -> Result<(), RunFailure> {
        let commit_held_back = self.session.snapshot().decisions().iter().any(|decision| {
            decision.tool_id.is_builtin()
                && decision.tool_id.native_name() == "workspace.commit"
                && (decision.approval_required || !decision.visible)
        });
        // The profile's message body, when this invocation sees it.
        let Some(body) = message_body(&self.spec.profile, &self.session) else {
            return Ok(());
        };
        if !self.foreground()
            || self.spec.profile.run.presentation != Presentation::Foreground
            || last_write != Some(body)
            || commit_held_back
        {
            return Ok(());
        }
        {
            let mut ledger = self.shared.ledger();
            if ledger.explicit_commits() > 0 || ledger.explicit_requested || ledger.auto_published {
                return Ok(());
            }
            ledger.auto_published = true;
        }
        let workspace = Arc::clone(self.session.workspace().workspace());
        let origin = CommitOrigin {
            invocation_id: self.id(),
            workspace: &workspace,
            call_id: None,
            reason: None,
            round,
        };
        // A file that vanished meanwhile is simply not published.
        if let Err(refused) = self
            .shared
            .commit(body, CommitMode::Replace, origin)
            .await?
        {
            tracing::info!(code = %refused.code, "auto-publish skipped: {}", refused.message);
        }
        Ok(())
    }
}
