//! Create-only, atomic audit files: tool arguments, tool results, snapshots.
//!
//! On Linux each file is written unnamed in its own directory and then
//! linked into place ([`create_linked`]: `O_TMPFILE` + `linkat`), relative
//! to the directory when the run holds it open. Elsewhere,
//! or where the file system has no `O_TMPFILE`, it is written to a temp file
//! in `<run>/.tmp` (same file system) and moved into place with
//! `persist_noclobber` (rename with NOREPLACE, or link + unlink). Either
//! way readers never see a partial file, and an existing file is never
//! overwritten. Under `Fsync` the file and its directory are synced before
//! returning; under `Batched` both wait for [`RunDirectory::sync`].

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tempfile::NamedTempFile;
use toolhost_core::{AgentToolResult, ToolId};

use crate::create::{Linked, create_linked, create_linked_in};
use crate::fsync::{SyncCounter, parent_dir};
use crate::journal::Durability;
use crate::layout::{LayoutError, RunLayout, RunPath};
use crate::run::RunDirectory;

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("{} already exists; create-only files are never overwritten", path.display())]
    AlreadyExists { path: PathBuf },
    #[error("call `{call_id}` was already stored at {}", path.display())]
    DuplicateCallId { call_id: String, path: PathBuf },
    #[error(
        "call `{call_id}` maps to {}, which already holds call `{existing_call_id}`",
        path.display()
    )]
    DigestCollision {
        call_id: String,
        existing_call_id: String,
        path: PathBuf,
    },
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("audit record for call `{call_id}` does not serialize: {source}")]
    Serialize {
        call_id: String,
        source: serde_json::Error,
    },
}

/// The directory a file goes into, held open, with the unnamed file made
/// ahead there when one waits (for a new file only).
pub(crate) struct HeldDir {
    dir: Arc<OwnedFd>,
    made: Option<OwnedFd>,
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> AuditError + '_ {
    move |source| AuditError::Io {
        path: path.to_owned(),
        source,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolArgsRecord<'a> {
    call_id: &'a str,
    tool_id: &'a ToolId,
    invocation_id: &'a str,
    round: u32,
    arguments: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResultRecord<'a> {
    invocation_id: &'a str,
    round: u32,
    result: &'a AgentToolResult,
}

/// How [`persist`] treats a file already at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// Audit facts: never overwritten (`AlreadyExists`).
    Refuse,
    /// Runtime state that changes (an invocation's read-state).
    Replace,
}

/// Write `bytes` to `relative` atomically: a new file linked into place
/// (relative to `held`, the file's directory when the caller holds it
/// open, with the unnamed file made ahead there if any), or a replacement
/// through a temp file in `.tmp/`. Parents must exist. Syncs the file
/// itself only when given a counter; the directory entry is the caller's
/// to sync.
pub(crate) fn persist(
    layout: &RunLayout,
    relative: &str,
    bytes: &[u8],
    sync_file: Option<&SyncCounter>,
    existing: Existing,
    held: Option<HeldDir>,
) -> Result<RunPath, AuditError> {
    let target = layout.resolve(relative)?;
    if existing == Existing::Refuse {
        let sync = |file: &fs::File| sync_file.map_or(Ok(()), |syncs| syncs.file(file));
        let linked = match (held, relative.rsplit_once('/')) {
            (Some(HeldDir { dir, made }), Some((_, name))) => {
                create_linked_in(dir.as_fd(), name, bytes, sync, made)
            }
            _ => create_linked(&target.absolute, bytes, sync),
        };
        match linked {
            Ok(Linked::Created) => return Ok(target),
            Ok(Linked::Unsupported) => {}
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                return Err(AuditError::AlreadyExists {
                    path: target.absolute,
                });
            }
            Err(source) => {
                return Err(AuditError::Io {
                    path: target.absolute,
                    source,
                });
            }
        }
    }
    let tmp_dir = layout.tmp_dir();
    // Dropped on every early return, which deletes the temp file.
    let mut temp = NamedTempFile::new_in(&tmp_dir).map_err(io_error(&tmp_dir))?;
    temp.write_all(bytes).map_err(io_error(temp.path()))?;
    if let Some(syncs) = sync_file {
        syncs.file(temp.as_file()).map_err(io_error(temp.path()))?;
    }
    let persisted = match existing {
        Existing::Refuse => temp.persist_noclobber(&target.absolute),
        Existing::Replace => temp.persist(&target.absolute),
    };
    match persisted {
        Ok(_) => Ok(target),
        // `error.file` (the temp file) is dropped here, and so removed.
        Err(error) if error.error.kind() == io::ErrorKind::AlreadyExists => {
            Err(AuditError::AlreadyExists {
                path: target.absolute,
            })
        }
        Err(error) => Err(AuditError::Io {
            path: target.absolute,
            source: error.error,
        }),
    }
}

