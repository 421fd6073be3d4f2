//! The host side of `workspace-read` and `workspace-write`: each call is
//! handed to the invocation's [`WorkspaceSession`], which enforces roots,
//! paths, symlinks and compare-and-swap.
//!
//! A recoverable workspace error goes back to the tool, which reports it to
//! the model. A system failure (a symlink planted in the workspace, an I/O
//! error, no workspace bound to the call) is recorded as the call's
//! [`HostFault`] and stops the guest with a trap: the tool never gets a
//! chance to paper over it, and the runtime fails the run.

use std::sync::Arc;

use toolhost_core::WorkMeter;

use toolhost_workspace::{
    Entry, EntryKind, Listing, MAX_LIST_DEPTH, TextFile, WorkspaceError, WorkspaceSession,
    WriteMode,
};

use crate::state::CallState;
use crate::state::bindings::toolhost::host::{
    workspace_read as read, workspace_types as types, workspace_write as write,
};

/// `record-read` from an extension: refused, nothing recorded.
pub const READ_STATE_REFUSED: &str = "workspace.read_state_refused";

/// Most entries one `list-entries` may return, whatever the tool asks.
const MAX_LIST_ENTRIES: u32 = 1_000;
/// Deepest and widest a `walk-files` may go, whatever the tool asks.
const MAX_WALK_DEPTH: u32 = toolhost_workspace::DEFAULT_WALK_DEPTH as u32;
const MAX_WALK_FILES: u32 = toolhost_workspace::DEFAULT_WALK_FILES as u32;

/// What a call's host capabilities act on. Empty by default: a call without
/// a workspace that tries to use one is stopped with a [`HostFault`].
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The invocation's workspace session (its read-state is shared by all
    /// of the invocation's calls).
    pub workspace: Option<Arc<WorkspaceSession>>,
    /// The chat the run is bound to, frozen at its input prefix.
    pub chat: Option<Arc<toolhost_chat::BoundChat>>,
    /// The run's activated world info.
    pub worldinfo: Option<Arc<toolhost_worldinfo::Activation>>,
    /// The skills the invocation may read, and its budget.
    pub skills: Option<Arc<crate::knowledge::SkillAccess>>,
    /// The agents the invocation's agent may call.
    pub agents: Option<Arc<Vec<crate::agents::CallableAgent>>>,
}

impl CallContext {
    pub fn with_workspace(workspace: Arc<WorkspaceSession>) -> Self {
        Self {
            workspace: Some(workspace),
            ..Self::default()
        }
    }
}

/// A system failure inside a host capability. The run must fail.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct HostFault {
    pub code: String,
    pub message: String,
}

impl CallState {
    fn workspace(&mut self) -> wasmtime::Result<Arc<WorkspaceSession>> {
        match &self.context.workspace {
            Some(session) => Ok(Arc::clone(session)),
            None => Err(self.fault(HostFault {
                code: "workspace.unavailable".into(),
                message: "the tool used the workspace, but no workspace is bound to this call"
                    .into(),
            })),
        }
    }

    /// Record `fault` as the call's and return the trap that stops the guest.
    fn fault(&mut self, fault: HostFault) -> wasmtime::Error {
        let error = wasmtime::Error::new(fault.clone());
        // The first fault is the cause; later ones are consequences.
        self.host_fault.get_or_insert(fault);
        error
    }

    /// Hand a recoverable error to the tool; stop the call on a system one.
    fn answer<T>(
        &mut self,
        result: Result<T, WorkspaceError>,
    ) -> wasmtime::Result<Result<T, types::WorkspaceError>> {
        match result {
            Ok(value) => Ok(Ok(value)),
            Err(WorkspaceError::Recoverable { code, message }) => Ok(Err(types::WorkspaceError {
                code: code.to_owned(),
                message: model_text(&message),
            })),
            Err(WorkspaceError::System { code, message }) => Err(self.fault(HostFault {
                code: code.to_owned(),
                message,
            })),
            // Stopped like a guest running late: the model reads
            // `sandbox.deadline_exceeded`, the run goes on.
            Err(WorkspaceError::DeadlinePassed(_)) => {
                Err(wasmtime::Error::new(crate::call::DeadlineReached))
            }
        }
    }

    /// What host-side work for this call may spend: until its deadline.
    pub(crate) fn work_meter(&self) -> WorkMeter {
        WorkMeter::until(self.deadline_at)
    }
}

/// A host message as the model reads it: `{tool:NAME}` written as the
/// builtin's alias, which is the same in every snapshot.
pub(crate) fn model_text(message: &str) -> String {
    toolhost_core::snapshot::tool_refs::render(message, &|_| None)
}

