//! The world-info entries activated for a run: the `worldInfoActivation`
//! of the run's `input/prompt_snapshot.json`, which the
//! `worldinfo-read` capability serves to `worldinfo.read_activated`.
//! Linux only (`openat2`), no wasmtime.
//!
//! ```json
//! { "worldInfoActivation": {
//!     "entries": [ { "world": "Eldoria", "uid": 12, "displayName": "The Old Road",
//!                    "constant": false, "position": "before", "content": "…" } ],
//!     "timestampMs": 1760000000000, "trigger": "normal" } }
//! ```
//!
//! - A missing file, or a snapshot without `worldInfoActivation` (or with
//!   `null`), is `Ok(None)`: the tool answers `worldinfo.activation_unavailable`.
//! - A file that cannot be used as a prompt snapshot (not JSON, not an
//!   object, a symbolic link, a special file, over 64 MiB, unreadable) is
//!   `agent.invalid_prompt_snapshot_file`; an activation that breaks the
//!   shape above is `agent.invalid_worldinfo_activation_snapshot`, naming
//!   the field. Both fail the run (the reference's fail-fast codes).
//! - Per entry: `content` is a required string; `world` a string, `uid` a
//!   string or a number (kept as text: `7` is `"7"`), both may be missing,
//!   `null` or empty; `displayName` and `trigger` strings, `constant` a
//!   boolean, `position` a string or a number, `timestampMs` a non-negative
//!   integer, each optional or `null`. Unknown keys are ignored.
//! - References: `worldinfo:<world>#<uid>`; `worldinfo:activated#<index>`
//!   (0-based) when the world or uid is empty, and for a later entry whose
//!   world and uid repeat an earlier one's, so every reference names one
//!   entry. [`Activation::entry`] also accepts `worldinfo:activated#<index>`
//!   for any entry.

#[cfg(not(target_os = "linux"))]
compile_error!("toolhost-worldinfo relies on Linux openat2");

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::AsFd as _;
use std::path::Path;

use rustix::fs::{FileType, Mode, fstat};
use rustix::io::Errno;
use serde::Serialize;
use serde_json::{Map, Value};
use toolhost_core::beneath::{self, Refusal};

/// Where the prompt snapshot lives in a run directory.
pub const PROMPT_SNAPSHOT_FILE: &str = "input/prompt_snapshot.json";
/// The key of the activation in the prompt snapshot.
pub const ACTIVATION_KEY: &str = "worldInfoActivation";
/// Largest prompt snapshot read (it holds the whole prompt).
pub const MAX_SNAPSHOT_BYTES: u64 = 64 * 1024 * 1024;
/// The run directory's temp directory (same file system as `input/`).
const TMP_DIR: &str = ".tmp";

/// The `code` values, exactly as results and the journal carry them.
pub mod codes {
    /// The run has no activation: a recoverable tool result (the tool's).
    pub const ACTIVATION_UNAVAILABLE: &str = "worldinfo.activation_unavailable";
    /// No activated entry has that reference: a recoverable tool result.
    pub const ENTRY_NOT_FOUND: &str = "worldinfo.entry_not_found";
    /// System: the activation does not have the snapshot's shape.
    pub const INVALID_ACTIVATION: &str = "agent.invalid_worldinfo_activation_snapshot";
    /// System: `input/prompt_snapshot.json` cannot be read as a JSON object.
    pub const INVALID_PROMPT_SNAPSHOT_FILE: &str = "agent.invalid_prompt_snapshot_file";
    /// System: `store` found a prompt snapshot already there (create-only).
    pub const PROMPT_SNAPSHOT_EXISTS: &str = "worldinfo.prompt_snapshot_exists";
    /// System: `store` could not write.
    pub const IO_ERROR: &str = "worldinfo.io_error";
}

/// A failure that ends the run (every variant is a System failure).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct WorldInfoError {
    pub code: &'static str,
    pub message: String,
}

impl WorldInfoError {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    fn invalid(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(
            codes::INVALID_ACTIVATION,
            format!("world-info activation snapshot: `{field}` {problem}"),
        )
    }

