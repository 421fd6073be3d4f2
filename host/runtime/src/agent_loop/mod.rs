//! The agent loop (SPEC §8 loop rules): the run's invocations, each a
//! series of rounds — one model request and the tool calls of its reply —
//! until a terminal tool ends it or a budget does.
//!
//! ```text
//! root invocation (then each handoff target, same run, fresh snapshot):
//!   round r ≤ maxRounds:
//!     begin_turn → model (retried while retryable) → model-responses/…/round-NNN.json
//!     no tool call ─ drift: text → direct_output.md in the message body's root
//!                    (output/ by default; not kept when the model cannot write
//!                    it there), reminder, next round
//!                    (last round: model.tool_call_required)
//!     each call in order:
//!       terminal but not last → agent.tool_after_finish (recoverable, not run)
//!       execute → effect applied → result stored:
//!         commit → ChatHost; finish → commit gate, children cancelled;
//!         delegate → child task started in the background; await → waits;
//!         handoff → policy, depth, pending tasks → the target goes on
//!     ended tasks not awaited → their results before the next request
//!     foreground, no explicit commit yet → the round's last write of the
//!     profile's message body (output/main.md by default) is auto-published
//!     (once; not enough to finish)
//!   rounds exhausted → agent.max_tool_rounds_exceeded
//! delegated task (return mode): the same rounds, ends with task.return
//!   → agent-results/<child>.json + summaries/<key>-result.md
//! ```
//!
//! A failure after a commit reached the chat ends the run as
//! `run_partial_success` (the chat keeps the commits); before, `run_failed`.
//! A child's failure only fails its task.

mod commit;
mod invocation;
mod shared;
mod tasks;

pub use crate::loop_record::{
    DEFAULT_CONTEXT_CHARS, LOOP_RECORD_PATH, LoopConfig, LoopRecord, RetryPolicy, RunCancel,
};
pub(crate) use invocation::task_summary_markdown;

use std::path::PathBuf;
use std::sync::Arc;

use toolhost_core::policy::Policies;
use toolhost_model::ModelSource;

use crate::agents::AgentDirectory;
use crate::host::ToolHost;
use crate::run::Run;
use toolhost_capabilities::ChatHost;

use invocation::{InvocationEnd, InvocationRole, InvocationSpec};
use shared::RunShared;

/// Where the text of a reply without tool calls is kept with the default
/// message body: `direct_output.md` in the message body's root.
pub const DIRECT_OUTPUT_PATH: &str = "output/direct_output.md";

/// What a run talks to.
#[derive(Clone)]
pub struct LoopParts {
    pub host: Arc<ToolHost>,
    /// Each agent's model (one for all, or one per agent).
    pub models: Arc<dyn ModelSource>,
    /// Where commits go.
    pub chat: Arc<dyn ChatHost>,
    /// The agents the run may delegate or hand off to.
    pub agents: AgentDirectory,
    /// The user's and the platform's tool policies for this run's
    /// snapshots when they are not the host's (a tenant's own under
    /// `toolhost serve`); `None`: the host's (docs/policy.md).
    pub policies: Option<Arc<Policies>>,
    /// The `toolhost serve` tenant whose run this is; `None`: the local
    /// use. An extension granted to a tenant's profile is offered and
    /// called only in that tenant's runs (docs/extensions.md).
    pub tenant: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Completed,
    PartialSuccess,
    Failed,
    /// Stopped through [`RunCancel`]; commits made before stay.
    Cancelled,
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
    pub invocation_id: String,
}

/// A delegated task, as the run ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSummary {
    pub task_id: String,
    pub agent_id: String,
    pub child_invocation_id: String,
    pub status: &'static str,
}

#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoopSummary {
    pub status: RunStatus,
    pub code: Option<String>,
    pub message: Option<String>,
    pub user_retryable: bool,
    /// Rounds of the foreground agents (the root and handoff targets), not
    /// of delegated children: `foregroundRounds` in JSON, so it is never
    /// read as the run's total (the service's `totalRounds` counts those).
    #[serde(rename = "foregroundRounds")]
    pub rounds: u32,
    /// Tool calls of every agent, delegated ones included.
    pub tool_calls: u32,
    pub commits: Vec<CommitRecord>,
    /// The foreground agents in order (more than one after a handoff).
    pub agents: Vec<String>,
    pub tasks: Vec<TaskSummary>,
    pub run_dir: PathBuf,
}