fn listing(listing: Listing) -> types::Listing {
    types::Listing {
        entries: listing.entries.into_iter().map(entry).collect(),
        truncated: listing.truncated,
    }
}

fn entry(entry: Entry) -> types::Entry {
    types::Entry {
        path: entry.path,
        kind: match entry.kind {
            EntryKind::File => types::EntryKind::File,
            EntryKind::Directory => types::EntryKind::Directory,
        },
        bytes: entry.bytes,
    }
}

fn text_file(file: TextFile) -> types::TextFile {
    types::TextFile {
        path: file.path,
        text: file.text,
        sha256: file.sha256,
    }
}

impl types::Host for CallState {}

impl read::Host for CallState {
    fn roots(&mut self) -> wasmtime::Result<Vec<types::Root>> {
        let session = self.workspace()?;
        Ok(session
            .workspace()
            .roots()
            .roots()
            .iter()
            .filter(|root| root.visible)
            .map(|root| types::Root {
                path: root.name.clone(),
                writable: root.writable,
            })
            .collect())
    }

    fn list_entries(
        &mut self,
        path: String,
        depth: u32,
        limit: u32,
    ) -> wasmtime::Result<Result<types::Listing, types::WorkspaceError>> {
        let session = self.workspace()?;
        let depth = depth.clamp(1, MAX_LIST_DEPTH as u32) as usize;
        let limit = limit.min(MAX_LIST_ENTRIES) as usize;
        let result = session
            .workspace()
            .list_metered(&path, depth, limit, &self.work_meter())
            .map(listing);
        self.answer(result)
    }

    fn walk_files(
        &mut self,
        path: String,
        max_depth: u32,
        max_files: u32,
    ) -> wasmtime::Result<Result<types::Listing, types::WorkspaceError>> {
        let session = self.workspace()?;
        let depth = max_depth.clamp(1, MAX_WALK_DEPTH) as usize;
        let files = max_files.min(MAX_WALK_FILES) as usize;
        let result = session
            .workspace()
            .walk_files_metered(&path, depth, files, &self.work_meter())
            .map(listing);
        self.answer(result)
    }

    fn read_text(
        &mut self,
        path: String,
    ) -> wasmtime::Result<Result<types::TextFile, types::WorkspaceError>> {
        let session = self.workspace()?;
        let result = session.read_text(&path).map(text_file);
        self.answer(result)
    }

    fn record_read(
        &mut self,
        path: String,
        sha256: String,
        seen: Option<String>,
    ) -> wasmtime::Result<Result<(), types::WorkspaceError>> {
        let session = self.workspace()?;
        // What the model has read authorizes what it may overwrite
        // (compare-and-swap). An extension reporting reads could make a
        // later `workspace.write_file` replace a file the model never saw,
        // so only builtins, which show the model what they record, may.
        if self.trust == crate::Trust::Extension {
            return Ok(Err(types::WorkspaceError {
                code: READ_STATE_REFUSED.to_owned(),
                message: model_text(
                    "an extension's reads do not count as the model's reads; the model reads the file with {tool:workspace.read_file} before it edits it",
                ),
            }));
        }
        let result = session.record_read(&path, &sha256, seen.as_deref());
        self.answer(result)
    }
}

impl write::Host for CallState {
    fn write(
        &mut self,
        path: String,
        content: String,
        mode: write::WriteMode,
    ) -> wasmtime::Result<Result<write::Written, types::WorkspaceError>> {
        let session = self.workspace()?;
        let mode = match mode {
            write::WriteMode::Replace => WriteMode::Replace,
            write::WriteMode::Append => WriteMode::Append,
        };
        let result = session
            .write(&path, &content, mode)
            .map(|written| write::Written {
                path: written.path,
                mode: match written.mode {
                    WriteMode::Replace => write::WriteMode::Replace,
                    WriteMode::Append => write::WriteMode::Append,
                },
                sha256: written.sha256,
                chars: written.chars,
                words: written.words,
                created: written.created,
            });
        self.answer(result)
    }

    fn patch(
        &mut self,
        path: String,
        old_string: String,
        new_string: String,
        replace_all: bool,
    ) -> wasmtime::Result<Result<write::Patched, types::WorkspaceError>> {
        let session = self.workspace()?;
        let result = session
            .patch_metered(
                &path,
                &old_string,
                &new_string,
                replace_all,
                &self.work_meter(),
            )
            .map(|patched| write::Patched {
                path: patched.path,
                replacements: u32::try_from(patched.replacements).unwrap_or(u32::MAX),
                old_sha256: patched.old_sha256,
                sha256: patched.sha256,
                chars: patched.chars,
                words: patched.words,
            });
        self.answer(result)
    }
}
