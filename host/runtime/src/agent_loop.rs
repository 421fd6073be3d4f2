//! The agent loop (SPEC §8 loop rules): rounds of one model request and
//! the tool calls of its reply, until a terminal tool ends the run or a
//! budget does.
//!
//! ```text
//! round r ≤ maxRounds:
//!   begin_turn → model (retried while retryable) → model-responses/round-NNN.json
//!   no tool call ─ drift: text → output/direct_output.md, reminder, next round
//!                  (last round: model.tool_call_required)
//!   each call in order:
//!     terminal but not last → agent.tool_after_finish (recoverable, not run)
//!     execute → effect applied (commit → ChatHost, finish → gate) → stored
//!   finish applied → agent_loop_finished, persist/ promoted, run_completed
//!   foreground, no explicit commit yet → the round's last write of
//!   output/main.md is auto-published (once; it does not satisfy the finish gate)
//! rounds exhausted → agent.max_tool_rounds_exceeded
//! ```
//!
//! A failure after a commit reached the chat ends the run as
//! `run_partial_success` (the chat keeps the commits); before, `run_failed`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelRole,
    AgentModelSettings, Classified, CommitMode, ExitPolicy, ToolChoice, ToolEffect, ToolFailure,
    ToolId, ToolInvocation, ToolOutcome, ToolSuccess,
    profile::{Presentation, Profile},
};
use toolhost_journal::{
    AgentLoopFinished, ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested,
    DirectOutputCaptured, DriftRecoveryAttempted, ModelCallAttemptFailed, ModelCompleted,
    PersistentChangesCommitted, PreservedCommit, ROOT_INVOCATION_ID, sha256_hex,
};
use toolhost_model::{AgentModel, ModelReply};
use toolhost_sandbox::CallEntropy;
use toolhost_workspace::{PersistBase, WriteGuard, persist};

use crate::chat_host::ChatHost;
use crate::failure::RunFailure;
use crate::host::ToolHost;
use crate::invocation::{ExecutedCall, InvocationSession};
use crate::run::Run;

/// The run's message body: what a commit without a path publishes, and the
/// only file an auto-publish takes.
pub const MESSAGE_BODY_PATH: &str = "output/main.md";

/// Where the text of a reply without tool calls is kept.
pub const DIRECT_OUTPUT_PATH: &str = "output/direct_output.md";

/// Tools that end their invocation's loop; each must be the last call of
/// its round.
const TERMINAL_TOOLS: [&str; 3] = ["workspace.finish", "agent.handoff", "task.return"];

/// Tools whose successful call may be auto-published.
const WRITE_TOOLS: [&str; 2] = ["workspace.write_file", "workspace.apply_patch"];

/// Model calls that fail with a retryable error are tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Before the first retry; doubled for each next one.
    pub initial_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_delay: Duration::from_secs(1),
        }
    }
}

/// What a loop is asked to do, beyond the run's profile.
#[derive(Debug, Clone, Default)]
pub struct LoopConfig {
    /// The first user message: what this run is for.
    pub task: String,
    /// The provider's model name; overrides the profile's `model.id`.
    pub model_name: Option<String>,
    /// Overrides the profile's `tools.maxRounds`.
    pub max_rounds: Option<u32>,
    pub retry: RetryPolicy,
    /// The chat's persist directory: projected into `persist/` when the
    /// loop starts, changed files copied back when the run finishes.
    pub persist_dir: Option<PathBuf>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    PartialSuccess,
    Failed,
}

/// One commit that reached the chat.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitRecord {
    pub path: String,
    pub mode: &'static str,
    pub message_index: u32,
    pub round: u32,
    /// A `workspace.commit` (true) or an auto-publish (false).
    pub explicit: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopSummary {
    pub status: RunStatus,
    pub code: Option<String>,
    pub message: Option<String>,
    pub user_retryable: bool,
    pub rounds: u32,
    pub tool_calls: u32,
    pub commits: Vec<CommitRecord>,
    pub run_dir: PathBuf,
}

