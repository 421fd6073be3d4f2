//! The chat-level persistent directory, projected into a run's `persist/`
//! root when the run starts and promoted back when it completes.
//!
//! - [`project`] copies every file of the chat's persist directory into the
//!   run's `persist/` and records the base, `{files: {path: sha256}}` (paths
//!   relative to the persist directory), create-only in
//!   `input/persist_snapshot.json`; the files themselves are kept as they
//!   were in `input/persist_base/`, so a replay starts from them.
//! - [`promote`] copies the run's added and modified files back, but only if
//!   the chat directory still is exactly the base (otherwise another run
//!   promoted meanwhile: System `workspace.persist_conflict`, nothing
//!   written). It records what it will copy in
//!   `input/persist_promotion.json` first, so a promotion a crash cut short
//!   can be repeated: files already holding what it copies count as its
//!   own, and are not written again. Every changed file is staged (temp
//!   file beside its target, written and fsynced) before the first one is
//!   renamed into place.
//!   Files deleted in the run are not deleted in the chat (no tool deletes).
//! - A run that never calls [`promote`] (failed, cancelled) leaves the chat
//!   directory untouched: nothing else here writes to it.
//!
//! Both hold an advisory lock on the chat directory (`flock`: shared while
//! projecting, exclusive while promoting), so two runs of one chat promote
//! one after the other and a projection never sees half a promotion. Symlinks
//! and special files in either directory are System
//! `workspace.symlink_found`; names starting with this crate's temp prefix
//! ([`crate::TEMP_PREFIX`]) are skipped on both sides, so a temp file a
//! crash left beside a promoted file never crosses over.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FlockOperation, Mode, OFlags, flock};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use toolhost_core::WorkMeter;

use crate::error::{WorkspaceError, codes};
use crate::fs::{self, Node, Placed, Placement, Staged, TempSite, WalkKind};
use crate::path::{PathUse, WorkspacePath};
use crate::workspace::{Workspace, sha256_hex};

/// The run's root the chat directory is projected into.
pub const PERSIST_ROOT: &str = "persist";
/// Where the base is recorded (hidden from tools).
pub const PERSIST_SNAPSHOT_FILE: &str = "input/persist_snapshot.json";
/// Where the projected files are kept as they were, for `toolhost replay`
/// (hidden from tools).
pub const PERSIST_BASE_DIR: &str = "input/persist_base";
/// Where a promotion records what it is about to copy, before it copies
/// anything (hidden from tools).
pub const PERSIST_PROMOTION_FILE: &str = "input/persist_promotion.json";

/// Deep enough for any path a workspace can hold (1024 bytes).
const WALK_DEPTH: usize = 1024;

/// What the chat directory held when the run started.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistBase {
    /// Path relative to the persist directory → lowercase hex sha256.
    pub files: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Added,
    Modified,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistChange {
    /// Relative to the persist directory.
    pub path: String,
    pub kind: ChangeKind,
    pub sha256: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeSet {
    /// In path order.
    pub changes: Vec<PersistChange>,
}

impl PersistBase {
    /// The base a run recorded when it was projected (for a reopened run).
    pub fn load(workspace: &Workspace) -> Result<Self, WorkspaceError> {
        let bytes = fs::read_file(
            workspace.anchor(),
            PERSIST_SNAPSHOT_FILE,
            PERSIST_SNAPSHOT_FILE,
            u64::MAX,
        )?
        .ok_or_else(|| {
            WorkspaceError::io("read", PERSIST_SNAPSHOT_FILE, "the run was never projected")
        })?;
        serde_json::from_slice(&bytes)
            .map_err(|error| WorkspaceError::io("parse", PERSIST_SNAPSHOT_FILE, error))
    }
}

/// The same error, said to be about the chat directory.
fn in_chat(dir: &Path) -> impl Fn(WorkspaceError) -> WorkspaceError + '_ {
    move |error| {
        let message = format!(
            "in the chat's persist directory {}: {}",
            dir.display(),
            error.message()
        );
        WorkspaceError::system(error.code(), message)
    }
}

fn open_chat_dir(dir: &Path) -> Result<Option<OwnedFd>, WorkspaceError> {
    match rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(WorkspaceError::io(
            "open chat persist directory",
            &dir.display().to_string(),
            errno,
        )),
    }
}

