//! `Workspace`: one run directory as tools see it, shared by every
//! invocation of the run.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::{Mode, OFlags};
use serde::Serialize;
use sha2::{Digest, Sha256};
use toolhost_core::WorkMeter;
use toolhost_journal::layout::TMP_DIR;

use crate::error::WorkspaceError;
use crate::fs::{self, Node, Placed, Placement, TempSite, WalkBounds, WalkKind};
use crate::path::{PathUse, WorkspacePath};
use crate::roots::WorkspaceRoots;

/// `workspace.list_files` goes at most this deep.
pub const MAX_LIST_DEPTH: usize = 4;
/// `workspace.search_files` defaults.
pub const DEFAULT_WALK_DEPTH: usize = 8;
pub const DEFAULT_WALK_FILES: usize = 5_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceLimits {
    /// Largest file a tool may read, or a write may produce.
    pub max_file_bytes: u64,
    /// Most entries one listing examines before it stops (`truncated`); it
    /// bounds the memory and time of a listing of a huge tree.
    pub max_list_scan: usize,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 8 * 1024 * 1024,
            max_list_scan: 100_000,
        }
    }
}

/// A text file as read now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TextFile {
    /// Normalized workspace path.
    pub path: String,
    pub text: String,
    /// Lowercase hex sha256 of the bytes.
    pub sha256: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Directory,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Normalized workspace path, no trailing `/`.
    pub path: String,
    pub kind: EntryKind,
    /// File size; 0 for a directory.
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listing {
    pub entries: Vec<Entry>,
    /// More entries exist than were returned.
    pub truncated: bool,
}

