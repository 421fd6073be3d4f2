//! `events.jsonl`: the run's append-only journal.
//!
//! One JSON object per line with exactly the keys `seq`, `id`, `runId`,
//! `timestamp`, `level`, `type`, `payload`; `payload` is always an object
//! carrying `eventScope`. `seq` runs 1, 2, 3… with no gap.
//!
//! Each event is one `write_all` of the whole line to an `O_APPEND` file, so
//! a crash leaves at most one torn line at the end, which [`Journal::open`]
//! cuts off (keeping a copy). A bad line anywhere else is corruption and is
//! never dropped. The journal holds an OS advisory lock while open: one
//! writer per run.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fsync::{SyncCounter, parent_dir};

/// The invocation a run starts with; run-level events are scoped to it.
pub const ROOT_INVOCATION_ID: &str = "inv_root";

/// Longest event type, in bytes.
const MAX_EVENT_TYPE_BYTES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// When appended events reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// `sync_data` after every event.
    Fsync,
    /// Every event is written at once (a process crash loses nothing); the
    /// fsync waits for `sync()`, an `error` event, a `run_*` event or close,
    /// so only a power loss can lose the events since then.
    #[default]
    Batched,
}

/// Which invocation an event belongs to (and which others it concerns).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventScope {
    pub invocation_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_invocation_ids: Vec<String>,
}

impl EventScope {
    pub fn new(invocation_id: impl Into<String>) -> Self {
        Self {
            invocation_id: invocation_id.into(),
            related_invocation_ids: Vec::new(),
        }
    }

    /// The run's root invocation.
    pub fn root() -> Self {
        Self::new(ROOT_INVOCATION_ID)
    }

    pub fn with_related(mut self, related: impl IntoIterator<Item = String>) -> Self {
        self.related_invocation_ids.extend(related);
        self
    }
}

/// One line of the journal, as written and as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalEvent {
    pub seq: u64,
    /// `evt_<uuid v4, simple form>`.
    pub id: String,
    pub run_id: String,
    /// RFC 3339, UTC, milliseconds.
    pub timestamp: String,
    pub level: Level,
    pub r#type: String,
    pub payload: Value,
}

impl JournalEvent {
    /// The payload's `eventScope`.
    pub fn scope(&self) -> Result<EventScope, serde_json::Error> {
        EventScope::deserialize(self.payload.get("eventScope").unwrap_or(&Value::Null))
    }
}

/// An event before the journal numbers, stamps and writes it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub level: Level,
    /// `[a-z][a-z0-9_]*`, e.g. `tool_call_started`.
    pub r#type: String,
    /// Injected into the payload as `eventScope` (replacing any given there).
    pub scope: EventScope,
    pub payload: Map<String, Value>,
}

impl NewEvent {
    pub fn new(level: Level, r#type: impl Into<String>, scope: EventScope) -> Self {
        Self {
            level,
            r#type: r#type.into(),
            scope,
            payload: Map::new(),
        }
    }

    pub fn with_payload(mut self, payload: Map<String, Value>) -> Self {
        self.payload = payload;
        self
    }
}

