//! A run directory kept in the cluster, so that any node can rebuild it: a
//! checkpoint before every journal append that follows a change. Each
//! file's bytes are a blob named by their sha256 (`blobs/<sha256>`: the same
//! name always holds the same bytes, so create-only costs nothing and a
//! file unchanged since the last checkpoint is not sent again); a
//! checkpoint (`checkpoints.<seq>.<token>`, create-only) maps every file of
//! the directory to its blob, as the directory was just before the owner
//! holding lease `token` appended the journal line `seq`. The journal
//! itself is the run log, not a file here.
//!
//! Rebuilding takes the latest checkpoint whose line was appended by the
//! same owner — a stale owner may have pushed a checkpoint whose line was
//! then refused — and the log: every file a line names was written before
//! the line, so it is in the checkpoint pushed before that line; what was
//! written after the last line is lost like a crash before the write, and
//! the resume redoes it (docs/runs.md).
//!
//! Workspace files change in place (`output/main.md` written twice): they
//! are checkpointed by content, which is why checkpoints map paths to blobs
//! rather than storing files under their own names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use toolhost_journal::sha256_hex;

use crate::files::MAX_FILE_BYTES;
use crate::run_log::LogEntry;
use crate::{Cluster, ClusterError, RunFiles, RunKey, RunLog};

/// Most files a run directory may hold to be mirrored.
pub const MAX_FILES: usize = 100_000;
/// Left out: the journal is the run log; `.tmp/` holds half-written files.
const SKIPPED: [&str; 2] = [
    toolhost_journal::layout::JOURNAL_FILE,
    toolhost_journal::layout::TMP_DIR,
];

/// What a checkpoint holds: run-relative path (`/`-separated) → sha256.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkpoint {
    /// The journal line this checkpoint comes before.
    pub seq: u64,
    pub files: BTreeMap<String, String>,
}

/// What this node knows of a file it pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    len: u64,
    modified: Option<SystemTime>,
    sha256: String,
    /// Its modification time was older than the listing that read it by
    /// more than a tick of the file system's clock, so a later write of
    /// the same length cannot carry the same time (git's "racy" rule).
    settled: bool,
}

/// More than the file system's timestamp granularity (a kernel tick).
const TIMESTAMP_TICK: std::time::Duration = std::time::Duration::from_millis(20);

/// A run directory's pushes to the cluster, by its owner.
pub struct RunMirror {
    files: RunFiles,
    root: PathBuf,
    /// The owner's lease token.
    token: u64,
    seen: BTreeMap<String, Seen>,
    /// The directory as the last checkpoint describes it.
    last: Option<Checkpoint>,
}

impl RunMirror {
    pub fn new(files: RunFiles, root: impl Into<PathBuf>, token: u64) -> Self {
        Self {
            files,
            root: root.into(),
            token,
            seen: BTreeMap::new(),
            last: None,
        }
    }

    /// If the directory changed since the last checkpoint, send the changed
    /// files and a checkpoint for the journal line `seq`; `true` if one was
    /// sent.
    pub async fn push(&mut self, seq: u64) -> Result<bool, ClusterError> {
        let root = self.root.clone();
        let listed_at = SystemTime::now();
        // Blocking reads, like the journal write this push comes before.
        let listed = list_files(&root)?;
        let mut checkpoint = Checkpoint {
            seq,
            files: BTreeMap::new(),
        };
        for (name, len, modified) in listed {
            let unchanged = self
                .seen
                .get(&name)
                .filter(|seen| seen.settled && seen.len == len && seen.modified == modified);
            let sha256 = match unchanged {
                Some(seen) => seen.sha256.clone(),
                None => {
                    let path = root.join(&name);
                    let bytes = read_bounded(&path)?;
                    let sha256 = sha256_hex(&bytes);
                    self.files
                        .create(&format!("blobs/{sha256}"), Bytes::from(bytes))
                        .await?;
                    self.seen.insert(
                        name.clone(),
                        Seen {
                            len,
                            modified,
                            sha256: sha256.clone(),
                            settled: modified
                                .is_some_and(|modified| modified + TIMESTAMP_TICK < listed_at),
                        },
                    );
                    sha256
                }
            };
            checkpoint.files.insert(name, sha256);
        }
        self.seen
            .retain(|name, _| checkpoint.files.contains_key(name));
        if self
            .last
            .as_ref()
            .is_some_and(|last| last.files == checkpoint.files)
        {
            return Ok(false);
        }
        let body = serde_json::to_vec(&checkpoint)
            .map_err(|error| ClusterError::nats("encoding a checkpoint", error))?;
        self.files
            .create(&checkpoint_name(seq, self.token), Bytes::from(body))
            .await?;
        self.last = Some(checkpoint);
        Ok(true)
    }

