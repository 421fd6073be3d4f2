//! What can go wrong, split the way the run loop needs it (like
//! `toolhost-workspace`): a [`SkillError::Recoverable`] is a tool result the
//! model reads, a [`SkillError::System`] fails the run.
//!
//! Following the reference (§6.11), everything a skill tool can run into
//! while reading installed skills is recoverable: a denied or unknown skill,
//! a bad path, a missing, binary or oversize file, a symbolic link (refused,
//! never followed: nothing outside the skill is read), an exhausted budget.
//! Only what the host itself cannot do is System: an I/O failure, a kernel
//! without `openat2`.

use std::fmt;

/// The `code` values, exactly as results and the journal carry them.
pub mod codes {
    // Recoverable (the model reads them).
    /// Denied by `skills.deny`, or not listed in `skills.visible`.
    pub const POLICY_DENIED: &str = "skill.policy_denied";
    /// Allowed by the profile but not installed in any scope.
    pub const NOT_VISIBLE: &str = "skill.not_visible";
    /// The skill has no such file (or its directory is gone).
    pub const NOT_FOUND: &str = "skill.not_found";
    /// A bad name or path, a directory, a binary (not UTF-8) or oversize
    /// file, a symbolic link or special file.
    pub const INVALID_REQUEST: &str = "skill.invalid_request";
    /// More than the invocation's remaining read budget (`maxReadCharsPerRun`).
    pub const READ_BUDGET_EXHAUSTED: &str = "skill.read_budget_exhausted";
    /// More than one call may show (`maxReadCharsPerCall`) while the run
    /// budget still has room.
    pub const READ_BUDGET_EXCEEDED: &str = "skill.read_budget_exceeded";

    // System (the run fails).
    /// An I/O failure reading the skill store, or `openat2` unavailable.
    pub const IO_ERROR: &str = "skill.io_error";
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// A tool result the model reads; the run goes on.
    #[error("{code}: {message}")]
    Recoverable { code: &'static str, message: String },
    /// The run fails.
    #[error("{code}: {message}")]
    System { code: &'static str, message: String },
}

impl SkillError {
    pub(crate) fn recoverable(code: &'static str, message: impl Into<String>) -> Self {
        Self::Recoverable {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn system(code: &'static str, message: impl Into<String>) -> Self {
        Self::System {
            code,
            message: message.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Recoverable { code, .. } | Self::System { code, .. } => code,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Self::Recoverable { message, .. } | Self::System { message, .. } => message,
        }
    }

    pub fn is_recoverable(&self) -> bool {
        matches!(self, Self::Recoverable { .. })
    }

    pub fn is_system(&self) -> bool {
        matches!(self, Self::System { .. })
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::recoverable(codes::INVALID_REQUEST, message)
    }

    pub(crate) fn io(op: &str, what: &str, error: impl fmt::Display) -> Self {
        Self::system(codes::IO_ERROR, format!("{op} {what}: {error}"))
    }
}

pub type Result<T, E = SkillError> = std::result::Result<T, E>;

/// What a guest's call to `skill-read` reads of this error.
impl From<SkillError> for toolhost_core::HostCallError {
    fn from(error: SkillError) -> Self {
        match error {
            SkillError::Recoverable { code, message } => Self::recoverable(code, message),
            SkillError::System { code, message } => Self::system(code, message),
        }
    }
}
