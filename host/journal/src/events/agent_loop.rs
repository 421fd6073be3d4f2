//! Events of the agent loop: model replies, drift, chat commits, the loop's
//! end and a run's partial success. Payload names follow the reference
//! (`docs/runs.md` lists them).

use serde::Serialize;
use serde_json::Value;

use super::Event;
use crate::journal::{EventScope, Level};

/// A model reply, stored and decoded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCompleted {
    pub round: u32,
    pub invocation_id: String,
    /// Run-relative path of the stored reply (`model-responses/…`).
    pub model_response_path: String,
    pub response_id: Option<String>,
    pub finish_reason: Value,
    pub tool_call_count: usize,
    pub has_assistant_text: bool,
    pub assistant_text_chars: usize,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}
invocation_scoped!(ModelCompleted, "model_completed", Level::Info);

/// The model called a name its request did not offer (an invented name, a
/// canonical id, another invocation's alias). Nothing ran and nothing was
/// guessed: the model reads an error listing the request's aliases. The
/// call is charged to the invocation's total budget (`charged`), so a model
/// cannot retry invented names for free; once the total is spent it is
/// refused like any call (`code` is then `agent.tool_budget_exhausted`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallUnknown {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    /// The name as the model sent it.
    pub name: String,
    pub code: String,
    /// What the model reads.
    pub message: String,
    pub charged: bool,
    /// The invocation's total after this call, and its limit.
    pub total_used: u32,
    pub total_limit: u32,
}
invocation_scoped!(ToolCallUnknown, "tool_call_unknown", Level::Warn);

/// One model call attempt failed; `willRetry` says whether another follows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCallAttemptFailed {
    pub round: u32,
    pub invocation_id: String,
    pub attempt: u32,
    pub code: String,
    pub message: String,
    pub retryable: bool,
    pub will_retry: bool,
}
invocation_scoped!(
    ModelCallAttemptFailed,
    "model_call_attempt_failed",
    Level::Warn
);

/// A reply without tool calls: its text kept as a workspace file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectOutputCaptured {
    pub round: u32,
    pub invocation_id: String,
    /// Workspace path (`output/direct_output.md`).
    pub path: String,
    pub chars: usize,
    pub sha256: String,
    pub model_response_path: String,
}
invocation_scoped!(DirectOutputCaptured, "direct_output_captured", Level::Info);

/// The model answered without a tool call; it is reminded and asked again.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecoveryAttempted {
    pub attempt: u32,
    /// `maxRounds − 1`: every round but the last may recover.
    pub max_attempts: u32,
    pub max_rounds: u32,
    pub limit_reason: &'static str,
    pub round: u32,
    pub invocation_id: String,
    pub committed_count: usize,
    pub reason_code: &'static str,
}
invocation_scoped!(
    DriftRecoveryAttempted,
    "drift_recovery_attempted",
    Level::Warn
);

/// The history of a round's request was cut to fit the model's window
/// (`context.maxInputChars`, counted in Unicode scalars): old results
/// replaced by a one-line stub naming their stored file, then the oldest
/// chat-history messages of the snapshot, then the oldest whole rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextTrimmed {
    pub invocation_id: String,
    /// The round whose request was trimmed.
    pub round: u32,
    /// The calls whose results now read as a stub, oldest first.
    pub stubbed_calls: Vec<String>,
    /// Chat-history messages of the prompt snapshot left out.
    pub dropped_history: usize,
    /// Whole rounds (a reply, its calls' results, what followed) left out.
    pub dropped_rounds: usize,
    /// The request's characters before and after, the fixed part included.
    pub chars_before: usize,
    pub chars_after: usize,
    pub budget: usize,
}
invocation_scoped!(ContextTrimmed, "context_trimmed", Level::Info);

/// The runtime is about to write the run's message into the chat.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatCommitRequested {
    pub commit_id: String,
    pub invocation_id: String,
    /// The commit tool's call, or `null` for an auto-publish.
    pub call_id: Option<String>,
    /// Workspace path of the committed text.
    pub path: String,
    pub mode: &'static str,
    /// The model's reason, or `auto_publish`.
    pub reason: Option<String>,
    pub chars: usize,
    pub sha256: String,
    /// The text, when the chat app makes the commit itself (host commit):
    /// it applies this, nothing else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The run's message an earlier commit made, which this one rewrites;
    /// absent for the run's first commit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_message: Option<u32>,
    /// `swipe`, `regenerate` or `continue`: the reply goes into message
    /// `targetIndex` that way (absent: a new message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_index: Option<u32>,
}
invocation_scoped!(ChatCommitRequested, "chat_commit_requested", Level::Info);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatCommitCompleted {
    pub commit_id: String,
    pub invocation_id: String,
    pub call_id: Option<String>,
    pub path: String,
    pub mode: &'static str,
    /// Index of the run's message in the chat (0 = first after the header).
    pub message_index: u32,
    /// Successful commits of the run so far, this one included.
    pub commit_count: usize,
    /// An auto-publish does not satisfy `workspace.finish`.
    pub explicit: bool,
}
invocation_scoped!(ChatCommitCompleted, "chat_commit_completed", Level::Info);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatCommitFailed {
    pub commit_id: String,
    pub invocation_id: String,
    pub call_id: Option<String>,
    pub path: String,
    pub mode: &'static str,
    pub code: String,
    pub message: String,
}
invocation_scoped!(ChatCommitFailed, "chat_commit_failed", Level::Error);

