//! `workspace-read` and `workspace-write`: each call is handed to the
//! invocation's [`WorkspaceSession`], which enforces roots, paths, symlinks
//! and compare-and-swap. Policy hooks: an extension not granted
//! `tool-results/` gets a session of its own without it, and an extension's
//! `record-read` is refused (its reads never count as the model's).

use std::sync::Arc;

use toolhost_core::{Capability, HostCallError};
use toolhost_sandbox::{CallState, HostFault, Trust};
use toolhost_workspace::{
    Entry, EntryKind, Listing, MAX_LIST_DEPTH, TextFile, WorkspaceSession, WriteMode,
};
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::bindings::toolhost::host::{
    workspace_read as read, workspace_types as types, workspace_write as write,
};
use crate::lifecycle::{BindInputs, CallScope, HostCapability, Settlement};
use crate::view::{Projected, View, project};

/// `record-read` from an extension: refused, nothing recorded.
pub const READ_STATE_REFUSED: &str = "workspace.read_state_refused";

/// Most entries one `list-entries` may return, whatever the tool asks.
const MAX_LIST_ENTRIES: u32 = 1_000;
/// Deepest and widest a `walk-files` may go, whatever the tool asks.
const MAX_WALK_DEPTH: u32 = toolhost_workspace::DEFAULT_WALK_DEPTH as u32;
const MAX_WALK_FILES: u32 = toolhost_workspace::DEFAULT_WALK_FILES as u32;

/// `workspace-read` and `workspace-write`: one session, two interfaces.
pub struct Workspace;

impl HostCapability for Workspace {
    const KEY: &'static str = "workspace";
    type Bound = Arc<WorkspaceSession>;
    type State = Arc<WorkspaceSession>;

    /// The invocation's session (its read-state is shared by its calls).
    fn bind(inputs: &BindInputs) -> Option<Self::Bound> {
        inputs.workspace.clone()
    }

    /// The session a call acts through — the invocation's, or for an
    /// extension not granted `tool-results/` a narrowed one.
    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        if !(grant.has(Capability::WorkspaceRead) || grant.has(Capability::WorkspaceWrite)) {
            return Ok(None);
        }
        Ok(match bound {
            Some(session) if grant.trust == Trust::Extension && !grant.tool_results => {
                Some(without_tool_results(session)?)
            }
            other => other.cloned(),
        })
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        type Projection = Projected<Workspace>;
        types::add_to_linker::<_, Projection>(linker, project::<Self>)?;
        read::add_to_linker::<_, Projection>(linker, project::<Self>)?;
        write::add_to_linker::<_, Projection>(linker, project::<Self>)
    }

    /// A write tool's writes are recorded before they land, when the run
    /// asks (so a resume can tell whether one did).
    fn begin(bound: &Self::Bound, call: &CallScope) {
        bound.set_intent_sink(call.write_intents.clone());
    }

    fn settle(bound: &Self::Bound, _settlement: &mut Settlement) {
        bound.set_intent_sink(None);
    }
}

/// An extension's view of the invocation's workspace without
/// `tool-results/` (other calls' results), in a session of its own: it was
/// not granted them. Its reads never count as the model's anyway.
fn without_tool_results(session: &WorkspaceSession) -> Result<Arc<WorkspaceSession>, HostFault> {
    let narrowed = session
        .workspace()
        .without_tool_results()
        .map_err(|error| HostFault {
            code: error.code().to_owned(),
            message: error.message(),
        })?;
    Ok(Arc::new(WorkspaceSession::new(Arc::new(narrowed))))
}

type WorkspaceView<'a> = View<'a, Arc<WorkspaceSession>>;

