//! `RunDirectory`: one run's directory, its manifest and its open journal.
//!
//! Creating a run lays out every directory, writes `input/resolved_profile.json`
//! and then `run.json` (both create-only and synced, so a present manifest
//! means complete input), and creates the journal. Opening a run validates
//! `run.json`, reopens (and if needed repairs) the journal under its lock and
//! clears temp files a crash left in `.tmp/`.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::audit::{AuditError, Existing, persist};
use crate::fsync::{SyncCounter, parent_dir};
use crate::journal::{Durability, Journal, JournalError, Recovery};
use crate::layout::{INPUT_DIR, LayoutError, RunLayout, SYSTEM_DIRS};
use crate::manifest::{ManifestError, RunManifest, sha256_hex};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error("run directory {} is not empty", path.display())]
    RootNotEmpty { path: PathBuf },
    #[error("run directory {} exists and is not a directory", path.display())]
    RootNotDirectory { path: PathBuf },
    #[error("resolved profile sha256 is {found}, but the manifest records {expected}")]
    ProfileDigestMismatch { expected: String, found: String },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |source| RunError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Past this many deferred files and directories, a sync point flushes the
/// file system at once (`syncfs`) instead of one `fsync` each. Below it a
/// run's sync stays its own and does not wait for other writers' data.
pub(crate) const PER_ENTRY_SYNCS_AT_MOST: usize = 8;

/// Whether this platform has a whole-file-system sync (`syncfs`); elsewhere
/// every deferred entry is kept and synced one by one.
const WHOLE_FILE_SYSTEM_SYNCS: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// What [`RunDirectory::sync_pending`] flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushed {
    /// The deferred entries one by one (or none were deferred).
    Entries,
    /// `syncfs`: the journal's written events too.
    FileSystem,
}

/// Audit files written under `Batched` whose fsync (file, then directory
/// entries) waits for the next `sync()`. Past
/// [`PER_ENTRY_SYNCS_AT_MOST`] entries the next sync is a whole-file-system
/// one anyway, so where there is one the entries stop being recorded: a
/// long-lived run (an MCP session) keeps no list that grows with its calls.
#[derive(Debug, Default)]
struct PendingSync {
    files: BTreeSet<PathBuf>,
    dirs: BTreeSet<PathBuf>,
    /// More than the per-entry bound was written since the last sync.
    whole_file_system: bool,
}

impl PendingSync {
    fn is_empty(&self) -> bool {
        !self.whole_file_system && self.files.is_empty() && self.dirs.is_empty()
    }

    fn clear(&mut self) {
        self.files.clear();
        self.dirs.clear();
        self.whole_file_system = false;
    }
}

#[derive(Debug)]
pub struct RunDirectory {
    layout: RunLayout,
    manifest: RunManifest,
    journal: Journal,
    /// Behind a lock so audit writes can take `&self`.
    pending: Mutex<PendingSync>,
    /// The directories audit files go into: known to exist, the busy ones
    /// held open.
    pub(crate) audit_dirs: Mutex<crate::audit_dirs::AuditDirs>,
}