/// `tool-args/call_<hex>.json`, as stored.
fn args_bytes(
    call_id: &str,
    tool_id: &ToolId,
    invocation_id: &str,
    round: u32,
    arguments: &Value,
) -> Result<Vec<u8>, AuditError> {
    let record = ToolArgsRecord {
        call_id,
        tool_id,
        invocation_id,
        round,
        arguments,
    };
    pretty(call_id, &record)
}

fn pretty(call_id: &str, record: &impl Serialize) -> Result<Vec<u8>, AuditError> {
    let mut bytes = serde_json::to_vec_pretty(record).map_err(|source| AuditError::Serialize {
        call_id: call_id.to_owned(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl RunDirectory {
    /// Atomically create `relative` (creating missing parent directories)
    /// with `bytes`; an existing file is left byte-for-byte unchanged and
    /// reported as `AlreadyExists`.
    pub fn write_create_only(&self, relative: &str, bytes: &[u8]) -> Result<(), AuditError> {
        self.write_create_only_at(relative, bytes).map(|_| ())
    }

    fn write_create_only_at(&self, relative: &str, bytes: &[u8]) -> Result<RunPath, AuditError> {
        self.write_at(relative, bytes, Existing::Refuse)
    }

    /// Write atomically with the run's durability: parents created, the file
    /// and its directory fsynced now (`Fsync`) or at the next sync (`Batched`).
    fn write_at(
        &self,
        relative: &str,
        bytes: &[u8],
        existing: Existing,
    ) -> Result<RunPath, AuditError> {
        // Validate before creating any directory for it.
        self.layout().resolve(relative)?;
        let syncs = self.journal().sync_counter();
        let fsync = (self.durability() == Durability::Fsync).then_some(syncs);
        let (mut changed_dirs, held) = self.ensure_parents(relative, existing)?;
        let target = persist(self.layout(), relative, bytes, fsync, existing, held)?;
        changed_dirs.push(parent_dir(&target.absolute).to_owned());
        if fsync.is_some() {
            for dir in &changed_dirs {
                syncs.dir(dir).map_err(io_error(dir))?;
            }
        } else {
            self.defer_sync(target.absolute.clone(), changed_dirs);
        }
        Ok(target)
    }

    /// Create the missing directories above `relative`; returns the
    /// directories whose entries changed and, when it is held open, the
    /// directory the file goes into with (for a new file) the unnamed file
    /// made ahead there.
    fn ensure_parents(
        &self,
        relative: &str,
        existing: Existing,
    ) -> Result<(Vec<PathBuf>, Option<HeldDir>), AuditError> {
        let Some((parent, _)) = relative.rsplit_once('/') else {
            return Ok((Vec::new(), None));
        };
        let mut dirs = self
            .audit_dirs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut changed = Vec::new();
        if !dirs.is_known(parent) {
            let mut dir = self.layout().root().to_path_buf();
            for segment in parent.split('/') {
                let next = dir.join(segment);
                match fs::create_dir(&next) {
                    Ok(()) => changed.push(dir),
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(source) => return Err(AuditError::Io { path: next, source }),
                }
                dir = next;
            }
            dirs.mark_known(parent);
        }
        let held = dirs.held(self.layout().root(), parent);
        let made = match (&held, existing) {
            (Some(_), Existing::Refuse) => dirs.take_unnamed(parent),
            _ => None,
        };
        Ok((changed, held.map(|dir| HeldDir { dir, made })))
    }

    /// Make the unnamed files of the next audit files ahead, one in each
    /// directory files keep going into (two so far, one since the last
    /// time: `tool-args/`, `tool-results/` of a serving run; not an
    /// invocation's snapshot directory): a host calls this when it has
    /// nothing else to do, and the next files in those directories are
    /// only written and linked. Returns how many were made; 0 where the
    /// file system has no `O_TMPFILE`.
    pub fn make_files_ahead(&self) -> usize {
        self.audit_dirs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .make_unnamed_ahead()
    }

    /// Atomically replace `relative` (a hidden runtime state file, e.g. an
    /// invocation's read-state) with `bytes`, creating parents as needed.
    pub fn replace_state_file(&self, relative: &str, bytes: &[u8]) -> Result<(), AuditError> {
        self.write_at(relative, bytes, Existing::Replace)
            .map(|_| ())
    }

    /// Store a call's arguments as `tool-args/call_<hex>.json`; returns the
    /// run-relative ref for `tool_call_requested.argumentsRef`.
    pub fn store_tool_args(
        &self,
        call_id: &str,
        tool_id: &ToolId,
        invocation_id: &str,
        round: u32,
        arguments: &Value,
    ) -> Result<String, AuditError> {
        let bytes = args_bytes(call_id, tool_id, invocation_id, round, arguments)?;
        let target = self.layout().tool_args(call_id);
        self.store_call_file(call_id, &target, &bytes, "/callId")
    }

    /// [`store_tool_args`](Self::store_tool_args) for a resumed run making
    /// a call again: a file already holding exactly these bytes (the call
    /// was requested before the interruption) is the same record, not a
    /// duplicate; different bytes still are.
    pub fn store_tool_args_again(
        &self,
        call_id: &str,
        tool_id: &ToolId,
        invocation_id: &str,
        round: u32,
        arguments: &Value,
    ) -> Result<String, AuditError> {
        let bytes = args_bytes(call_id, tool_id, invocation_id, round, arguments)?;
        let target = self.layout().tool_args(call_id);
        if fs::read(&target.absolute).is_ok_and(|existing| existing == bytes) {
            return Ok(target.relative);
        }
        self.store_call_file(call_id, &target, &bytes, "/callId")
    }

    /// [`write_create_only`](Self::write_create_only), where a file already
    /// holding exactly `bytes` counts as written (a resumed run writing a
    /// record again).
    pub fn write_create_only_again(&self, relative: &str, bytes: &[u8]) -> Result<(), AuditError> {
        let target = self.layout().resolve(relative)?;
        if fs::read(&target.absolute).is_ok_and(|existing| existing == bytes) {
            return Ok(());
        }
        self.write_create_only(relative, bytes)
    }

    /// Store a call's result as `tool-results/call_<hex>.json`; returns the
    /// run-relative ref for `tool_result_stored.path`.
    pub fn store_tool_result(
        &self,
        invocation_id: &str,
        round: u32,
        result: &AgentToolResult,
    ) -> Result<String, AuditError> {
        let record = ToolResultRecord {
            invocation_id,
            round,
            result,
        };
        let bytes = pretty(&result.call_id, &record)?;
        let target = self.layout().tool_result(&result.call_id);
        self.store_call_file(&result.call_id, &target, &bytes, "/result/callId")
    }

    /// Store an invocation's tool snapshot; create-only, so a snapshot is
    /// never replaced once the model may have seen it.
    pub fn write_snapshot(
        &self,
        invocation_id: &str,
        json_bytes: &[u8],
    ) -> Result<String, AuditError> {
        let target = self.layout().tool_snapshot(invocation_id)?;
        self.write_create_only_at(&target.relative, json_bytes)
            .map(|written| written.relative)
    }

    fn store_call_file(
        &self,
        call_id: &str,
        target: &RunPath,
        bytes: &[u8],
        call_id_pointer: &str,
    ) -> Result<String, AuditError> {
        match self.write_create_only_at(&target.relative, bytes) {
            Ok(written) => Ok(written.relative),
            Err(AuditError::AlreadyExists { path }) => {
                Err(classify_existing(call_id, path, call_id_pointer))
            }
            Err(error) => Err(error),
        }
    }
}

/// The stem is a 64-bit digest prefix, so an existing file is either the
/// same call stored twice or (very rarely) another call with the same stem.
/// An unreadable existing file stays a plain `AlreadyExists`.
fn classify_existing(call_id: &str, path: PathBuf, call_id_pointer: &str) -> AuditError {
    let existing = fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .and_then(|value| {
            value
                .pointer(call_id_pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    match existing {
        Some(existing) if existing == call_id => AuditError::DuplicateCallId {
            call_id: call_id.to_owned(),
            path,
        },
        Some(existing_call_id) => AuditError::DigestCollision {
            call_id: call_id.to_owned(),
            existing_call_id,
            path,
        },
        None => AuditError::AlreadyExists { path },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{TMP_DIR, audit_stem};
    use crate::manifest::{RootSpec, RunManifest};
    use crate::run::PER_ENTRY_SYNCS_AT_MOST as PER_ENTRY_SYNCS_AT_MOST_FOR_TESTS;
    use serde_json::json;
    use toolhost_core::{ToolCall, ToolOutcome, ToolSuccess};

    const PROFILE: &[u8] = b"{\"id\":\"default-writer\"}\n";

    fn run(dir: &Path, durability: Durability) -> RunDirectory {
        let mut roots = RootSpec::default_universe();
        roots.push(RootSpec::tool_results());
        let manifest = RunManifest::new("run_test", "default-writer", PROFILE, roots);
        RunDirectory::create(&dir.join("run"), manifest, PROFILE, durability).expect("create")
    }

    fn tool() -> ToolId {
        ToolId::builtin("dice.roll").expect("id")
    }

    fn result_for(call_id: &str) -> AgentToolResult {
        let invocation = ToolCall {
            call_id: call_id.into(),
            tool_id: tool(),
            arguments: json!({}),
            provider_metadata: Value::Null,
        };
        let success = ToolSuccess {
            content: "Rolled 4".into(),
            ..ToolSuccess::default()
        };
        AgentToolResult::from_outcome(&invocation, ToolOutcome::Success(success)).0
    }

    fn tmp_entries(run: &RunDirectory) -> usize {
        fs::read_dir(run.layout().root().join(TMP_DIR))
            .expect("tmp dir")
            .count()
    }

    #[test]
    fn a_second_write_fails_and_leaves_the_first_byte_identical() {
        for durability in [Durability::Fsync, Durability::Batched] {
            let dir = tempfile::tempdir().expect("tempdir");
            let run = run(dir.path(), durability);
            run.write_create_only("model-responses/r1.json", b"first")
                .expect("first");
            let error = run
                .write_create_only("model-responses/r1.json", b"second")
                .expect_err("second");
            assert!(
                matches!(&error, AuditError::AlreadyExists { path } if path.ends_with("model-responses/r1.json")),
                "{error:?}"
            );
            let path = run.layout().root().join("model-responses/r1.json");
            assert_eq!(fs::read(&path).expect("read"), b"first");

            let snapshot = run
                .write_snapshot("inv_root", b"{\"tools\":[]}")
                .expect("snapshot");
            assert_eq!(snapshot, "input/invocations/inv_root/tool_snapshot.json");
            assert!(matches!(
                run.write_snapshot("inv_root", b"{\"tools\":[1]}"),
                Err(AuditError::AlreadyExists { .. })
            ));
            assert_eq!(
                run.read_snapshot("inv_root").expect("read"),
                Some(b"{\"tools\":[]}".to_vec())
            );
            assert_eq!(tmp_entries(&run), 0, "no temp file left after failures");
        }
    }

    #[test]
    fn duplicate_call_ids_and_digest_collisions_are_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = run(dir.path(), Durability::Batched);
        let arguments = json!({"formula": "2d6"});
        let reference = run
            .store_tool_args("call_A", &tool(), "inv_root", 1, &arguments)
            .expect("store");
        assert_eq!(
            reference,
            format!("tool-args/{}.json", audit_stem("call_A"))
        );
        let path = run.layout().root().join(&reference);
        let first = fs::read(&path).expect("read");

        let error = run
            .store_tool_args("call_A", &tool(), "inv_root", 2, &json!({}))
            .expect_err("duplicate");
        assert!(
            matches!(&error, AuditError::DuplicateCallId { call_id, .. } if call_id == "call_A"),
            "{error:?}"
        );
        assert_eq!(fs::read(&path).expect("read"), first, "not overwritten");

        // Force a collision: call_B's stem already holds another call.
        let collided = run.layout().tool_args("call_B");
        run.write_create_only(&collided.relative, br#"{"callId":"call_Z"}"#)
            .expect("pre-write");
        let error = run
            .store_tool_args("call_B", &tool(), "inv_root", 1, &arguments)
            .expect_err("collision");
        assert!(
            matches!(
                &error,
                AuditError::DigestCollision { call_id, existing_call_id, .. }
                    if call_id == "call_B" && existing_call_id == "call_Z"
            ),
            "{error:?}"
        );
        assert_eq!(
            fs::read(&collided.absolute).expect("read"),
            br#"{"callId":"call_Z"}"#
        );

        // The same for results, where the id sits at result.callId.
        let stored = run
            .store_tool_result("inv_root", 1, &result_for("call_A"))
            .expect("store result");
        assert_eq!(
            stored,
            format!("tool-results/{}.json", audit_stem("call_A"))
        );
        assert!(matches!(
            run.store_tool_result("inv_root", 1, &result_for("call_A")),
            Err(AuditError::DuplicateCallId { .. })
        ));
        let collided = run.layout().tool_result("call_C");
        run.write_create_only(&collided.relative, br#"{"result":{"callId":"call_Y"}}"#)
            .expect("pre-write");
        assert!(matches!(
            run.store_tool_result("inv_root", 1, &result_for("call_C")),
            Err(AuditError::DigestCollision { existing_call_id, .. }) if existing_call_id == "call_Y"
        ));
        // An unreadable occupant is neither: a plain AlreadyExists.
        let garbage = run.layout().tool_args("call_D");
        run.write_create_only(&garbage.relative, b"not json")
            .expect("pre-write");
        assert!(matches!(
            run.store_tool_args("call_D", &tool(), "inv_root", 1, &arguments),
            Err(AuditError::AlreadyExists { .. })
        ));
        assert_eq!(tmp_entries(&run), 0);
    }

    #[test]
    fn a_hostile_call_id_becomes_a_safe_stem_and_stays_inside_the_json() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = run(dir.path(), Durability::Fsync);
        let call_id = format!("{}/../..\\ evil 呼び出し 工具", "x".repeat(1100));
        assert!(call_id.chars().count() > 1000);
        let reference = run
            .store_tool_args(&call_id, &tool(), "inv_root", 3, &json!({"a": 1}))
            .expect("store");
        let names: Vec<String> = fs::read_dir(run.layout().root().join("tool-args"))
            .expect("dir")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .into_string()
                    .expect("utf-8")
            })
            .collect();
        assert_eq!(names.len(), 1);
        let name = &names[0];
        assert_eq!(reference, format!("tool-args/{name}"));
        assert_eq!(name.len(), "call_".len() + 16 + ".json".len(), "{name}");
        assert!(name.starts_with("call_") && name.ends_with(".json"));
        assert!(
            name[5..21]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        let record: Value =
            serde_json::from_slice(&fs::read(run.layout().root().join(&reference)).expect("read"))
                .expect("json");
        assert_eq!(
            record,
            json!({
                "callId": call_id,
                "toolId": "builtin:dice.roll",
                "invocationId": "inv_root",
                "round": 3,
                "arguments": {"a": 1}
            })
        );
        // Nothing escaped the run directory.
        let run_entries = fs::read_dir(dir.path()).expect("dir").count();
        assert_eq!(run_entries, 1);
    }

    #[test]
    fn tool_results_are_stored_with_their_invocation_and_round() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = run(dir.path(), Durability::Batched);
        let result = result_for("call_1");
        let reference = run
            .store_tool_result("inv_root", 2, &result)
            .expect("store");
        let text = fs::read_to_string(run.layout().root().join(&reference)).expect("read");
        assert!(
            text.ends_with("}\n") && text.contains("\n  \"round\": 2"),
            "pretty: {text}"
        );
        let record: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(record["invocationId"], "inv_root");
        assert_eq!(record["round"], 2);
        assert_eq!(
            serde_json::from_value::<AgentToolResult>(record["result"].clone()).expect("result"),
            result
        );
    }

    #[test]
    fn no_temp_file_is_left_after_success_or_failure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = run(dir.path(), Durability::Batched);
        assert_eq!(tmp_entries(&run), 0, "after creation");
        run.write_create_only("agent-results/a.json", b"{}")
            .expect("write");
        assert_eq!(tmp_entries(&run), 0, "after success");
        assert!(
            run.write_create_only("agent-results/a.json", b"{}")
                .is_err()
        );
        assert_eq!(tmp_entries(&run), 0, "after AlreadyExists");
        // A target whose parent is a file fails in persist, not before.
        run.write_create_only("agent-results/file", b"x")
            .expect("write");
        assert!(matches!(
            run.write_create_only("agent-results/file/child", b"x"),
            Err(AuditError::Io { .. })
        ));
        assert_eq!(tmp_entries(&run), 0, "after an I/O failure");
    }

    fn inode(path: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).expect("stat"))
    }

    fn waiting_inode(run: &RunDirectory, dir: &str) -> Option<u64> {
        run.audit_dirs.lock().expect("lock").unnamed_inode(dir)
    }

    /// Whether unnamed files can be made in `dir` (`O_TMPFILE`).
    fn unnamed_files_work(dir: &Path) -> bool {
        let held: OwnedFd = fs::File::open(dir).expect("open dir").into();
        crate::create::open_unnamed(&held).is_some()
    }

    /// This process's descriptors of unnamed files in `dir`: `/proc` shows
    /// one as `<dir>/#<inode> (deleted)`.
    fn unnamed_open_in(dir: &Path) -> usize {
        let prefix = format!("{}/#", dir.display());
        fs::read_dir("/proc/self/fd")
            .expect("/proc/self/fd")
            .flatten()
            .filter(|entry| {
                fs::read_link(entry.path()).is_ok_and(|target| {
                    let target = target.to_string_lossy();
                    target.starts_with(&prefix) && target.ends_with(" (deleted)")
                })
            })
            .count()
    }

    #[test]
    fn files_made_ahead_become_the_next_files_and_leave_no_trace_unused() {
        for durability in [Durability::Batched, Durability::Fsync] {
            let dir = tempfile::tempdir().expect("tempdir");
            if !unnamed_files_work(dir.path()) {
                eprintln!("skipped: no O_TMPFILE on this file system");
                return;
            }
            let run = run(dir.path(), durability);
            let root = run.layout().root().canonicalize().expect("root");
            assert_eq!(run.make_files_ahead(), 0, "no directory written yet");
            run.write_snapshot("inv_root", b"{}").expect("snapshot");
            for call in ["call_0", "call_1"] {
                run.store_tool_args(call, &tool(), "inv_root", 1, &json!({}))
                    .expect("args");
                run.store_tool_result("inv_root", 1, &result_for(call))
                    .expect("result");
                if call == "call_0" {
                    assert_eq!(run.make_files_ahead(), 0, "one file is not a habit");
                }
            }
            assert_eq!(
                run.make_files_ahead(),
                2,
                "one in tool-args/, one in tool-results/, none beside the snapshot"
            );
            assert_eq!(run.make_files_ahead(), 0, "nothing written since");
            let listed = |sub: &str| fs::read_dir(root.join(sub)).expect("ls").count();
            assert_eq!((listed("tool-args"), listed("tool-results")), (2, 2));
            assert_eq!(unnamed_open_in(&root.join("tool-args")), 1, "unnamed, open");

            let ahead = waiting_inode(&run, "tool-args").expect("waiting");
            let syncs = run.sync_calls();
            let stored = run
                .store_tool_args("call_2", &tool(), "inv_root", 2, &json!({"n": 2}))
                .expect("args");
            let path = root.join(&stored);
            assert_eq!(inode(&path), ahead, "the file made ahead got the name");
            // Fsync: the file and its directory before returning, as always.
            let expected_syncs = if durability == Durability::Fsync {
                2
            } else {
                0
            };
            assert_eq!(run.sync_calls() - syncs, expected_syncs, "{durability:?}");
            let record: Value =
                serde_json::from_slice(&fs::read(&path).expect("read")).expect("json");
            assert_eq!(record["arguments"], json!({"n": 2}));
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &fs::metadata(&path).expect("meta").permissions(),
            );
            assert_eq!(mode & 0o777, 0o600);
            assert_eq!(waiting_inode(&run, "tool-args"), None, "used once");
            assert_eq!(unnamed_open_in(&root.join("tool-args")), 0);

            // One waits in tool-results/ still; a clash there uses it up and
            // changes nothing.
            let earlier = root.join(run.layout().tool_result("call_1").relative);
            let first = fs::read(&earlier).expect("read");
            assert!(matches!(
                run.store_tool_result("inv_root", 1, &result_for("call_1")),
                Err(AuditError::DuplicateCallId { .. })
            ));
            assert_eq!(waiting_inode(&run, "tool-results"), None);
            assert_eq!(fs::read(&earlier).expect("read"), first);
            assert_eq!((listed("tool-args"), listed("tool-results")), (3, 2));
            assert_eq!(unnamed_open_in(&root.join("tool-results")), 0);

            // Made ahead and never used: closed with the run, nothing named.
            assert_eq!(run.make_files_ahead(), 2);
            assert_eq!(unnamed_open_in(&root.join("tool-args")), 1);
            assert_eq!(unnamed_open_in(&root.join("tool-results")), 1);
            drop(run);
            assert_eq!(unnamed_open_in(&root.join("tool-args")), 0);
            assert_eq!(unnamed_open_in(&root.join("tool-results")), 0);
            assert_eq!((listed("tool-args"), listed("tool-results")), (3, 2));
            assert_eq!(fs::read_dir(root.join(TMP_DIR)).expect("tmp").count(), 0);
        }
    }

    #[test]
    fn paths_that_leave_the_run_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = run(dir.path(), Durability::Batched);
        for bad in ["/tmp/x", "../x", "output/../../x", ""] {
            assert!(
                matches!(
                    run.write_create_only(bad, b"x"),
                    Err(AuditError::Layout(LayoutError::InvalidRelativePath { .. }))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            run.write_snapshot("../inv", b"{}"),
            Err(AuditError::Layout(LayoutError::InvalidSegment { .. }))
        ));
        assert!(!dir.path().join("x").exists());
    }

    #[test]
    fn batched_defers_file_and_directory_syncs_to_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut run = run(dir.path(), Durability::Batched);
        run.write_snapshot("inv_child", b"{}").expect("snapshot");
        let (files, dirs) = run.pending_sync();
        assert_eq!(files, 1);
        // The new invocation directory's parent, and the snapshot's directory.
        assert_eq!(dirs, 2);
        run.sync().expect("sync");
        assert_eq!(run.pending_sync(), (0, 0));

        let dir = tempfile::tempdir().expect("tempdir");
        let run = self::run(dir.path(), Durability::Fsync);
        run.write_snapshot("inv_child", b"{}").expect("snapshot");
        assert_eq!(run.pending_sync(), (0, 0), "fsync syncs at once");
    }

    /// One call's audit trail as the runtime writes it: arguments, four
    /// events, result.
    fn store_call(run: &mut RunDirectory, call_id: &str) {
        run.store_tool_args(call_id, &tool(), "inv_root", 1, &json!({"formula": "2d6"}))
            .expect("args");
        for event in [
            "tool_call_requested",
            "tool_call_started",
            "tool_result_stored",
        ] {
            run.journal_mut()
                .append(crate::journal::NewEvent::new(
                    crate::journal::Level::Info,
                    event,
                    crate::journal::EventScope::root(),
                ))
                .expect("append");
        }
        run.store_tool_result("inv_root", 1, &result_for(call_id))
            .expect("result");
        run.journal_mut()
            .append(crate::journal::NewEvent::new(
                crate::journal::Level::Info,
                "tool_call_completed",
                crate::journal::EventScope::root(),
            ))
            .expect("append");
    }

    #[test]
    fn batched_calls_make_no_sync_calls_and_a_sync_point_a_bounded_number() {
        for calls in [1_usize, 3, 40] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut run = run(dir.path(), Durability::Batched);
            let before = run.sync_calls();
            for n in 0..calls {
                store_call(&mut run, &format!("call_{n}"));
            }
            assert_eq!(
                run.sync_calls(),
                before,
                "{calls} calls: no sync call per call"
            );
            let (files, dirs) = run.pending_sync();
            assert!(
                files + dirs <= PER_ENTRY_SYNCS_AT_MOST_FOR_TESTS,
                "{calls} calls: what waits for the sync stays bounded ({files} + {dirs})"
            );
            run.sync().expect("sync");
            let at_sync_point = run.sync_calls() - before;
            // Few entries: one fsync each (2 files a call, then the two
            // directories, then the journal); many: one syncfs, which
            // covers the journal too.
            let expected = if 2 * calls + 2 <= PER_ENTRY_SYNCS_AT_MOST_FOR_TESTS {
                2 * calls as u64 + 2 + 1
            } else {
                1
            };
            assert_eq!(at_sync_point, expected, "{calls} calls");
            assert_eq!(run.pending_sync(), (0, 0));
            let synced = run.sync_calls();
            run.sync().expect("sync again");
            assert_eq!(run.sync_calls(), synced, "nothing left to sync");
        }
    }

    #[test]
    fn fsync_mode_syncs_every_file_its_directory_and_every_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut run = run(dir.path(), Durability::Fsync);
        store_call(&mut run, "call_first");
        let before = run.sync_calls();
        store_call(&mut run, "call_second");
        // Two files with their directory each, four events.
        assert_eq!(run.sync_calls() - before, 2 * 2 + 4);
        assert_eq!(run.pending_sync(), (0, 0));
    }
}