    fn file(problem: impl std::fmt::Display) -> Self {
        Self::new(
            codes::INVALID_PROMPT_SNAPSHOT_FILE,
            format!("{PROMPT_SNAPSHOT_FILE}: {problem}"),
        )
    }

    pub fn code(&self) -> &'static str {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// One activated entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActivatedEntry {
    /// Position in the activation list, 0-based.
    pub index: usize,
    /// The world book; may be empty.
    pub world: String,
    /// The entry's uid as text; may be empty.
    pub uid: String,
    pub display_name: Option<String>,
    pub constant: bool,
    pub position: Option<String>,
    pub content: String,
    /// `worldinfo:<world>#<uid>` or `worldinfo:activated#<index>`.
    pub reference: String,
}

/// The activation snapshot of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Activation {
    entries: Vec<ActivatedEntry>,
    timestamp_ms: Option<u64>,
    trigger: Option<String>,
}

const REF_PREFIX: &str = "worldinfo:";
const INDEX_PREFIX: &str = "worldinfo:activated#";

impl Activation {
    /// The activation of the run in `run_dir` (its
    /// `input/prompt_snapshot.json`); `Ok(None)` when the file or its
    /// `worldInfoActivation` is missing. The file is opened beneath the run
    /// directory without following any symbolic link.
    pub fn load(run_dir: &Path) -> Result<Option<Self>, WorldInfoError> {
        match Self::load_snapshot(run_dir)? {
            None => Ok(None),
            Some(snapshot) => Self::from_prompt_snapshot(&snapshot),
        }
    }