impl RunDirectory {
    /// Create a run at `root`, which must not exist or be an empty directory.
    /// `durability` is recorded in the manifest (replacing
    /// `manifest.journal.durability`), so a reopened run keeps it.
    pub fn create(
        root: &Path,
        mut manifest: RunManifest,
        resolved_profile_json: &[u8],
        durability: Durability,
    ) -> Result<Self, RunError> {
        manifest.journal.durability = durability;
        manifest.validate()?;
        let found = sha256_hex(resolved_profile_json);
        if found != manifest.profile.sha256 {
            return Err(RunError::ProfileDigestMismatch {
                expected: manifest.profile.sha256.clone(),
                found,
            });
        }
        prepare_root(root)?;
        let layout = RunLayout::new(root);
        let roots = manifest.roots.iter().map(|root| root.path.as_str());
        for dir in SYSTEM_DIRS.into_iter().chain(roots) {
            let path = root.join(dir);
            fs::create_dir_all(&path).map_err(io_error(&path))?;
        }
        // Input first: the profile, its entry in input/ and input/'s in
        // the run directory all durable before run.json is linked, so a
        // run.json that exists always has its input beside it. Synced
        // whatever the durability; creation happens once.
        let syncs = SyncCounter::default();
        let profile = layout.resolved_profile();
        persist(
            &layout,
            &profile.relative,
            resolved_profile_json,
            Some(&syncs),
            Existing::Refuse,
            None,
        )?;
        for dir in [root.join(INPUT_DIR), root.to_owned()] {
            syncs.dir(&dir).map_err(io_error(&dir))?;
        }
        let manifest_path = layout.manifest();
        persist(
            &layout,
            &manifest_path.relative,
            &manifest.to_json_bytes(),
            Some(&syncs),
            Existing::Refuse,
            None,
        )?;
        // Creating the journal syncs the run directory again, which makes
        // run.json's and events.jsonl's entries durable at once.
        let journal = Journal::create_counted(
            layout.journal().absolute,
            manifest.run_id.clone(),
            durability,
            syncs.clone(),
        )?;
        let parent = parent_dir(root);
        syncs.dir(parent).map_err(io_error(parent))?;
        Ok(Self {
            layout,
            manifest,
            journal,
            pending: Mutex::default(),
            audit_dirs: Mutex::default(),
        })
    }

    /// Reopen a run: validate `run.json`, reopen the journal (one writer at a
    /// time: a second opener gets `JournalError::InUse`), cut a torn tail.
    pub fn open(root: &Path) -> Result<(Self, Recovery), RunError> {
        let layout = RunLayout::new(root);
        let manifest_path = layout.manifest().absolute;
        let bytes = fs::read(&manifest_path).map_err(io_error(&manifest_path))?;
        let manifest = RunManifest::from_json_bytes(&bytes)?;
        let (journal, recovery) = Journal::open_counted(
            layout.journal().absolute,
            manifest.run_id.clone(),
            manifest.journal.durability,
            SyncCounter::default(),
        )?;
        // Only after taking the journal lock: no other writer of this run
        // can have a temp file in flight.
        clear_stale_temp_files(&layout.tmp_dir())?;
        let run = Self {
            layout,
            manifest,
            journal,
            pending: Mutex::default(),
            audit_dirs: Mutex::default(),
        };
        Ok((run, recovery))
    }

    pub fn layout(&self) -> &RunLayout {
        &self.layout
    }

    pub fn manifest(&self) -> &RunManifest {
        &self.manifest
    }

