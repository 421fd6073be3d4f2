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

impl Event for PersistentChangesCommitted {
    const TYPE: &'static str = "persistent_changes_committed";
    fn level(&self) -> Level {
        Level::Info
    }
    fn scope(&self) -> EventScope {
        EventScope::root()
    }
}

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

impl Event for RunPartialSuccess {
    const TYPE: &'static str = "run_partial_success";
    fn level(&self) -> Level {
        Level::Warn
    }
    fn scope(&self) -> EventScope {
        EventScope::root()
    }
}
