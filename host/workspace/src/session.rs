//! `WorkspaceSession`: one invocation's view of the workspace, with the
//! read-states that make writes and patches compare-and-swap (reference
//! §5.5). The model never sends a sha; what it has read is what authorizes
//! what it may overwrite.
//!
//! Every check-and-write runs under the workspace's per-path lock, so two
//! sessions of one run cannot interleave between the check and the write;
//! the lock is taken before the session's own state map, never after.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::error::{WorkspaceError, codes};
use crate::fs::{Placed, Placement};
use crate::path::{PathUse, WorkspacePath};
use crate::replace::{self, Occurrence};
use crate::workspace::{TextFile, Workspace, sha256_hex};
use toolhost_core::WorkMeter;
use toolhost_text::metrics;

/// What this invocation knows about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadState {
    /// The version the knowledge is about.
    pub sha256: String,
    /// The whole file was shown (or written by this invocation).
    pub full_read: bool,
    /// The fragments shown, when not a full read.
    pub observed: Vec<String>,
    /// A patch based on a partial read failed: the next patch needs a full
    /// read first.
    pub patch_requires_full_read: bool,
}

impl ReadState {
    fn full(sha256: String) -> Self {
        Self {
            sha256,
            full_read: true,
            observed: Vec::new(),
            patch_requires_full_read: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteMode {
    Replace,
    Append,
}

/// A successful `workspace.write_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub path: String,
    pub mode: WriteMode,
    /// The file's sha256 after the write.
    pub sha256: String,
    /// `None` when the file was created.
    pub previous_sha256: Option<String>,
    /// Characters and words of the content written (for an append, of the
    /// appended text), for the structured result; the model's text leaves
    /// them out.
    pub chars: u64,
    pub words: u64,
    pub created: bool,
}

/// A successful `workspace.apply_patch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Patched {
    pub path: String,
    pub replacements: u64,
    pub old_sha256: String,
    pub sha256: String,
    /// Characters and words of the whole file after the patch.
    pub chars: u64,
    pub words: u64,
}

#[derive(Debug)]
pub struct WorkspaceSession {
    workspace: Arc<Workspace>,
    states: Mutex<HashMap<String, ReadState>>,
    intent: IntentSlot,
}

/// The session's sink, if any (a closure has no `Debug`).
#[derive(Default)]
struct IntentSlot(Mutex<Option<IntentSink>>);

impl std::fmt::Debug for IntentSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntentSlot")
    }
}

/// A write about to land: recorded before the file changes, so a resumed
/// run can tell whether a write a crash interrupted landed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteIntent {
    pub path: String,
    /// The file's sha256 before, `None` when it did not exist.
    pub before_sha256: Option<String>,
    /// What it will be after.
    pub after_sha256: String,
}

/// Where a session reports each [`WriteIntent`]; an error stops the write.
pub type IntentSink = Arc<dyn Fn(&WriteIntent) -> Result<(), WorkspaceError> + Send + Sync>;

fn recoverable(code: &'static str, message: String) -> WorkspaceError {
    WorkspaceError::recoverable(code, message)
}

impl WorkspaceSession {
    pub fn new(workspace: Arc<Workspace>) -> Self {
        Self {
            workspace,
            states: Mutex::new(HashMap::new()),
            intent: IntentSlot::default(),
        }
    }

    /// Report each write to `sink` before it lands (`None`: stop).
    pub fn set_intent_sink(&self, sink: Option<IntentSink>) {
        *self
            .intent
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = sink;
    }

    fn announce(
        &self,
        path: &WorkspacePath,
        before: Option<&str>,
        after: &[u8],
    ) -> Result<(), WorkspaceError> {
        let sink = self
            .intent
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        match sink {
            Some(sink) => sink(&WriteIntent {
                path: path.as_str().to_owned(),
                before_sha256: before.map(str::to_owned),
                after_sha256: sha256_hex(after),
            }),
            None => Ok(()),
        }
    }

