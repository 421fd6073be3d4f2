//! One agent run on disk: its directory layout, its manifest (`run.json`),
//! its journal (`events.jsonl`) and its create-only audit files. No wasmtime.
//!
//! - [`layout`]: where each file lives, and the path-segment rules.
//! - [`manifest`]: `run.json`, written once at creation.
//! - [`journal`]: the append-only event log, its durability modes and its
//!   crash recovery.
//! - [`events`]: the typed event vocabulary recorded through [`Journal::record`].
//! - [`audit`]: atomic create-only files (tool arguments, results, snapshots),
//!   made unnamed and linked into place where Linux allows it (`create`).
//! - [`run`]: [`RunDirectory`], which ties them together.

pub mod audit;
mod audit_dirs;
mod blocking;
pub use blocking::may_block;
mod create;
pub mod events;
mod fsync;
pub use fsync::{SyncCounter, sync_may_wait};
pub mod journal;
pub mod layout;
pub mod manifest;
pub mod run;
pub mod tail;

pub use audit::AuditError;
pub use events::{
    AgentAwaitCompleted, AgentDelegateStarted, AgentHandoffAccepted, AgentLoopFinished,
    AgentTaskEnded, ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested,
    ChildResultsInjected, ContextAssembled, ContextTrimmed, DirectOutputCaptured,
    DriftRecoveryAttempted, Event, ModelCallAttemptFailed, ModelCompleted, ModelRequestCreated,
    PersistentChangesCommitted, PreservedCommit, RunCancelled, RunCompleted, RunFailed,
    RunPartialSuccess, RunResumed, RunStarted, TERMINAL_EVENTS, TaskReturnCompleted,
    ToolCallApprovalDecided, ToolCallApprovalRequested, ToolCallCompleted, ToolCallFailed,
    ToolCallOutcome, ToolCallRequested, ToolCallStarted, ToolCallSystemFailed, ToolCallUnknown,
    ToolResultStored,
};
pub use journal::{
    Durability, EventScope, Journal, JournalError, JournalEvent, Level, NewEvent, Observer,
    ROOT_INVOCATION_ID, Recovery, Replica, read_events,
};
pub use layout::{LayoutError, RunLayout, RunPath, audit_stem, new_run_id};
pub use manifest::{
    ChatBinding, CommitPolicy, JournalRef, Lifecycle, MANIFEST_VERSION, ManifestError, ProfileRef,
    RootSpec, RunInputs, RunManifest, SkillSourceRef, sha256_hex,
};
pub use run::{RunDirectory, RunError};