impl WorkspaceView<'_> {
    fn session(&mut self) -> wasmtime::Result<Arc<WorkspaceSession>> {
        match &self.state {
            Some(session) => Ok(Arc::clone(session)),
            None => Err(self.core.fault(HostFault {
                code: "workspace.unavailable".into(),
                message: "the tool used the workspace, but no workspace is bound to this call"
                    .into(),
            })),
        }
    }

    /// Answer with the workspace interfaces' own error record.
    fn answer_workspace<T>(
        &mut self,
        result: Result<T, toolhost_workspace::WorkspaceError>,
    ) -> wasmtime::Result<Result<T, types::WorkspaceError>> {
        self.core
            .answer(result.map_err(HostCallError::from), |code, message| {
                types::WorkspaceError { code, message }
            })
    }
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

impl types::Host for WorkspaceView<'_> {}

impl read::Host for WorkspaceView<'_> {
    fn roots(&mut self) -> wasmtime::Result<Vec<types::Root>> {
        let session = self.session()?;
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
        let session = self.session()?;
        let depth = depth.clamp(1, MAX_LIST_DEPTH as u32) as usize;
        let limit = limit.min(MAX_LIST_ENTRIES) as usize;
        let result = session
            .workspace()
            .list_metered(&path, depth, limit, &self.core.work_meter())
            .map(listing);
        self.answer_workspace(result)
    }

    fn walk_files(
        &mut self,
        path: String,
        max_depth: u32,
        max_files: u32,
    ) -> wasmtime::Result<Result<types::Listing, types::WorkspaceError>> {
        let session = self.session()?;
        let depth = max_depth.clamp(1, MAX_WALK_DEPTH) as usize;
        let files = max_files.min(MAX_WALK_FILES) as usize;
        let result = session
            .workspace()
            .walk_files_metered(&path, depth, files, &self.core.work_meter())
            .map(listing);
        self.answer_workspace(result)
    }

    fn read_text(
        &mut self,
        path: String,
    ) -> wasmtime::Result<Result<types::TextFile, types::WorkspaceError>> {
        let session = self.session()?;
        let result = session.read_text(&path).map(text_file);
        self.answer_workspace(result)
    }

    fn record_read(
        &mut self,
        path: String,
        sha256: String,
        seen: Option<String>,
    ) -> wasmtime::Result<Result<(), types::WorkspaceError>> {
        let session = self.session()?;
        // What the model has read authorizes what it may overwrite
        // (compare-and-swap). An extension reporting reads could make a
        // later `workspace.write_file` replace a file the model never saw,
        // so only builtins, which show the model what they record, may.
        if self.core.trust() == Trust::Extension {
            let refused = HostCallError::recoverable(
                READ_STATE_REFUSED,
                format!(
                    "an extension's reads do not count as the model's reads; the model reads the file with {} before it edits it",
                    toolhost_core::alias::builtin_alias("workspace.read_file")
                ),
            );
            return self
                .core
                .answer(Err(refused), |code, message| types::WorkspaceError {
                    code,
                    message,
                });
        }
        let result = session.record_read(&path, &sha256, seen.as_deref());
        self.answer_workspace(result)
    }
}

impl write::Host for WorkspaceView<'_> {
    fn write(
        &mut self,
        path: String,
        content: String,
        mode: write::WriteMode,
    ) -> wasmtime::Result<Result<write::Written, types::WorkspaceError>> {
        let session = self.session()?;
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
        self.answer_workspace(result)
    }

    fn patch(
        &mut self,
        path: String,
        old_string: String,
        new_string: String,
        replace_all: bool,
    ) -> wasmtime::Result<Result<write::Patched, types::WorkspaceError>> {
        let session = self.session()?;
        let result = session
            .patch_metered(
                &path,
                &old_string,
                &new_string,
                replace_all,
                &self.core.work_meter(),
            )
            .map(|patched| write::Patched {
                path: patched.path,
                replacements: u32::try_from(patched.replacements).unwrap_or(u32::MAX),
                old_sha256: patched.old_sha256,
                sha256: patched.sha256,
                chars: patched.chars,
                words: patched.words,
            });
        self.answer_workspace(result)
    }
}
