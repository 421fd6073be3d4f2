//! One invocation's rounds: ask the model, run the reply's tool calls in
//! order, apply their effects, until a terminal effect or a budget ends it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelRole,
    AgentModelSettings, ExitPolicy, ModelTurn, ToolChoice, ToolFailure, ToolId, ToolSuccess,
    builtin, profile::Profile,
};
use toolhost_journal::{
    AgentLoopFinished, ChatCommitFailed, ChatCommitRequested, DriftRecoveryAttempted, Event as _,
};
use toolhost_model::AgentModel;

use super::shared::RunShared;
use crate::failure::RunFailure;
use crate::invocation::Invocation;
use crate::loop_record::DEFAULT_CONTEXT_CHARS;

mod delegation;
mod effects;
mod model;
mod opening;
mod prompt;
mod task_return;
mod unknown;
mod window;

use prompt::system_prompt;
pub(crate) use task_return::task_summary_markdown;
use unknown::ReplyCall;

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
    let sources = shared.parts.host.snapshot_sources_under(
        shared.parts.policies.as_deref(),
        shared.parts.tenant.as_deref(),
    );
    let delegated = matches!(spec.role, InvocationRole::Child { .. });
    let inputs = shared.run.inputs();
    let prompt = inputs
        .prompt_origin()
        .zip(inputs.prompt_snapshot().map(|snapshot| snapshot.as_ref()));
    let opening = opening::opening(&spec.profile, prompt, &spec.first_message, delegated);
    let mut session = shared.run.start_agent_invocation(
        &spec.profile,
        sources,
        &spec.invocation_id,
        exit,
        serde_json::to_value(&opening.summary).ok(),
    )?;
    session.set_agents(shared.parts.agents.callable_by(&spec.profile))?;
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
    agent.rounds(opening).await
}

struct InvocationLoop<'a> {
    shared: &'a Arc<RunShared>,
    model: Arc<dyn AgentModel>,
    session: Invocation,
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

    /// What model-facing text calls builtin `native`: its alias in this
    /// invocation's snapshot.
    fn alias(&self, native: &str) -> String {
        self.session.snapshot().alias_of_builtin(native)
    }

    fn foreground(&self) -> bool {
        matches!(self.spec.role, InvocationRole::Foreground)
    }

    async fn rounds(&mut self, opening: opening::Opening) -> Result<InvocationEnd, RunFailure> {
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
        // The profile's own prompt replaces toolhost's, as in the reference.
        let mut system = Some(match &profile.instructions.agent_system_prompt {
            Some(own) => own.clone(),
            None => system_prompt(&profile, &self.session, self.foreground()),
        });
        let mut window = window::Window::new(
            profile
                .context
                .max_input_chars
                .or(self.shared.config.context_chars)
                .unwrap_or(DEFAULT_CONTEXT_CHARS) as usize,
            opening.chat_history,
        );
        let mut history = opening.messages;
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
            self.fit(&mut window, system.as_deref(), &turn, &mut history, round)?;
            // The prompt and the history are lent to the request and taken
            // back: a round copies neither (a long chat made that a good
            // part of a served round).
            let request = AgentModelRequest {
                settings: settings.clone(),
                system: system.take(),
                messages: std::mem::take(&mut history),
                turn,
            };
            let shared = self.shared;
            let reply = unless_cancelled(shared, self.ask(&request, round)).await;
            let AgentModelRequest {
                system: lent_system,
                messages: lent_history,
                turn,
                ..
            } = request;
            (system, history) = (lent_system, lent_history);
            let reply = reply?;
            let response_path = self.store_reply(&reply, round)?;
            let message = reply.response.message;
            let calls: Vec<ReplyCall> = message.calls().map(ReplyCall::from).collect();
            let text = message.text();
            history.push(message);

            if calls.is_empty() {
                let saved = self.capture_direct_output(&text, round, &response_path)?;
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
                history.push(AgentModelMessage::user_text(
                    self.reminder(round, saved.as_deref()),
                ));
                continue;
            }

            let last = calls.len() - 1;
            let mut results = Vec::with_capacity(calls.len());
            let mut ends = None;
            let mut last_write = None;
            for (index, call) in calls.into_iter().enumerate() {
                self.shared.ledger().tool_calls += 1;
                let call = match call {
                    ReplyCall::Tool(call) => call,
                    // A name the request did not offer: answered, charged,
                    // and the reply's other calls still run.
                    ReplyCall::Unknown(unknown) => {
                        let result = self.answer_unknown(&turn, &unknown, round)?;
                        results.push(AgentModelContentPart::UnknownToolResult { result });
                        continue;
                    }
                };
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
                    let execution =
                        self.session
                            .execute(shared.parts.host.as_ref(), &turn, call, entropy);
                    let mut executed = unless_cancelled(shared, execution).await?;
                    // A replayed call the effect refused then changes nothing now.
                    let refused_then = executed
                        .stored_result()
                        .is_some_and(|stored| stored.is_error);
                    // A commit the chat app refused then was asked for all
                    // the same: the next one keeps the id it had, and its
                    // two events are the record's, not written again.
                    if refused_then
                        && let Some(log) = shared.run.resume_log()
                        && log.commit_requested_by(self.id(), &executed.call().call_id)
                    {
                        log.take(self.id(), ChatCommitRequested::TYPE);
                        log.take(self.id(), ChatCommitFailed::TYPE);
                        let mut ledger = shared.ledger();
                        ledger.commit_requests += 1;
                        ledger.explicit_requested = true;
                    }
                    if let Some(effect) = executed.take_effect().filter(|_| !refused_then) {
                        self.line_up_with_record(executed.call()).await;
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
            // A host commit waits for the chat app: a cancel ends the wait.
            unless_cancelled(shared, self.auto_publish(last_write.as_deref(), round)).await?;
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
}

impl InvocationLoop<'_> {
    /// Fit the next request into the model's window: old results become
    /// stubs naming their stored file, then old chat history and old rounds
    /// go (journalled as `context_trimmed`). What cannot fit fails the run
    /// before anything is sent.
    fn fit(
        &self,
        window: &mut window::Window,
        system: Option<&str>,
        turn: &ModelTurn,
        history: &mut Vec<AgentModelMessage>,
        round: u32,
    ) -> Result<(), RunFailure> {
        let read_alias = self
            .session
            .snapshot()
            .builtin_alias_of("workspace.read_file");
        let stub = window::stubber(self.shared.run.manifest_layout(), read_alias);
        match window.fit(window::fixed_chars(system, turn), history, stub) {
            Ok(None) => Ok(()),
            Ok(Some(trimmed)) => {
                self.shared.run.record(&trimmed.event(self.id(), round))?;
                Ok(())
            }
            Err(over) => Err(RunFailure::LoopExhausted {
                code: window::OverBudget::CODE,
                message: over.to_string(),
            }),
        }
    }
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
