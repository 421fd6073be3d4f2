//! Where things live inside a run directory.
//!
//! ```text
//! <run>/run.json                                      manifest (create-only)
//! <run>/events.jsonl                                  the journal
//! <run>/input/resolved_profile.json
//! <run>/input/invocations/<invocation-id>/tool_snapshot.json
//! <run>/tool-args/call_<hex>.json                     <hex>: first 8 bytes of sha256(call id)
//! <run>/tool-results/call_<hex>.json
//! <run>/model-responses/  <run>/agent-results/
//! <run>/.tmp/                                         temp files for atomic writes
//! <run>/output/ scratch/ plan/ summaries/ persist/    workspace roots
//! ```
//!
//! Every helper returns both the absolute path and the run-relative form
//! (always `/`-separated), because journal payloads record relative refs.

use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

pub const MANIFEST_FILE: &str = "run.json";
pub const JOURNAL_FILE: &str = "events.jsonl";
pub const INPUT_DIR: &str = "input";
pub const RESOLVED_PROFILE_FILE: &str = "input/resolved_profile.json";
/// The prompt snapshot a run was given (world-info activation), if any.
pub const PROMPT_SNAPSHOT_FILE: &str = "input/prompt_snapshot.json";
pub const INVOCATIONS_DIR: &str = "input/invocations";
pub const TOOL_SNAPSHOT_FILE: &str = "tool_snapshot.json";
/// What an invocation has read of the workspace (runtime state, replaced as
/// it changes, so a reopened invocation keeps it).
pub const READ_STATE_FILE: &str = "read_state.json";
pub const TOOL_ARGS_DIR: &str = "tool-args";
pub const TOOL_RESULTS_DIR: &str = "tool-results";
pub const MODEL_RESPONSES_DIR: &str = "model-responses";
pub const AGENT_RESULTS_DIR: &str = "agent-results";
pub const TMP_DIR: &str = ".tmp";

/// Entries of the run directory a tool never sees.
pub const HIDDEN: [&str; 7] = [
    MANIFEST_FILE,
    JOURNAL_FILE,
    INPUT_DIR,
    TOOL_ARGS_DIR,
    MODEL_RESPONSES_DIR,
    AGENT_RESULTS_DIR,
    TMP_DIR,
];

/// Directories every run has besides its workspace roots, parents first.
pub const SYSTEM_DIRS: [&str; 7] = [
    TMP_DIR,
    INPUT_DIR,
    INVOCATIONS_DIR,
    TOOL_ARGS_DIR,
    TOOL_RESULTS_DIR,
    MODEL_RESPONSES_DIR,
    AGENT_RESULTS_DIR,
];

/// Longest id accepted as a path segment.
pub const MAX_SEGMENT_BYTES: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("{kind} `{value}` cannot be a path segment: expected 1 to 128 of `A-Z a-z 0-9 _ -`")]
    InvalidSegment { kind: &'static str, value: String },
    #[error("run-relative path `{path}` is invalid: {reason}")]
    InvalidRelativePath { path: String, reason: &'static str },
}

/// `[A-Za-z0-9_-]{1,128}`: safe as a file name on every platform we run on.
pub fn check_segment(kind: &'static str, value: &str) -> Result<(), LayoutError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_SEGMENT_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(LayoutError::InvalidSegment {
            kind,
            value: value.to_owned(),
        })
    }
}

/// `call_` + lowercase hex of the first 8 bytes of sha256(call id). Call ids
/// come from providers and may hold anything; the stem is always a safe,
/// bounded file name (the raw id is kept inside the file).
pub fn audit_stem(call_id: &str) -> String {
    let digest = Sha256::digest(call_id.as_bytes());
    format!("call_{}", hex::encode(&digest[..8]))
}

/// `run_<YYYYMMDDTHHMMSSZ>_<8 lowercase hex>`: sorts by creation time, and
/// the random suffix separates runs created in the same second.
pub fn new_run_id() -> String {
    let seconds = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let compact: String = seconds.chars().filter(|c| *c != '-' && *c != ':').collect();
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("run_{compact}_{}", &random[..8])
}

/// A file or directory inside the run, in both forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPath {
    pub absolute: PathBuf,
    /// `/`-separated, relative to the run root; what payloads record.
    pub relative: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLayout {
    root: PathBuf,
}