/// The repository-level guard of [`Workspace::write_text`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteGuard {
    Unchecked,
    MustNotExist,
    MustMatchSha256(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardedWrite {
    Written {
        previous_sha256: Option<String>,
        sha256: String,
    },
    /// The guard did not hold; nothing was written.
    Conflict { actual_sha256: Option<String> },
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub struct Workspace {
    run_dir: PathBuf,
    dir: OwnedFd,
    roots: WorkspaceRoots,
    limits: WorkspaceLimits,
    /// Per-path write locks, shared with every narrowed view of this
    /// workspace so writes to one file serialize across invocations.
    locks: Arc<Mutex<HashMap<String, Arc<Mutex<()>>>>>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("run_dir", &self.run_dir)
            .field("roots", &self.roots)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Workspace {
    /// Open the run directory once; every later access is relative to this
    /// descriptor, so renaming or replacing `run_dir` afterwards changes
    /// nothing. The run directory path itself is the host's and is trusted.
    pub fn open(
        run_dir: impl AsRef<Path>,
        roots: WorkspaceRoots,
        limits: WorkspaceLimits,
    ) -> Result<Self, WorkspaceError> {
        let run_dir = run_dir.as_ref().to_owned();
        let dir = rustix::fs::open(
            &run_dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| {
            WorkspaceError::io("open run directory", &run_dir.display().to_string(), errno)
        })?;
        Ok(Self {
            run_dir,
            dir,
            roots,
            limits,
            locks: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// The same run directory seen through fewer roots: what an invocation
    /// whose profile narrows the run's roots may reach (a delegated agent, a
    /// handoff target). Roots outside `visible` are hidden, writes only under
    /// `writable`; nothing the run hides becomes visible. Shares the
    /// directory and the write locks.
    pub fn narrowed(
        &self,
        visible: &[String],
        writable: &[String],
    ) -> Result<Self, WorkspaceError> {
        self.with_roots(self.roots.narrowed(visible, writable))
    }

    /// The same run directory without `tool-results/`
    /// ([`WorkspaceRoots::without_tool_results`]).
    pub fn without_tool_results(&self) -> Result<Self, WorkspaceError> {
        self.with_roots(self.roots.without_tool_results())
    }

    /// A view through `roots`, sharing the directory and the write locks.
    fn with_roots(&self, roots: WorkspaceRoots) -> Result<Self, WorkspaceError> {
        let dir = self.dir.try_clone().map_err(|error| {
            WorkspaceError::io(
                "reopen run directory",
                &self.run_dir.display().to_string(),
                error,
            )
        })?;
        Ok(Self {
            run_dir: self.run_dir.clone(),
            dir,
            roots,
            limits: self.limits.clone(),
            locks: Arc::clone(&self.locks),
        })
    }

    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    pub fn roots(&self) -> &WorkspaceRoots {
        &self.roots
    }

    pub fn limits(&self) -> &WorkspaceLimits {
        &self.limits
    }

    pub(crate) fn anchor(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// Run `f` holding the write lock of `path` (one per normalized path,
    /// shared by every session of this workspace).
    pub(crate) fn with_path_lock<R>(&self, path: &WorkspacePath, f: impl FnOnce() -> R) -> R {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(locks.entry(path.as_str().to_owned()).or_default())
        };
        let _held = lock.lock().unwrap_or_else(PoisonError::into_inner);
        f()
    }

    /// The current bytes and sha of a file, `None` when it does not exist.
    pub(crate) fn read_bytes(
        &self,
        path: &WorkspacePath,
    ) -> Result<Option<(Vec<u8>, String)>, WorkspaceError> {
        let bytes = fs::read_file(
            self.anchor(),
            path.as_str(),
            path.as_str(),
            self.limits.max_file_bytes,
        )?;
        Ok(bytes.map(|bytes| {
            let sha = sha256_hex(&bytes);
            (bytes, sha)
        }))
    }

    /// The current text of a file, `None` when it does not exist.
    pub(crate) fn read_existing(
        &self,
        path: &WorkspacePath,
    ) -> Result<Option<TextFile>, WorkspaceError> {
        let Some((bytes, sha256)) = self.read_bytes(path)? else {
            return Ok(None);
        };
        let text =
            String::from_utf8(bytes).map_err(|_| WorkspaceError::file_not_text(path.as_str()))?;
        Ok(Some(TextFile {
            path: path.as_str().to_owned(),
            text,
            sha256,
        }))
    }

    /// Write `bytes` to `path` atomically (temp file in `.tmp/`, fsync,
    /// rename). No visibility or size check: callers check (model paths) or
    /// own the path (runtime files such as `input/persist_snapshot.json`).
    pub(crate) fn place(
        &self,
        path: &WorkspacePath,
        bytes: &[u8],
        placement: Placement,
    ) -> Result<Placed, WorkspaceError> {
        let segments: Vec<&str> = path.segments().collect();
        fs::write_file(
            self.anchor(),
            &segments,
            bytes,
            TempSite::Dir(&[TMP_DIR]),
            placement,
            path.as_str(),
        )
    }

    /// `workspace.file_too_large` when a write would produce `bytes` bytes
    /// over the limit.
    pub(crate) fn check_size(
        &self,
        path: &WorkspacePath,
        bytes: usize,
    ) -> Result<(), WorkspaceError> {
        if bytes as u64 > self.limits.max_file_bytes {
            return Err(WorkspaceError::file_too_large(
                path.as_str(),
                self.limits.max_file_bytes,
                "would be",
            ));
        }
        Ok(())
    }

    /// A file's text, for a tool to show (the caller records what it showed
    /// through [`crate::WorkspaceSession::record_read`]).
    pub fn read_text(&self, path: &str) -> Result<TextFile, WorkspaceError> {
        let path = WorkspacePath::parse(path, PathUse::File)?;
        self.roots.check_visible(&path)?;
        self.read_existing(&path)?
            .ok_or_else(|| WorkspaceError::file_not_found(path.as_str()))
    }

    /// `workspace.list_files`: what lies under `path` (`""` = every visible
    /// root), `depth` levels deep (clamped to 1..=4; the tool validates it),
    /// directories first then by path, at most `limit` entries. Only
    /// visible roots are ever entered, so hidden entries never take a place
    /// under the limit. A file path lists that file.
    pub fn list(&self, path: &str, depth: usize, limit: usize) -> Result<Listing, WorkspaceError> {
        self.list_metered(path, depth, limit, &WorkMeter::unbounded())
    }

    /// [`Self::list`] for one call: every entry read is charged to `meter`
    /// (stopping at the call's deadline), and at most
    /// [`WorkspaceLimits::max_list_scan`] names are read in all.
    pub fn list_metered(
        &self,
        path: &str,
        depth: usize,
        limit: usize,
        meter: &WorkMeter,
    ) -> Result<Listing, WorkspaceError> {
        let depth = depth.clamp(1, MAX_LIST_DEPTH);
        let mut entries = Vec::new();
        let mut truncated = false;
        let scan = self.limits.max_list_scan;
        let walked = self.visit(path, depth, meter, &mut |path, kind, bytes| {
            if entries.len() >= scan {
                truncated = true;
                return ControlFlow::Break(());
            }
            entries.push(entry(path, kind, bytes));
            ControlFlow::Continue(())
        })?;
        truncated |= walked.is_break();
        entries.sort_by(|a, b| {
            (a.kind != EntryKind::Directory, &a.path)
                .cmp(&(b.kind != EntryKind::Directory, &b.path))
        });
        if entries.len() > limit {
            entries.truncate(limit);
            truncated = true;
        }
        Ok(Listing { entries, truncated })
    }

    /// Files only, for search: under `path` (`""` = every visible root), at
    /// most `max_depth` levels deep, at most `max_files` files (visited in
    /// path order; `truncated` when more exist), sorted by path. Defaults:
    /// [`DEFAULT_WALK_DEPTH`], [`DEFAULT_WALK_FILES`].
    pub fn walk_files(
        &self,
        path: &str,
        max_depth: usize,
        max_files: usize,
    ) -> Result<Listing, WorkspaceError> {
        self.walk_files_metered(path, max_depth, max_files, &WorkMeter::unbounded())
    }

    /// [`Self::walk_files`] for one call: every entry read is charged to
    /// `meter`, and directories count against
    /// [`WorkspaceLimits::max_list_scan`] like files, so a tree of empty
    /// directories cannot keep the walk going.
    pub fn walk_files_metered(
        &self,
        path: &str,
        max_depth: usize,
        max_files: usize,
        meter: &WorkMeter,
    ) -> Result<Listing, WorkspaceError> {
        let mut entries = Vec::new();
        let mut truncated = false;
        let mut examined = 0_usize;
        let scan = self.limits.max_list_scan;
        let walked = self.visit(path, max_depth.max(1), meter, &mut |path, kind, bytes| {
            examined += 1;
            if examined > scan {
                truncated = true;
                return ControlFlow::Break(());
            }
            if kind == WalkKind::File {
                if entries.len() >= max_files {
                    truncated = true;
                    return ControlFlow::Break(());
                }
                entries.push(entry(path, kind, bytes));
            }
            ControlFlow::Continue(())
        })?;
        truncated |= walked.is_break();
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Listing { entries, truncated })
    }

    /// Visit what lies under `raw`; `Break` when the visitor stopped or a
    /// directory was too large to read whole.
    fn visit(
        &self,
        raw: &str,
        depth: usize,
        meter: &WorkMeter,
        visit: &mut dyn FnMut(&WorkspacePath, WalkKind, u64) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, WorkspaceError> {
        let path = WorkspacePath::parse(raw, PathUse::Directory)?;
        self.roots.check_visible(&path)?;
        let names_left = std::cell::Cell::new(self.limits.max_list_scan);
        let bounds = WalkBounds::new(meter, &names_left);
        if path.is_root() {
            for root in self.roots.visible() {
                let root = WorkspacePath::root().join(root);
                // A visible root that does not exist yet is simply empty.
                if let Some(node) = fs::open_node(self.anchor(), root.as_str(), root.as_str())?
                    && self
                        .visit_node(node, &root, depth, bounds, visit)?
                        .is_break()
                {
                    return Ok(ControlFlow::Break(()));
                }
            }
            return Ok(ControlFlow::Continue(()));
        }
        match fs::open_node(self.anchor(), path.as_str(), path.as_str())? {
            None => Err(WorkspaceError::path_not_found(path.as_str())),
            Some(Node::File { bytes, .. }) => Ok(visit(&path, WalkKind::File, bytes)),
            Some(Node::Directory(fd)) => fs::walk(fd, &path, depth, false, bounds, visit),
        }
    }

    /// A node found `depth` levels from the start: itself, then its children.
    fn visit_node(
        &self,
        node: Node,
        path: &WorkspacePath,
        depth: usize,
        bounds: WalkBounds<'_>,
        visit: &mut dyn FnMut(&WorkspacePath, WalkKind, u64) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, WorkspaceError> {
        match node {
            Node::File { bytes, .. } => Ok(visit(path, WalkKind::File, bytes)),
            Node::Directory(fd) => {
                if visit(path, WalkKind::Directory, 0).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                fs::walk(fd, path, depth - 1, false, bounds, visit)
            }
        }
    }

    /// Write a text file on the runtime's behalf (a captured direct output,
    /// a task result…) under the model's path rules: the path must be
    /// writable. Serialized with every session write of that path.
    pub fn write_text(
        &self,
        path: &str,
        text: &str,
        guard: WriteGuard,
    ) -> Result<GuardedWrite, WorkspaceError> {
        let path = WorkspacePath::parse(path, PathUse::File)?;
        self.roots.check_writable(&path)?;
        self.check_size(&path, text.len())?;
        self.with_path_lock(&path, || {
            let previous = self.read_bytes(&path)?.map(|(_, sha)| sha);
            let placement = match (&guard, &previous) {
                (WriteGuard::MustNotExist, Some(_)) => {
                    return Ok(GuardedWrite::Conflict {
                        actual_sha256: previous,
                    });
                }
                (WriteGuard::MustMatchSha256(expected), actual)
                    if actual.as_deref() != Some(expected.as_str()) =>
                {
                    return Ok(GuardedWrite::Conflict {
                        actual_sha256: previous,
                    });
                }
                (_, None) => Placement::CreateOnly,
                (_, Some(_)) => Placement::Replace,
            };
            match self.place(&path, text.as_bytes(), placement)? {
                Placed::Done => Ok(GuardedWrite::Written {
                    previous_sha256: previous,
                    sha256: sha256_hex(text.as_bytes()),
                }),
                Placed::Exists => Ok(GuardedWrite::Conflict {
                    actual_sha256: self.read_bytes(&path)?.map(|(_, sha)| sha),
                }),
            }
        })
    }
}

fn entry(path: &WorkspacePath, kind: WalkKind, bytes: u64) -> Entry {
    Entry {
        path: path.as_str().to_owned(),
        kind: match kind {
            WalkKind::File => EntryKind::File,
            WalkKind::Directory => EntryKind::Directory,
        },
        bytes,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::error::codes;
    use crate::fs::BEFORE_COMMIT;

    fn setup() -> (tempfile::TempDir, PathBuf, Workspace) {
        let temp = tempfile::tempdir().unwrap();
        let run = temp.path().join("run");
        std::fs::create_dir_all(run.join("output/d")).unwrap();
        std::fs::create_dir_all(run.join(".tmp")).unwrap();
        std::fs::create_dir_all(temp.path().join("outside")).unwrap();
        let workspace = Workspace::open(
            &run,
            WorkspaceRoots::default_run(),
            WorkspaceLimits::default(),
        )
        .unwrap();
        (temp, run, workspace)
    }

    fn with_hook<R>(hook: impl FnMut() + 'static, f: impl FnOnce() -> R) -> R {
        BEFORE_COMMIT.with(|slot| *slot.borrow_mut() = Some(Box::new(hook)));
        let result = f();
        BEFORE_COMMIT.with(|slot| *slot.borrow_mut() = None);
        result
    }

    #[test]
    fn a_parent_swapped_for_a_symlink_between_check_and_use_is_refused() {
        let (temp, run, workspace) = setup();
        let outside = temp.path().join("outside");
        let (run_hook, outside_hook) = (run.clone(), outside.clone());
        let error = with_hook(
            move || {
                // The real directory moves away; a symlink to the outside
                // takes its place.
                std::fs::rename(run_hook.join("output/d"), run_hook.join("scratch-d")).unwrap();
                symlink(&outside_hook, run_hook.join("output/d")).unwrap();
            },
            || workspace.write_text("output/d/f.md", "pwned", WriteGuard::Unchecked),
        )
        .unwrap_err();
        assert_eq!(error.code(), codes::SYMLINK_FOUND, "{error}");
        assert!(error.is_system());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(run.join("scratch-d")).unwrap().count(), 0);
        assert_eq!(std::fs::read_dir(run.join(".tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_parent_removed_between_check_and_use_is_refused() {
        let (_temp, run, workspace) = setup();
        let run_hook = run.clone();
        let error = with_hook(
            move || std::fs::remove_dir(run_hook.join("output/d")).unwrap(),
            || workspace.write_text("output/d/f.md", "x", WriteGuard::Unchecked),
        )
        .unwrap_err();
        assert_eq!(error.code(), codes::SYMLINK_FOUND, "{error}");
        assert_eq!(std::fs::read_dir(run.join(".tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_file_created_meanwhile_wins_over_a_create_only_write() {
        let (_temp, run, workspace) = setup();
        let run_hook = run.clone();
        let outcome = with_hook(
            move || std::fs::write(run_hook.join("output/new.md"), "theirs").unwrap(),
            || workspace.write_text("output/new.md", "ours", WriteGuard::MustNotExist),
        )
        .unwrap();
        assert_eq!(
            outcome,
            GuardedWrite::Conflict {
                actual_sha256: Some(sha256_hex(b"theirs"))
            }
        );
        assert_eq!(
            std::fs::read_to_string(run.join("output/new.md")).unwrap(),
            "theirs"
        );
        assert_eq!(std::fs::read_dir(run.join(".tmp")).unwrap().count(), 0);
    }

    #[test]
    fn a_symlink_created_meanwhile_at_the_target_is_refused() {
        let (temp, run, workspace) = setup();
        let secret = temp.path().join("outside/secret");
        std::fs::write(&secret, "secret").unwrap();
        let (run_hook, secret_hook) = (run.clone(), secret.clone());
        let error = with_hook(
            move || symlink(&secret_hook, run_hook.join("output/new.md")).unwrap(),
            || workspace.write_text("output/new.md", "ours", WriteGuard::MustNotExist),
        )
        .unwrap_err();
        assert_eq!(error.code(), codes::SYMLINK_FOUND);
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    }

    #[test]
    fn write_text_guards() {
        let (_temp, run, workspace) = setup();
        let written = workspace
            .write_text("output/a.md", "one", WriteGuard::MustNotExist)
            .unwrap();
        assert_eq!(
            written,
            GuardedWrite::Written {
                previous_sha256: None,
                sha256: sha256_hex(b"one")
            }
        );
        assert_eq!(
            workspace
                .write_text("output/a.md", "two", WriteGuard::MustNotExist)
                .unwrap(),
            GuardedWrite::Conflict {
                actual_sha256: Some(sha256_hex(b"one"))
            }
        );
        assert!(matches!(
            workspace
                .write_text(
                    "output/a.md",
                    "two",
                    WriteGuard::MustMatchSha256("0".repeat(64))
                )
                .unwrap(),
            GuardedWrite::Conflict { .. }
        ));
        assert!(matches!(
            workspace
                .write_text(
                    "output/a.md",
                    "two",
                    WriteGuard::MustMatchSha256(sha256_hex(b"one"))
                )
                .unwrap(),
            GuardedWrite::Written { .. }
        ));
        workspace
            .write_text("output/a.md", "three", WriteGuard::Unchecked)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(run.join("output/a.md")).unwrap(),
            "three"
        );
        let error = workspace
            .write_text("tool-results/x.json", "{}", WriteGuard::Unchecked)
            .unwrap_err();
        assert_eq!(error.code(), codes::PATH_NOT_WRITABLE);
    }
}
