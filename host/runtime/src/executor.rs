//! The executor boundary: what runs one call once the control plane (gate,
//! approval, journal, audit) has let it through. An executor only runs the
//! call on its source and binds the result to it; [`ToolHost`](crate::ToolHost)
//! is the one behind every catalog (the sandbox and MCP servers).

use std::sync::Arc;

use toolhost_capabilities::InvocationBound;
use toolhost_core::{AgentToolResult, IdentityMismatch, ToolBinding, ToolCall, ToolEffect, ToolId};
use toolhost_journal::AuditError;
use toolhost_sandbox::{CallEntropy, CallReport, HostFault, LimitError, LoadError};

use crate::readable_view::ResultViews;

/// What an executor is given of the invocation a call belongs to.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The invocation's capabilities, prepared per call for a sandboxed
    /// tool (none bound outside an invocation).
    pub bound: Arc<InvocationBound>,
    /// How an MCP result too long to read inline becomes a readable view;
    /// none outside an invocation, where the whole result is inline.
    pub views: Option<Arc<ResultViews>>,
    /// A replay: no stored secret is written into any request — a replay
    /// acts with nobody's credential (neither the run owner's, a served
    /// tenant's perhaps, nor this machine's).
    pub replaying: bool,
}

/// A system failure while executing: the run cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error("tool.executor_missing: no executor for tool `{0}`")]
    UnknownTool(ToolId),
    #[error(transparent)]
    Identity(#[from] Box<IdentityMismatch>),
    #[error("sandbox.limits_invalid: the limits of `{tool}` cannot be applied: {source}")]
    Limits { tool: ToolId, source: LimitError },
    /// A host capability hit a system failure during the call (a symlink
    /// planted in the workspace, an I/O error); the call was stopped.
    #[error("{0}")]
    HostFault(HostFault),
    /// An MCP call was sent and never answered: whether the server acted is
    /// unknown, so the run fails rather than guess (never retried).
    #[error("mcp.outcome_unknown: {tool}: {message}")]
    McpOutcomeUnknown { tool: ToolId, message: String },
    /// A builtin's component could not be loaded at its first use (a
    /// cache that cannot be read, a component that disagrees with its
    /// table entry); the next call tries again.
    #[error("sandbox.load_failed: {tool}: {source}")]
    Load {
        tool: ToolId,
        #[source]
        source: Box<LoadError>,
    },
    /// A long MCP result's readable view could not be stored.
    #[error(transparent)]
    View(#[from] AuditError),
}

impl ExecuteError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool(_) => "tool.executor_missing",
            Self::Identity(_) => "tool.result_identity_mismatch",
            Self::Limits { .. } => "sandbox.limits_invalid",
            // Codes of host faults are the capability's own (`workspace.*`);
            // the static ones here name the class.
            Self::HostFault(_) => "sandbox.host_fault",
            Self::McpOutcomeUnknown { .. } => "mcp.outcome_unknown",
            Self::Load { .. } => "sandbox.load_failed",
            Self::View(_) => "audit.write_failed",
        }
    }
}

/// Runs invocations. The control plane (gate, journal, audit) sits in front
/// of every executor; an executor only runs the call and binds the result
/// to it.
pub trait ToolExecutor {
    /// Run `call` as `binding` (its frozen descriptor and limits) with
    /// the recorded nondeterministic inputs `entropy`, in its invocation's
    /// `context` (its capabilities, its readable views).
    fn execute(
        &self,
        call: &ToolCall,
        binding: &ToolBinding,
        entropy: CallEntropy,
        context: CallContext,
    ) -> impl std::future::Future<Output = Result<Execution, ExecuteError>> + Send;

    /// Why `tool`'s source asks for a person's approval now although the
    /// snapshot did not (an MCP registration switched to `ask` since it
    /// was compiled). The call-time recheck can only tighten a frozen
    /// decision, never loosen it.
    fn approval_required_now(&self, _tool: &ToolId) -> Option<String> {
        None
    }
}

/// One finished execution.
#[derive(Debug)]
pub struct Execution {
    pub result: AgentToolResult,
    /// For the runtime to apply; never part of the stored result.
    pub effect: Option<ToolEffect>,
    /// The sandbox's report (none for an MCP call).
    pub report: Option<CallReport>,
}
