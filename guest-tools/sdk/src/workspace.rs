//! The workspace capabilities, behind traits so a tool's logic runs the same
//! against the host (inside the sandbox) and against anything else (native
//! unit tests, the native baseline of the search benchmark).
//!
//! Every host-side workspace error comes back as the [`ToolError`] the model
//! reads (`workspace.path_not_visible: …`). Failures that must end the run
//! (a symlink planted in the workspace, an I/O error) never reach the tool:
//! the host stops the call.

use crate::ToolError;
use crate::bindings::toolhost::host::{
    workspace_read as read, workspace_types as types, workspace_write as write,
};

pub use types::{Entry, EntryKind, Listing, Root, TextFile};
pub use write::{Patched, WriteMode, Written};

/// Reading the run's workspace (`workspace-read`).
pub trait Workspace {
    /// The visible roots, in manifest order.
    fn roots(&self) -> Vec<Root>;
    /// Entries under `path` ("" = every visible root), directories first.
    fn list(&self, path: &str, depth: u32, limit: u32) -> Result<Listing, ToolError>;
    /// Files under `path`, by path, for a search.
    fn walk_files(&self, path: &str, max_depth: u32, max_files: u32) -> Result<Listing, ToolError>;
    /// A whole text file and its sha256.
    fn read_text(&self, path: &str) -> Result<TextFile, ToolError>;
    /// Tell the host what of `path` (at `sha256`) the model was shown: all of
    /// it (`seen` = `None`) or this fragment. Later edits are checked against it.
    fn record_read(&self, path: &str, sha256: &str, seen: Option<&str>) -> Result<(), ToolError>;
}

/// Changing the run's workspace (`workspace-write`), compare-and-swap against
/// what this invocation has read.
pub trait WorkspaceWriter: Workspace {
    fn write(&self, path: &str, content: &str, mode: WriteMode) -> Result<Written, ToolError>;
    fn patch(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Patched, ToolError>;
}

/// The host's capabilities, as imported by the component.
#[derive(Debug, Clone, Copy, Default)]
pub struct Host;

fn tool_error(error: types::WorkspaceError) -> ToolError {
    ToolError::new(error.code, error.message)
}

impl Workspace for Host {
    fn roots(&self) -> Vec<Root> {
        read::roots()
    }

    fn list(&self, path: &str, depth: u32, limit: u32) -> Result<Listing, ToolError> {
        read::list_entries(path, depth, limit).map_err(tool_error)
    }

    fn walk_files(&self, path: &str, max_depth: u32, max_files: u32) -> Result<Listing, ToolError> {
        read::walk_files(path, max_depth, max_files).map_err(tool_error)
    }

    fn read_text(&self, path: &str) -> Result<TextFile, ToolError> {
        read::read_text(path).map_err(tool_error)
    }

    fn record_read(&self, path: &str, sha256: &str, seen: Option<&str>) -> Result<(), ToolError> {
        read::record_read(path, sha256, seen).map_err(tool_error)
    }
}

impl WorkspaceWriter for Host {
    fn write(&self, path: &str, content: &str, mode: WriteMode) -> Result<Written, ToolError> {
        write::write(path, content, mode).map_err(tool_error)
    }

    fn patch(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Patched, ToolError> {
        write::patch(path, old, new, replace_all).map_err(tool_error)
    }
}

/// `workspace:<path>#L<a>-L<b>`, the reference a hit or a read carries.
pub fn line_ref(path: &str, start_line: u32, end_line: u32) -> String {
    format!("workspace:{path}#L{start_line}-L{end_line}")
}
