//! `Run`: one agent run on disk — its directory, manifest and journal — and
//! the invocations started in it. Every invocation compiles its snapshot
//! here and journals through it; the run's end is journalled here too.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use toolhost_core::{Classified, Profile, ToolId};
use toolhost_journal::{
    Event, Observer, PreservedCommit, RunCompleted, RunDirectory, RunFailed, RunLayout,
    RunManifest, RunPartialSuccess,
};
use toolhost_journal::{Replica, may_block};

use toolhost_capabilities::RunContext;
use toolhost_capabilities::chat::BoundChat;
use toolhost_workspace::{Workspace, WorkspaceLimits, WorkspaceRoots, WorkspaceSession};

mod open;

pub use open::RunBuilder;

use crate::approval::{Answer, Approver};
use crate::failure::RunFailure;
use crate::resume::ResumeLog;

/// Makes the journal replica of the run directory at the given root, before
/// the run's first event (the cluster's: `toolhost-cluster`). An error
/// stops the run from being created or resumed.
pub type ReplicaFactory = Box<dyn FnOnce(&Path) -> Result<Box<dyn Replica>, String> + Send>;

/// An open run. Shared by its invocations (`Arc<Run>`); the directory is
/// behind a mutex because the journal has one writer.
#[derive(Debug)]
pub struct Run {
    dir: Mutex<RunDirectory>,
    layout: RunLayout,
    manifest: RunManifest,
    /// The model-visible part of the run directory, shared by invocations;
    /// each invocation reads and writes it through its own session.
    workspace: Arc<Workspace>,
    /// The chat, world info and skills the run is bound to.
    inputs: Arc<RunContext>,
    /// The run's frozen profile.
    profile: Arc<Profile>,
    /// A resumed agent run's journal, made again step by step.
    resume_log: Option<Arc<ResumeLog>>,
    /// Where calls needing approval are decided (default: no one, denied).
    approver: Mutex<Arc<dyn Approver>>,
    /// Tools a person approved for the rest of the run.
    approved_for_run: Mutex<BTreeSet<ToolId>>,
}

/// Whether a run's end goes on when its audit files cannot be synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AuditSync {
    Required,
    /// A failed run's `run_failed` is journalled all the same.
    BestEffort,
}

impl Run {
    /// A resumed run's journal cursor (`None`: a new or reopened run).
    pub(crate) fn resume_log(&self) -> Option<&Arc<ResumeLog>> {
        self.resume_log.as_ref()
    }

    /// A run file, `None` if it was never written.
    pub(crate) fn read_file(&self, relative: &str) -> Result<Option<Vec<u8>>, RunFailure> {
        Ok(self.dir().read_file(relative)?)
    }

    fn wrap(dir: RunDirectory, inputs: RunContext, profile: Profile) -> Result<Self, RunFailure> {
        let roots = WorkspaceRoots::from_specs(&dir.manifest().roots)?;
        let workspace = Workspace::open(dir.layout().root(), roots, WorkspaceLimits::default())?;
        Ok(Self {
            layout: dir.layout().clone(),
            manifest: dir.manifest().clone(),
            dir: Mutex::new(dir),
            workspace: Arc::new(workspace),
            inputs: Arc::new(inputs),
            profile: Arc::new(profile),
            resume_log: None,
            approver: Mutex::new(Arc::new(Answer::nobody())),
            approved_for_run: Mutex::new(BTreeSet::new()),
        })
    }

    /// The chat the run is bound to, if any.
    pub fn chat(&self) -> Option<&Arc<BoundChat>> {
        self.inputs.chat()
    }

    /// The run's frozen profile.
    pub fn profile(&self) -> &Arc<Profile> {
        &self.profile
    }

    /// What the run is bound to, for its invocations' capabilities.
    pub(crate) fn inputs(&self) -> &Arc<RunContext> {
        &self.inputs
    }

    pub(crate) fn manifest_layout(&self) -> &RunLayout {
        &self.layout
    }

    /// The run's workspace (visible roots, symlink-proof access).
    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    /// A fresh session on the workspace: one per invocation, holding what
    /// that invocation has read.
    pub(crate) fn workspace_session(&self) -> Arc<WorkspaceSession> {
        Arc::new(WorkspaceSession::new(Arc::clone(&self.workspace)))
    }

    /// A session through `profile`'s roots: the run's own when the profile
    /// is the run's (or shows the same), else a narrowed view — a delegated
    /// agent or a handoff target never sees more than its profile allows,
    /// nor more than the run does.
    pub(crate) fn workspace_session_for(
        &self,
        profile: &Profile,
    ) -> Result<Arc<WorkspaceSession>, RunFailure> {
        let own = &self.profile.workspace;
        let theirs = &profile.workspace;
        if own.visible_roots == theirs.visible_roots && own.writable_roots == theirs.writable_roots
        {
            return Ok(self.workspace_session());
        }
        let narrowed = self
            .workspace
            .narrowed(&theirs.visible_roots, &theirs.writable_roots)?;
        Ok(Arc::new(WorkspaceSession::new(Arc::new(narrowed))))
    }

    pub fn run_id(&self) -> &str {
        &self.manifest.run_id
    }

    pub fn root(&self) -> &Path {
        self.layout.root()
    }

    pub fn manifest(&self) -> &RunManifest {
        &self.manifest
    }

    /// Whether `profile` resolves to exactly the profile this run froze.
    pub fn was_created_with(&self, profile: &Profile) -> bool {
        profile.digest() == self.manifest.profile.sha256
    }

