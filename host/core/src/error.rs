//! The three error classes of SPEC §12, shared by every error the control
//! plane produces, so the runtime decides what happens to a run in one place.

use std::fmt;

/// What an error does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The model reads it as a tool result (`## Tool error`) and the run goes on.
    Recoverable,
    /// Policy decided against the call. With `fail_fast` the run stops (a
    /// model that breaks its turn contract); otherwise the model reads a
    /// denied result and goes on (an exhausted budget).
    PolicyDenied { fail_fast: bool },
    /// The runtime itself failed (journal append, serialization, a result
    /// for the wrong call, an escape inside the repository): the run fails.
    SystemFailure,
}

impl ErrorClass {
    /// Whether the run can go on after this error.
    pub fn run_continues(self) -> bool {
        matches!(
            self,
            Self::Recoverable | Self::PolicyDenied { fail_fast: false }
        )
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Recoverable => "recoverable",
            Self::PolicyDenied { fail_fast: false } => "policy denied",
            Self::PolicyDenied { fail_fast: true } => "policy denied (fail fast)",
            Self::SystemFailure => "system failure",
        })
    }
}

/// An error with a stable dotted code (`agent.tool_budget_exhausted`) and a class.
pub trait Classified: std::error::Error {
    fn code(&self) -> &'static str;
    fn class(&self) -> ErrorClass;
}
