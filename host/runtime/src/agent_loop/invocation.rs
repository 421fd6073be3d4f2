//! One invocation's rounds: ask the model, run the reply's tool calls in
//! order, apply their effects, until a terminal effect or a budget ends it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelRole,
    AgentModelSettings, AwaitMode, Classified, CommitMode, ExitPolicy, ToolChoice, ToolEffect,
    ToolFailure, ToolId, ToolInvocation, ToolOutcome, ToolSuccess, builtin,
    profile::{Presentation, Profile},
};
use toolhost_journal::{
    AgentAwaitCompleted, AgentDelegateStarted, AgentHandoffAccepted, AgentLoopFinished,
    ChildResultsInjected, DirectOutputCaptured, DriftRecoveryAttempted, ModelCallAttemptFailed,
    ModelCompleted, ROOT_INVOCATION_ID, TaskReturnCompleted, sha256_hex,
};
use toolhost_model::{AgentModel, ModelReply};
use toolhost_workspace::{PathUse, WorkspacePath, WriteGuard};

use super::shared::{CommitOrigin, RunShared};
use super::tasks::{TaskStatus, TaskView, render_capsule, tasks_json};
use super::{DIRECT_OUTPUT_PATH, MESSAGE_BODY_PATH};
use crate::agents::refusal;
use crate::failure::RunFailure;
use crate::invocation::{ExecutedCall, InvocationSession};

/// How long a replayed step waits for a replayed child to end again.
const REPLAY_WAIT: Duration = Duration::from_secs(600);

pub(super) enum InvocationRole {
    /// The root agent or a handoff target: ends the run with `workspace.finish`.
    Foreground,
    /// A delegated task: reports with `task.return`.
    Child {
        task_id: String,
        parent_invocation_id: String,
        workspace_key: String,
    },
}

pub(super) struct InvocationSpec {
    pub invocation_id: String,
    pub profile: Arc<Profile>,
    pub role: InvocationRole,
    /// The first user message (the run's task, a handoff or task brief).
    pub first_message: String,
    pub max_rounds: u32,
}

pub(super) enum InvocationEnd {
    /// `workspace.finish` succeeded.
    Finished,
    /// `agent.handoff` was accepted: the target goes on.
    HandedOff(InvocationSpec),
    /// `task.return` stored the child's report.
    Returned,
}

/// What an applied effect did to the loop.
enum Applied {
    Nothing,
    Ends(InvocationEnd),
}

pub(super) async fn run_invocation(
    shared: &Arc<RunShared>,
    spec: InvocationSpec,
) -> Result<InvocationEnd, RunFailure> {
    let exit = match spec.role {
        InvocationRole::Foreground => ExitPolicy::RunFinishAllowed,
        InvocationRole::Child { .. } => ExitPolicy::TaskReturnRequired,
    };
    let mut session = shared.run.start_invocation(
        &spec.profile,
        shared.parts.host.snapshot_sources(),
        &spec.invocation_id,
        exit,
    )?;
    session.set_agents(shared.parts.agents.callable_by(&spec.profile));
    if matches!(spec.role, InvocationRole::Foreground) {
        shared.ledger().agents.push(spec.profile.id.clone());
    }
    let model = shared.parts.models.model_for(&spec.profile.id);
    let mut agent = InvocationLoop {
        shared,
        model,
        session,
        spec,
        returned: false,
        end_reason: None,
    };
    agent.rounds().await
}

struct InvocationLoop<'a> {
    shared: &'a Arc<RunShared>,
    model: Arc<dyn AgentModel>,
    session: InvocationSession,
    spec: InvocationSpec,
    returned: bool,
    /// Why the loop ended, as the terminal call said (`finish`'s reason,
    /// the handoff target, the task status).
    end_reason: Option<String>,
}