impl RunLayout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// `<runs_dir>/<run_id>`, refusing a run id that is not a safe segment.
    pub fn under(runs_dir: &Path, run_id: &str) -> Result<Self, LayoutError> {
        check_segment("run id", run_id)?;
        Ok(Self::new(runs_dir.join(run_id)))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolve a run-relative path. Our own paths only, but still refuse
    /// anything that could leave the run directory.
    pub fn resolve(&self, relative: &str) -> Result<RunPath, LayoutError> {
        let invalid = |reason| LayoutError::InvalidRelativePath {
            path: relative.to_owned(),
            reason,
        };
        if relative.is_empty() {
            return Err(invalid("it is empty"));
        }
        if relative.contains('\\') {
            return Err(invalid("it contains `\\`; use `/`"));
        }
        let path = Path::new(relative);
        for component in path.components() {
            match component {
                Component::Normal(_) => {}
                Component::ParentDir => return Err(invalid("it contains `..`")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(invalid("it is absolute"));
                }
                Component::CurDir => return Err(invalid("it contains `.`")),
            }
        }
        // `Path::components` silently folds `a//b` and a trailing `/`; the
        // relative form is recorded verbatim, so keep it canonical.
        if relative.split('/').any(str::is_empty) {
            return Err(invalid("it has an empty segment"));
        }
        Ok(RunPath {
            absolute: self.root.join(path),
            relative: relative.to_owned(),
        })
    }

    fn fixed(&self, relative: &str) -> RunPath {
        RunPath {
            absolute: self.root.join(relative),
            relative: relative.to_owned(),
        }
    }

    pub fn manifest(&self) -> RunPath {
        self.fixed(MANIFEST_FILE)
    }

    pub fn journal(&self) -> RunPath {
        self.fixed(JOURNAL_FILE)
    }

    pub fn resolved_profile(&self) -> RunPath {
        self.fixed(RESOLVED_PROFILE_FILE)
    }

    pub fn tmp_dir(&self) -> PathBuf {
        self.root.join(TMP_DIR)
    }

    pub fn model_responses_dir(&self) -> RunPath {
        self.fixed(MODEL_RESPONSES_DIR)
    }

    pub fn agent_results_dir(&self) -> RunPath {
        self.fixed(AGENT_RESULTS_DIR)
    }

    pub fn invocation_dir(&self, invocation_id: &str) -> Result<RunPath, LayoutError> {
        check_segment("invocation id", invocation_id)?;
        Ok(self.fixed(&format!("{INVOCATIONS_DIR}/{invocation_id}")))
    }

    pub fn tool_snapshot(&self, invocation_id: &str) -> Result<RunPath, LayoutError> {
        check_segment("invocation id", invocation_id)?;
        Ok(self.fixed(&format!(
            "{INVOCATIONS_DIR}/{invocation_id}/{TOOL_SNAPSHOT_FILE}"
        )))
    }

    pub fn read_state(&self, invocation_id: &str) -> Result<RunPath, LayoutError> {
        check_segment("invocation id", invocation_id)?;
        Ok(self.fixed(&format!(
            "{INVOCATIONS_DIR}/{invocation_id}/{READ_STATE_FILE}"
        )))
    }

    pub fn tool_args(&self, call_id: &str) -> RunPath {
        self.fixed(&format!("{TOOL_ARGS_DIR}/{}.json", audit_stem(call_id)))
    }

    pub fn tool_result(&self, call_id: &str) -> RunPath {
        self.fixed(&format!("{TOOL_RESULTS_DIR}/{}.json", audit_stem(call_id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_stem_is_sixteen_lowercase_hex() {
        // sha256("abc") = ba7816bf8f01cfea…
        assert_eq!(audit_stem("abc"), "call_ba7816bf8f01cfea");
        let hostile = format!("{}/..\\ 日本語", "x".repeat(1200));
        let stem = audit_stem(&hostile);
        assert_eq!(stem.len(), 5 + 16);
        assert!(
            stem[5..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
    }

    #[test]
    fn run_ids_are_sortable_and_safe() {
        let id = new_run_id();
        // run_20261203T022709Z_1a2b3c4d
        assert_eq!(id.len(), 4 + 16 + 1 + 8, "{id}");
        assert!(id.starts_with("run_"));
        assert_eq!(&id[12..13], "T");
        assert_eq!(&id[19..21], "Z_");
        check_segment("run id", &id).expect("a run id is a valid segment");
        assert_ne!(new_run_id()[21..], id[21..], "random suffix");
    }

    #[test]
    fn segments_are_checked() {
        for good in ["inv_root", "a", "A-9_z", &"x".repeat(128)] {
            check_segment("invocation id", good).expect(good);
        }
        for bad in ["", ".", "..", "a/b", "a b", "日本", "a.b", &"x".repeat(129)] {
            assert!(
                matches!(
                    check_segment("invocation id", bad),
                    Err(LayoutError::InvalidSegment { .. })
                ),
                "{bad}"
            );
        }
        let layout = RunLayout::new("/runs/r");
        assert!(layout.tool_snapshot("../x").is_err());
        assert!(RunLayout::under(Path::new("/runs"), "../etc").is_err());
        assert_eq!(
            RunLayout::under(Path::new("/runs"), "run_1")
                .expect("valid")
                .root(),
            Path::new("/runs/run_1")
        );
    }

    #[test]
    fn helpers_give_absolute_and_relative_forms() {
        let layout = RunLayout::new("/runs/r");
        let args = layout.tool_args("abc");
        assert_eq!(args.relative, "tool-args/call_ba7816bf8f01cfea.json");
        assert_eq!(
            args.absolute,
            Path::new("/runs/r/tool-args/call_ba7816bf8f01cfea.json")
        );
        assert_eq!(
            layout.tool_result("abc").relative,
            "tool-results/call_ba7816bf8f01cfea.json"
        );
        let snapshot = layout.tool_snapshot("inv_root").expect("valid");
        assert_eq!(
            snapshot.relative,
            "input/invocations/inv_root/tool_snapshot.json"
        );
        assert_eq!(layout.journal().relative, "events.jsonl");
    }

    #[test]
    fn resolve_refuses_escapes() {
        let layout = RunLayout::new("/runs/r");
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "./a",
            "a//b",
            "a/",
            "a\\b",
        ] {
            assert!(
                matches!(
                    layout.resolve(bad),
                    Err(LayoutError::InvalidRelativePath { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(
            layout.resolve("output/a.md").expect("valid").absolute,
            Path::new("/runs/r/output/a.md")
        );
    }
}
