//! `RunFailure`: what ends a run. Everything else a call can go through —
//! a tool error, a sandbox limit, an exhausted budget — is a result the model
//! reads, and never reaches this type.

use toolhost_core::{
    Classified, ErrorClass, GateRejection, IdentityMismatch, ModelCallError, SnapshotError,
    TurnError,
};
use toolhost_journal::{AuditError, JournalError, RunError};

use crate::executor::ExecuteError;

#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    /// A journal append failed: without its journal the run cannot go on.
    #[error("journal.append_failed: {0}")]
    Journal(#[from] JournalError),
    /// An audit fact could not be stored, or would have overwritten one.
    #[error("{code}: {0}", code = audit_code(.0))]
    Audit(#[from] AuditError),
    /// The run directory could not be created or reopened.
    #[error("run.directory_failed: {0}")]
    Directory(#[from] RunError),
    #[error(transparent)]
    Identity(#[from] Box<IdentityMismatch>),
    #[error("{code}: {0}", code = .0.code())]
    Execute(#[from] ExecuteError),
    /// A fail-fast gate rejection (turn contract broken, or a runtime bug).
    #[error(transparent)]
    Gate(GateRejection),
    #[error(transparent)]
    Turn(#[from] TurnError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The provider's reply broke the request's contract.
    #[error(transparent)]
    Model(#[from] ModelCallError),
    /// A person asked for a tool the invocation does not offer (the CLI;
    /// a model's unknown call is a `Model` or `Gate` failure instead).
    #[error("agent.tool_policy_denied: {0}")]
    NotOffered(String),
    /// The run's workspace could not be opened, or a workspace operation of
    /// the runtime itself failed.
    #[error(transparent)]
    Workspace(#[from] toolhost_workspace::WorkspaceError),
    /// What the run is bound to does not bind: the chat is unreadable or
    /// its frozen history changed, a skills directory cannot be read, the
    /// prompt snapshot's world info is malformed.
    #[error(transparent)]
    Context(#[from] toolhost_capabilities::ContextError),
    /// A stored file of the run (snapshot, profile) does not parse.
    #[error("run.state_invalid: {0}")]
    State(String),
    /// The model gave no usable reply (after the loop's retries).
    #[error(transparent)]
    ModelClient(#[from] toolhost_model::ModelError),
    /// The chat host could not write the run's message.
    #[error("agent.chat_commit_failed: {0}")]
    ChatCommit(String),
    /// The loop ran out of what it may spend: rounds, or model replies
    /// without a tool call (`agent.max_tool_rounds_exceeded`,
    /// `model.tool_call_required`).
    #[error("{code}: {message}")]
    LoopExhausted { code: &'static str, message: String },
    /// The run was cancelled from outside.
    #[error("agent.cancelled: the run was cancelled")]
    Cancelled,
    /// A resume of a run that already ended (`run_completed`,
    /// `run_failed`, `run_partial_success`, `run_cancelled`).
    #[error(
        "run.already_ended: the run ended with {kind} (journal event {seq}); an ended run is never resumed"
    )]
    AlreadyEnded { kind: String, seq: u64 },
    /// A resume of a run that cannot be resumed: no loop record, or the
    /// settings given contradict it.
    #[error("run.not_resumable: {0}")]
    NotResumable(String),
}

/// Codes a user may retry as is (the model may do better next time).
const USER_RETRYABLE: [&str; 4] = [
    "model.tool_call_required",
    "agent.tool_after_finish",
    "agent.max_tool_rounds_exceeded",
    "agent.cancelled",
];

impl RunFailure {
    /// Running the same thing again may work (rate limits, a network blip).
    pub fn retryable(&self) -> bool {
        matches!(self, Self::ModelClient(error) if error.retryable())
    }

    /// The person may retry as is: a retryable failure, or a model that
    /// drifted or ran out of rounds.
    pub fn user_retryable(&self) -> bool {
        self.retryable() || USER_RETRYABLE.contains(&self.code())
    }
}

/// A host fault's own code when it is one of the known ones (the journal
/// and `run_failed` carry a `&'static str`).
fn host_fault_code(code: &str) -> &'static str {
    use toolhost_workspace::codes;
    [
        codes::SYMLINK_FOUND,
        codes::IO_ERROR,
        "workspace.unavailable",
        "skill.io_error",
    ]
    .into_iter()
    .find(|known| *known == code)
    .unwrap_or("sandbox.host_fault")
}

fn audit_code(error: &AuditError) -> &'static str {
    match error {
        AuditError::DuplicateCallId { .. } => "audit.duplicate_call_id",
        AuditError::DigestCollision { .. } => "audit.digest_collision",
        AuditError::AlreadyExists { .. } => "audit.already_exists",
        _ => "audit.write_failed",
    }
}

impl Classified for RunFailure {
    fn code(&self) -> &'static str {
        match self {
            Self::Journal(_) => "journal.append_failed",
            Self::Audit(error) => audit_code(error),
            Self::Directory(_) => "run.directory_failed",
            Self::Identity(_) => "tool.result_identity_mismatch",
            Self::Execute(ExecuteError::HostFault(fault)) => host_fault_code(&fault.code),
            Self::Execute(ExecuteError::View(error)) => audit_code(error),
            Self::Execute(error) => error.code(),
            Self::Gate(rejection) => rejection.code(),
            Self::Turn(error) => error.code(),
            Self::Snapshot(error) => error.code(),
            Self::Model(error) => error.code(),
            Self::NotOffered(_) => "agent.tool_policy_denied",
            Self::Workspace(error) => error.code(),
            Self::Context(error) => error.code(),
            Self::State(_) => "run.state_invalid",
            Self::ModelClient(error) => error.code(),
            Self::ChatCommit(_) => "agent.chat_commit_failed",
            Self::LoopExhausted { code, .. } => code,
            Self::Cancelled => "agent.cancelled",
            Self::AlreadyEnded { .. } => "run.already_ended",
            Self::NotResumable(_) => "run.not_resumable",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Self::Gate(rejection) => rejection.class(),
            Self::Model(error) => error.class(),
            Self::NotOffered(_) => ErrorClass::PolicyDenied { fail_fast: true },
            Self::ModelClient(error) => error.class(),
            Self::LoopExhausted { .. } => ErrorClass::PolicyDenied { fail_fast: true },
            _ => ErrorClass::SystemFailure,
        }
    }
}