fn lock(fd: BorrowedFd<'_>, operation: FlockOperation, dir: &Path) -> Result<(), WorkspaceError> {
    flock(fd, operation).map_err(|errno| {
        WorkspaceError::io(
            "lock chat persist directory",
            &dir.display().to_string(),
            errno,
        )
    })
}

/// Every file under `anchor`/`start` (relative paths, in order).
fn files_under(
    anchor: BorrowedFd<'_>,
    start: &str,
) -> Result<Vec<(WorkspacePath, u64)>, WorkspaceError> {
    let base = WorkspacePath::parse(start, PathUse::Directory)?;
    let mut files = Vec::new();
    match fs::open_node(anchor, if start.is_empty() { "." } else { start }, start)? {
        None => {}
        Some(Node::File { .. }) => {
            return Err(WorkspaceError::io(
                "list",
                start,
                "is a file, not a directory",
            ));
        }
        Some(Node::Directory(fd)) => {
            let meter = WorkMeter::unbounded();
            let names_left = std::cell::Cell::new(fs::MAX_DIRECTORY_NAMES);
            let bounds = fs::WalkBounds::new(&meter, &names_left);
            let walked = fs::walk(
                fd,
                &base,
                WALK_DEPTH,
                true,
                bounds,
                &mut |path, kind, bytes| {
                    if kind == WalkKind::File {
                        files.push((path.clone(), bytes));
                    }
                    ControlFlow::Continue(())
                },
            )?;
            if walked.is_break() {
                // Projecting or promoting part of a directory would lose
                // files; refuse the whole instead.
                return Err(WorkspaceError::io(
                    "list",
                    start,
                    format!("it holds more than {} entries", fs::MAX_DIRECTORY_NAMES),
                ));
            }
        }
    }
    Ok(files)
}

/// `path` relative to `persist/`.
fn relative(path: &WorkspacePath) -> &str {
    path.as_str()
        .strip_prefix(PERSIST_ROOT)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(path.as_str())
}

fn read_all(anchor: BorrowedFd<'_>, path: &str) -> Result<Vec<u8>, WorkspaceError> {
    fs::read_file(anchor, path, path, u64::MAX)?
        .ok_or_else(|| WorkspaceError::io("read", path, "vanished while being copied"))
}

/// path → sha of every file of the chat directory.
fn chat_state(fd: BorrowedFd<'_>, dir: &Path) -> Result<BTreeMap<String, String>, WorkspaceError> {
    let mut state = BTreeMap::new();
    for (path, _) in files_under(fd, "").map_err(in_chat(dir))? {
        let bytes = read_all(fd, path.as_str()).map_err(in_chat(dir))?;
        state.insert(path.as_str().to_owned(), sha256_hex(&bytes));
    }
    Ok(state)
}

/// Copy the chat's persist directory (missing = empty) into the run's
/// `persist/` and record the base in `input/persist_snapshot.json`. Refused
/// (System `workspace.persist_already_projected`) when the run already has a
/// snapshot or files in `persist/`.
pub fn project(
    chat_persist_dir: &Path,
    workspace: &Workspace,
) -> Result<PersistBase, WorkspaceError> {
    let anchor = workspace.anchor();
    let already = |what: &str| {
        WorkspaceError::system(
            codes::PERSIST_ALREADY_PROJECTED,
            format!(
                "persist was already projected into this run ({what}); reopen it with PersistBase::load"
            ),
        )
    };
    if fs::open_node(anchor, PERSIST_SNAPSHOT_FILE, PERSIST_SNAPSHOT_FILE)?.is_some() {
        return Err(already("input/persist_snapshot.json exists"));
    }
    if !files_under(anchor, PERSIST_ROOT)?.is_empty() {
        return Err(already("persist/ holds files"));
    }
    let mut base = PersistBase::default();
    if let Some(chat) = open_chat_dir(chat_persist_dir)? {
        lock(chat.as_fd(), FlockOperation::LockShared, chat_persist_dir)?;
        let persist = WorkspacePath::parse(PERSIST_ROOT, PathUse::Directory)?;
        for (path, _) in files_under(chat.as_fd(), "").map_err(in_chat(chat_persist_dir))? {
            let bytes = read_all(chat.as_fd(), path.as_str()).map_err(in_chat(chat_persist_dir))?;
            let mut target = persist.clone();
            for segment in path.segments() {
                target = target.join(segment);
            }
            if workspace.place(&target, &bytes, Placement::CreateOnly)? == Placed::Exists {
                return Err(already(&format!("{target} appeared meanwhile")));
            }
            let mut kept = WorkspacePath::parse(PERSIST_BASE_DIR, PathUse::Directory)?;
            for segment in path.segments() {
                kept = kept.join(segment);
            }
            workspace.place(&kept, &bytes, Placement::Replace)?;
            toolhost_core::crash_point::hit("persist_projected");
            base.files
                .insert(path.as_str().to_owned(), sha256_hex(&bytes));
        }
        // The lock goes with the descriptor.
    }
    let mut json = serde_json::to_vec_pretty(&base)
        .map_err(|error| WorkspaceError::io("serialize", PERSIST_SNAPSHOT_FILE, error))?;
    json.push(b'\n');
    let snapshot = WorkspacePath::parse(PERSIST_SNAPSHOT_FILE, PathUse::File)?;
    if workspace.place(&snapshot, &json, Placement::CreateOnly)? == Placed::Exists {
        return Err(already("input/persist_snapshot.json appeared meanwhile"));
    }
    Ok(base)
}

