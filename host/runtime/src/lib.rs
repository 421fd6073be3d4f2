//! The runtime: the tool sources behind one catalog ([`ToolHost`]), and the
//! control plane every call passes through on its way to them — a [`Run`]
//! (directory, manifest, journal) and per invocation an
//! [`Invocation`] (snapshot, turns, gate, audit files).

mod agent_loop;
mod agents;
mod answer_file;
pub mod approval;
mod direct_call;
mod executor;
pub mod extensions;
mod failure;
mod host;
pub mod host_commit;
mod invocation;
mod loop_record;
mod readable_view;
mod replay;
mod resume;
mod run;

pub use agent_loop::{
    CommitRecord, DEFAULT_CONTEXT_CHARS, DIRECT_OUTPUT_PATH, LOOP_RECORD_PATH, LoopConfig,
    LoopParts, LoopRecord, LoopSummary, RetryPolicy, RunCancel, RunStatus, TaskSummary,
    run_agent_loop,
};
pub use agents::{AgentDirectory, AgentDirectoryError};
pub use direct_call::{DirectCallError, DirectCaller};
pub use executor::{CallContext, ExecuteError, Execution, ToolExecutor};
pub use failure::RunFailure;
pub use host::{
    BuiltinComponent, ExtensionOmitted, HostError, ToolHost, ToolHostConfig, ToolSource,
    arguments_from_text,
};
pub use invocation::{CallOutcome, ExecutedCall, Invocation};
pub use readable_view::{ResultViews, ViewStore};
pub use replay::{CallVerdict, ReplayReport, ReplayedCall, replay_run};
pub use resume::{ResumeFound, TERMINAL_EVENTS};
pub use run::{ReplicaFactory, Run, RunBuilder};
pub use toolhost_capabilities::{
    ChatHost, ChatHostError, CommitFuture, CommitOutcome, CommitRequest, GenerationType,
    RunBindings, SillyTavernChatHost,
};
pub use toolhost_journal::may_block;