/// The loop ended on a terminal tool (`workspace.finish`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLoopFinished {
    pub invocation_id: String,
    pub round: u32,
    pub commit_count: usize,
    pub reason: Option<String>,
}
invocation_scoped!(AgentLoopFinished, "agent_loop_finished", Level::Info);

/// `persist/` files copied back to the chat's persist directory.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistentChangesCommitted {
    pub change_count: usize,
    pub changes: Value,
}

run_scoped!(
    PersistentChangesCommitted,
    "persistent_changes_committed",
    Level::Info
);

/// One commit the chat keeps although the run failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreservedCommit {
    pub path: String,
    pub mode: &'static str,
    pub message_index: u32,
    pub round: u32,
}

/// The run failed after at least one commit reached the chat: those
/// commits stay (no rollback). `run_failed`'s payload plus the commits.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunPartialSuccess {
    pub code: String,
    pub message: String,
    /// Always false: the commits already happened.
    pub retryable: bool,
    pub user_retryable: bool,
    pub preserved_commit_count: usize,
    pub preserved_commits: Vec<PreservedCommit>,
}

run_scoped!(RunPartialSuccess, "run_partial_success", Level::Warn);

/// A delegated task started: a child invocation runs in the background.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDelegateStarted {
    pub task_id: String,
    pub parent_invocation_id: String,
    pub child_invocation_id: String,
    pub target_profile_id: String,
    pub workspace_key: String,
}

invocation_scoped!(
    AgentDelegateStarted,
    "agent_delegate_started",
    Level::Info,
    parent_invocation_id
);

/// A delegated task ended: `completed`, `failed` or `cancelled`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentTaskEnded {
    pub task_id: String,
    pub parent_invocation_id: String,
    pub child_invocation_id: String,
    pub agent_id: String,
    pub status: &'static str,
    pub error: Option<String>,
}

impl Event for AgentTaskEnded {
    const TYPE: &'static str = "agent_task_ended";
    fn level(&self) -> Level {
        if self.status == "completed" {
            Level::Info
        } else {
            Level::Warn
        }
    }
    fn scope(&self) -> EventScope {
        EventScope::new(self.child_invocation_id.clone())
    }
}

/// `task.return` stored the child's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskReturnCompleted {
    pub task_id: String,
    pub parent_invocation_id: String,
    pub child_invocation_id: String,
    pub status: String,
    /// `agent-results/<child-invocation-id>.json`.
    pub result_ref: String,
    /// `summaries/<workspace-key>-result.md`.
    pub summary_ref: String,
}

invocation_scoped!(
    TaskReturnCompleted,
    "task_return_completed",
    Level::Info,
    child_invocation_id
);

/// `agent.await` answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentAwaitCompleted {
    pub parent_invocation_id: String,
    pub mode: &'static str,
    pub timed_out: bool,
    pub task_ids: Vec<String>,
}

invocation_scoped!(
    AgentAwaitCompleted,
    "agent_await_completed",
    Level::Info,
    parent_invocation_id
);

/// Results of ended tasks the parent did not await, put before its next
/// request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildResultsInjected {
    pub invocation_id: String,
    pub round: u32,
    pub task_ids: Vec<String>,
}
invocation_scoped!(ChildResultsInjected, "child_results_injected", Level::Info);

/// The run passed to another agent; the source invocation ends.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentHandoffAccepted {
    pub task_id: String,
    pub source_invocation_id: String,
    pub new_invocation_id: String,
    pub target_profile_id: String,
    /// Handoffs in this run so far, this one included.
    pub depth: u32,
}

invocation_scoped!(
    AgentHandoffAccepted,
    "agent_handoff_accepted",
    Level::Info,
    source_invocation_id
);

/// The run was stopped from outside; commits made before stay.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunCancelled {
    pub code: &'static str,
    pub preserved_commit_count: usize,
    /// Delegated tasks stopped with it.
    pub cancelled_tasks: Vec<String>,
}

run_scoped!(RunCancelled, "run_cancelled", Level::Warn);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::journal::{Durability, Journal, read_events};

    #[test]
    fn context_trimmed_writes_its_type_level_scope_and_fields() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, "run_x", Durability::Batched).expect("create");
        journal
            .record(&ContextTrimmed {
                invocation_id: "inv_child".into(),
                round: 7,
                stubbed_calls: vec!["call_1".into(), "call_2".into()],
                dropped_history: 3,
                dropped_rounds: 1,
                chars_before: 412_003,
                chars_after: 99_870,
                budget: 100_000,
            })
            .expect("record");
        drop(journal);
        let events = read_events(&path).expect("read");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].r#type, ContextTrimmed::TYPE);
        assert_eq!(events[0].level, Level::Info);
        assert_eq!(
            events[0].payload,
            json!({
                "eventScope": {"invocationId": "inv_child"},
                "invocationId": "inv_child",
                "round": 7,
                "stubbedCalls": ["call_1", "call_2"],
                "droppedHistory": 3,
                "droppedRounds": 1,
                "charsBefore": 412_003,
                "charsAfter": 99_870,
                "budget": 100_000,
            })
        );
    }
}