/// Run `run` to its end: the root invocation, then each agent it hands off
/// to, with delegated tasks in the background. Journals every step and the
/// run's end. Never returns an error: a failure is the summary's status
/// (and `run_failed` / `run_partial_success` in the journal).
///
/// A run from [`Run::resume`] goes on where it was interrupted: `config`
/// must hold the recorded settings ([`LoopRecord::config`]) and `parts` the
/// recorded agents ([`LoopRecord::agents`]); a contradiction is refused
/// (`run.not_resumable`) without ending the run.
pub async fn run_agent_loop(run: &Arc<Run>, parts: LoopParts, config: &LoopConfig) -> LoopSummary {
    let record = match loop_record(run, &parts, config) {
        Ok(record) => record,
        Err(failure) => return not_started(run, &failure),
    };
    let agents = parts.agents.clone().with_own(run.profile());
    let shared = Arc::new(RunShared::new(
        Arc::clone(run),
        LoopParts { agents, ..parts },
        config.clone(),
        record,
    ));
    // Dropped before the loop ends (the embedder stops it: a server shutting
    // down), the run is interrupted, and so are its delegated children:
    // they run as tasks of their own and would otherwise go on writing.
    let mut interrupted = AbortChildrenOnDrop(Some(Arc::clone(&shared)));
    let ended = drive(&shared).await;
    // Not interrupted: the run's end settles its tasks.
    interrupted.0 = None;
    shared.end(ended)
}

/// Aborts the run's delegated tasks when dropped.
struct AbortChildrenOnDrop(Option<Arc<RunShared>>);

impl Drop for AbortChildrenOnDrop {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            shared.tasks.abort_all();
        }
    }
}

/// A new run's record, written before its first step; a resumed run's,
/// checked against `config` and `parts`.
fn loop_record(
    run: &Arc<Run>,
    parts: &LoopParts,
    config: &LoopConfig,
) -> Result<LoopRecord, crate::RunFailure> {
    if run.resume_log().is_none() {
        let record = LoopRecord::new(config, &parts.agents)?;
        run.dir()
            .write_create_only(LOOP_RECORD_PATH, &record.to_json())?;
        return Ok(record);
    }
    let bytes = run
        .read_file(LOOP_RECORD_PATH)?
        .ok_or_else(|| crate::RunFailure::NotResumable(format!("{LOOP_RECORD_PATH} is missing")))?;
    let record = LoopRecord::from_json(&bytes)?;
    let mut differing = record.contradictions(config);
    let recorded: Vec<(&str, &str)> = record
        .agents
        .iter()
        .map(|agent| (agent.id.as_str(), agent.sha256.as_str()))
        .collect();
    let given: Vec<(String, String)> = parts
        .agents
        .profiles()
        .map(|profile| (profile.id.clone(), profile.digest()))
        .collect();
    let given: Vec<(&str, &str)> = given
        .iter()
        .map(|(id, digest)| (id.as_str(), digest.as_str()))
        .collect();
    if recorded != given {
        differing.push("agents");
    }
    if !differing.is_empty() {
        return Err(crate::RunFailure::NotResumable(format!(
            "the run was recorded with another {} (see {LOOP_RECORD_PATH})",
            differing.join(", ")
        )));
    }
    Ok(record)
}

/// The summary of a loop that did not start: nothing was journalled, so
/// the run stays as it was (resumable, when it was).
fn not_started(run: &Arc<Run>, failure: &crate::RunFailure) -> LoopSummary {
    use toolhost_core::Classified;
    LoopSummary {
        status: RunStatus::Failed,
        code: Some(failure.code().to_owned()),
        message: Some(failure.to_string()),
        user_retryable: false,
        rounds: 0,
        tool_calls: 0,
        commits: Vec::new(),
        agents: Vec::new(),
        tasks: Vec::new(),
        run_dir: run.root().to_owned(),
    }
}

async fn drive(shared: &Arc<RunShared>) -> Result<(), crate::RunFailure> {
    shared.project_persist()?;
    let profile = Arc::clone(shared.run.profile());
    let mut spec = InvocationSpec {
        invocation_id: toolhost_journal::ROOT_INVOCATION_ID.to_owned(),
        max_rounds: shared
            .config
            .max_rounds
            .unwrap_or(profile.tools.max_rounds)
            .max(1),
        profile,
        role: InvocationRole::Foreground,
        first_message: shared.config.task.clone(),
    };
    loop {
        match invocation::run_invocation(shared, spec).await? {
            InvocationEnd::Finished => return shared.promote_persist(),
            InvocationEnd::HandedOff(next) => spec = next,
            InvocationEnd::Returned => {
                return Err(crate::RunFailure::State(
                    "a foreground invocation returned a task result".into(),
                ));
            }
        }
    }
}