    /// A write that landed before a crash, found by a resumed run: the
    /// file is known as it was written, as the write would have left it.
    pub fn record_landed_write(&self, path: &str, sha256: &str) {
        if let Ok(parsed) = WorkspacePath::parse(path, PathUse::File) {
            self.states().insert(
                parsed.as_str().to_owned(),
                ReadState::full(sha256.to_owned()),
            );
        }
    }

    pub fn workspace(&self) -> &Arc<Workspace> {
        &self.workspace
    }

    fn states(&self) -> MutexGuard<'_, HashMap<String, ReadState>> {
        self.states.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn state(&self, path: &WorkspacePath) -> Option<ReadState> {
        self.states().get(path.as_str()).cloned()
    }

    fn flag_full_read(&self, path: &WorkspacePath) {
        if let Some(state) = self.states().get_mut(path.as_str()) {
            state.patch_requires_full_read = true;
        }
    }

    /// Everything this session knows, by path: what a reopened invocation
    /// restores with [`WorkspaceSession::restore_states`].
    pub fn states_snapshot(&self) -> BTreeMap<String, ReadState> {
        self.states()
            .iter()
            .map(|(path, state)| (path.clone(), state.clone()))
            .collect()
    }

    /// Take over the read-states of an earlier process of the same
    /// invocation. Nothing is trusted blindly: every write and patch still
    /// compares the state's sha with the file as it is now, so a file changed
    /// meanwhile is stale. Paths that no longer parse are dropped.
    pub fn restore_states(&self, states: BTreeMap<String, ReadState>) {
        let mut current = self.states();
        for (path, state) in states {
            if let Ok(parsed) = WorkspacePath::parse(&path, PathUse::File) {
                current.insert(parsed.as_str().to_owned(), state);
            }
        }
    }

    /// What this session knows about `path` (for tests and audit).
    pub fn read_state(&self, path: &str) -> Option<ReadState> {
        let path = WorkspacePath::parse(path, PathUse::File).ok()?;
        self.state(&path)
    }

    /// [`Workspace::read_text`]; nothing is recorded until the tool says
    /// what it showed through [`Self::record_read`].
    pub fn read_text(&self, path: &str) -> Result<TextFile, WorkspaceError> {
        self.workspace.read_text(path)
    }