/// Run the root invocation of `run` to its end, journalling every step and
/// the run's end. Never returns an error: a failure is the summary's status
/// (and `run_failed` / `run_partial_success` in the journal).
pub async fn run_agent_loop(
    run: &Arc<Run>,
    host: &ToolHost,
    model: &dyn AgentModel,
    chat: &dyn ChatHost,
    config: &LoopConfig,
) -> LoopSummary {
    let mut agent = AgentLoop {
        run,
        host,
        model,
        chat,
        config,
        profile: Arc::clone(run.profile()),
        commits: Vec::new(),
        run_message: None,
        auto_published: false,
        tool_calls: 0,
        rounds: 0,
        persist_base: None,
    };
    let ended = agent.drive().await;
    agent.end(ended)
}

struct AgentLoop<'a> {
    run: &'a Arc<Run>,
    host: &'a ToolHost,
    model: &'a dyn AgentModel,
    chat: &'a dyn ChatHost,
    config: &'a LoopConfig,
    profile: Arc<Profile>,
    commits: Vec<CommitRecord>,
    /// The chat message this run owns, once a commit created it.
    run_message: Option<u32>,
    auto_published: bool,
    tool_calls: u32,
    rounds: u32,
    persist_base: Option<PersistBase>,
}

/// What a control effect did to the loop.
enum Applied {
    Nothing,
    Finished(Option<String>),
}