    /// Rebuild `run`'s directory at `dir` (which must not exist) from its
    /// latest checkpoint and its journal. `None` when the cluster holds no
    /// journal of it.
    pub async fn rebuild(
        cluster: &Cluster,
        run: &RunKey,
        dir: &Path,
    ) -> Result<Option<Checkpoint>, ClusterError> {
        let entries = RunLog::read_entries(cluster, run).await?;
        if entries.is_empty() {
            return Ok(None);
        }
        let files = cluster.files(run);
        let checkpoint = latest_checkpoint(&files, &entries)
            .await?
            .unwrap_or_default();
        let io = |what: &str, error: std::io::Error| {
            ClusterError::nats(format!("rebuilding {run}: {what}"), error)
        };
        std::fs::create_dir(dir).map_err(|error| io("the run directory", error))?;
        for (name, sha256) in &checkpoint.files {
            let relative = safe_relative(name)?;
            let bytes = blob(&files, run, name, sha256).await?;
            let path = dir.join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|error| io(name, error))?;
            }
            write_new(&path, &bytes).map_err(|error| io(name, error))?;
        }
        let journal: Vec<u8> = entries
            .iter()
            .flat_map(|entry| entry.line.iter().copied())
            .collect();
        write_new(&dir.join(toolhost_journal::layout::JOURNAL_FILE), &journal)
            .map_err(|error| io("the journal", error))?;
        Ok(Some(checkpoint))
    }
}

/// What a node's read copy of a run holds ([`RunMirror::sync_into`]).
#[derive(Debug, Default)]
pub struct ReadCopy {
    /// The stream sequence of the last journal line copied (0: none yet).
    head: u64,
    /// `(seq, token)` of every line copied.
    appended: BTreeSet<(u64, u64)>,
    /// The checkpoint its files come from.
    checkpoint: Option<String>,
    files: BTreeMap<String, String>,
}

impl ReadCopy {
    /// Nothing copied yet.
    pub fn is_empty(&self) -> bool {
        self.head == 0
    }
}