    /// The run's whole stored prompt snapshot, read as [`Self::load`] reads
    /// it; `Ok(None)` when it is missing.
    pub fn load_snapshot(run_dir: &Path) -> Result<Option<Value>, WorldInfoError> {
        let Some(bytes) = read_snapshot(run_dir)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|error| WorldInfoError::file(format!("not valid JSON: {error}")))
    }

    /// The activation of a whole prompt snapshot (a JSON object);
    /// `Ok(None)` when it has no `worldInfoActivation` or it is `null`.
    pub fn from_prompt_snapshot(snapshot: &Value) -> Result<Option<Self>, WorldInfoError> {
        let Some(object) = snapshot.as_object() else {
            return Err(WorldInfoError::file(format!(
                "the prompt snapshot is {}, not an object",
                kind(snapshot)
            )));
        };
        match object.get(ACTIVATION_KEY) {
            None | Some(Value::Null) => Ok(None),
            Some(activation) => Self::from_json(activation).map(Some),
        }
    }

    /// Check and read a `worldInfoActivation` value.
    pub fn from_json(activation: &Value) -> Result<Self, WorldInfoError> {
        let object = activation.as_object().ok_or_else(|| {
            WorldInfoError::invalid(
                ACTIVATION_KEY,
                format!("is {}, not an object", kind(activation)),
            )
        })?;
        let entries = match object.get("entries") {
            Some(Value::Array(entries)) => entries,
            Some(other) => {
                return Err(WorldInfoError::invalid(
                    "entries",
                    format!("is {}, not an array", kind(other)),
                ));
            }
            None => return Err(WorldInfoError::invalid("entries", "is missing")),
        };
        let timestamp_ms = match object.get("timestampMs") {
            None | Some(Value::Null) => None,
            Some(value) => Some(timestamp(value).ok_or_else(|| {
                WorldInfoError::invalid("timestampMs", "is not a non-negative integer")
            })?),
        };
        let trigger = optional_string(object, "trigger", "trigger")?;

        let mut parsed = Vec::with_capacity(entries.len());
        let mut taken = HashSet::new();
        for (index, entry) in entries.iter().enumerate() {
            let field = |name: &str| format!("entries[{index}].{name}");
            let object = entry.as_object().ok_or_else(|| {
                WorldInfoError::invalid(
                    &format!("entries[{index}]"),
                    format!("is {}, not an object", kind(entry)),
                )
            })?;
            let world = optional_string(object, "world", &field("world"))?.unwrap_or_default();
            let uid = match object.get("uid") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(uid)) => uid.clone(),
                Some(Value::Number(uid)) => uid.to_string(),
                Some(other) => {
                    return Err(WorldInfoError::invalid(
                        &field("uid"),
                        format!("is {}, not a string or a number", kind(other)),
                    ));
                }
            };
            let display_name = optional_string(object, "displayName", &field("displayName"))?;
            let constant = match object.get("constant") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(constant)) => *constant,
                Some(other) => {
                    return Err(WorldInfoError::invalid(
                        &field("constant"),
                        format!("is {}, not a boolean", kind(other)),
                    ));
                }
            };
            let position = match object.get("position") {
                None | Some(Value::Null) => None,
                Some(Value::String(position)) => Some(position.clone()),
                Some(Value::Number(position)) => Some(position.to_string()),
                Some(other) => {
                    return Err(WorldInfoError::invalid(
                        &field("position"),
                        format!("is {}, not a string or a number", kind(other)),
                    ));
                }
            };
            let content = match object.get("content") {
                Some(Value::String(content)) => content.clone(),
                None => return Err(WorldInfoError::invalid(&field("content"), "is missing")),
                Some(other) => {
                    return Err(WorldInfoError::invalid(
                        &field("content"),
                        format!("is {}, not a string", kind(other)),
                    ));
                }
            };
            let natural = format!("{REF_PREFIX}{world}#{uid}");
            let reference = if world.is_empty() || uid.is_empty() || taken.contains(&natural) {
                format!("{INDEX_PREFIX}{index}")
            } else {
                natural
            };
            taken.insert(reference.clone());
            parsed.push(ActivatedEntry {
                index,
                world,
                uid,
                display_name,
                constant,
                position,
                content,
                reference,
            });
        }
        Ok(Self {
            entries: parsed,
            timestamp_ms,
            trigger,
        })
    }

    /// Give the run in `run_dir` this activation: checks it, then creates
    /// `input/prompt_snapshot.json` holding `{"worldInfoActivation": …}`,
    /// atomically and only if no prompt snapshot is there yet.
    pub fn store(run_dir: &Path, activation: &Value) -> Result<Self, WorldInfoError> {
        let checked = Self::from_json(activation)?;
        let mut snapshot = Map::new();
        snapshot.insert(ACTIVATION_KEY.to_owned(), activation.clone());
        write_snapshot(run_dir, &Value::Object(snapshot))?;
        Ok(checked)
    }

    /// Create the run's `input/prompt_snapshot.json` from a whole prompt
    /// snapshot (an object), create-only and atomic, after checking its
    /// `worldInfoActivation` if it has one.
    pub fn store_prompt_snapshot(
        run_dir: &Path,
        snapshot: &Value,
    ) -> Result<Option<Self>, WorldInfoError> {
        let checked = Self::from_prompt_snapshot(snapshot)?;
        write_snapshot(run_dir, snapshot)?;
        Ok(checked)
    }

    /// The entries, in activation order.
    pub fn entries(&self) -> &[ActivatedEntry] {
        &self.entries
    }

    pub fn timestamp_ms(&self) -> Option<u64> {
        self.timestamp_ms
    }

    pub fn trigger(&self) -> Option<&str> {
        self.trigger.as_deref()
    }

    /// The entry a reference names: an entry's own reference, else
    /// `worldinfo:activated#<index>` (decimal, no leading zero) for any
    /// entry. Surrounding whitespace is ignored.
    pub fn entry(&self, reference: &str) -> Option<&ActivatedEntry> {
        let reference = reference.trim();
        if let Some(entry) = self
            .entries
            .iter()
            .find(|entry| entry.reference == reference)
        {
            return Some(entry);
        }
        let digits = reference.strip_prefix(INDEX_PREFIX)?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return None;
        }
        self.entries.get(digits.parse::<usize>().ok()?)
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn optional_string(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, WorldInfoError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(WorldInfoError::invalid(
            field,
            format!("is {}, not a string", kind(other)),
        )),
    }
}

