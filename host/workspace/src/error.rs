//! What can go wrong, split the way the run loop needs it: a
//! [`WorkspaceError::Recoverable`] is a tool result the model reads (it names
//! the next step, using the tools' model aliases), a
//! [`WorkspaceError::System`] fails the run (an escape or I/O failure the
//! model cannot fix and must not be told to work around).

use std::fmt;

/// The `code` values, exactly as results and the journal carry them.
pub mod codes {
    // Recoverable (the model reads them).
    pub const INVALID_PATH: &str = "workspace.invalid_path";
    pub const PATH_NOT_VISIBLE: &str = "workspace.path_not_visible";
    pub const PATH_NOT_WRITABLE: &str = "workspace.path_not_writable";
    pub const PATH_NOT_FOUND: &str = "workspace.path_not_found";
    pub const FILE_NOT_FOUND: &str = "workspace.file_not_found";
    pub const PATH_IS_DIRECTORY: &str = "workspace.path_is_directory";
    pub const FILE_NOT_TEXT: &str = "workspace.file_not_text";
    pub const FILE_TOO_LARGE: &str = "workspace.file_too_large";
    /// `record_read` was given a digest or a fragment the file does not
    /// have now: the file changed while the tool was reading it (or the tool
    /// misreported what it showed). Nothing is recorded; read again.
    pub const READ_STALE_FILE: &str = "workspace.read_stale_file";
    pub const WRITE_REQUIRES_READ: &str = "workspace.write_requires_read";
    pub const WRITE_STALE_FILE: &str = "workspace.write_stale_file";
    pub const PATCH_EMPTY_OLD_STRING: &str = "workspace.patch_empty_old_string";
    pub const PATCH_NO_CHANGE: &str = "workspace.patch_no_change";
    pub const PATCH_REQUIRES_READ: &str = "workspace.patch_requires_read";
    pub const PATCH_REQUIRES_FULL_READ: &str = "workspace.patch_requires_full_read";
    pub const PATCH_STALE_FILE: &str = "workspace.patch_stale_file";
    pub const PATCH_OLD_STRING_NOT_FOUND: &str = "workspace.patch_old_string_not_found";
    pub const PATCH_OLD_STRING_NOT_UNIQUE: &str = "workspace.patch_old_string_not_unique";

    // System (the run fails).
    /// A symlink, a special file (fifo, socket, device) or a mount crossing
    /// inside the run directory or the chat's persist directory.
    pub const SYMLINK_FOUND: &str = "workspace.symlink_found";
    pub const IO_ERROR: &str = "workspace.io_error";
    /// The roots handed to the workspace are unusable (a hidden entry, not
    /// one plain segment, listed twice).
    pub const INVALID_ROOTS: &str = "workspace.invalid_roots";
    /// `promote`: the chat's persist directory changed since the run's base
    /// was taken (another run promoted meanwhile); nothing was written.
    pub const PERSIST_CONFLICT: &str = "workspace.persist_conflict";
    /// `project` on a run that already has `input/persist_snapshot.json`
    /// or files in `persist/` (use `PersistBase::load` on a reopened run).
    pub const PERSIST_ALREADY_PROJECTED: &str = "workspace.persist_already_projected";

    // Neither: the sandbox stops the call as `sandbox.deadline_exceeded`.
    /// The call's deadline passed while the host worked for it.
    pub const DEADLINE_PASSED: &str = "workspace.deadline_passed";
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    /// A tool result the model reads; the run goes on.
    #[error("{code}: {message}")]
    Recoverable { code: &'static str, message: String },
    /// The run fails.
    #[error("{code}: {message}")]
    System { code: &'static str, message: String },
    /// The call's deadline passed during host-side work for it (a
    /// [`WorkMeter`](toolhost_core::WorkMeter) ran out): the sandbox stops
    /// the call as `sandbox.deadline_exceeded`, like a guest running late.
    #[error("workspace.deadline_passed: {0}")]
    DeadlinePassed(#[from] toolhost_core::DeadlinePassed),
}

impl WorkspaceError {
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
            Self::DeadlinePassed(_) => codes::DEADLINE_PASSED,
        }
    }

    pub fn message(&self) -> String {
        match self {
            Self::Recoverable { message, .. } | Self::System { message, .. } => message.clone(),
            Self::DeadlinePassed(passed) => passed.to_string(),
        }
    }

    pub fn is_recoverable(&self) -> bool {
        matches!(self, Self::Recoverable { .. })
    }

    pub fn is_system(&self) -> bool {
        matches!(self, Self::System { .. })
    }

    // Messages used from several modules, kept in one place.

    pub(crate) fn path_is_directory(path: &str) -> Self {
        Self::recoverable(
            codes::PATH_IS_DIRECTORY,
            format!(
                "workspace path `{path}` is a directory; call {workspace_list_files} to list its contents and re-target a specific file.",
                workspace_list_files = crate::error::alias("workspace.list_files")
            ),
        )
    }

    pub(crate) fn file_not_found(path: &str) -> Self {
        Self::recoverable(
            codes::FILE_NOT_FOUND,
            format!(
                "workspace file `{path}` does not exist; call {workspace_list_files} to see which files exist.",
                workspace_list_files = crate::error::alias("workspace.list_files")
            ),
        )
    }

    pub(crate) fn path_not_found(path: &str) -> Self {
        Self::recoverable(
            codes::PATH_NOT_FOUND,
            format!(
                "workspace path `{path}` does not exist; call {workspace_list_files} without a path to see the workspace roots.",
                workspace_list_files = crate::error::alias("workspace.list_files")
            ),
        )
    }

    pub(crate) fn file_not_text(path: &str) -> Self {
        Self::recoverable(
            codes::FILE_NOT_TEXT,
            format!(
                "workspace file `{path}` is not UTF-8 text, so workspace tools cannot read or edit it; pick another file."
            ),
        )
    }

    pub(crate) fn file_too_large(path: &str, limit: u64, what: &str) -> Self {
        Self::recoverable(
            codes::FILE_TOO_LARGE,
            format!(
                "workspace file `{path}` {what} over the {limit}-byte limit; split the content across several smaller files."
            ),
        )
    }

    /// A symlink, escape or special file: never something the model made
    /// through the tools, so the run stops.
    pub(crate) fn symlink_found(path: &str, what: &str) -> Self {
        Self::system(
            codes::SYMLINK_FOUND,
            format!(
                "workspace path `{path}` {what}; links, special files and mount points are not allowed inside the workspace"
            ),
        )
    }

    /// A System I/O failure of `op` on `path` (hosts that write beside the workspace use it too).
    pub fn io(op: &str, path: &str, error: impl fmt::Display) -> Self {
        Self::system(codes::IO_ERROR, format!("{op} `{path}`: {error}"))
    }
}

pub type Result<T, E = WorkspaceError> = std::result::Result<T, E>;

/// What a guest's call to a workspace capability reads of this error.
impl From<WorkspaceError> for toolhost_core::HostCallError {
    fn from(error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::Recoverable { code, message } => Self::recoverable(code, message),
            WorkspaceError::System { code, message } => Self::system(code, message),
            WorkspaceError::DeadlinePassed(_) => Self::DeadlinePassed,
        }
    }
}

/// What the model calls builtin `native_name`: its alias, the same in every
/// snapshot (builtins always get their native name with `.` → `_`). An
/// argument of a message's format, never a pass over the finished text, so
/// no path or name in a message is ever rewritten.
pub(crate) fn alias(native_name: &str) -> String {
    toolhost_core::alias::builtin_alias(native_name)
}