/// The base of a run resumed before, at or after its projection: loaded
/// when the projection was recorded; else made again, after removing the
/// copies a crash left in `persist/` half-way through it. Only for a run
/// whose loop has not gone past its projection (the loop's first step):
/// then nothing but the projection wrote into `persist/`.
pub fn project_again(
    chat_persist_dir: &Path,
    workspace: &Workspace,
) -> Result<PersistBase, WorkspaceError> {
    let anchor = workspace.anchor();
    if fs::open_node(anchor, PERSIST_SNAPSHOT_FILE, PERSIST_SNAPSHOT_FILE)?.is_some() {
        return PersistBase::load(workspace);
    }
    // The kept base copies too: a file gone from the chat since must not
    // linger as a base.
    for root in [PERSIST_ROOT, PERSIST_BASE_DIR] {
        for (path, _) in files_under(anchor, root)? {
            fs::remove_file(anchor, &path)?;
        }
    }
    project(chat_persist_dir, workspace)
}

/// Copy the run's added and modified `persist/` files back into the chat's
/// persist directory (created if missing). Refused, with nothing written,
/// when the chat directory is no longer exactly `base`.
pub fn promote(
    workspace: &Workspace,
    chat_persist_dir: &Path,
    base: &PersistBase,
) -> Result<ChangeSet, WorkspaceError> {
    let anchor = workspace.anchor();
    let mut changes = Vec::new();
    for (path, _) in files_under(anchor, PERSIST_ROOT)? {
        let bytes = read_all(anchor, path.as_str())?;
        let sha256 = sha256_hex(&bytes);
        let relative = relative(&path).to_owned();
        let kind = match base.files.get(&relative) {
            None => ChangeKind::Added,
            Some(known) if *known != sha256 => ChangeKind::Modified,
            Some(_) => continue,
        };
        changes.push(PersistChange {
            path: relative,
            kind,
            sha256,
            bytes: bytes.len() as u64,
        });
    }

    // The intent first: a promotion a crash cut short is repeated from it,
    // and the files it already copied are recognised as its own.
    let intent = WorkspacePath::parse(PERSIST_PROMOTION_FILE, PathUse::File)?;
    let recorded = fs::read_file(
        anchor,
        PERSIST_PROMOTION_FILE,
        PERSIST_PROMOTION_FILE,
        u64::MAX,
    )?;
    let recorded_before = recorded.is_some();
    let changes = match recorded {
        Some(bytes) => {
            let recorded: ChangeSet = serde_json::from_slice(&bytes)
                .map_err(|error| WorkspaceError::io("parse", PERSIST_PROMOTION_FILE, error))?;
            if recorded.changes != changes {
                return Err(WorkspaceError::system(
                    codes::PERSIST_CONFLICT,
                    format!(
                        "persist/ no longer holds what {PERSIST_PROMOTION_FILE} recorded for its promotion; nothing was promoted"
                    ),
                ));
            }
            recorded.changes
        }
        None => {
            if changes.is_empty() {
                // Nothing to write, so nothing to conflict with.
                return Ok(ChangeSet { changes });
            }
            let mut json = serde_json::to_vec_pretty(&ChangeSet {
                changes: changes.clone(),
            })
            .map_err(|error| WorkspaceError::io("serialize", PERSIST_PROMOTION_FILE, error))?;
            json.push(b'\n');
            workspace.place(&intent, &json, Placement::CreateOnly)?;
            changes
        }
    };
    if changes.is_empty() {
        return Ok(ChangeSet { changes });
    }
    std::fs::create_dir_all(chat_persist_dir).map_err(|error| {
        WorkspaceError::io(
            "create chat persist directory",
            &chat_persist_dir.display().to_string(),
            error,
        )
    })?;
    let chat = open_chat_dir(chat_persist_dir)?.ok_or_else(|| {
        WorkspaceError::io(
            "open chat persist directory",
            &chat_persist_dir.display().to_string(),
            "vanished",
        )
    })?;
    lock(
        chat.as_fd(),
        FlockOperation::LockExclusive,
        chat_persist_dir,
    )?;
    // Each file must be the base's, or (a repeated promotion) already ours.
    let now = chat_state(chat.as_fd(), chat_persist_dir)?;
    let ours = |path: &str, sha: &str| {
        changes
            .iter()
            .any(|change| change.path == path && change.sha256 == sha)
    };
    let mut differing: Vec<&str> = now
        .iter()
        .filter(|(path, sha)| base.files.get(*path) != Some(sha) && !ours(path, sha))
        .map(|(path, _)| path.as_str())
        .chain(
            base.files
                .keys()
                .filter(|path| !now.contains_key(*path))
                .map(String::as_str),
        )
        .collect();
    if !differing.is_empty() {
        differing.sort_unstable();
        differing.truncate(10);
        return Err(WorkspaceError::system(
            codes::PERSIST_CONFLICT,
            format!(
                "the chat's persist directory {} changed since this run started (another run promoted meanwhile?): {}; nothing was promoted",
                chat_persist_dir.display(),
                differing.join(", ")
            ),
        ));
    }

    // A repeated promotion: the temp files the cut-short one staged are
    // debris (the exclusive lock says nobody else is staging).
    if recorded_before {
        let mut dirs: Vec<Vec<&str>> = vec![Vec::new()];
        for change in &changes {
            let mut segments: Vec<&str> = change.path.split('/').collect();
            segments.pop();
            if !dirs.contains(&segments) {
                dirs.push(segments);
            }
        }
        for segments in dirs {
            fs::remove_stale_temps(
                chat.as_fd(),
                &segments,
                &chat_persist_dir.display().to_string(),
            )
            .map_err(in_chat(chat_persist_dir))?;
        }
    }

    // Stage everything first: a failure here leaves the chat untouched
    // (dropping the staged files removes them). Files already in place (a
    // repeated promotion) are not written again.
    let mut staged = Vec::with_capacity(changes.len());
    for change in &changes {
        if now.get(&change.path) == Some(&change.sha256) {
            continue;
        }
        let bytes = read_all(anchor, &format!("{PERSIST_ROOT}/{}", change.path))?;
        let segments: Vec<&str> = change.path.split('/').collect();
        let file = Staged::new(
            chat.as_fd(),
            &segments,
            &bytes,
            TempSite::Beside,
            &change.path,
        )
        .map_err(in_chat(chat_persist_dir))?;
        let placement = if now.contains_key(&change.path) {
            Placement::Replace
        } else {
            Placement::CreateOnly
        };
        staged.push((file, placement));
    }
    for (index, (file, placement)) in staged.into_iter().enumerate() {
        if index == 1 {
            toolhost_core::crash_point::hit("persist_promoted");
        }
        if file
            .commit(chat.as_fd(), placement)
            .map_err(in_chat(chat_persist_dir))?
            == Placed::Exists
        {
            // Only a writer ignoring the lock can get here.
            return Err(WorkspaceError::system(
                codes::PERSIST_CONFLICT,
                format!(
                    "a file appeared in the chat's persist directory {} during promotion",
                    chat_persist_dir.display()
                ),
            ));
        }
    }
    Ok(ChangeSet { changes })
}