/// What [`Journal::open`] found and repaired.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Recovery {
    /// The last whole event; the next append gets `last_seq + 1`.
    pub last_seq: u64,
    /// Length of the torn tail that was cut off, if any.
    pub torn_bytes: Option<u64>,
    /// Where the torn bytes were kept (`events.jsonl.torn-<unix-ms>`).
    pub torn_copy: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("journal {} already exists", path.display())]
    AlreadyExists { path: PathBuf },
    #[error("journal {} is in use by another writer", path.display())]
    InUse { path: PathBuf },
    #[error("journal {} is corrupt at line {line}: {reason}", path.display())]
    Corrupt {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("journal {} line {line}: expected seq {expected}, found {found}", path.display())]
    SeqGap {
        path: PathBuf,
        line: u64,
        expected: u64,
        found: u64,
    },
    #[error("journal {} line {line}: runId `{found}` is not this run's `{expected}`", path.display())]
    RunIdMismatch {
        path: PathBuf,
        line: u64,
        expected: String,
        found: String,
    },
    /// Only from [`read_events`]: the last line is incomplete (a crash mid-
    /// append, or a writer still writing). `Journal::open` repairs it.
    #[error("journal {} ends with a torn line of {bytes} bytes at offset {offset}", path.display())]
    TornTail {
        path: PathBuf,
        offset: u64,
        bytes: u64,
    },
    /// An earlier write or fsync failed; what reached the disk is unknown, so
    /// the journal refuses further events (the run fails).
    #[error("journal {} is poisoned by an earlier write failure", path.display())]
    Poisoned { path: PathBuf },
    #[error("event type `{0}` is invalid: expected `[a-z][a-z0-9_]*`, at most 64 bytes")]
    InvalidEventType(String),
    #[error("event `{event_type}` does not serialize: {source}")]
    Serialize {
        event_type: String,
        source: serde_json::Error,
    },
    #[error("event `{event_type}` payload is not a JSON object")]
    PayloadNotObject { event_type: String },
    /// The replica did not take the events from `seq` on: nothing was
    /// written here, and the journal is poisoned (no journal, no run).
    #[error("journal {}: the replica did not take event {seq}: {reason}", path.display())]
    Replica {
        path: PathBuf,
        seq: u64,
        reason: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Produces `(id, timestamp)` for each event; replaceable in tests so runs
/// can be compared byte for byte.
type Stamp = Box<dyn FnMut() -> (String, String) + Send>;

fn default_stamp() -> (String, String) {
    (
        format!("evt_{}", uuid::Uuid::new_v4().simple()),
        humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
    )
}

/// The open, locked journal of one run.
pub struct Journal {
    file: File,
    path: PathBuf,
    run_id: String,
    durability: Durability,
    last_seq: u64,
    /// Events written since the last fsync.
    unsynced: bool,
    poisoned: bool,
    stamp: Stamp,
    /// The line being built, reused so an append allocates nothing new.
    line: Vec<u8>,
    /// Counts every sync call made for the journal (shared with its run).
    syncs: SyncCounter,
    /// Told about every event once it is written (live progress).
    observer: Option<Observer>,
    /// Whole lines numbered and composed but not written yet
    /// ([`Journal::hold`]): they go out with the next write.
    held: Vec<u8>,
    /// What the observer is told of each held line, once it is written.
    held_events: Vec<HeldEvent>,
    /// Takes every line before it is written here (the cluster).
    replica: Option<Box<dyn Replica>>,
    /// Their payloads, for the observer (`HeldEvent::payload` indexes it).
    held_payloads: Vec<u8>,
}

/// A held event, for the observer.
struct HeldEvent {
    seq: u64,
    level: Level,
    event_type: String,
    invocation_id: String,
    payload: std::ops::Range<usize>,
}

/// A watcher of appended events: `(seq, level, type, invocation id, payload
/// JSON)`. It runs inside the append, so it must be quick and must not
/// journal.
pub type Observer = std::sync::Arc<dyn Fn(u64, Level, &str, &str, &[u8]) + Send + Sync>;

/// A copy of the journal kept elsewhere (the cluster's run log) that must
/// take every line before this journal writes it, so the file here is
/// always a prefix of the replica: a line the replica refused was never
/// acted on here either.
pub trait Replica: Send {
    /// Take `lines` — whole journal lines, each ending in `\n`, the first
    /// numbered `first_seq` and the rest in order after it — or say why
    /// not. A refusal poisons the journal.
    fn replicate(&mut self, first_seq: u64, lines: &[u8]) -> Result<(), String>;
}

impl fmt::Debug for Journal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("run_id", &self.run_id)
            .field("durability", &self.durability)
            .field("last_seq", &self.last_seq)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Create a new, empty journal; fails if the file exists.
    pub fn create(
        path: impl Into<PathBuf>,
        run_id: impl Into<String>,
        durability: Durability,
    ) -> Result<Self, JournalError> {
        Self::create_counted(
            path.into(),
            run_id.into(),
            durability,
            SyncCounter::default(),
        )
    }

    /// [`Journal::create`], counting its syncs in `syncs`.
    pub(crate) fn create_counted(
        path: PathBuf,
        run_id: String,
        durability: Durability,
        syncs: SyncCounter,
    ) -> Result<Self, JournalError> {
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| {
                if source.kind() == io::ErrorKind::AlreadyExists {
                    JournalError::AlreadyExists { path: path.clone() }
                } else {
                    JournalError::Io {
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        lock(&file, &path)?;
        // Once per run, whatever the durability: the journal's name must
        // survive a power loss for the run to be reopened at all.
        // `RunDirectory::create` relies on this sync of the run directory
        // for run.json's entry too.
        syncs.dir(parent_dir(&path)).map_err(io_error(&path))?;
        Ok(Self::with_file(file, path, run_id, durability, 0, syncs))
    }

    /// Reopen an existing journal to append to it: scans it once, checks
    /// every line, and cuts off a torn tail left by a crash.
    pub fn open(
        path: impl Into<PathBuf>,
        run_id: impl Into<String>,
        durability: Durability,
    ) -> Result<(Self, Recovery), JournalError> {
        Self::open_counted(
            path.into(),
            run_id.into(),
            durability,
            SyncCounter::default(),
        )
    }

    /// [`Journal::open`], counting its syncs in `syncs`.
    pub(crate) fn open_counted(
        path: PathBuf,
        run_id: String,
        durability: Durability,
        syncs: SyncCounter,
    ) -> Result<(Self, Recovery), JournalError> {
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        lock(&file, &path)?;
        let scan = scan(&path, &file, Some(&run_id), false)?;
        let mut recovery = Recovery {
            last_seq: scan.last_seq,
            ..Recovery::default()
        };
        if let Some(torn) = scan.torn {
            let copy = cut_torn_tail(&file, &path, scan.good_len, &torn, &syncs)?;
            tracing::warn!(
                journal = %path.display(),
                torn_bytes = torn.len(),
                copy = %copy.display(),
                last_seq = scan.last_seq,
                "journal ended with a torn line; cut it off and kept a copy",
            );
            recovery.torn_bytes = Some(torn.len() as u64);
            recovery.torn_copy = Some(copy);
        }
        let journal = Self::with_file(file, path, run_id, durability, scan.last_seq, syncs);
        Ok((journal, recovery))
    }

    fn with_file(
        file: File,
        path: PathBuf,
        run_id: String,
        durability: Durability,
        last_seq: u64,
        syncs: SyncCounter,
    ) -> Self {
        Self {
            file,
            path,
            run_id,
            durability,
            last_seq,
            unsynced: false,
            poisoned: false,
            stamp: Box::new(default_stamp),
            line: Vec::with_capacity(1024),
            syncs,
            observer: None,
            held: Vec::new(),
            held_events: Vec::new(),
            held_payloads: Vec::new(),
            replica: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The last event written (0 for an empty journal).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Number, stamp and write one event. Never reads the file. A failed
    /// write poisons the journal: every later call returns `Poisoned`.
    pub fn append(&mut self, event: NewEvent) -> Result<JournalEvent, JournalError> {
        let NewEvent {
            level,
            r#type,
            scope,
            mut payload,
        } = event;
        // The scope argument wins over anything the payload says.
        payload.remove("eventScope");
        let serialize = |source| JournalError::Serialize {
            event_type: r#type.clone(),
            source,
        };
        let bytes = serde_json::to_vec(&payload).map_err(serialize)?;
        let (seq, id, timestamp) = self.write_event(level, &r#type, &scope, &bytes, false)?;
        let scope = serde_json::to_value(&scope).map_err(serialize)?;
        payload.insert("eventScope".to_owned(), scope);
        Ok(JournalEvent {
            seq,
            id,
            run_id: self.run_id.clone(),
            timestamp,
            level,
            r#type,
            payload: Value::Object(payload),
        })
    }

    /// Write one event whose payload is `payload`, a serialized JSON object
    /// without `eventScope`. The line is composed once, in the key order of
    /// [`JournalEvent`], and written with one `write` call, together with
    /// the lines held before it. With `hold` (and only under `Batched`, for
    /// an event that needs no sync) the line waits for the next write
    /// instead: see [`Journal::hold`].
    pub(crate) fn write_event(
        &mut self,
        level: Level,
        event_type: &str,
        scope: &EventScope,
        payload: &[u8],
        hold: bool,
    ) -> Result<(u64, String, String), JournalError> {
        if self.poisoned {
            return Err(self.poisoned_error());
        }
        check_event_type(event_type)?;
        let Some(inner) = payload
            .strip_prefix(b"{")
            .and_then(|rest| rest.strip_suffix(b"}"))
        else {
            return Err(JournalError::PayloadNotObject {
                event_type: event_type.to_owned(),
            });
        };
        let seq = self.last_seq + 1;
        let (id, timestamp) = (self.stamp)();
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let composed = compose_line(
            &mut line,
            seq,
            [&id, &self.run_id, &timestamp],
            level,
            event_type,
            inner,
            scope,
        );
        if let Err(source) = composed {
            self.line = line;
            return Err(JournalError::Serialize {
                event_type: event_type.to_owned(),
                source,
            });
        }
        let must_sync = self.durability == Durability::Fsync
            || level == Level::Error
            || event_type.starts_with("run_");
        if hold && !must_sync {
            self.held.extend_from_slice(&line);
            self.line = line;
            let start = self.held_payloads.len();
            self.held_payloads.extend_from_slice(payload);
            self.held_events.push(HeldEvent {
                seq,
                level,
                event_type: event_type.to_owned(),
                invocation_id: scope.invocation_id.clone(),
                payload: start..self.held_payloads.len(),
            });
            self.last_seq = seq;
            return Ok((seq, id, timestamp));
        }
        // One write of the held lines and this one: a crash tears at most
        // the last line of it, and every line before it is whole.
        let first_seq = self.held_events.first().map_or(seq, |held| held.seq);
        let written = if self.held.is_empty() {
            self.replicate(first_seq, &line)
                .and_then(|()| self.write_local(&line))
        } else {
            self.held.extend_from_slice(&line);
            let held = std::mem::take(&mut self.held);
            let written = self
                .replicate(first_seq, &held)
                .and_then(|()| self.write_local(&held));
            self.held = held;
            written
        };
        self.line = line;
        written?;
        self.last_seq = seq;
        self.unsynced = true;
        self.tell_held();
        if let Some(observer) = &self.observer {
            observer(seq, level, event_type, &scope.invocation_id, payload);
        }
        if must_sync {
            self.sync()?;
        }
        Ok((seq, id, timestamp))
    }

    /// Number and compose an event now but write it with the next one, so
    /// the events of one step cost one `write`: for an event nothing acts
    /// on before the next one is written (a call's `tool_call_requested`
    /// is followed by its `tool_call_started` once the gate has answered,
    /// with no I/O between them). A process crash in between loses both,
    /// as if it came before the first. Under `Fsync`, and for an event that
    /// syncs (`run_*`, `error`), it is written at once. [`sync`](Self::sync),
    /// [`flush`](Self::flush) and dropping the journal write what is held.
    pub(crate) fn hold_event(
        &mut self,
        level: Level,
        event_type: &str,
        scope: &EventScope,
        payload: &[u8],
    ) -> Result<u64, JournalError> {
        self.write_event(level, event_type, scope, payload, true)
            .map(|(seq, _, _)| seq)
    }

    /// Write the held events now.
    pub fn flush(&mut self) -> Result<(), JournalError> {
        if self.held.is_empty() {
            return Ok(());
        }
        if self.poisoned {
            return Err(self.poisoned_error());
        }
        let first_seq = self.held_events.first().map_or(0, |held| held.seq);
        let held = std::mem::take(&mut self.held);
        let written = self
            .replicate(first_seq, &held)
            .and_then(|()| self.write_local(&held));
        self.held = held;
        written?;
        self.unsynced = true;
        self.tell_held();
        Ok(())
    }

    /// Hand `lines` to the replica, if there is one; a refusal poisons.
    fn replicate(&mut self, first_seq: u64, lines: &[u8]) -> Result<(), JournalError> {
        let Some(replica) = self.replica.as_mut() else {
            return Ok(());
        };
        replica.replicate(first_seq, lines).map_err(|reason| {
            self.poisoned = true;
            JournalError::Replica {
                path: self.path.clone(),
                seq: first_seq,
                reason,
            }
        })
    }

    /// Write `lines` to the file; a failure poisons.
    fn write_local(&mut self, lines: &[u8]) -> Result<(), JournalError> {
        let written = self.file.write_all(lines);
        self.poison_on_error(written)
    }

    /// Keep a replica that takes every line before it is written here
    /// (replaces an earlier one), starting with the lines held now. Lines
    /// written before are the caller's to have copied (the cluster copies
    /// nothing: it rebuilds this file from the replica).
    pub fn set_replica(&mut self, replica: Option<Box<dyn Replica>>) -> Result<(), JournalError> {
        self.replica = replica;
        self.flush()
    }

    /// A failed write or fsync poisons the journal: the kernel may have
    /// written part of it, or already dropped the dirty pages.
    fn poison_on_error(&mut self, done: std::io::Result<()>) -> Result<(), JournalError> {
        done.map_err(|source| {
            self.poisoned = true;
            JournalError::Io {
                path: self.path.clone(),
                source,
            }
        })
    }

    /// The held lines are written: tell the observer, forget them.
    fn tell_held(&mut self) {
        if let Some(observer) = &self.observer {
            for held in &self.held_events {
                observer(
                    held.seq,
                    held.level,
                    &held.event_type,
                    &held.invocation_id,
                    &self.held_payloads[held.payload.clone()],
                );
            }
        }
        self.held.clear();
        self.held_events.clear();
        self.held_payloads.clear();
    }

    /// Watch every event appended from now on (replaces an earlier observer).
    pub fn set_observer(&mut self, observer: Option<Observer>) {
        self.observer = observer;
    }

    /// fsync what has been written. A failed fsync poisons the journal: the
    /// kernel may already have dropped the dirty pages.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.flush()?;
        if self.poisoned {
            return Err(self.poisoned_error());
        }
        if !self.unsynced {
            return Ok(());
        }
        let synced = self.syncs.data(&self.file);
        self.poison_on_error(synced)?;
        self.unsynced = false;
        Ok(())
    }

    /// Sync and release the lock, reporting a failure that drop would only log.
    pub fn close(mut self) -> Result<(), JournalError> {
        self.sync()
    }

    fn poisoned_error(&self) -> JournalError {
        JournalError::Poisoned {
            path: self.path.clone(),
        }
    }

    #[cfg(test)]
    pub(crate) fn set_stamp(&mut self, stamp: impl FnMut() -> (String, String) + Send + 'static) {
        self.stamp = Box::new(stamp);
    }

    /// The counter of this journal's sync calls (a run shares it).
    pub fn sync_counter(&self) -> &SyncCounter {
        &self.syncs
    }

    /// A file-system-wide sync (`syncfs`) made after the last append covered
    /// the journal too: nothing is left to sync.
    pub(crate) fn note_synced(&mut self) {
        self.unsynced = false;
    }

    #[cfg(test)]
    pub(crate) fn sync_count(&self) -> u64 {
        self.syncs.calls()
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if let Err(error) = self.flush() {
            tracing::warn!(journal = %self.path.display(), %error, "writing held journal events on close failed");
        }
        if self.unsynced
            && !self.poisoned
            && let Err(error) = self.syncs.data(&self.file)
        {
            tracing::warn!(journal = %self.path.display(), %error, "journal fsync on close failed");
        }
    }
}

/// Read every event, strictly. A torn last line is `TornTail` (distinct from
/// `Corrupt`): a reader never repairs, and a live writer may be mid-line.
/// Takes no lock, so it can read a journal another process is writing.
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<JournalEvent>, JournalError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(io_error(path))?;
    let scan = scan(path, &file, None, true)?;
    match scan.torn {
        Some(torn) => Err(JournalError::TornTail {
            path: path.to_owned(),
            offset: scan.good_len,
            bytes: torn.len() as u64,
        }),
        None => Ok(scan.events),
    }
}

fn lock(file: &File, path: &Path) -> Result<(), JournalError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(JournalError::InUse {
            path: path.to_owned(),
        }),
        Err(TryLockError::Error(source)) => Err(JournalError::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// `{"seq":…,"id":…,"runId":…,"timestamp":…,"level":…,"type":…,"payload":{…,"eventScope":{…}}}\n`
fn compose_line(
    line: &mut Vec<u8>,
    seq: u64,
    [id, run_id, timestamp]: [&str; 3],
    level: Level,
    event_type: &str,
    payload_inner: &[u8],
    scope: &EventScope,
) -> serde_json::Result<()> {
    use std::io::Write as _;
    // Writing into a Vec cannot fail; only serialization can.
    let _ = write!(line, "{{\"seq\":{seq},\"id\":");
    serde_json::to_writer(&mut *line, id)?;
    line.extend_from_slice(b",\"runId\":");
    serde_json::to_writer(&mut *line, run_id)?;
    line.extend_from_slice(b",\"timestamp\":");
    serde_json::to_writer(&mut *line, timestamp)?;
    line.extend_from_slice(b",\"level\":");
    serde_json::to_writer(&mut *line, &level)?;
    line.extend_from_slice(b",\"type\":");
    serde_json::to_writer(&mut *line, event_type)?;
    line.extend_from_slice(b",\"payload\":{");
    line.extend_from_slice(payload_inner);
    if !payload_inner.is_empty() {
        line.push(b',');
    }
    line.extend_from_slice(b"\"eventScope\":");
    serde_json::to_writer(&mut *line, scope)?;
    line.extend_from_slice(b"}}\n");
    Ok(())
}

/// `[a-z][a-z0-9_]*`, at most [`MAX_EVENT_TYPE_BYTES`]: what every writer
/// checks, and what a reader of stored lines checks again (a line's type
/// becomes an SSE `event:` field, where a newline would forge events).
pub(crate) fn is_event_type(event_type: &str) -> bool {
    event_type.len() <= MAX_EVENT_TYPE_BYTES
        && event_type.starts_with(|c: char| c.is_ascii_lowercase())
        && event_type
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn check_event_type(event_type: &str) -> Result<(), JournalError> {
    if is_event_type(event_type) {
        Ok(())
    } else {
        Err(JournalError::InvalidEventType(event_type.to_owned()))
    }
}

struct Scan {
    last_seq: u64,
    /// Byte length of the whole events, i.e. where a torn tail starts.
    good_len: u64,
    torn: Option<Vec<u8>>,
    /// Filled only when asked (readers); `open` keeps memory flat.
    events: Vec<JournalEvent>,
}

/// One pass over the file. A bad line is judged only once we know whether
/// anything follows it: last → torn tail, otherwise → corruption.
fn scan(
    path: &Path,
    file: &File,
    expected_run_id: Option<&str>,
    collect: bool,
) -> Result<Scan, JournalError> {
    let mut reader = BufReader::new(file);
    let mut run_id = expected_run_id.map(str::to_owned);
    let mut out = Scan {
        last_seq: 0,
        good_len: 0,
        torn: None,
        events: Vec::new(),
    };
    let mut pending_bad: Option<(u64, String)> = None;
    let mut line_no = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = reader
            .by_ref()
            .read_until(b'\n', &mut line)
            .map_err(io_error(path))?;
        if read == 0 {
            break;
        }
        if let Some((line, reason)) = pending_bad.take() {
            return Err(JournalError::Corrupt {
                path: path.to_owned(),
                line,
                reason,
            });
        }
        line_no += 1;
        // Only the final read can lack the newline (it stops at EOF).
        let Some(body) = line.strip_suffix(b"\n") else {
            pending_bad = Some((line_no, "no trailing newline".to_owned()));
            out.torn = Some(line.clone());
            continue;
        };
        let event = match parse_line(body) {
            Ok(event) => event,
            Err(reason) => {
                pending_bad = Some((line_no, reason));
                out.torn = Some(line.clone());
                continue;
            }
        };
        if event.seq != out.last_seq + 1 {
            return Err(JournalError::SeqGap {
                path: path.to_owned(),
                line: line_no,
                expected: out.last_seq + 1,
                found: event.seq,
            });
        }
        match &run_id {
            Some(expected) if *expected != event.run_id => {
                return Err(JournalError::RunIdMismatch {
                    path: path.to_owned(),
                    line: line_no,
                    expected: expected.clone(),
                    found: event.run_id,
                });
            }
            Some(_) => {}
            None => run_id = Some(event.run_id.clone()),
        }
        out.last_seq = event.seq;
        out.good_len += read as u64;
        if collect {
            out.events.push(event);
        }
    }
    Ok(out)
}

fn parse_line(body: &[u8]) -> Result<JournalEvent, String> {
    let event: JournalEvent = serde_json::from_slice(body).map_err(|error| error.to_string())?;
    if !event.payload.is_object() {
        return Err("payload is not an object".to_owned());
    }
    event
        .scope()
        .map_err(|error| format!("payload.eventScope: {error}"))?;
    Ok(event)
}

/// Keep the torn bytes beside the journal (durably), then cut the journal
/// back to its last whole event.
fn cut_torn_tail(
    file: &File,
    path: &Path,
    good_len: u64,
    torn: &[u8],
    syncs: &SyncCounter,
) -> Result<PathBuf, JournalError> {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_millis())
        .unwrap_or(0);
    let mut base = path.as_os_str().to_owned();
    base.push(format!(".torn-{millis}"));
    let mut copy_path = PathBuf::from(&base);
    let mut attempt = 1;
    let mut copy = loop {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&copy_path)
        {
            Ok(copy) => break copy,
            // Two recoveries in the same millisecond: never overwrite a copy.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => {
                let mut next = base.clone();
                next.push(format!("-{attempt}"));
                copy_path = PathBuf::from(next);
                attempt += 1;
            }
            Err(source) => {
                return Err(JournalError::Io {
                    path: copy_path,
                    source,
                });
            }
        }
    };
    copy.write_all(torn)
        .and_then(|()| syncs.file(&copy))
        .map_err(io_error(&copy_path))?;
    file.set_len(good_len).map_err(io_error(path))?;
    syncs.file(file).map_err(io_error(path))?;
    syncs.dir(parent_dir(path)).map_err(io_error(path))?;
    Ok(copy_path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::fs;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    const RUN: &str = "run_20261203T022709Z_0123abcd";

    fn info(event_type: &str, n: u64) -> NewEvent {
        let mut payload = Map::new();
        payload.insert("n".into(), json!(n));
        NewEvent::new(Level::Info, event_type, EventScope::new("inv_root")).with_payload(payload)
    }

    fn journal_with(dir: &Path, events: u64) -> PathBuf {
        let path = dir.join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        for n in 1..=events {
            journal
                .append(info("tool_call_started", n))
                .expect("append");
        }
        journal.close().expect("close");
        path
    }

    fn lines(path: &Path) -> Vec<Value> {
        let text = fs::read_to_string(path).expect("read");
        assert!(text.is_empty() || text.ends_with('\n'));
        text.lines()
            .map(|line| serde_json::from_str(line).expect("each line is JSON"))
            .collect()
    }

    fn fixed_stamps() -> impl FnMut() -> (String, String) + Send + 'static {
        let counter = Arc::new(AtomicU64::new(0));
        move || {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            (
                format!("evt_{n:032x}"),
                format!("2026-12-03T02:27:{:02}.123Z", n % 60),
            )
        }
    }

    #[test]
    fn each_line_is_exactly_the_serialization_of_its_event() {
        // Lines are composed by hand for speed; they must stay byte for byte
        // what serde writes for the event they parse to, whatever the text.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        let hostile = "quote \" backslash \\ newline \n tab \t nul \u{0} 界 🎲 \u{2028}";
        let mut payload = Map::new();
        payload.insert("text".into(), json!(hostile));
        payload.insert("nested".into(), json!({"list": [1, null, {"a": hostile}]}));
        let scope = EventScope::new(hostile).with_related([hostile.to_owned()]);
        journal
            .append(NewEvent::new(Level::Debug, "odd_text", scope).with_payload(payload))
            .expect("append");
        journal
            .append(NewEvent::new(
                Level::Error,
                "empty_payload",
                EventScope::root(),
            ))
            .expect("append");
        drop(journal);
        let text = fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        for line in lines {
            let event: JournalEvent = serde_json::from_str(line).expect("parses");
            // The envelope, up to the payload, byte for byte; the payload as
            // JSON (its keys keep the event's field order, eventScope last).
            let canonical = serde_json::to_string(&event).expect("serialize");
            let envelope =
                |text: &str| text[..text.find("\"payload\":").expect("payload")].to_owned();
            assert_eq!(envelope(line), envelope(&canonical));
            let reparsed: Value = serde_json::from_str(line).expect("json");
            assert_eq!(reparsed["payload"], event.payload);
        }
        let events = read_events(&path).expect("read back");
        assert_eq!(events[0].payload["text"], hostile);
        assert_eq!(events[0].scope().expect("scope").invocation_id, hostile);
        assert_eq!(
            events[1].payload,
            json!({"eventScope": {"invocationId": "inv_root"}})
        );
    }

    #[test]
    fn seq_continues_after_reopen_and_lines_have_exactly_seven_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 3);
        let (mut journal, recovery) =
            Journal::open(&path, RUN, Durability::Batched).expect("reopen");
        assert_eq!(
            recovery,
            Recovery {
                last_seq: 3,
                ..Recovery::default()
            }
        );
        let scope = EventScope::new("inv_child").with_related(["inv_root".to_owned()]);
        let event = journal
            .append(NewEvent::new(
                Level::Warn,
                "tool_call_failed",
                scope.clone(),
            ))
            .expect("append");
        assert_eq!(event.seq, 4);
        assert_eq!(journal.last_seq(), 4);
        drop(journal);

        let all = lines(&path);
        assert_eq!(all.len(), 4);
        for (index, line) in all.iter().enumerate() {
            let object = line.as_object().expect("object");
            let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(
                keys,
                [
                    "id",
                    "level",
                    "payload",
                    "runId",
                    "seq",
                    "timestamp",
                    "type"
                ]
            );
            assert_eq!(line["seq"], json!(index + 1));
            assert_eq!(line["runId"], RUN);
            let id = line["id"].as_str().expect("id");
            assert!(id.starts_with("evt_") && id.len() == 4 + 32, "{id}");
            let timestamp = line["timestamp"].as_str().expect("timestamp");
            assert_eq!(timestamp.len(), "2026-12-03T02:27:09.123Z".len());
            assert!(timestamp.ends_with('Z'));
            humantime::parse_rfc3339(timestamp).expect("RFC 3339");
            assert!(line["payload"]["eventScope"]["invocationId"].is_string());
        }
        assert_eq!(
            all[0]["payload"]["eventScope"],
            json!({"invocationId": "inv_root"}),
            "empty relatedInvocationIds is omitted"
        );
        assert_eq!(all[0]["payload"]["n"], 1);
        assert_eq!(
            all[3]["payload"]["eventScope"],
            json!({"invocationId": "inv_child", "relatedInvocationIds": ["inv_root"]})
        );
        assert_eq!(all[3]["level"], "warn");
        let events = read_events(&path).expect("read");
        assert_eq!(events[3].scope().expect("scope"), scope);
    }

    #[test]
    fn create_refuses_an_existing_journal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 1);
        let before = fs::read(&path).expect("read");
        assert!(matches!(
            Journal::create(&path, RUN, Durability::Batched),
            Err(JournalError::AlreadyExists { .. })
        ));
        assert_eq!(fs::read(&path).expect("read"), before);
    }

    fn assert_recovers(path: &Path, expected_last: u64, torn: &[u8]) {
        let before = fs::read(path).expect("read");
        assert!(matches!(
            read_events(path),
            Err(JournalError::TornTail { bytes, .. }) if bytes == torn.len() as u64
        ));
        let (mut journal, recovery) =
            Journal::open(path, RUN, Durability::Batched).expect("reopen");
        assert_eq!(recovery.last_seq, expected_last);
        assert_eq!(recovery.torn_bytes, Some(torn.len() as u64));
        let copy = recovery.torn_copy.expect("copy kept");
        assert!(
            copy.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("events.jsonl.torn-")),
            "{copy:?}"
        );
        assert_eq!(fs::read(&copy).expect("copy"), torn);
        assert_eq!(
            fs::read(path).expect("read"),
            before[..before.len() - torn.len()],
            "cut back to the last whole event"
        );
        let next = journal
            .append(info("tool_call_started", 99))
            .expect("append");
        assert_eq!(next.seq, expected_last + 1);
        drop(journal);
        let events = read_events(path).expect("parses fully afterwards");
        assert_eq!(events.len() as u64, expected_last + 1);
        assert_eq!(
            events.iter().map(|event| event.seq).collect::<Vec<_>>(),
            (1..=expected_last + 1).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_journal_cut_mid_line_reopens_at_the_last_whole_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 3);
        let bytes = fs::read(&path).expect("read");
        let last_line_start = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|b| *b == b'\n')
            .expect("three lines")
            + 1;
        let cut = bytes.len() - 10;
        fs::write(&path, &bytes[..cut]).expect("chop");
        assert_recovers(&path, 2, &bytes[last_line_start..cut]);
    }

    #[test]
    fn a_journal_with_half_a_line_of_garbage_reopens_at_the_last_whole_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 3);
        let garbage = br#"{"seq":4,"id":"evt_"#;
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(garbage).expect("garbage");
        drop(file);
        assert_recovers(&path, 3, garbage);
    }

    #[test]
    fn a_whole_line_without_its_newline_is_still_torn() {
        // The writer never finished the append, so it was never acknowledged.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 2);
        let bytes = fs::read(&path).expect("read");
        fs::write(&path, &bytes[..bytes.len() - 1]).expect("drop the newline");
        let second = bytes[..bytes.len() - 1]
            .iter()
            .rposition(|b| *b == b'\n')
            .expect("two lines")
            + 1;
        assert_recovers(&path, 1, &bytes[second..bytes.len() - 1]);
    }

    #[test]
    fn an_unparsable_last_line_is_torn() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 2);
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"{\"seq\":3,\n").expect("garbage");
        drop(file);
        assert_recovers(&path, 2, b"{\"seq\":3,\n");
    }

    fn assert_refused_untouched(path: &Path, check: impl Fn(&JournalError) -> bool) {
        let before = fs::read(path).expect("read");
        let error = Journal::open(path, RUN, Durability::Batched).expect_err("refused");
        assert!(check(&error), "{error:?}");
        assert_eq!(fs::read(path).expect("read"), before, "file untouched");
        let siblings = fs::read_dir(path.parent().expect("parent"))
            .expect("dir")
            .count();
        assert_eq!(siblings, 1, "no torn copy made");
    }

    #[test]
    fn corruption_in_the_middle_is_an_error_and_the_file_is_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 3);
        let text = fs::read_to_string(&path).expect("read");
        let mut lines: Vec<&str> = text.lines().collect();
        lines[1] = "{not json";
        fs::write(&path, lines.join("\n") + "\n").expect("corrupt");
        assert_refused_untouched(&path, |error| {
            matches!(error, JournalError::Corrupt { line: 2, .. })
        });
        assert!(matches!(
            read_events(&path),
            Err(JournalError::Corrupt { line: 2, .. })
        ));

        // An extra key is corruption too: lines have exactly seven keys.
        let mut extra: Value =
            serde_json::from_str(text.lines().next().expect("line")).expect("json");
        extra["extra"] = json!(1);
        let rest: Vec<&str> = text.lines().skip(1).collect();
        fs::write(&path, format!("{extra}\n{}\n", rest.join("\n"))).expect("rewrite");
        assert_refused_untouched(&path, |error| {
            matches!(error, JournalError::Corrupt { line: 1, .. })
        });
    }

    #[test]
    fn a_blank_line_in_the_middle_is_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 2);
        let text = fs::read_to_string(&path).expect("read");
        let (first, second) = text.split_once('\n').expect("two lines");
        fs::write(&path, format!("{first}\n\n{second}")).expect("rewrite");
        assert_refused_untouched(&path, |error| {
            matches!(error, JournalError::Corrupt { line: 2, .. })
        });
    }

    #[test]
    fn non_consecutive_seq_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 3);
        let text = fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        // Drop event 2: 1, 3.
        fs::write(&path, format!("{}\n{}\n", lines[0], lines[2])).expect("rewrite");
        assert_refused_untouched(&path, |error| {
            matches!(
                error,
                JournalError::SeqGap {
                    line: 2,
                    expected: 2,
                    found: 3,
                    ..
                }
            )
        });
        // Repeat event 1: 1, 1.
        fs::write(&path, format!("{}\n{}\n", lines[0], lines[0])).expect("rewrite");
        assert_refused_untouched(&path, |error| {
            matches!(error, JournalError::SeqGap { found: 1, .. })
        });
    }

    #[test]
    fn a_wrong_run_id_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 2);
        let before = fs::read(&path).expect("read");
        let error = Journal::open(&path, "run_other", Durability::Batched).expect_err("refused");
        assert!(
            matches!(error, JournalError::RunIdMismatch { line: 1, ref found, .. } if found == RUN),
            "{error:?}"
        );
        assert_eq!(fs::read(&path).expect("read"), before, "file untouched");

        // One foreign line in the middle of our own.
        let text = fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        let foreign = lines[1].replace(RUN, "run_other");
        fs::write(&path, format!("{}\n{foreign}\n", lines[0])).expect("rewrite");
        let error = Journal::open(&path, RUN, Durability::Batched).expect_err("refused");
        assert!(
            matches!(error, JournalError::RunIdMismatch { line: 2, .. }),
            "{error:?}"
        );
        assert!(matches!(
            read_events(&path),
            Err(JournalError::RunIdMismatch { line: 2, .. })
        ));
    }

    #[test]
    fn a_second_opener_is_refused_while_the_first_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut first = Journal::create(&path, RUN, Durability::Batched).expect("create");
        first.append(info("tool_call_started", 1)).expect("append");
        assert!(matches!(
            Journal::open(&path, RUN, Durability::Batched),
            Err(JournalError::InUse { .. })
        ));
        // Readers take no lock.
        assert_eq!(read_events(&path).expect("read").len(), 1);
        drop(first);
        let (second, _) = Journal::open(&path, RUN, Durability::Batched).expect("now free");
        assert!(matches!(
            Journal::open(&path, RUN, Durability::Fsync),
            Err(JournalError::InUse { .. })
        ));
        drop(second);
    }

    #[test]
    fn a_failed_write_poisons_the_journal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        journal
            .append(info("tool_call_started", 1))
            .expect("append");
        // A read-only handle makes the next write fail.
        journal.file = File::open(&path).expect("read-only");
        assert!(matches!(
            journal.append(info("tool_call_started", 2)),
            Err(JournalError::Io { .. })
        ));
        assert!(journal.is_poisoned());
        assert!(matches!(
            journal.append(info("tool_call_started", 3)),
            Err(JournalError::Poisoned { .. })
        ));
        assert!(matches!(journal.sync(), Err(JournalError::Poisoned { .. })));
        assert_eq!(journal.last_seq(), 1);
    }

    #[test]
    fn invalid_event_types_are_refused_before_writing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        for bad in ["", "Tool", "tool call", "1x", &"x".repeat(65)] {
            assert!(
                matches!(
                    journal.append(info(bad, 1)),
                    Err(JournalError::InvalidEventType(_))
                ),
                "{bad:?}"
            );
        }
        assert!(!journal.is_poisoned());
        assert_eq!(journal.append(info("ok_type", 1)).expect("append").seq, 1);
    }

    #[test]
    fn the_scope_argument_wins_over_a_payload_event_scope() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        let mut payload = Map::new();
        payload.insert("eventScope".into(), json!({"invocationId": "forged"}));
        let event = journal
            .append(NewEvent::new(Level::Info, "x", EventScope::new("inv_a")).with_payload(payload))
            .expect("append");
        assert_eq!(event.scope().expect("scope").invocation_id, "inv_a");
    }

    /// `hold_event` with `info`'s payload.
    fn hold(journal: &mut Journal, event_type: &str, n: u64) -> u64 {
        let payload = serde_json::to_vec(&json!({"n": n})).expect("payload");
        journal
            .hold_event(
                Level::Info,
                event_type,
                &EventScope::new("inv_root"),
                &payload,
            )
            .expect("hold")
    }

    #[test]
    fn held_events_go_out_with_the_next_write_in_order_and_are_told_then() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&told);
        journal.set_observer(Some(std::sync::Arc::new(
            move |seq, _, kind: &str, _: &str, payload: &[u8]| {
                let payload: Value = serde_json::from_slice(payload).expect("payload json");
                sink.lock()
                    .expect("lock")
                    .push((seq, kind.to_owned(), payload["n"].clone()));
            },
        )));
        assert_eq!(hold(&mut journal, "tool_call_requested", 1), 1);
        assert_eq!(hold(&mut journal, "tool_call_requested", 2), 2);
        assert_eq!(
            std::fs::read(&path).expect("read").len(),
            0,
            "nothing written yet"
        );
        assert!(told.lock().expect("lock").is_empty(), "nor told");
        journal
            .append(info("tool_call_started", 3))
            .expect("append");
        let events = read_events(&path).expect("read");
        let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, [1, 2, 3], "all three, in order");
        assert_eq!(events[1].payload["n"], 2);
        assert_eq!(
            *told.lock().expect("lock"),
            [
                (1, "tool_call_requested".to_owned(), json!(1)),
                (2, "tool_call_requested".to_owned(), json!(2)),
                (3, "tool_call_started".to_owned(), json!(3)),
            ]
        );
        // sync() and dropping write what is held.
        hold(&mut journal, "tool_result_stored", 4);
        journal.sync().expect("sync");
        assert_eq!(read_events(&path).expect("read").len(), 4);
        hold(&mut journal, "tool_result_stored", 5);
        drop(journal);
        assert_eq!(read_events(&path).expect("read").len(), 5);
    }

    #[test]
    fn events_that_sync_and_fsync_mode_are_never_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("batched.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        hold(&mut journal, "run_started", 1);
        assert_eq!(
            read_events(&path).expect("read").len(),
            1,
            "run_* syncs, so it is written"
        );
        let path = dir.path().join("fsync.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Fsync).expect("create");
        hold(&mut journal, "tool_call_requested", 1);
        assert_eq!(
            read_events(&path).expect("read").len(),
            1,
            "fsync writes every event at once"
        );
    }

    #[test]
    fn batched_syncs_only_when_it_must_and_fsync_always() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("batched.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        // Creating syncs the directory once, whatever the durability.
        assert_eq!(journal.sync_count(), 1, "the new name is made durable");
        let created = journal.sync_count();
        journal
            .append(info("tool_call_started", 1))
            .expect("append");
        journal
            .append(info("tool_call_started", 2))
            .expect("append");
        assert_eq!(journal.sync_count() - created, 0, "info events wait");
        assert_eq!(
            read_events(&path).expect("read").len(),
            2,
            "but are written at once"
        );
        journal.append(info("run_started", 3)).expect("append");
        assert_eq!(journal.sync_count() - created, 1, "run_* events sync");
        journal
            .append(NewEvent::new(
                Level::Error,
                "tool_call_failed",
                EventScope::root(),
            ))
            .expect("append");
        assert_eq!(journal.sync_count() - created, 2, "error events sync");
        journal
            .append(info("tool_call_started", 5))
            .expect("append");
        journal.sync().expect("sync");
        journal.sync().expect("sync");
        assert_eq!(
            journal.sync_count() - created,
            3,
            "sync() syncs once when needed"
        );

        let path = dir.path().join("fsync.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Fsync).expect("create");
        let created = journal.sync_count();
        for n in 1..=3 {
            journal
                .append(info("tool_call_started", n))
                .expect("append");
        }
        assert_eq!(journal.sync_count() - created, 3);
    }

    #[test]
    fn fsync_and_batched_write_the_same_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut outputs = Vec::new();
        for durability in [Durability::Fsync, Durability::Batched] {
            let path = dir.path().join(format!("{durability:?}.jsonl"));
            let mut journal = Journal::create(&path, RUN, durability).expect("create");
            journal.set_stamp(fixed_stamps());
            journal.append(info("run_started", 1)).expect("append");
            journal
                .append(info("tool_call_started", 2))
                .expect("append");
            journal
                .append(NewEvent::new(
                    Level::Error,
                    "run_failed",
                    EventScope::root(),
                ))
                .expect("append");
            journal.close().expect("close");
            outputs.push(fs::read(&path).expect("read"));
        }
        assert!(!outputs[0].is_empty());
        assert_eq!(outputs[0], outputs[1]);
    }

    #[test]
    fn an_empty_journal_reopens_at_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = journal_with(dir.path(), 0);
        let (mut journal, recovery) =
            Journal::open(&path, RUN, Durability::Batched).expect("reopen");
        assert_eq!(recovery, Recovery::default());
        assert_eq!(journal.append(info("x", 1)).expect("append").seq, 1);
        assert!(read_events(dir.path().join("missing.jsonl")).is_err());
    }

    /// What a replica took: each call's first seq and lines.
    type Taken = std::sync::Arc<std::sync::Mutex<Vec<(u64, Vec<u8>)>>>;

    /// Records what it is given, and refuses from the call numbered
    /// `refuse_from` on (0: never).
    struct Recorded {
        taken: Taken,
        calls: u64,
        refuse_from: u64,
    }

    impl Replica for Recorded {
        fn replicate(&mut self, first_seq: u64, lines: &[u8]) -> Result<(), String> {
            self.calls += 1;
            if self.refuse_from != 0 && self.calls >= self.refuse_from {
                return Err("fenced".into());
            }
            self.taken
                .lock()
                .expect("lock")
                .push((first_seq, lines.to_vec()));
            Ok(())
        }
    }

    fn recorded(refuse_from: u64) -> (Recorded, Taken) {
        let taken = std::sync::Arc::default();
        let replica = Recorded {
            taken: std::sync::Arc::clone(&taken),
            calls: 0,
            refuse_from,
        };
        (replica, taken)
    }

    #[test]
    fn a_replica_takes_every_line_first_and_the_file_is_its_copy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        let (replica, taken) = recorded(0);
        journal.set_replica(Some(Box::new(replica))).expect("set");
        journal.append(info("run_started", 1)).expect("append");
        // Held events go to the replica with the write that carries them.
        assert_eq!(hold(&mut journal, "tool_call_requested", 2), 2);
        journal
            .append(info("tool_call_started", 3))
            .expect("append");
        hold(&mut journal, "tool_result_stored", 4);
        journal.flush().expect("flush");
        let taken = taken.lock().expect("lock").clone();
        let firsts: Vec<u64> = taken.iter().map(|(first, _)| *first).collect();
        assert_eq!(firsts, vec![1, 2, 4]);
        let replicated: Vec<u8> = taken.into_iter().flat_map(|(_, lines)| lines).collect();
        assert_eq!(replicated, fs::read(&path).expect("read"));
        let seqs: Vec<u64> = lines(&path)
            .iter()
            .map(|line| line["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_line_the_replica_refused_is_never_written_and_the_journal_is_poisoned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, RUN, Durability::Batched).expect("create");
        let (replica, taken) = recorded(2);
        journal.set_replica(Some(Box::new(replica))).expect("set");
        journal.append(info("run_started", 1)).expect("append");
        hold(&mut journal, "tool_call_requested", 2);
        let err = journal
            .append(info("tool_call_started", 3))
            .expect_err("refused");
        assert!(
            matches!(&err, JournalError::Replica { seq: 2, reason, .. } if reason == "fenced"),
            "{err}"
        );
        assert!(journal.is_poisoned());
        assert!(matches!(
            journal.append(info("run_failed", 4)),
            Err(JournalError::Poisoned { .. })
        ));
        drop(journal);
        // Only what the replica took is here.
        let seqs: Vec<u64> = lines(&path)
            .iter()
            .map(|line| line["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, vec![1]);
        assert_eq!(taken.lock().expect("lock").len(), 1);
    }
}
