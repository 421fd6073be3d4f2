//! Delegation: checking and starting a child, awaiting tasks, injecting
//! finished children's results, and lining a replayed step up with the
//! task ends recorded before it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_core::{
    AgentModelMessage, AwaitMode, ToolCall, ToolFailure, ToolSuccess, profile::Profile,
};
use toolhost_journal::{
    AgentAwaitCompleted, AgentDelegateStarted, AgentTaskEnded, ChildResultsInjected, Event as _,
};

use crate::agent_loop::tasks::{TaskStatus, TaskView, render_capsule, tasks_json};
use crate::agents::refusal;
use crate::failure::RunFailure;

use super::prompt::task_brief;
use super::*;

impl InvocationLoop<'_> {
    /// Results of this agent's ended tasks it has not read yet go before
    /// its next request.
    pub(super) async fn inject_child_results(
        &self,
        history: &mut Vec<AgentModelMessage>,
        round: u32,
    ) -> Result<(), RunFailure> {
        let ended = match self.shared.run.resume_log() {
            // Replaying: the journal says which results this round took.
            Some(log) if log.replaying(self.id()) => match log.peek(self.id()) {
                Some(next) if next.kind == ChildResultsInjected::TYPE => {
                    let ids: Vec<String> = next.payload["taskIds"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|id| id.as_str().map(str::to_owned))
                        .collect();
                    // They ended before; their children end again in replay.
                    let (views, _) = self
                        .shared
                        .tasks
                        .wait(&ids, AwaitMode::AllCompleted, REPLAY_WAIT)
                        .await;
                    views
                }
                _ => Vec::new(),
            },
            _ => self.shared.tasks.take_undelivered(self.id()),
        };
        if ended.is_empty() {
            return Ok(());
        }
        self.shared.run.record(&ChildResultsInjected {
            invocation_id: self.id().to_owned(),
            round,
            task_ids: ended.iter().map(|view| view.task_id.clone()).collect(),
        })?;
        history.push(AgentModelMessage::user_text(format!(
            "[system notice] Tasks you delegated have ended.\n\n{}",
            render_capsule("Delegated task results", &ended)
        )));
        Ok(())
    }

    /// Start a child invocation for `agent_id` in the background.
    pub(super) fn delegate(
        &self,
        agent_id: &str,
        task: Value,
        call_id: &str,
    ) -> Result<Result<ToolSuccess, ToolFailure>, RunFailure> {
        match self.check_delegation(agent_id) {
            Ok(target) => self.start_child(agent_id, target, task, call_id).map(Ok),
            Err(refused) => Ok(Err(refused)),
        }
    }

    /// The target profile, when the caller may delegate to it now.
    pub(super) fn check_delegation(&self, agent_id: &str) -> Result<Arc<Profile>, ToolFailure> {
        let caller = &self.spec.profile;
        if !caller.delegation.can_delegate {
            return Err(ToolFailure::new(
                "agent.delegation_policy_denied",
                format!("{} may not delegate tasks", caller.id),
            ));
        }
        let target = self
            .shared
            .parts
            .agents
            .get(agent_id)
            .cloned()
            .ok_or_else(|| {
                ToolFailure::new(
                    "agent.target_profile_not_found",
                    format!("no agent profile is called {agent_id}"),
                )
            })?;
        if let Some(reason) = refusal(caller, &target, false) {
            return Err(ToolFailure::new("agent.delegation_policy_denied", reason));
        }
        let tasks = &self.shared.tasks;
        let (all, running) = tasks.counts(self.id(), agent_id);
        let limits = &target.delegation;
        if all >= limits.max_invocations_per_run {
            return Err(ToolFailure::new(
                "agent.delegation_budget_exhausted",
                format!(
                    "{agent_id} takes at most {} task(s) per run from you",
                    limits.max_invocations_per_run
                ),
            ));
        }
        if running >= limits.max_concurrent_invocations {
            return Err(ToolFailure::new(
                "agent.delegation_budget_exhausted",
                format!(
                    "{agent_id} already runs {running} of your tasks (at most {} at once); {} one first",
                    limits.max_concurrent_invocations,
                    self.alias("agent.await")
                ),
            ));
        }
        Ok(target)
    }

    /// Register the task and start its child invocation in the background.
    pub(super) fn start_child(
        &self,
        agent_id: &str,
        target: Arc<Profile>,
        task: Value,
        call_id: &str,
    ) -> Result<ToolSuccess, RunFailure> {
        let caller = &self.spec.profile;
        let tasks = &self.shared.tasks;
        let task_id = self.shared.record.derive_id("task", &[self.id(), call_id]);
        let child_id = self.shared.record.derive_id("inv", &[self.id(), call_id]);
        let workspace_key = tasks.workspace_key(agent_id);
        tasks.start(
            self.id(),
            TaskView {
                task_id: task_id.clone(),
                agent_id: agent_id.to_owned(),
                child_invocation_id: child_id.clone(),
                workspace_key: workspace_key.clone(),
                status: TaskStatus::Running,
                report: None,
                result_ref: None,
                error: None,
            },
        );
        self.shared.run.record(&AgentDelegateStarted {
            task_id: task_id.clone(),
            parent_invocation_id: self.id().to_owned(),
            child_invocation_id: child_id.clone(),
            target_profile_id: agent_id.to_owned(),
            workspace_key: workspace_key.clone(),
        })?;
        let spec = InvocationSpec {
            invocation_id: child_id.clone(),
            max_rounds: target.tools.max_rounds.max(1),
            first_message: task_brief(caller, &task),
            profile: target,
            role: InvocationRole::Child {
                task_id: task_id.clone(),
                parent_invocation_id: self.id().to_owned(),
                workspace_key,
            },
        };
        let shared = Arc::clone(self.shared);
        let spawned_task_id = task_id.clone();
        let handle = tokio::spawn(async move {
            // A resumed run: a task the record shows failed or cancelled
            // ends so again, without running (or paying for) anything.
            let recorded_end = shared
                .run
                .resume_log()
                .and_then(|log| log.task_end(&spawned_task_id));
            if let Some((status, error)) = recorded_end
                && status != "completed"
            {
                if let Some(log) = shared.run.resume_log() {
                    log.skip_to(&spec.invocation_id, AgentTaskEnded::TYPE);
                }
                let status = if status == "cancelled" {
                    TaskStatus::Cancelled
                } else {
                    TaskStatus::Failed
                };
                shared
                    .tasks
                    .finish(&shared.run, &spawned_task_id, status, None, None, error);
                return;
            }
            let ended = run_invocation(&shared, spec).await;
            let run = &shared.run;
            match ended {
                // task.return already recorded the report.
                Ok(InvocationEnd::Returned) => {}
                Ok(_) => shared.tasks.finish(
                    run,
                    &spawned_task_id,
                    TaskStatus::Failed,
                    None,
                    None,
                    Some(format!(
                        "the task ended without {}",
                        toolhost_core::alias::builtin_alias(toolhost_core::builtin::TASK_RETURN)
                    )),
                ),
                Err(RunFailure::Cancelled) => shared.tasks.finish(
                    run,
                    &spawned_task_id,
                    TaskStatus::Cancelled,
                    None,
                    None,
                    Some("cancelled with the run".into()),
                ),
                Err(failure) => shared.tasks.finish(
                    run,
                    &spawned_task_id,
                    TaskStatus::Failed,
                    None,
                    None,
                    Some(failure.to_string()),
                ),
            }
        });
        tasks.set_abort(&task_id, handle.abort_handle());
        Ok(ToolSuccess {
            content: format!(
                "Delegated {task_id} to {agent_id}. It runs in the background; its result reaches you with {}, or by itself after a later tool call.",
                self.alias("agent.await")
            ),
            structured: json!({"taskId": task_id, "status": "running", "agentId": agent_id}),
            resource_refs: Vec::new(),
            effect: None,
        })
    }

    pub(super) async fn await_tasks(
        &self,
        task_ids: &[String],
        mode: AwaitMode,
        timeout_ms: Option<u32>,
    ) -> Result<Result<ToolSuccess, ToolFailure>, RunFailure> {
        let ids = match self.shared.tasks.select(self.id(), task_ids) {
            Ok(ids) => ids,
            Err(refused) => return Ok(Err(refused)),
        };
        let timeout = Duration::from_millis(u64::from(timeout_ms.unwrap_or(120_000)));
        let (views, timed_out) = self.shared.tasks.wait(&ids, mode, timeout).await;
        let mode_name = match mode {
            AwaitMode::NextCompleted => "nextCompleted",
            AwaitMode::AllCompleted => "allCompleted",
            AwaitMode::StatusOnly => "statusOnly",
        };
        self.shared.run.record(&AgentAwaitCompleted {
            parent_invocation_id: self.id().to_owned(),
            mode: mode_name,
            timed_out,
            task_ids: ids,
        })?;
        let heading = if timed_out {
            "Delegated tasks (the wait timed out)"
        } else {
            "Delegated tasks"
        };
        Ok(success(
            render_capsule(heading, &views),
            json!({"mode": mode_name, "timedOut": timed_out, "tasks": tasks_json(&views)}),
        ))
    }

    /// In a resumed run, before a control effect is applied again: the
    /// tasks whose end the journal shows before this call started end again
    /// first (their children are replaying), so the effect sees the task
    /// board it saw then.
    pub(super) async fn line_up_with_record(&self, call: &ToolCall) {
        if let Some(log) = self.shared.run.resume_log() {
            let ended = log.tasks_ended_before(self.id(), &call.call_id);
            if !ended.is_empty() {
                self.shared.tasks.wait_ended(&ended, REPLAY_WAIT).await;
            }
        }
    }

    /// A replayed `agent.await`: the tasks its stored result reported ended
    /// end again in this run (their children replay too) and are marked
    /// delivered, as they were; the model reads the stored result.
    pub(super) async fn await_replayed(
        &self,
        stored: &toolhost_core::AgentToolResult,
    ) -> Result<(), RunFailure> {
        let ended: Vec<String> = stored.structured["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|task| {
                task["status"]
                    .as_str()
                    .is_some_and(|status| status != "running")
            })
            .filter_map(|task| task["taskId"].as_str().map(str::to_owned))
            .collect();
        if !ended.is_empty() {
            self.shared
                .tasks
                .wait(&ended, AwaitMode::AllCompleted, REPLAY_WAIT)
                .await;
        }
        // `agent_await_completed`, as journalled.
        if let Some(log) = self.shared.run.resume_log() {
            log.take(self.id(), AgentAwaitCompleted::TYPE);
        }
        Ok(())
    }
}