    /// The tool showed the model `path` at version `sha256`: all of it
    /// (`seen = None`) or the fragment `seen` (the raw text of the lines
    /// shown, without line-number prefixes).
    ///
    /// The host records only what the file holds now: when `sha256` is not
    /// the current sha, or `seen` is not in the current text, nothing is
    /// recorded and the result is the recoverable
    /// `workspace.read_stale_file` (the file changed while it was being
    /// read; read it again).
    ///
    /// Full: `{sha, full_read, observed: [], flag cleared}`. Partial: a state
    /// about another version restarts with `[seen]` (the flag is kept); a
    /// full read of this version stays full; otherwise `seen` is added.
    pub fn record_read(
        &self,
        path: &str,
        sha256: &str,
        seen: Option<&str>,
    ) -> Result<(), WorkspaceError> {
        let path = WorkspacePath::parse(path, PathUse::File)?;
        self.workspace.roots().check_visible(&path)?;
        self.workspace.with_path_lock(&path, || {
            let current = self
                .workspace
                .read_existing(&path)?
                .ok_or_else(|| WorkspaceError::file_not_found(path.as_str()))?;
            if current.sha256 != sha256 {
                return Err(recoverable(
                    codes::READ_STALE_FILE,
                    format!(
                        "workspace file `{path}` changed while it was being read; call {workspace_read_file} again.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                ));
            }
            if let Some(seen) = seen
                && !current.text.contains(seen)
            {
                return Err(recoverable(
                    codes::READ_STALE_FILE,
                    format!(
                        "the text reported as read from `{path}` is not in the file; call {workspace_read_file} again.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                ));
            }
            let mut states = self.states();
            let key = path.as_str().to_owned();
            match seen {
                None => {
                    states.insert(key, ReadState::full(current.sha256));
                }
                Some(seen) => match states.get_mut(&key) {
                    Some(state) if state.sha256 != current.sha256 => {
                        state.sha256 = current.sha256;
                        state.full_read = false;
                        state.observed = vec![seen.to_owned()];
                    }
                    Some(state) if state.full_read => {}
                    Some(state) => {
                        if !state.observed.iter().any(|known| known == seen) {
                            state.observed.push(seen.to_owned());
                        }
                    }
                    None => {
                        states.insert(
                            key,
                            ReadState {
                                sha256: current.sha256,
                                full_read: false,
                                observed: vec![seen.to_owned()],
                                patch_requires_full_read: false,
                            },
                        );
                    }
                },
            }
            Ok(())
        })
    }

    /// `workspace.write_file`.
    ///
    /// - `Replace` on an existing file needs a read-state (any read, partial
    ///   included: `workspace.write_requires_read`) whose sha is the file's
    ///   current sha (`workspace.write_stale_file`). A missing file is
    ///   created create-only; one appearing meanwhile is
    ///   `workspace.write_requires_read`. Afterwards the file is fully known.
    /// - `Append` needs no read, adds `content` verbatim (no newline),
    ///   creates a missing file. Afterwards the file is fully known only if it
    ///   was new or the session had fully read exactly the version appended
    ///   to; otherwise the old state stays, so appending to a partially read
    ///   (or stale) file never authorizes a later replace.
    pub fn write(
        &self,
        path: &str,
        content: &str,
        mode: WriteMode,
    ) -> Result<Written, WorkspaceError> {
        let path = WorkspacePath::parse(path, PathUse::File)?;
        self.workspace.roots().check_writable(&path)?;
        if mode == WriteMode::Replace {
            self.workspace.check_size(&path, content.len())?;
        }
        self.workspace.with_path_lock(&path, || {
            let current = self.workspace.read_existing(&path)?;
            if mode == WriteMode::Replace
                && let Some(current) = &current
            {
                let Some(state) = self.state(&path) else {
                    return Err(recoverable(
                        codes::WRITE_REQUIRES_READ,
                        format!(
                            "workspace file `{path}` already exists and was not read in this invocation; call {workspace_read_file} on it before replacing it, or write with mode `append`.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                        ),
                    ));
                };
                if state.sha256 != current.sha256 {
                    return Err(recoverable(
                        codes::WRITE_STALE_FILE,
                        format!(
                            "workspace file `{path}` changed since it was last read; call {workspace_read_file} again before replacing it.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                        ),
                    ));
                }
            }
            let new_text = match (mode, &current) {
                (WriteMode::Append, Some(current)) => {
                    let mut text = String::with_capacity(current.text.len() + content.len());
                    text.push_str(&current.text);
                    text.push_str(content);
                    self.workspace.check_size(&path, text.len())?;
                    text
                }
                _ => content.to_owned(),
            };
            let placement = if current.is_some() {
                Placement::Replace
            } else {
                Placement::CreateOnly
            };
            self.announce(
                &path,
                current.as_ref().map(|current| current.sha256.as_str()),
                new_text.as_bytes(),
            )?;
            if self
                .workspace
                .place(&path, new_text.as_bytes(), placement)?
                == Placed::Exists
            {
                // Created by someone else since we looked (not through this
                // workspace: the path lock is held).
                return Err(recoverable(
                    codes::WRITE_REQUIRES_READ,
                    format!(
                        "workspace file `{path}` was created by someone else meanwhile; call {workspace_read_file} on it before writing it.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                ));
            }
            let sha256 = sha256_hex(new_text.as_bytes());
            let previous_sha256 = current.map(|current| current.sha256);
            {
                let mut states = self.states();
                let fully_known = match (mode, &previous_sha256) {
                    (WriteMode::Replace, _) | (WriteMode::Append, None) => true,
                    (WriteMode::Append, Some(previous)) => states
                        .get(path.as_str())
                        .is_some_and(|state| state.full_read && &state.sha256 == previous),
                };
                if fully_known {
                    states.insert(path.as_str().to_owned(), ReadState::full(sha256.clone()));
                }
            }
            Ok(Written {
                path: path.as_str().to_owned(),
                mode,
                created: previous_sha256.is_none(),
                sha256,
                previous_sha256,
                chars: metrics::chars(content),
                words: metrics::words(content),
            })
        })
    }

    /// `workspace.apply_patch`, in the reference's order: empty
    /// `old_string`; `old == new`; path checks; no read-state; the
    /// full-read flag; a partial read with `replace_all`, or whose observed
    /// texts do not contain `old` (both set the flag); a changed file; 0
    /// matches; several matches without `replace_all` (the last three set the
    /// flag after a partial read). The write is made under the path lock
    /// against the version checked. After a partial read the observed texts
    /// are patched (`replacen(old, new, 1)`) and the flag cleared; after a
    /// full read the file stays fully known.
    pub fn patch(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Patched, WorkspaceError> {
        self.patch_metered(path, old, new, replace_all, &WorkMeter::unbounded())
    }

    /// [`Self::patch`] for one call: every byte the matching examines is
    /// charged to `meter`, which stops the work at the call's deadline
    /// ([`WorkspaceError::DeadlinePassed`]). Whatever the strings, the work
    /// is linear in the file and the strings, and nothing larger than the
    /// file cap is allocated: uniqueness takes at most two `memmem`
    /// searches, `replace_all` counts its matches in one pass and checks
    /// the resulting length before building it.
    pub fn patch_metered(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
        meter: &WorkMeter,
    ) -> Result<Patched, WorkspaceError> {
        if old.is_empty() {
            return Err(recoverable(
                codes::PATCH_EMPTY_OLD_STRING,
                format!(
                    "old_string is empty; copy the exact text to replace from {} output.",
                    crate::error::alias("workspace.read_file")
                ),
            ));
        }
        if old == new {
            return Err(recoverable(
                codes::PATCH_NO_CHANGE,
                "old_string and new_string are identical, so the patch would change nothing; give the new text in new_string.".to_owned(),
            ));
        }
        let path = WorkspacePath::parse(path, PathUse::File)?;
        self.workspace.roots().check_writable(&path)?;
        self.workspace.with_path_lock(&path, || {
            let Some(state) = self.state(&path) else {
                return Err(recoverable(
                    codes::PATCH_REQUIRES_READ,
                    format!(
                        "workspace file `{path}` was not read in this invocation; call {workspace_read_file} on it before patching it.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                ));
            };
            let full_read_needed = |why: &str| {
                recoverable(
                    codes::PATCH_REQUIRES_FULL_READ,
                    format!(
                        "{why}; call {workspace_read_file} on `{path}` without start_line/line_count to read the whole file, then patch it.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                )
            };
            if state.patch_requires_full_read {
                return Err(full_read_needed(&format!(
                    "an earlier patch of `{path}` based on a partial read failed"
                )));
            }
            let partial = !state.full_read;
            if partial && replace_all {
                self.flag_full_read(&path);
                return Err(full_read_needed("replace_all needs a full read of the file"));
            }
            let observed_bytes: usize = state.observed.iter().map(String::len).sum();
            meter.charge(observed_bytes as u64)?;
            if partial && !state.observed.iter().any(|text| text.contains(old)) {
                self.flag_full_read(&path);
                return Err(full_read_needed(
                    "old_string is not in the parts of the file read so far",
                ));
            }
            let stale = || {
                recoverable(
                    codes::PATCH_STALE_FILE,
                    format!(
                        "workspace file `{path}` changed since it was last read; call {workspace_read_file} again, then retry the patch.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                )
            };
            let current = self
                .workspace
                .read_existing(&path)?
                .ok_or_else(|| WorkspaceError::file_not_found(path.as_str()))?;
            if current.sha256 != state.sha256 {
                if partial {
                    self.flag_full_read(&path);
                }
                return Err(stale());
            }
            let not_found = || {
                recoverable(
                    codes::PATCH_OLD_STRING_NOT_FOUND,
                    format!(
                        "old_string was not found in `{path}`; copy it exactly from {workspace_read_file} output, without the line-number prefixes.",
                workspace_read_file = crate::error::alias("workspace.read_file")
                    ),
                )
            };
            let text = &current.text;
            let (new_text, replacements) = if replace_all {
                let found = replace::count(text, old, meter)?;
                if found == 0 {
                    if partial {
                        self.flag_full_read(&path);
                    }
                    return Err(not_found());
                }
                // The size is known before anything is built.
                let len = replace::replaced_len(text.len(), found, old.len(), new.len())
                    .unwrap_or(u64::MAX);
                self.workspace.check_size(&path, usize::try_from(len).unwrap_or(usize::MAX))?;
                (
                    replace::replace_all(text, old, new, len as usize, meter)?,
                    found,
                )
            } else {
                match replace::find_unique(text, old, meter)? {
                    Occurrence::Unique(at) => {
                        self.workspace
                            .check_size(&path, text.len() - old.len() + new.len())?;
                        (replace::replace_at(text, at, old.len(), new), 1)
                    }
                    Occurrence::None => {
                        if partial {
                            self.flag_full_read(&path);
                        }
                        return Err(not_found());
                    }
                    Occurrence::Several { first, second } => {
                        if partial {
                            self.flag_full_read(&path);
                        }
                        let (first, second) =
                            (replace::line_of(text, first), replace::line_of(text, second));
                        let where_ = if first == second {
                            format!("twice on line {first}")
                        } else {
                            format!("on lines {first} and {second}")
                        };
                        return Err(recoverable(
                            codes::PATCH_OLD_STRING_NOT_UNIQUE,
                            format!(
                                "old_string occurs more than once in `{path}` (first {where_}); include more surrounding text to make it unique, or set replace_all to replace every occurrence."
                            ),
                        ));
                    }
                }
            };
            // Under the path lock, against the version just checked.
            self.announce(&path, Some(&current.sha256), new_text.as_bytes())?;
            self.workspace
                .place(&path, new_text.as_bytes(), Placement::Replace)?;
            let sha256 = sha256_hex(new_text.as_bytes());
            {
                let mut states = self.states();
                let next = if partial {
                    ReadState {
                        sha256: sha256.clone(),
                        full_read: false,
                        observed: state
                            .observed
                            .iter()
                            .map(|text| text.replacen(old, new, 1))
                            .collect(),
                        patch_requires_full_read: false,
                    }
                } else {
                    ReadState::full(sha256.clone())
                };
                states.insert(path.as_str().to_owned(), next);
            }
            Ok(Patched {
                path: path.as_str().to_owned(),
                replacements,
                old_sha256: current.sha256,
                sha256,
                chars: metrics::chars(&new_text),
                words: metrics::words(&new_text),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fs::BEFORE_COMMIT;
    use crate::roots::WorkspaceRoots;
    use crate::workspace::WorkspaceLimits;

    fn session() -> (tempfile::TempDir, WorkspaceSession) {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(temp.path().join("output")).unwrap();
        let workspace = Workspace::open(
            temp.path(),
            WorkspaceRoots::default_run(),
            WorkspaceLimits::default(),
        )
        .unwrap();
        (temp, WorkspaceSession::new(Arc::new(workspace)))
    }

    /// Between the check ("no file there") and the create-only rename,
    /// someone else creates the file: theirs stays, ours is refused.
    #[test]
    fn a_file_created_between_check_and_create_is_write_requires_read() {
        let (temp, session) = session();
        let target = temp.path().join("output/new.md");
        let hook_target = target.clone();
        BEFORE_COMMIT.with(|slot| {
            *slot.borrow_mut() = Some(Box::new(move || {
                std::fs::write(&hook_target, "theirs").unwrap();
            }));
        });
        let result = session.write("output/new.md", "ours", WriteMode::Replace);
        BEFORE_COMMIT.with(|slot| *slot.borrow_mut() = None);
        let error = result.unwrap_err();
        assert_eq!(error.code(), codes::WRITE_REQUIRES_READ);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
        assert_eq!(session.read_state("output/new.md"), None);
        assert_eq!(
            std::fs::read_dir(temp.path().join(".tmp")).unwrap().count(),
            0
        );
    }
}