impl RunMirror {
    /// Bring the read copy of `run` at `dir` up to the cluster's state: the
    /// files of the latest checkpoint written where they changed (each
    /// replaced whole, by a rename), files gone from it removed, then the
    /// journal lines stored since appended to its `events.jsonl` — so a
    /// reader following that file sees it only grow, and every file a line
    /// names is there before the line. `false` when the cluster has no
    /// journal of `run`. `copy` is what earlier syncs of `dir` did; with a
    /// new one, whatever is at `dir` (an earlier process's copy, or one
    /// forgotten) is removed first.
    pub async fn sync_into(
        cluster: &Cluster,
        run: &RunKey,
        dir: &Path,
        copy: &mut ReadCopy,
    ) -> Result<bool, ClusterError> {
        let io = |what: &str, error: std::io::Error| {
            ClusterError::nats(format!("copying {run}: {what}"), error)
        };
        if copy.is_empty() {
            match std::fs::remove_dir_all(dir) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io("clearing an old copy", error));
                }
                _ => {}
            }
        }
        let entries = RunLog::read_entries_after(cluster, run, copy.head).await?;
        if entries.is_empty() {
            return Ok(!copy.is_empty());
        }
        std::fs::create_dir_all(dir).map_err(|error| io("its directory", error))?;
        copy.appended
            .extend(entries.iter().map(|entry| (entry.seq, entry.token)));
        let files = cluster.files(run);
        let latest = latest_checkpoint_name(&files, &copy.appended).await?;
        if let Some(name) = latest.filter(|name| copy.checkpoint.as_ref() != Some(name)) {
            let checkpoint = read_checkpoint(&files, &name).await?;
            for (path, sha256) in &checkpoint.files {
                if copy.files.get(path) == Some(sha256) {
                    continue;
                }
                let relative = safe_relative(path)?;
                let bytes = blob(&files, run, path, sha256).await?;
                replace(&dir.join(relative), &bytes).map_err(|error| io(path, error))?;
            }
            for gone in copy
                .files
                .keys()
                .filter(|path| !checkpoint.files.contains_key(*path))
            {
                let relative = safe_relative(gone)?;
                match std::fs::remove_file(dir.join(relative)) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        return Err(io(gone, error));
                    }
                    _ => {}
                }
            }
            copy.files = checkpoint.files;
            copy.checkpoint = Some(name);
        }
        let journal: Vec<u8> = entries
            .iter()
            .flat_map(|entry| entry.line.iter().copied())
            .collect();
        append(&dir.join(toolhost_journal::layout::JOURNAL_FILE), &journal)
            .map_err(|error| io("the journal", error))?;
        copy.head = entries.last().map_or(copy.head, |entry| entry.stream_seq);
        Ok(true)
    }
}

/// Write `bytes` as `path`, replacing it whole: a temp file beside it,
/// renamed over it.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let parent = path
        .parent()
        .ok_or_else(|| std::io::Error::other("a file with no directory"))?;
    std::fs::create_dir_all(parent)?;
    let mut temp = tempfile::Builder::new()
        .prefix(".copy.")
        .tempfile_in(parent)?;
    temp.write_all(bytes)?;
    temp.persist(path).map_err(|error| error.error)?;
    Ok(())
}

/// Add `bytes` at the end of `path` (made if missing).
fn append(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?
        .write_all(bytes)
}

fn checkpoint_name(seq: u64, token: u64) -> String {
    format!("checkpoints.{seq:012}.{token}")
}

/// The name of the checkpoint with the largest seq whose line was appended
/// by the owner that pushed it — `appended` holds each line's `(seq,
/// token)` — if any.
async fn latest_checkpoint_name(
    files: &RunFiles,
    appended: &BTreeSet<(u64, u64)>,
) -> Result<Option<String>, ClusterError> {
    let names = files.names_under("checkpoints").await?;
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let (seq, token) = name.strip_prefix("checkpoints.")?.split_once('.')?;
            let (seq, token): (u64, u64) = (seq.parse().ok()?, token.parse().ok()?);
            appended.contains(&(seq, token)).then_some((seq, name))
        })
        .max()
        .map(|(_, name)| name))
}

async fn read_checkpoint(files: &RunFiles, name: &str) -> Result<Checkpoint, ClusterError> {
    let bytes = files
        .get(name)
        .await?
        .ok_or_else(|| ClusterError::NotFound {
            what: format!("checkpoint {name}"),
        })?;
    let checkpoint: Checkpoint = serde_json::from_slice(&bytes)
        .map_err(|error| ClusterError::nats(format!("checkpoint {name}"), error))?;
    checkpoint.check(name)?;
    Ok(checkpoint)
}