impl InvocationLoop<'_> {
    fn id(&self) -> &str {
        &self.spec.invocation_id
    }

    fn foreground(&self) -> bool {
        matches!(self.spec.role, InvocationRole::Foreground)
    }

    async fn rounds(&mut self) -> Result<InvocationEnd, RunFailure> {
        let profile = Arc::clone(&self.spec.profile);
        let settings = AgentModelSettings {
            model: self
                .shared
                .config
                .model_name
                .clone()
                .or_else(|| profile.model.id.clone())
                .unwrap_or_default(),
            temperature: profile.model.temperature,
            max_output_tokens: self
                .shared
                .config
                .max_output_tokens
                .or(profile.model.max_output_tokens),
        };
        let system = system_prompt(&profile, &self.session, self.foreground());
        let mut history = vec![AgentModelMessage::user_text(
            self.spec.first_message.clone(),
        )];
        let max_rounds = self.spec.max_rounds;

        while self.session.round() < max_rounds {
            if self.shared.config.cancel.is_cancelled() {
                return Err(RunFailure::Cancelled);
            }
            let turn = self
                .session
                .begin_turn(ToolChoice::Auto, &self.model.describe())?;
            let round = self.session.round();
            if self.foreground() {
                self.shared.ledger().rounds += 1;
            }
            let request = AgentModelRequest {
                settings: settings.clone(),
                system: Some(system.clone()),
                messages: history.clone(),
                turn,
            };
            let shared = self.shared;
            let reply = unless_cancelled(shared, self.ask(&request, round)).await?;
            let response_path = self.store_reply(&reply, round)?;
            let message = reply.response.message;
            let calls: Vec<ToolInvocation> = message.tool_calls().cloned().collect();
            let text = message.text();
            history.push(message);

            if calls.is_empty() {
                self.capture_direct_output(&text, round, &response_path)?;
                if round >= max_rounds {
                    break;
                }
                self.shared.run.record(&DriftRecoveryAttempted {
                    attempt: round,
                    max_attempts: max_rounds - 1,
                    max_rounds,
                    limit_reason: "max_rounds",
                    round,
                    invocation_id: self.id().to_owned(),
                    committed_count: self.shared.ledger().commits.len(),
                    reason_code: "model.tool_call_required",
                })?;
                history.push(AgentModelMessage::user_text(self.reminder(round)));
                continue;
            }

            let last = calls.len() - 1;
            let mut results = Vec::with_capacity(calls.len());
            let mut ends = None;
            let mut last_write = None;
            for (index, call) in calls.into_iter().enumerate() {
                self.shared.ledger().tool_calls += 1;
                let outcome = if is_terminal(&call.tool_id) && index != last {
                    let name = call.tool_id.native_name().to_owned();
                    self.session.refuse(
                        call,
                        ToolFailure::new(
                            "agent.tool_after_finish",
                            format!(
                                "{name} ends your turn, so it must be the last tool call of a reply; call it again, alone or last"
                            ),
                        ),
                    )?
                } else {
                    let entropy = shared.record.entropy(self.id(), &call.call_id);
                    let execution = self.session.execute(
                        shared.parts.host.as_ref(),
                        &request.turn,
                        call,
                        entropy,
                    );
                    let mut executed = unless_cancelled(shared, execution).await?;
                    // A replayed call the effect refused then changes nothing now.
                    let refused_then = executed
                        .stored_result()
                        .is_some_and(|stored| stored.is_error);
                    if let Some(effect) = executed.take_effect().filter(|_| !refused_then) {
                        self.line_up_with_record(executed.invocation()).await;
                        let applied = self.apply(&mut executed, effect, round);
                        match unless_cancelled(shared, applied).await {
                            Ok(Applied::Ends(end)) => ends = Some(end),
                            Ok(Applied::Nothing) => {}
                            Err(failure) => return Err(self.session.fail_call(&executed, failure)),
                        }
                    }
                    self.session.store(executed)?
                };
                if let Some(path) = written_path(&outcome.result) {
                    last_write = Some(path);
                }
                results.push(AgentModelContentPart::ToolResult {
                    result: outcome.result,
                });
            }
            history.push(AgentModelMessage {
                role: AgentModelRole::Tool,
                parts: results,
                provider_metadata: Value::Null,
            });

            if let Some(end) = ends {
                self.shared.run.record(&AgentLoopFinished {
                    invocation_id: self.id().to_owned(),
                    round,
                    commit_count: self.shared.ledger().commits.len(),
                    reason: self.end_reason.take(),
                })?;
                return Ok(end);
            }
            self.auto_publish(last_write.as_deref(), round)?;
            self.inject_child_results(&mut history, round).await?;
        }
        let last_was_drift = matches!(
            history.last(),
            Some(message) if message.role == AgentModelRole::Assistant
        );
        Err(RunFailure::LoopExhausted {
            code: if last_was_drift {
                "model.tool_call_required"
            } else {
                "agent.max_tool_rounds_exceeded"
            },
            message: if last_was_drift {
                format!(
                    "{} answered without a tool call in the last of its {max_rounds} rounds",
                    self.spec.profile.id
                )
            } else {
                format!(
                    "{} used all {max_rounds} rounds without finishing",
                    self.spec.profile.id
                )
            },
        })
    }

    /// The stored reply of `round`, when a resumed run has one: the model
    /// is not asked again (a model answering from a sequence moves past it).
    fn stored_reply(&self, round: u32) -> Result<Option<ModelReply>, RunFailure> {
        if self.shared.run.resume_log().is_none() {
            return Ok(None);
        }
        let Some(bytes) = self.shared.run.read_file(&self.reply_path(round))? else {
            return Ok(None);
        };
        #[derive(serde::Deserialize)]
        struct Stored {
            response: toolhost_core::AgentModelResponse,
            raw: Value,
        }
        let stored: Stored = serde_json::from_slice(&bytes).map_err(|error| {
            RunFailure::State(format!("{} does not load: {error}", self.reply_path(round)))
        })?;
        self.model.skip_reply();
        Ok(Some(ModelReply {
            response: stored.response,
            raw: stored.raw,
        }))
    }

    fn reply_path(&self, round: u32) -> String {
        if self.id() == ROOT_INVOCATION_ID {
            format!("model-responses/round-{round:03}.json")
        } else {
            format!("model-responses/{}/round-{round:03}.json", self.id())
        }
    }

    /// One model call, retried while its failure is retryable.
    async fn ask(&self, request: &AgentModelRequest, round: u32) -> Result<ModelReply, RunFailure> {
        if let Some(stored) = self.stored_reply(round)? {
            // Attempts that failed before it were journalled then.
            if let Some(log) = self.shared.run.resume_log() {
                log.skip_while(self.id(), "model_call_attempt_failed");
            }
            return Ok(stored);
        }
        let retry = self.shared.config.retry;
        let mut attempt = 1;
        loop {
            match self.model.complete(request).await {
                Ok(reply) => return Ok(reply),
                Err(error) => {
                    let will_retry = error.retryable() && attempt <= retry.max_retries;
                    self.shared.run.record(&ModelCallAttemptFailed {
                        round,
                        invocation_id: self.id().to_owned(),
                        attempt,
                        code: error.code().to_owned(),
                        message: error.to_string(),
                        retryable: error.retryable(),
                        will_retry,
                    })?;
                    if !will_retry {
                        return Err(error.into());
                    }
                    let delay = retry
                        .initial_delay
                        .saturating_mul(1 << (attempt - 1).min(16));
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }

    /// `model-responses/round-NNN.json` (the root) or
    /// `model-responses/<invocation>/round-NNN.json`, create-only, and
    /// `model_completed`.
    fn store_reply(&self, reply: &ModelReply, round: u32) -> Result<String, RunFailure> {
        let path = self.reply_path(round);
        let record = json!({
            "schemaVersion": 1,
            "round": round,
            "invocationId": self.id(),
            "model": self.model.describe(),
            "response": reply.response,
            "raw": reply.raw,
        });
        let mut bytes = serde_json::to_vec_pretty(&record)
            .map_err(|error| RunFailure::State(format!("model reply: {error}")))?;
        bytes.push(b'\n');
        if self.shared.run.resume_log().is_some() && self.shared.run.read_file(&path)?.is_some() {
            // A stored reply taken up again: the file is the record.
        } else {
            self.shared.run.dir().write_create_only(&path, &bytes)?;
        }
        let response = &reply.response;
        let text = response.message.text();
        self.shared.run.record(&ModelCompleted {
            round,
            invocation_id: self.id().to_owned(),
            model_response_path: path.clone(),
            response_id: response.response_id.clone(),
            finish_reason: serde_json::to_value(&response.finish_reason).unwrap_or(Value::Null),
            tool_call_count: response.message.tool_calls().count(),
            has_assistant_text: !text.trim().is_empty(),
            assistant_text_chars: text.chars().count(),
            input_tokens: response.usage.map(|usage| usage.input_tokens),
            output_tokens: response.usage.map(|usage| usage.output_tokens),
        })?;
        Ok(path)
    }

    /// Keep a reply's text that no tool call carried, so nothing the model
    /// wrote is lost (foreground agents; a child's drift text stays in its
    /// stored reply).
    fn capture_direct_output(
        &self,
        text: &str,
        round: u32,
        response_path: &str,
    ) -> Result<(), RunFailure> {
        if text.trim().is_empty() || !self.foreground() {
            return Ok(());
        }
        self.shared
            .run
            .workspace()
            .write_text(DIRECT_OUTPUT_PATH, text, WriteGuard::Unchecked)?;
        self.shared.run.record(&DirectOutputCaptured {
            round,
            invocation_id: self.id().to_owned(),
            path: DIRECT_OUTPUT_PATH.to_owned(),
            chars: text.chars().count(),
            sha256: sha256_hex(text.as_bytes()),
            model_response_path: response_path.to_owned(),
        })?;
        Ok(())
    }

    fn reminder(&self, attempt: u32) -> String {
        let head = format!(
            "[system reminder, direct output recovery attempt {attempt}] Your last reply had no tool call, so nobody saw it."
        );
        if !self.foreground() {
            return format!(
                "{head} Work only through tool calls, and report your result with task_return."
            );
        }
        if self.shared.ledger().explicit_commits() > 0 {
            format!(
                "{head} Its text was saved to {DIRECT_OUTPUT_PATH}. Your reply is already committed to the chat: call workspace_finish to end the run, or write and commit again first."
            )
        } else {
            format!(
                "{head} Its text was saved to {DIRECT_OUTPUT_PATH}. Work only through tool calls: write your reply to {MESSAGE_BODY_PATH} with workspace_write_file, publish it with workspace_commit, then call workspace_finish."
            )
        }
    }

    /// The round's last write of the message body reaches the chat before
    /// the first explicit commit (foreground, once per run).
    fn auto_publish(&self, last_write: Option<&str>, round: u32) -> Result<(), RunFailure> {
        if !self.foreground()
            || self.spec.profile.run.presentation != Presentation::Foreground
            || last_write != Some(MESSAGE_BODY_PATH)
        {
            return Ok(());
        }
        {
            let mut ledger = self.shared.ledger();
            if ledger.explicit_commits() > 0 || ledger.auto_published {
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
            .commit(MESSAGE_BODY_PATH, CommitMode::Replace, origin)?
        {
            tracing::info!(code = %refused.code, "auto-publish skipped: {}", refused.message);
        }
        Ok(())
    }

    /// Results of this agent's ended tasks it has not read yet go before
    /// its next request.
    async fn inject_child_results(
        &self,
        history: &mut Vec<AgentModelMessage>,
        round: u32,
    ) -> Result<(), RunFailure> {
        let ended = match self.shared.run.resume_log() {
            // Replaying: the journal says which results this round took.
            Some(log) if log.replaying(self.id()) => match log.peek(self.id()) {
                Some(next) if next.kind == "child_results_injected" => {
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

    /// Apply a control tool's effect; the call's stored result says what
    /// happened (a recoverable error when the effect was refused).
    async fn apply(
        &mut self,
        executed: &mut ExecutedCall,
        effect: ToolEffect,
        round: u32,
    ) -> Result<Applied, RunFailure> {
        let outcome = match effect {
            ToolEffect::Commit { path, mode, reason } => {
                let path = path.unwrap_or_else(|| MESSAGE_BODY_PATH.to_owned());
                let workspace = Arc::clone(self.session.workspace().workspace());
                let origin = CommitOrigin {
                    invocation_id: self.id(),
                    workspace: &workspace,
                    call_id: Some(executed.invocation().call_id.clone()),
                    reason,
                    round,
                };
                match self.shared.commit(&path, mode, origin)? {
                    Ok(record) => {
                        let count = self.shared.ledger().commits.len();
                        success(
                            format!(
                                "Committed {} to the chat ({}): your message is #{} now. Commits in this run: {count}.",
                                record.path, record.mode, record.message_index
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
                let call_id = executed.invocation().call_id.clone();
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

    fn finish(&mut self, executed: &mut ExecutedCall, reason: Option<String>) -> Applied {
        if !self.foreground() {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.child_finish_denied",
                "a delegated task ends with task_return, not workspace_finish",
            )));
            return Applied::Nothing;
        }
        let foreground = self.spec.profile.run.presentation == Presentation::Foreground;
        if foreground && self.shared.ledger().explicit_commits() == 0 {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.foreground_commit_required",
                format!(
                    "commit your reply before finishing: write it to {MESSAGE_BODY_PATH}, call workspace_commit, then workspace_finish"
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

    /// Start a child invocation for `agent_id` in the background.
    fn delegate(
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
    fn check_delegation(&self, agent_id: &str) -> Result<Arc<Profile>, ToolFailure> {
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
                    "{agent_id} already runs {running} of your tasks (at most {} at once); agent_await one first",
                    limits.max_concurrent_invocations
                ),
            ));
        }
        Ok(target)
    }

    /// Register the task and start its child invocation in the background.
    fn start_child(
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
                    log.skip_to(&spec.invocation_id, "agent_task_ended");
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
                    Some("the task ended without task_return".into()),
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
                "Delegated {task_id} to {agent_id}. It runs in the background; its result reaches you with agent_await, or by itself after a later tool call."
            ),
            structured: json!({"taskId": task_id, "status": "running", "agentId": agent_id}),
            resource_refs: Vec::new(),
            effect: None,
        })
    }

    async fn await_tasks(
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
    async fn line_up_with_record(&self, call: &ToolInvocation) {
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
    async fn await_replayed(
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
            log.take(self.id(), "agent_await_completed");
        }
        Ok(())
    }

    fn handoff(
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
                    "your delegated task(s) {} are unfinished; agent_await them first",
                    pending.join(", ")
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
        let call_id = executed.invocation().call_id.clone();
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

    fn task_return(
        &mut self,
        executed: &mut ExecutedCall,
        report: Value,
    ) -> Result<Applied, RunFailure> {
        let InvocationRole::Child {
            task_id,
            parent_invocation_id,
            workspace_key,
        } = &self.spec.role
        else {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.task_return_denied",
                "only a delegated task reports with task_return",
            )));
            return Ok(Applied::Nothing);
        };
        if self.returned {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.task_already_finished",
                "this task already returned its result",
            )));
            return Ok(Applied::Nothing);
        }
        // Every artifact must be a visible workspace path.
        let roots = self.shared.run.workspace().roots();
        for artifact in report["artifacts"].as_array().into_iter().flatten() {
            let path = artifact["path"].as_str().unwrap_or("");
            let checked = WorkspacePath::parse(path, PathUse::File)
                .and_then(|parsed| roots.check_visible(&parsed));
            if let Err(error) = checked {
                executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                    error.code(),
                    format!("artifact {path}: {}", error.message()),
                )));
                return Ok(Applied::Nothing);
            }
        }
        let status = report["status"].as_str().unwrap_or("completed").to_owned();
        let summary = report["summary"].as_str().unwrap_or("").to_owned();
        let result_ref = format!("agent-results/{}.json", self.id());
        let summary_ref = format!("summaries/{workspace_key}-result.md");
        let record = json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentTaskResult",
            "status": status,
            "summary": summary,
            "summaryRef": summary_ref,
            "result": report,
            "runtime": {
                "taskId": task_id,
                "runId": self.shared.run.run_id(),
                "parentInvocationId": parent_invocation_id,
                "childInvocationId": self.id(),
                "targetProfileId": self.spec.profile.id,
                "workspaceKey": workspace_key,
            },
        });
        let mut bytes = serde_json::to_vec_pretty(&record)
            .map_err(|error| RunFailure::State(format!("task result: {error}")))?;
        bytes.push(b'\n');
        self.shared
            .run
            .dir()
            .write_create_only_again(&result_ref, &bytes)?;
        let markdown = task_summary_markdown(task_id, &self.spec.profile.id, &status, &summary);
        self.shared
            .run
            .workspace()
            .write_text(&summary_ref, &markdown, WriteGuard::Unchecked)?;
        self.shared.run.record(&TaskReturnCompleted {
            task_id: task_id.clone(),
            parent_invocation_id: parent_invocation_id.clone(),
            child_invocation_id: self.id().to_owned(),
            status: status.clone(),
            result_ref: result_ref.clone(),
            summary_ref: summary_ref.clone(),
        })?;
        self.returned = true;
        let task_status = if status == "failed" {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        self.shared.tasks.finish(
            &self.shared.run,
            task_id,
            task_status,
            Some(report),
            Some(result_ref.clone()),
            None,
        );
        executed.replace_outcome(ToolOutcome::Success(ToolSuccess {
            content: format!("Result returned ({status}). Your task is complete."),
            structured: json!({"taskId": task_id, "status": status, "resultRef": result_ref, "summaryRef": summary_ref}),
            resource_refs: vec![format!("workspace:{summary_ref}")],
            effect: None,
        }));
        Ok(Applied::Ends(InvocationEnd::Returned))
    }
}

/// `summaries/<key>-result.md`, what the parent reads of a returned task.
pub(crate) fn task_summary_markdown(
    task_id: &str,
    profile_id: &str,
    status: &str,
    summary: &str,
) -> String {
    format!("# Task result: {task_id} ({profile_id})\n\nStatus: {status}\n\n{summary}\n")
}

/// `future`, unless the run is cancelled first.
async fn unless_cancelled<T>(
    shared: &RunShared,
    future: impl std::future::Future<Output = Result<T, RunFailure>>,
) -> Result<T, RunFailure> {
    tokio::select! {
        biased;
        () = shared.config.cancel.cancelled() => Err(RunFailure::Cancelled),
        result = future => result,
    }
}

fn success(content: String, structured: Value) -> Result<ToolSuccess, ToolFailure> {
    Ok(ToolSuccess {
        content,
        structured,
        resource_refs: Vec::new(),
        effect: None,
    })
}

/// A tool that ends its invocation's loop: the last call of its round.
fn is_terminal(tool: &ToolId) -> bool {
    builtin::of(tool).is_some_and(|builtin| builtin.terminal)
}

/// The normalized path a successful write or patch changed.
fn written_path(result: &toolhost_core::AgentToolResult) -> Option<String> {
    let tool = &result.tool_id;
    // A successful write or patch may be auto-published.
    let writes = builtin::of(tool).is_some_and(|builtin| builtin.writes_workspace);
    if result.is_error || !writes {
        return None;
    }
    result
        .structured
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The system prompt: who the agent is and how its part ends, naming the
/// tools by this snapshot's aliases.
fn system_prompt(profile: &Profile, session: &InvocationSession, foreground: bool) -> String {
    let name = profile.display_name.as_deref().unwrap_or(&profile.id);
    let mut prompt = format!("You are {name}.");
    if let Some(description) = &profile.description {
        prompt.push(' ');
        prompt.push_str(description);
    }
    prompt.push_str(
        "\n\nYou act only through tool calls; text outside them is not shown to anyone. \
         Your workspace has output/ (the reply goes in output/main.md), scratch/, plan/, \
         summaries/ and persist/.",
    );
    let snapshot = session.snapshot();
    let alias = |native: &str| {
        ToolId::builtin(native).ok().and_then(|id| {
            snapshot
                .binding(&id)
                .map(|binding| binding.model_alias.clone())
        })
    };
    if !foreground {
        if let Some(task_return) = alias("task.return") {
            prompt.push_str(&format!(
                " You work on a task another agent delegated to you: when it is done, report \
                 with {task_return} as the last call of that reply."
            ));
        }
        return prompt;
    }
    if let (Some(write), Some(commit), Some(finish)) = (
        alias("workspace.write_file"),
        alias("workspace.commit"),
        alias("workspace.finish"),
    ) {
        prompt.push_str(&format!(
            " When your reply is ready: write it with {write}, publish it with {commit}, \
             then end the run with {finish} as the last call of that reply."
        ));
    }
    prompt
}

/// Sections of a brief the renderers know, in order; other keys go under
/// "Additional Instructions".
fn render_brief(title: &str, intro: String, brief: &Value, known: &[(&str, &str)]) -> String {
    let mut text = format!("# {title}\n\n{intro}\n");
    for (key, heading) in known {
        match &brief[*key] {
            Value::String(value) if !value.trim().is_empty() => {
                text.push_str(&format!("\n## {heading}\n{value}\n"));
            }
            Value::Array(items) if !items.is_empty() => {
                text.push_str(&format!("\n## {heading}\n"));
                for item in items {
                    text.push_str(&format!("- {}\n", item.as_str().unwrap_or_default()));
                }
            }
            _ => {}
        }
    }
    if let Value::Object(map) = brief {
        let extra: serde_json::Map<String, Value> = map
            .iter()
            .filter(|(key, _)| !known.iter().any(|(known, _)| known == key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !extra.is_empty() {
            text.push_str(&format!(
                "\n## Additional Instructions\n```json\n{}\n```\n",
                serde_json::to_string_pretty(&Value::Object(extra)).unwrap_or_default()
            ));
        }
    }
    text
}

fn task_brief(caller: &Profile, task: &Value) -> String {
    let name = caller.display_name.as_deref().unwrap_or(&caller.id);
    render_brief(
        "Delegated Task",
        format!(
            "{name} delegated this task to you. Work on it with your tools; your result goes back to {name}, not to the chat. Report it with task_return."
        ),
        task,
        &[
            ("title", "Title"),
            ("objective", "Objective"),
            ("context", "Context"),
            ("expectedOutput", "Expected Output"),
        ],
    )
}

fn handoff_brief(caller: &Profile, brief: &Value) -> String {
    let name = caller.display_name.as_deref().unwrap_or(&caller.id);
    render_brief(
        "Handoff Brief",
        format!(
            "{name} handed this run to you. The workspace holds its work so far. Finish the run yourself: commit the reply and call workspace_finish."
        ),
        brief,
        &[
            ("title", "Title"),
            ("reason", "Reason"),
            ("objective", "Objective"),
            ("contextSummary", "Context Summary"),
            ("workspaceRefs", "Workspace References"),
            ("mustPreserve", "Must Preserve"),
            ("completionCriteria", "Completion Criteria"),
        ],
    )
}