    pub fn durability(&self) -> Durability {
        self.journal.durability()
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    /// Make everything written so far durable: the audit files and directory
    /// entries deferred under `Batched` first, then the journal that names
    /// them. Deferred entries are kept if a sync fails.
    pub fn sync(&mut self) -> Result<(), RunError> {
        self.sync_audit_files()?;
        self.journal.sync()?;
        Ok(())
    }

    /// Make the deferred audit files and directory entries durable, before
    /// an event that must not outlive them (`run_completed`, …) is appended
    /// and synced.
    pub fn sync_audit_files(&mut self) -> Result<(), RunError> {
        if self.sync_pending()? == Flushed::FileSystem {
            self.journal.note_synced();
        }
        Ok(())
    }

    /// The sync calls made for this run so far (journal, audit files,
    /// directories): how tests hold the durability policy to its word.
    pub fn sync_calls(&self) -> u64 {
        self.journal.sync_counter().calls()
    }

    /// Sync the deferred entries: one by one while they are few, else the
    /// whole file system in one `syncfs`, so a sync point costs a bounded
    /// number of calls however many tool calls came before it.
    fn sync_pending(&self) -> Result<Flushed, RunError> {
        let mut pending = self.lock_pending();
        if pending.is_empty() {
            return Ok(Flushed::Entries);
        }
        let syncs = self.journal.sync_counter();
        let deferred = pending.files.len() + pending.dirs.len();
        if pending.whole_file_system || deferred > PER_ENTRY_SYNCS_AT_MOST {
            let root = self.layout.root();
            match syncs.filesystem(root) {
                Ok(()) => {
                    pending.clear();
                    return Ok(Flushed::FileSystem);
                }
                // No `syncfs`: entry by entry, unless they were not kept.
                Err(error)
                    if error.kind() == io::ErrorKind::Unsupported && !pending.whole_file_system => {
                }
                Err(source) => {
                    return Err(RunError::Io {
                        path: root.to_owned(),
                        source,
                    });
                }
            }
        }
        for file in &pending.files {
            fs::File::open(file)
                .and_then(|opened| syncs.file(&opened))
                .map_err(io_error(file))?;
        }
        pending.files.clear();
        for dir in &pending.dirs {
            syncs.dir(dir).map_err(io_error(dir))?;
        }
        pending.dirs.clear();
        Ok(Flushed::Entries)
    }

    pub(crate) fn defer_sync(&self, file: PathBuf, dirs: Vec<PathBuf>) {
        let mut pending = self.lock_pending();
        if pending.whole_file_system {
            return;
        }
        pending.files.insert(file);
        pending.dirs.extend(dirs);
        if WHOLE_FILE_SYSTEM_SYNCS
            && pending.files.len() + pending.dirs.len() > PER_ENTRY_SYNCS_AT_MOST
        {
            pending.files.clear();
            pending.dirs.clear();
            pending.whole_file_system = true;
        }
    }

    fn lock_pending(&self) -> MutexGuard<'_, PendingSync> {
        // The set stays consistent even if a holder panicked.
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[cfg(test)]
    pub(crate) fn pending_sync(&self) -> (usize, usize) {
        let pending = self.lock_pending();
        (pending.files.len(), pending.dirs.len())
    }

    /// The resolved profile, checked against the digest in `run.json`.
    pub fn read_resolved_profile(&self) -> Result<Vec<u8>, RunError> {
        let path = self.layout.resolved_profile().absolute;
        let bytes = fs::read(&path).map_err(io_error(&path))?;
        let found = sha256_hex(&bytes);
        if found != self.manifest.profile.sha256 {
            return Err(RunError::ProfileDigestMismatch {
                expected: self.manifest.profile.sha256.clone(),
                found,
            });
        }
        Ok(bytes)
    }

    /// An invocation's tool snapshot, `None` if none was written.
    pub fn read_snapshot(&self, invocation_id: &str) -> Result<Option<Vec<u8>>, RunError> {
        let path = self.layout.tool_snapshot(invocation_id)?.absolute;
        read_if_present(path)
    }

    /// A run file (`input/loop.json`, a stored model reply), `None` if it
    /// was never written.
    pub fn read_file(&self, relative: &str) -> Result<Option<Vec<u8>>, RunError> {
        read_if_present(self.layout.resolve(relative)?.absolute)
    }

    /// An invocation's stored read-state, if it has one.
    pub fn read_read_state(&self, invocation_id: &str) -> Result<Option<Vec<u8>>, RunError> {
        let path = self.layout.read_state(invocation_id)?.absolute;
        read_if_present(path)
    }
}

fn read_if_present(path: std::path::PathBuf) -> Result<Option<Vec<u8>>, RunError> {
    match fs::read(&path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(RunError::Io { path, source }),
    }
}

impl Drop for RunDirectory {
    fn drop(&mut self) {
        // The journal syncs itself when dropped; deferred audit syncs are ours.
        match self.sync_pending() {
            Ok(Flushed::FileSystem) => self.journal.note_synced(),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(run = %self.layout.root().display(), %error, "deferred audit fsync failed");
            }
        }
    }
}