impl Checkpoint {
    /// What a checkpoint read back from NATS must be before any of it is
    /// used: anything that can write to the cluster could have written it.
    /// Its line is the one its name says, it names at most [`MAX_FILES`]
    /// files, each a plain run-relative path that is not the journal or a
    /// temp file, each with a sha256 (so a blob is checked against it).
    fn check(&self, name: &str) -> Result<(), ClusterError> {
        let invalid = |reason: String| ClusterError::nats(format!("checkpoint {name}"), reason);
        let named_seq = name
            .strip_prefix("checkpoints.")
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(seq, _)| seq.parse::<u64>().ok());
        if named_seq != Some(self.seq) {
            return Err(invalid(format!(
                "it says line {} but is named for another",
                self.seq
            )));
        }
        if self.files.len() > MAX_FILES {
            return Err(invalid(format!("more than {MAX_FILES} files")));
        }
        for (path, sha256) in &self.files {
            safe_relative(path)?;
            let first = path.split('/').next().unwrap_or_default();
            if SKIPPED.contains(&path.as_str()) || first == toolhost_journal::layout::TMP_DIR {
                return Err(invalid(format!(
                    "it names `{path}`, which is never checkpointed"
                )));
            }
            if !is_sha256(sha256) {
                return Err(invalid(format!("`{path}` has no sha256")));
            }
        }
        Ok(())
    }
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The bytes of `path`'s blob, checked against the digest that names it —
/// not only against its claim, which lives in the same cluster.
async fn blob(
    files: &RunFiles,
    run: &RunKey,
    path: &str,
    sha256: &str,
) -> Result<Bytes, ClusterError> {
    let bytes = files
        .get(&format!("blobs/{sha256}"))
        .await?
        .ok_or_else(|| ClusterError::NotFound {
            what: format!("the blob of {path} in {run}"),
        })?;
    if sha256_hex(&bytes) != sha256 {
        return Err(ClusterError::nats(
            format!("the blob of {path} in {run}"),
            "its bytes are not the ones its name's sha256 says",
        ));
    }
    Ok(bytes)
}

/// The latest valid checkpoint (see [`latest_checkpoint_name`]).
async fn latest_checkpoint(
    files: &RunFiles,
    entries: &[LogEntry],
) -> Result<Option<Checkpoint>, ClusterError> {
    let appended: BTreeSet<(u64, u64)> = entries
        .iter()
        .map(|entry| (entry.seq, entry.token))
        .collect();
    match latest_checkpoint_name(files, &appended).await? {
        Some(name) => read_checkpoint(files, &name).await.map(Some),
        None => Ok(None),
    }
}

/// A run-relative name from a checkpoint as a path that stays beneath the
/// directory.
fn safe_relative(name: &str) -> Result<PathBuf, ClusterError> {
    let path = Path::new(name);
    let plain = !name.is_empty()
        && path
            .components()
            .all(|component| matches!(component, Component::Normal(_)));
    if plain {
        Ok(path.to_owned())
    } else {
        Err(ClusterError::InvalidName {
            what: "checkpointed path",
            value: name.chars().take(256).collect(),
        })
    }
}

/// Every regular file beneath `root` but the skipped ones, with its length
/// and modification time, never following a symlink.
fn list_files(root: &Path) -> Result<Vec<(String, u64, Option<SystemTime>)>, ClusterError> {
    let mut found = Vec::new();
    let mut pending = vec![(root.to_owned(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|error| ClusterError::nats(format!("listing {}", dir.display()), error))?;
        for entry in entries {
            let entry = entry
                .map_err(|error| ClusterError::nats(format!("listing {}", dir.display()), error))?;
            let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let name = if prefix.is_empty() {
                file_name.clone()
            } else {
                format!("{prefix}/{file_name}")
            };
            if SKIPPED.contains(&name.as_str()) {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|error| ClusterError::nats(format!("reading {name}"), error))?;
            if kind.is_dir() {
                pending.push((entry.path(), name));
            } else if kind.is_file() {
                let meta = entry
                    .metadata()
                    .map_err(|error| ClusterError::nats(format!("reading {name}"), error))?;
                found.push((name, meta.len(), meta.modified().ok()));
                if found.len() > MAX_FILES {
                    return Err(ClusterError::nats(
                        "mirroring a run",
                        format!("more than {MAX_FILES} files"),
                    ));
                }
            }
        }
    }
    Ok(found)
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, ClusterError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|error| ClusterError::nats(format!("reading {}", path.display()), error))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ClusterError::nats(
            format!("reading {}", path.display()),
            format!("larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    Ok(bytes)
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