impl AgentLoop<'_> {
    fn max_rounds(&self) -> u32 {
        self.config
            .max_rounds
            .unwrap_or(self.profile.tools.max_rounds)
            .max(1)
    }

    fn explicit_commits(&self) -> usize {
        self.commits.iter().filter(|commit| commit.explicit).count()
    }

    async fn drive(&mut self) -> Result<(), RunFailure> {
        if let Some(dir) = &self.config.persist_dir {
            self.persist_base = Some(persist::project(dir, self.run.workspace())?);
        }
        let mut session = self.run.start_invocation(
            &self.profile,
            self.host.snapshot_sources(),
            ROOT_INVOCATION_ID,
            ExitPolicy::RunFinishAllowed,
        )?;
        let settings = AgentModelSettings {
            model: self
                .config
                .model_name
                .clone()
                .or_else(|| self.profile.model.id.clone())
                .unwrap_or_default(),
            temperature: self.profile.model.temperature,
            max_output_tokens: self.profile.model.max_output_tokens,
        };
        let system = system_prompt(&self.profile, &session);
        let mut history = vec![AgentModelMessage::user_text(self.config.task.clone())];
        let max_rounds = self.max_rounds();

        while session.round() < max_rounds {
            let turn = session.begin_turn(ToolChoice::Auto, &self.model.describe())?;
            let round = session.round();
            self.rounds = round;
            let request = AgentModelRequest {
                settings: settings.clone(),
                system: Some(system.clone()),
                messages: history.clone(),
                turn,
            };
            let reply = self.ask(&request, round).await?;
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
                let attempt = round;
                self.run.record(&DriftRecoveryAttempted {
                    attempt,
                    max_attempts: max_rounds - 1,
                    max_rounds,
                    limit_reason: "max_rounds",
                    round,
                    invocation_id: ROOT_INVOCATION_ID.to_owned(),
                    committed_count: self.commits.len(),
                    reason_code: "model.tool_call_required",
                })?;
                history.push(AgentModelMessage::user_text(self.reminder(attempt)));
                continue;
            }

            let last = calls.len() - 1;
            let mut results = Vec::with_capacity(calls.len());
            let mut finished = None;
            let mut last_write = None;
            for (index, call) in calls.into_iter().enumerate() {
                self.tool_calls += 1;
                let outcome = if is_terminal(&call.tool_id) && index != last {
                    let name = call.tool_id.native_name().to_owned();
                    session.refuse(
                        call,
                        ToolFailure::new(
                            "agent.tool_after_finish",
                            format!(
                                "{name} ends your turn, so it must be the last tool call of a reply; call it again, alone or last"
                            ),
                        ),
                    )?
                } else {
                    let mut executed = session
                        .execute(self.host, &request.turn, call, CallEntropy::fresh())
                        .await?;
                    if let Some(effect) = executed.take_effect() {
                        match self.apply(&session, &mut executed, effect, round)? {
                            Applied::Finished(reason) => finished = Some(reason),
                            Applied::Nothing => {}
                        }
                    }
                    session.store(executed)?
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

            if let Some(reason) = finished {
                self.run.record(&AgentLoopFinished {
                    invocation_id: ROOT_INVOCATION_ID.to_owned(),
                    round,
                    commit_count: self.commits.len(),
                    reason,
                })?;
                self.promote_persist()?;
                return Ok(());
            }
            if self.profile.run.presentation == Presentation::Foreground
                && self.explicit_commits() == 0
                && !self.auto_published
                && last_write.as_deref() == Some(MESSAGE_BODY_PATH)
            {
                self.auto_published = true;
                // A file that vanished meanwhile is simply not published.
                if let Err(failure) =
                    self.commit(MESSAGE_BODY_PATH, CommitMode::Replace, None, None, round)?
                {
                    tracing::info!(code = %failure.code, "auto-publish skipped: {}", failure.message);
                }
            }
        }
        let last_was_drift = matches!(
            history.last(),
            Some(message) if message.role == AgentModelRole::Assistant
        );
        Err(if last_was_drift {
            RunFailure::LoopExhausted {
                code: "model.tool_call_required",
                message: format!(
                    "the model answered without a tool call in the last of its {max_rounds} rounds"
                ),
            }
        } else {
            RunFailure::LoopExhausted {
                code: "agent.max_tool_rounds_exceeded",
                message: format!("the run used all {max_rounds} rounds without finishing"),
            }
        })
    }

    /// One model call, retried while its failure is retryable.
    async fn ask(&self, request: &AgentModelRequest, round: u32) -> Result<ModelReply, RunFailure> {
        let retry = self.config.retry;
        let mut attempt = 1;
        loop {
            match self.model.complete(request).await {
                Ok(reply) => return Ok(reply),
                Err(error) => {
                    let will_retry = error.retryable() && attempt <= retry.max_retries;
                    self.run.record(&ModelCallAttemptFailed {
                        round,
                        invocation_id: ROOT_INVOCATION_ID.to_owned(),
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

    /// `model-responses/round-NNN.json`, create-only, and `model_completed`.
    fn store_reply(&self, reply: &ModelReply, round: u32) -> Result<String, RunFailure> {
        let path = format!("model-responses/round-{round:03}.json");
        let record = json!({
            "schemaVersion": 1,
            "round": round,
            "invocationId": ROOT_INVOCATION_ID,
            "model": self.model.describe(),
            "response": reply.response,
            "raw": reply.raw,
        });
        let mut bytes = serde_json::to_vec_pretty(&record)
            .map_err(|error| RunFailure::State(format!("model reply: {error}")))?;
        bytes.push(b'\n');
        self.run.dir().write_create_only(&path, &bytes)?;
        let response = &reply.response;
        let text = response.message.text();
        self.run.record(&ModelCompleted {
            round,
            invocation_id: ROOT_INVOCATION_ID.to_owned(),
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
    /// wrote is lost.
    fn capture_direct_output(
        &self,
        text: &str,
        round: u32,
        response_path: &str,
    ) -> Result<(), RunFailure> {
        if text.trim().is_empty() {
            return Ok(());
        }
        self.run
            .workspace()
            .write_text(DIRECT_OUTPUT_PATH, text, WriteGuard::Unchecked)?;
        self.run.record(&DirectOutputCaptured {
            round,
            invocation_id: ROOT_INVOCATION_ID.to_owned(),
            path: DIRECT_OUTPUT_PATH.to_owned(),
            chars: text.chars().count(),
            sha256: sha256_hex(text.as_bytes()),
            model_response_path: response_path.to_owned(),
        })?;
        Ok(())
    }

    fn reminder(&self, attempt: u32) -> String {
        let head = format!(
            "[system reminder, direct output recovery attempt {attempt}] Your last reply had no tool call, so nobody saw it (its text was saved to {DIRECT_OUTPUT_PATH})."
        );
        if self.explicit_commits() > 0 {
            format!(
                "{head} Your reply is already committed to the chat: call workspace_finish to end the run, or write and commit again first."
            )
        } else {
            format!(
                "{head} Work only through tool calls: write your reply to {MESSAGE_BODY_PATH} with workspace_write_file, publish it with workspace_commit, then call workspace_finish."
            )
        }
    }

    /// Apply a control tool's effect; the call's stored result says what
    /// happened (a recoverable error when the effect was refused).
    fn apply(
        &mut self,
        session: &InvocationSession,
        executed: &mut ExecutedCall,
        effect: ToolEffect,
        round: u32,
    ) -> Result<Applied, RunFailure> {
        let call_id = executed.invocation().call_id.clone();
        match effect {
            ToolEffect::Commit { path, mode, reason } => {
                let path = path.unwrap_or_else(|| MESSAGE_BODY_PATH.to_owned());
                let committed = self
                    .commit(&path, mode, Some(call_id), reason, round)
                    .map_err(|failure| session.fail_call(executed, failure))?;
                executed.replace_outcome(match committed {
                    Ok(record) => ToolOutcome::Success(ToolSuccess {
                        content: format!(
                            "Committed {} to the chat ({}): your message is #{} now. Commits in this run: {}.",
                            record.path,
                            record.mode,
                            record.message_index,
                            self.commits.len()
                        ),
                        structured: json!({
                            "path": record.path,
                            "mode": record.mode,
                            "messageIndex": record.message_index,
                            "commitCount": self.commits.len(),
                        }),
                        resource_refs: vec![format!("workspace:{}", record.path)],
                        effect: None,
                    }),
                    Err(failure) => ToolOutcome::Error(failure),
                });
                Ok(Applied::Nothing)
            }
            ToolEffect::Finish { reason } => {
                let foreground = self.profile.run.presentation == Presentation::Foreground;
                if foreground && self.explicit_commits() == 0 {
                    executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                        "agent.foreground_commit_required",
                        format!(
                            "commit your reply before finishing: write it to {MESSAGE_BODY_PATH}, call workspace_commit, then workspace_finish"
                        ),
                    )));
                    return Ok(Applied::Nothing);
                }
                executed.replace_outcome(ToolOutcome::Success(ToolSuccess {
                    content: "Finished. The run ends here.".to_owned(),
                    structured: json!({"reason": reason, "commitCount": self.commits.len()}),
                    resource_refs: Vec::new(),
                    effect: None,
                }));
                Ok(Applied::Finished(reason))
            }
            other => {
                // Delegation effects need the task scheduler (not in this
                // build): refuse them so the model can go on without.
                let kind = serde_json::to_value(&other)
                    .ok()
                    .and_then(|value| value.get("kind").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_default();
                executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                    "agent.effect_unsupported",
                    format!("this runtime cannot apply a `{kind}` effect yet; go on without it"),
                )));
                Ok(Applied::Nothing)
            }
        }
    }

    /// Publish a workspace file as the run's message. `Ok(Err)` is a
    /// refusal the model can fix (missing, empty, not visible); `Err` ends
    /// the run (the chat host failed).
    fn commit(
        &mut self,
        path: &str,
        mode: CommitMode,
        call_id: Option<String>,
        reason: Option<String>,
        round: u32,
    ) -> Result<Result<CommitRecord, ToolFailure>, RunFailure> {
        let file = match self.run.workspace().read_text(path) {
            Ok(file) => file,
            Err(error) if error.is_system() => return Err(error.into()),
            Err(error) => return Ok(Err(ToolFailure::new(error.code(), error.message()))),
        };
        if file.text.trim().is_empty() {
            return Ok(Err(ToolFailure::new(
                "workspace.required_artifact_empty",
                format!(
                    "{} is empty; write your reply into it before committing",
                    file.path
                ),
            )));
        }
        let explicit = call_id.is_some();
        let mode_name = match mode {
            CommitMode::Replace => "replace",
            CommitMode::Append => "append",
        };
        let commit_id = format!("commit_{:03}", self.commits.len() + 1);
        self.run.record(&ChatCommitRequested {
            commit_id: commit_id.clone(),
            invocation_id: ROOT_INVOCATION_ID.to_owned(),
            call_id: call_id.clone(),
            path: file.path.clone(),
            mode: mode_name,
            reason: reason.or_else(|| (!explicit).then(|| "auto_publish".to_owned())),
            chars: file.text.chars().count(),
            sha256: file.sha256.clone(),
        })?;
        match self.chat.commit(&file.text, mode, self.run_message) {
            Ok(index) => {
                self.run_message = Some(index);
                let record = CommitRecord {
                    path: file.path.clone(),
                    mode: mode_name,
                    message_index: index,
                    round,
                    explicit,
                };
                self.commits.push(record.clone());
                self.run.record(&ChatCommitCompleted {
                    commit_id,
                    invocation_id: ROOT_INVOCATION_ID.to_owned(),
                    call_id,
                    path: file.path,
                    mode: mode_name,
                    message_index: index,
                    commit_count: self.commits.len(),
                    explicit,
                })?;
                Ok(Ok(record))
            }
            Err(error) => {
                self.run.record(&ChatCommitFailed {
                    commit_id,
                    invocation_id: ROOT_INVOCATION_ID.to_owned(),
                    call_id,
                    path: file.path,
                    mode: mode_name,
                    code: error.code.clone(),
                    message: error.message.clone(),
                })?;
                Err(RunFailure::ChatCommit(error.to_string()))
            }
        }
    }

    fn promote_persist(&self) -> Result<(), RunFailure> {
        let (Some(dir), Some(base)) = (&self.config.persist_dir, &self.persist_base) else {
            return Ok(());
        };
        let changes = persist::promote(self.run.workspace(), dir, base)?;
        self.run.record(&PersistentChangesCommitted {
            change_count: changes.changes.len(),
            changes: serde_json::to_value(&changes.changes).unwrap_or(Value::Null),
        })?;
        Ok(())
    }

    /// Journal the run's end and sum it up.
    fn end(self, ended: Result<(), RunFailure>) -> LoopSummary {
        let mut summary = LoopSummary {
            status: RunStatus::Completed,
            code: None,
            message: None,
            user_retryable: false,
            rounds: self.rounds,
            tool_calls: self.tool_calls,
            commits: self.commits.clone(),
            run_dir: self.run.root().to_owned(),
        };
        let journalled = match ended {
            Ok(()) => self.run.complete(),
            Err(failure) => {
                summary.code = Some(failure.code().to_owned());
                summary.message = Some(failure.to_string());
                if self.commits.is_empty() {
                    summary.status = RunStatus::Failed;
                    summary.user_retryable = failure.user_retryable();
                    self.run.fail(&failure)
                } else {
                    summary.status = RunStatus::PartialSuccess;
                    let preserved = self
                        .commits
                        .iter()
                        .map(|commit| PreservedCommit {
                            path: commit.path.clone(),
                            mode: commit.mode,
                            message_index: commit.message_index,
                            round: commit.round,
                        })
                        .collect();
                    self.run.partial_success(&failure, preserved)
                }
            }
        };
        if let Err(error) = journalled {
            tracing::error!(%error, "could not journal the end of the run");
            summary.status = RunStatus::Failed;
            summary.code.get_or_insert_with(|| error.code().to_owned());
            summary.message.get_or_insert_with(|| error.to_string());
        }
        summary
    }
}

fn is_terminal(tool: &ToolId) -> bool {
    tool.is_builtin() && TERMINAL_TOOLS.contains(&tool.native_name())
}

/// The normalized path a successful write or patch changed.
fn written_path(result: &toolhost_core::AgentToolResult) -> Option<String> {
    let tool = &result.tool_id;
    if result.is_error || !tool.is_builtin() || !WRITE_TOOLS.contains(&tool.native_name()) {
        return None;
    }
    result
        .structured
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The system prompt: who the agent is and how a run ends, naming the
/// tools by this snapshot's aliases.
fn system_prompt(profile: &Profile, session: &InvocationSession) -> String {
    let name = profile.display_name.as_deref().unwrap_or(&profile.id);
    let mut prompt = format!("You are {name}.");
    if let Some(description) = &profile.description {
        prompt.push(' ');
        prompt.push_str(description);
    }
    prompt.push_str(
        "\n\nYou act only through tool calls; text outside them is not shown to anyone. \
         Your workspace has output/ (your reply goes in output/main.md), scratch/, plan/, \
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