    /// The run directory, for one journal append or audit write. A panic
    /// while it was held cannot leave it half-written (each write is whole),
    /// so a poisoned lock is taken over.
    pub(crate) fn dir(&self) -> MutexGuard<'_, RunDirectory> {
        self.dir
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Journal `event` — unless a resumed run journalled it before and its
    /// loop is only making it again ([`ResumeLog`]).
    pub fn record<E: Event>(&self, event: &E) -> Result<u64, RunFailure> {
        self.append(event, false)
    }

    /// [`record`](Self::record), but written together with the next event
    /// (`Journal::hold`): for an event nothing acts on before the next one
    /// is recorded, so one step of a call costs one `write`. A crash before
    /// that loses it, as if it came just before it.
    pub fn hold<E: Event>(&self, event: &E) -> Result<u64, RunFailure> {
        self.append(event, true)
    }

    fn append<E: Event>(&self, event: &E, hold: bool) -> Result<u64, RunFailure> {
        if let Some(log) = &self.resume_log
            && let Some(recorded) = log.take(&event.scope().invocation_id, E::TYPE)
        {
            return Ok(recorded.seq);
        }
        let mut dir = self.dir();
        let journal = dir.journal_mut();
        let seq = if hold {
            journal.hold(event)?
        } else {
            journal.record(event)?
        };
        drop(dir);
        toolhost_core::crash_point::hit_event(seq);
        Ok(seq)
    }

    /// Make every event and audit file written so far durable, without
    /// ending the run (a call made after the run's end, through the API).
    pub fn sync(&self) -> Result<(), RunFailure> {
        may_block(self.root(), || self.dir().sync())?;
        Ok(())
    }

    /// Make the unnamed files of the next call's audit files now
    /// ([`RunDirectory::make_files_ahead`]), so that call only writes and
    /// links them. For a host with idle time between calls, after it has
    /// answered one: `mcp serve` over stdio, between a client's requests.
    pub fn make_files_ahead(&self) -> usize {
        self.dir().make_files_ahead()
    }

    /// The sync calls (`fsync`, `fdatasync`, `syncfs`) made for this run so
    /// far: what a durability mode costs, counted rather than assumed.
    pub fn sync_calls(&self) -> u64 {
        self.dir().sync_calls()
    }

    /// Journal `run_completed` and make everything durable.
    pub fn complete(&self) -> Result<(), RunFailure> {
        self.end_with(&RunCompleted {}, AuditSync::Required)
    }

    /// Journal `run_failed` for `failure` and make everything durable.
    pub fn fail(&self, failure: &RunFailure) -> Result<(), RunFailure> {
        let failed = RunFailed {
            code: failure.code().to_owned(),
            message: failure.to_string(),
            retryable: failure.retryable(),
            user_retryable: failure.user_retryable(),
        };
        // The failure may be the disk itself: `run_failed` is still tried.
        self.end_with(&failed, AuditSync::BestEffort)
    }

    /// Journal `run_partial_success`: `failure` ended the run after
    /// `preserved` commits reached the chat, which keeps them.
    pub fn partial_success(
        &self,
        failure: &RunFailure,
        preserved: Vec<PreservedCommit>,
    ) -> Result<(), RunFailure> {
        let partial = RunPartialSuccess {
            code: failure.code().to_owned(),
            message: failure.to_string(),
            retryable: false,
            user_retryable: false,
            preserved_commit_count: preserved.len(),
            preserved_commits: preserved,
        };
        self.end_with(&partial, AuditSync::Required)
    }

    /// Journal `run_cancelled` and make everything durable.
    pub fn cancelled(
        &self,
        preserved_commit_count: usize,
        cancelled_tasks: Vec<String>,
    ) -> Result<(), RunFailure> {
        let cancelled = toolhost_journal::RunCancelled {
            code: "agent.cancelled",
            preserved_commit_count,
            cancelled_tasks,
        };
        self.end_with(&cancelled, AuditSync::Required)
    }

    /// A run's end, its sync point: the audit files written since the last
    /// one made durable first, then `terminal` journalled and the journal
    /// made durable — off the runtime worker where the disk can wait.
    fn end_with<E: Event>(&self, terminal: &E, audit_sync: AuditSync) -> Result<(), RunFailure> {
        may_block(self.root(), || {
            let mut dir = self.dir();
            match dir.sync_audit_files() {
                Err(error) if audit_sync == AuditSync::BestEffort => {
                    tracing::warn!(%error, "syncing audit files before {}", E::TYPE);
                }
                synced => synced?,
            }
            dir.journal_mut().record(terminal)?;
            dir.sync()?;
            Ok(())
        })
    }

    /// Decide this run's approvals with `approver` from now on (the
    /// default denies them: no one is asked).
    pub fn set_approver(&self, approver: Arc<dyn Approver>) {
        *self
            .approver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = approver;
    }

    pub(crate) fn approver(&self) -> Arc<dyn Approver> {
        Arc::clone(
            &self
                .approver
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Whether a person approved `tool` for the rest of the run.
    pub(crate) fn approved_for_run(&self, tool: &ToolId) -> bool {
        self.approved_for_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(tool)
    }

    pub(crate) fn approve_for_run(&self, tool: &ToolId) {
        self.approved_for_run
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(tool.clone());
    }

    /// Watch every journal event from now on (live progress lines).
    pub fn observe(&self, observer: Option<Observer>) {
        self.dir().journal_mut().set_observer(observer);
    }

    /// A compact description of a model request, for `model_request_created`.
    pub(crate) fn request_summary(requester: &str, tools: usize) -> Value {
        json!({"requester": requester, "toolCount": tools})
    }
}

impl crate::readable_view::ViewStore for Run {
    fn store_view(&self, path: &str, bytes: &[u8]) -> Result<(), toolhost_journal::AuditError> {
        self.dir().write_create_only(path, bytes)
    }
}