fn prepare_root(root: &Path) -> Result<(), RunError> {
    match fs::metadata(root) {
        Ok(metadata) if !metadata.is_dir() => Err(RunError::RootNotDirectory {
            path: root.to_owned(),
        }),
        Ok(_) => {
            let mut entries = fs::read_dir(root).map_err(io_error(root))?;
            if entries.next().is_some() {
                Err(RunError::RootNotEmpty {
                    path: root.to_owned(),
                })
            } else {
                Ok(())
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            fs::create_dir_all(root).map_err(io_error(root))
        }
        Err(source) => Err(RunError::Io {
            path: root.to_owned(),
            source,
        }),
    }
}

/// Temp files are never referenced by anything; a crash between write and
/// persist leaves them behind.
fn clear_stale_temp_files(tmp_dir: &Path) -> Result<(), RunError> {
    let entries = match fs::read_dir(tmp_dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return fs::create_dir_all(tmp_dir).map_err(io_error(tmp_dir));
        }
        Err(source) => {
            return Err(RunError::Io {
                path: tmp_dir.to_owned(),
                source,
            });
        }
    };
    let mut removed = 0usize;
    for entry in entries {
        let path = entry.map_err(io_error(tmp_dir))?.path();
        fs::remove_file(&path).map_err(io_error(&path))?;
        removed += 1;
    }
    if removed > 0 {
        tracing::info!(tmp = %tmp_dir.display(), removed, "removed stale temp files");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{RunCompleted, RunStarted, ToolCallOutcome, ToolCallRequested};
    use crate::journal::{EventScope, Level, NewEvent, read_events};
    use crate::layout::{HIDDEN, TMP_DIR};
    use crate::manifest::RootSpec;
    use serde_json::json;
    use toolhost_core::{AgentToolResult, ToolCall, ToolId, ToolOutcome, ToolSuccess};

    const PROFILE: &[u8] = b"{\"id\":\"default-writer\"}\n";
    const RUN_ID: &str = "run_20261203T022709Z_0123abcd";

    fn manifest() -> RunManifest {
        let mut roots = RootSpec::default_universe();
        roots.push(RootSpec::tool_results());
        RunManifest::new(RUN_ID, "default-writer", PROFILE, roots)
    }

    #[test]
    fn create_lays_out_the_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("runs").join(RUN_ID);
        let run =
            RunDirectory::create(&root, manifest(), PROFILE, Durability::Fsync).expect("create");
        // Each a device flush on a disk: the profile, input/, the run
        // directory, run.json, the run directory again (by the journal's
        // creation, after run.json), its parent.
        assert_eq!(run.sync_calls(), 6);
        for entry in [
            "input/invocations",
            "tool-args",
            "tool-results",
            "model-responses",
            "agent-results",
            ".tmp",
            "output",
            "scratch",
            "plan",
            "summaries",
            "persist",
        ] {
            assert!(root.join(entry).is_dir(), "{entry}");
        }
        assert_eq!(
            fs::read(root.join("input/resolved_profile.json")).expect("profile"),
            PROFILE
        );
        assert_eq!(run.read_resolved_profile().expect("profile"), PROFILE);
        let on_disk =
            RunManifest::from_json_bytes(&fs::read(root.join("run.json")).expect("manifest"))
                .expect("valid");
        assert_eq!(&on_disk, run.manifest());
        assert_eq!(on_disk.journal.durability, Durability::Fsync, "recorded");
        assert_eq!(fs::read(root.join("events.jsonl")).expect("journal"), b"");
        let mut names: Vec<String> = fs::read_dir(&root)
            .expect("dir")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .into_string()
                    .expect("utf-8")
            })
            .collect();
        names.sort();
        for hidden in HIDDEN {
            assert!(names.iter().any(|name| name == hidden), "{hidden}");
        }
        assert_eq!(names.len(), HIDDEN.len() + 6, "{names:?}");
    }

    #[test]
    fn create_accepts_only_an_absent_or_empty_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).expect("mkdir");
        RunDirectory::create(&empty, manifest(), PROFILE, Durability::Batched).expect("empty");

        let full = dir.path().join("full");
        fs::create_dir(&full).expect("mkdir");
        fs::write(full.join("keep.txt"), b"mine").expect("write");
        assert!(matches!(
            RunDirectory::create(&full, manifest(), PROFILE, Durability::Batched),
            Err(RunError::RootNotEmpty { .. })
        ));
        assert_eq!(fs::read_dir(&full).expect("dir").count(), 1, "untouched");

        let file = dir.path().join("file");
        fs::write(&file, b"x").expect("write");
        assert!(matches!(
            RunDirectory::create(&file, manifest(), PROFILE, Durability::Batched),
            Err(RunError::RootNotDirectory { .. })
        ));
        // An existing run is not empty either.
        assert!(matches!(
            RunDirectory::create(&empty, manifest(), PROFILE, Durability::Batched),
            Err(RunError::RootNotEmpty { .. })
        ));
    }

    #[test]
    fn create_checks_the_manifest_and_the_profile_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("run");
        assert!(matches!(
            RunDirectory::create(&root, manifest(), b"{}", Durability::Batched),
            Err(RunError::ProfileDigestMismatch { .. })
        ));
        let mut bad = manifest();
        bad.run_id = "run/../x".into();
        assert!(matches!(
            RunDirectory::create(&root, bad, PROFILE, Durability::Batched),
            Err(RunError::Manifest(ManifestError::InvalidRunId(_)))
        ));
        assert!(!root.exists(), "nothing created before validation");
    }

    #[test]
    fn open_continues_the_journal_and_keeps_the_durability() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("run");
        let mut run =
            RunDirectory::create(&root, manifest(), PROFILE, Durability::Fsync).expect("create");
        let started = RunStarted::new(run.manifest());
        assert_eq!(run.journal_mut().record(&started).expect("record"), 1);
        drop(run);

        // A temp file left by a crash is cleared on open.
        fs::write(root.join(TMP_DIR).join(".tmpStale"), b"half").expect("stale");
        let (mut run, recovery) = RunDirectory::open(&root).expect("open");
        assert_eq!(recovery.last_seq, 1);
        assert_eq!(recovery.torn_bytes, None);
        assert_eq!(run.durability(), Durability::Fsync);
        assert_eq!(fs::read_dir(root.join(TMP_DIR)).expect("tmp").count(), 0);
        assert_eq!(
            run.journal_mut().record(&RunCompleted {}).expect("record"),
            2
        );

        assert!(matches!(
            RunDirectory::open(&root),
            Err(RunError::Journal(JournalError::InUse { .. }))
        ));
        drop(run);
        let types: Vec<String> = read_events(root.join("events.jsonl"))
            .expect("read")
            .into_iter()
            .map(|event| event.r#type)
            .collect();
        assert_eq!(types, ["run_started", "run_completed"]);
    }

    #[test]
    fn open_refuses_a_bad_manifest_and_reads_detect_tampering() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("run");
        drop(
            RunDirectory::create(&root, manifest(), PROFILE, Durability::Batched).expect("create"),
        );

        let (run, _) = RunDirectory::open(&root).expect("open");
        assert_eq!(run.read_snapshot("inv_root").expect("read"), None);
        assert!(matches!(
            run.read_snapshot("../x"),
            Err(RunError::Layout(LayoutError::InvalidSegment { .. }))
        ));
        drop(run);

        // Tampered profile: caught when read.
        let profile = root.join("input/resolved_profile.json");
        fs::write(&profile, b"{\"id\":\"other\"}").expect("tamper");
        let (run, _) = RunDirectory::open(&root).expect("open");
        assert!(matches!(
            run.read_resolved_profile(),
            Err(RunError::ProfileDigestMismatch { .. })
        ));
        drop(run);

        let manifest_path = root.join("run.json");
        let mut value: serde_json::Value =
            serde_json::from_slice(&fs::read(&manifest_path).expect("read")).expect("json");
        value["manifestVersion"] = json!(7);
        fs::write(&manifest_path, serde_json::to_vec(&value).expect("bytes")).expect("write");
        assert!(matches!(
            RunDirectory::open(&root),
            Err(RunError::Manifest(ManifestError::UnsupportedVersion { .. }))
        ));
        fs::remove_file(&manifest_path).expect("remove");
        assert!(matches!(
            RunDirectory::open(&root),
            Err(RunError::Io { .. })
        ));
    }

    /// Every file of a run directory, relative path → bytes.
    fn snapshot_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
        fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
            for entry in fs::read_dir(dir).expect("dir") {
                let path = entry.expect("entry").path();
                let relative = path
                    .strip_prefix(root)
                    .expect("inside")
                    .to_string_lossy()
                    .into_owned();
                if path.is_dir() {
                    out.push((format!("{relative}/"), Vec::new()));
                    walk(root, &path, out);
                } else {
                    out.push((relative, fs::read(&path).expect("read")));
                }
            }
        }
        let mut out = Vec::new();
        walk(root, root, &mut out);
        out.sort();
        out
    }

    #[test]
    fn fsync_and_batched_produce_the_same_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut manifest = manifest();
        manifest.created_at = "2026-12-03T02:27:09.123Z".into();
        let tool = ToolId::builtin("dice.roll").expect("id");
        let mut trees = Vec::new();
        for durability in [Durability::Fsync, Durability::Batched] {
            let root = dir.path().join(format!("{durability:?}"));
            let mut run =
                RunDirectory::create(&root, manifest.clone(), PROFILE, durability).expect("create");
            let mut n = 0u64;
            run.journal_mut().set_stamp(move || {
                n += 1;
                (format!("evt_{n:032x}"), "2026-12-03T02:27:10.000Z".into())
            });
            let started = RunStarted::new(run.manifest());
            run.journal_mut().record(&started).expect("started");
            run.write_snapshot("inv_root", b"{\"tools\":[]}")
                .expect("snapshot");
            let arguments_ref = run
                .store_tool_args("call_1", &tool, "inv_root", 1, &json!({"formula": "d6"}))
                .expect("args");
            run.journal_mut()
                .record(&ToolCallRequested {
                    round: 1,
                    invocation_id: "inv_root".into(),
                    call_id: "call_1".into(),
                    tool_id: tool.clone(),
                    snapshot_id: "snap_1".into(),
                    name: "dice.roll".into(),
                    arguments_ref,
                })
                .expect("started");
            let invocation = ToolCall {
                call_id: "call_1".into(),
                tool_id: tool.clone(),
                arguments: json!({"formula": "d6"}),
                provider_metadata: serde_json::Value::Null,
            };
            let (result, _) = AgentToolResult::from_outcome(
                &invocation,
                ToolOutcome::Success(ToolSuccess {
                    content: "Rolled 4".into(),
                    ..ToolSuccess::default()
                }),
            );
            run.store_tool_result("inv_root", 1, &result)
                .expect("result");
            ToolCallOutcome::from_result(1, "inv_root", "snap_1", &result, 5, None)
                .record(run.journal_mut())
                .expect("completed");
            run.journal_mut()
                .append(NewEvent::new(Level::Info, "note", EventScope::root()))
                .expect("note");
            run.sync().expect("sync");
            drop(run);
            trees.push(snapshot_tree(&root));
        }
        let (fsync, batched) = (&trees[0], &trees[1]);
        assert!(fsync.len() > 15, "{fsync:?}");
        // The durability itself is recorded in run.json; everything else matches.
        let without_manifest = |tree: &Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
            tree.iter()
                .filter(|(path, _)| path != "run.json")
                .cloned()
                .collect()
        };
        assert_eq!(without_manifest(fsync), without_manifest(batched));
        let manifests: Vec<RunManifest> = trees
            .iter()
            .map(|tree| {
                let bytes = &tree
                    .iter()
                    .find(|(path, _)| path == "run.json")
                    .expect("run.json")
                    .1;
                RunManifest::from_json_bytes(bytes).expect("manifest")
            })
            .collect();
        let mut normalized = manifests[0].clone();
        normalized.journal.durability = Durability::Batched;
        assert_eq!(normalized, manifests[1]);
    }
}