/// A non-negative integer, also written as an integral float (`1.7e12`).
fn timestamp(value: &Value) -> Option<u64> {
    if let Some(integer) = value.as_u64() {
        return Some(integer);
    }
    let float = value.as_f64()?;
    (float >= 0.0 && float.fract() == 0.0 && float < u64::MAX as f64).then_some(float as u64)
}

/// The snapshot's bytes, `Ok(None)` when it (or `input/`) is missing.
fn read_snapshot(run_dir: &Path) -> Result<Option<Vec<u8>>, WorldInfoError> {
    let dir = rustix::fs::open(run_dir, beneath::DIR_FLAGS, Mode::empty()).map_err(|errno| {
        WorldInfoError::file(format!(
            "cannot open the run directory {}: {errno}",
            run_dir.display()
        ))
    })?;
    let opened = beneath::open_beneath(
        dir.as_fd(),
        PROMPT_SNAPSHOT_FILE,
        beneath::READ_FLAGS,
        Mode::empty(),
    );
    let fd = match opened.map_err(Refusal::of) {
        Ok(fd) => fd,
        Err(Refusal::Missing) => return Ok(None),
        Err(Refusal::Link | Refusal::Escape) => {
            return Err(WorldInfoError::file(
                "is, or passes through, a symbolic link or mount point; it is never followed",
            ));
        }
        Err(Refusal::Unsupported) => return Err(WorldInfoError::file(beneath::NO_OPENAT2)),
        Err(Refusal::NotDirectory) => {
            return Err(WorldInfoError::file(format!(
                "cannot be opened: {}",
                Errno::NOTDIR
            )));
        }
        Err(Refusal::Other(errno)) => {
            return Err(WorldInfoError::file(format!("cannot be opened: {errno}")));
        }
    };
    let stat =
        fstat(&fd).map_err(|errno| WorldInfoError::file(format!("cannot be read: {errno}")))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(WorldInfoError::file("is not a regular file"));
    }
    let mut bytes = Vec::new();
    File::from(fd)
        .take(MAX_SNAPSHOT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| WorldInfoError::file(format!("cannot be read: {error}")))?;
    if bytes.len() as u64 > MAX_SNAPSHOT_BYTES {
        return Err(WorldInfoError::file(format!(
            "is over the {MAX_SNAPSHOT_BYTES}-byte limit"
        )));
    }
    Ok(Some(bytes))
}

/// Create `input/prompt_snapshot.json` atomically (temp file in the run's
/// `.tmp/`, fsync, rename without replacing, fsync the directory).
fn write_snapshot(run_dir: &Path, snapshot: &Value) -> Result<(), WorldInfoError> {
    let io = |what: &str, error: io::Error| {
        WorldInfoError::new(
            codes::IO_ERROR,
            format!("{what} {PROMPT_SNAPSHOT_FILE}: {error}"),
        )
    };
    let mut bytes = serde_json::to_vec_pretty(snapshot).map_err(|error| {
        WorldInfoError::new(
            codes::IO_ERROR,
            format!("serialize the prompt snapshot: {error}"),
        )
    })?;
    bytes.push(b'\n');
    let input = run_dir.join("input");
    let tmp = run_dir.join(TMP_DIR);
    for dir in [&input, &tmp] {
        fs::create_dir_all(dir).map_err(|error| io("create the directory of", error))?;
    }
    let mut temp = tempfile::NamedTempFile::new_in(&tmp).map_err(|error| io("stage", error))?;
    temp.write_all(&bytes)
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|error| io("write", error))?;
    let target = run_dir.join(PROMPT_SNAPSHOT_FILE);
    match temp.persist_noclobber(&target) {
        Ok(_) => {}
        Err(error) if error.error.kind() == io::ErrorKind::AlreadyExists => {
            return Err(WorldInfoError::new(
                codes::PROMPT_SNAPSHOT_EXISTS,
                format!(
                    "{PROMPT_SNAPSHOT_FILE} already exists; a prompt snapshot is never overwritten"
                ),
            ));
        }
        Err(error) => return Err(io("create", error.error)),
    }
    File::open(&input)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| io("sync the directory of", error))
}
