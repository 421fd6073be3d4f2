//! `run.json`: what a run is, written once when the run directory is created.
//!
//! Read strictly: an unknown field or another `manifestVersion` is an error,
//! because a manifest this build does not fully understand must not be
//! reopened and appended to.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::journal::Durability;
use crate::layout::{self, JOURNAL_FILE, LayoutError, RESOLVED_PROFILE_FILE, TOOL_RESULTS_DIR};
use toolhost_core::prompt_snapshot::PromptOrigin;

/// The only manifest version this build reads and writes.
pub const MANIFEST_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not JSON, a missing or unknown field (the message names it), or a
    /// value of the wrong type.
    #[error("run manifest is malformed: {0}")]
    Malformed(serde_json::Error),
    #[error("run manifest has manifestVersion {found}; this build reads only version 1")]
    UnsupportedVersion { found: String },
    #[error("run manifest has no manifestVersion")]
    MissingVersion,
    #[error("run manifest runId: {0}")]
    InvalidRunId(LayoutError),
    #[error("run manifest createdAt `{0}` is not an RFC 3339 UTC timestamp")]
    InvalidTimestamp(String),
    #[error("run manifest profile.sha256 `{0}` is not 64 lowercase hex digits")]
    InvalidDigest(String),
    #[error("run manifest {field} is `{found}`; this build keeps it at `{expected}`")]
    UnsupportedPath {
        field: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("run manifest root `{path}` is invalid: {reason}")]
    InvalidRoot { path: String, reason: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Lifecycle {
    /// Lives and dies with the run.
    Run,
    /// Outlives the run (committed back when it completes).
    Persistent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommitPolicy {
    Never,
    OnRunCompleted,
}

/// One workspace root a tool may see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RootSpec {
    /// A single segment under the run directory.
    pub path: String,
    pub visible: bool,
    pub writable: bool,
    pub lifecycle: Lifecycle,
    pub commit: CommitPolicy,
    /// Filled by the runtime, not by tools (e.g. `tool-results`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub runtime: bool,
}

fn is_false(value: &bool) -> bool {
    !value
}

impl RootSpec {
    fn workspace(path: &str) -> Self {
        Self {
            path: path.to_owned(),
            visible: true,
            writable: true,
            lifecycle: Lifecycle::Run,
            commit: CommitPolicy::Never,
            runtime: false,
        }
    }

    /// output, scratch, plan, summaries (per run) and persist (kept, committed
    /// when the run completes).
    pub fn default_universe() -> Vec<Self> {
        let mut roots: Vec<Self> = ["output", "scratch", "plan", "summaries"]
            .into_iter()
            .map(Self::workspace)
            .collect();
        roots.push(Self {
            lifecycle: Lifecycle::Persistent,
            commit: CommitPolicy::OnRunCompleted,
            ..Self::workspace("persist")
        });
        roots
    }

    /// `tool-results`: visible to tools, written only by the runtime.
    pub fn tool_results() -> Self {
        Self {
            writable: false,
            runtime: true,
            ..Self::workspace(TOOL_RESULTS_DIR)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileRef {
    pub id: String,
    /// Lowercase hex sha256 of the resolved profile file's bytes.
    pub sha256: String,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JournalRef {
    pub path: String,
    pub durability: Durability,
}

/// The chat a run is bound to: its file, and the prefix the run may see
/// (messages added later are invisible to the run's tools).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatBinding {
    /// Absolute path of the SillyTavern JSONL chat file.
    pub path: String,
    /// Messages (after the header) frozen into the run.
    pub visible_messages: u32,
    /// sha256 of the frozen prefix's bytes: a reopened run (or a commit)
    /// refuses a chat whose history changed underneath it.
    pub prefix_sha256: String,
    /// How the reply lands: `swipe`, `regenerate` or `continue` (absent:
    /// `normal`, a new message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_type: Option<String>,
    /// The message a swipe, regeneration or continuation writes into, as it
    /// was when the run was bound (`{index, textLen, textSha256}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Value>,
}

/// An installed-skills directory the run reads, at one scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillSourceRef {
    /// `global`, `preset`, `profile` or `character` (later scopes override).
    pub scope: String,
    /// Absolute path of the directory holding one folder per skill.
    pub dir: String,
}

/// What the run reads besides its own directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunInputs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatBinding>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<SkillSourceRef>,
    /// Whether `input/prompt_snapshot.json` was stored (a whole snapshot,
    /// or only the world info activation).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompt_snapshot: bool,
    /// Where the model's prompt came from: the stored snapshot, or built
    /// from the bound chat. Absent in runs made before prompts were read:
    /// they keep their first request when resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<PromptOrigin>,
}

impl RunInputs {
    pub fn is_empty(&self) -> bool {
        self.chat.is_none() && self.skills.is_empty() && !self.prompt_snapshot
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunManifest {
    pub manifest_version: u32,
    pub run_id: String,
    /// RFC 3339, UTC, milliseconds.
    pub created_at: String,
    pub toolhost_version: String,
    pub profile: ProfileRef,
    pub journal: JournalRef,
    pub roots: Vec<RootSpec>,
    pub hidden: Vec<String>,
    /// The chat, skills and prompt snapshot the run is bound to.
    #[serde(default, skip_serializing_if = "RunInputs::is_empty")]
    pub inputs: RunInputs,
}

impl RunManifest {
    /// A manifest created now by this build, with the standard paths and
    /// hidden entries. `roots` is recorded as given (typically
    /// `default_universe()` plus `tool_results()`).
    pub fn new(
        run_id: impl Into<String>,
        profile_id: impl Into<String>,
        resolved_profile_json: &[u8],
        roots: Vec<RootSpec>,
    ) -> Self {
        Self {
            manifest_version: MANIFEST_VERSION,
            run_id: run_id.into(),
            created_at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            toolhost_version: env!("CARGO_PKG_VERSION").to_owned(),
            profile: ProfileRef {
                id: profile_id.into(),
                sha256: sha256_hex(resolved_profile_json),
                path: RESOLVED_PROFILE_FILE.to_owned(),
            },
            journal: JournalRef {
                path: JOURNAL_FILE.to_owned(),
                durability: Durability::default(),
            },
            roots,
            hidden: layout::HIDDEN
                .iter()
                .map(|entry| (*entry).to_owned())
                .collect(),
            inputs: RunInputs::default(),
        }
    }

    /// Parse and validate `run.json`. The version is checked before the
    /// strict parse, so a future manifest reports its version rather than
    /// whichever new field it has.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Self, ManifestError> {
        let value: Value = serde_json::from_slice(bytes).map_err(ManifestError::Malformed)?;
        match value.get("manifestVersion") {
            None if value.is_object() => return Err(ManifestError::MissingVersion),
            Some(version) if version.as_u64() != Some(u64::from(MANIFEST_VERSION)) => {
                return Err(ManifestError::UnsupportedVersion {
                    found: version.to_string(),
                });
            }
            _ => {}
        }
        let manifest: Self = serde_json::from_value(value).map_err(ManifestError::Malformed)?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        // A struct of strings, bools and enums: serializing cannot fail.
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// What this build relies on when it reopens the run.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.manifest_version != MANIFEST_VERSION {
            return Err(ManifestError::UnsupportedVersion {
                found: self.manifest_version.to_string(),
            });
        }
        layout::check_segment("run id", &self.run_id).map_err(ManifestError::InvalidRunId)?;
        if humantime::parse_rfc3339(&self.created_at).is_err() {
            return Err(ManifestError::InvalidTimestamp(self.created_at.clone()));
        }
        let digest = &self.profile.sha256;
        if digest.len() != 64
            || !digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(ManifestError::InvalidDigest(digest.clone()));
        }
        if self.profile.path != RESOLVED_PROFILE_FILE {
            return Err(ManifestError::UnsupportedPath {
                field: "profile.path",
                found: self.profile.path.clone(),
                expected: RESOLVED_PROFILE_FILE,
            });
        }
        if self.journal.path != JOURNAL_FILE {
            return Err(ManifestError::UnsupportedPath {
                field: "journal.path",
                found: self.journal.path.clone(),
                expected: JOURNAL_FILE,
            });
        }
        for (index, root) in self.roots.iter().enumerate() {
            let invalid = |reason| ManifestError::InvalidRoot {
                path: root.path.clone(),
                reason,
            };
            if layout::check_segment("root", &root.path).is_err() {
                return Err(invalid("expected one segment of `A-Z a-z 0-9 _ -`"));
            }
            if layout::HIDDEN.contains(&root.path.as_str()) {
                return Err(invalid("it is a hidden system entry"));
            }
            if self.roots[..index]
                .iter()
                .any(|other| other.path == root.path)
            {
                return Err(invalid("it is listed twice"));
            }
        }
        Ok(())
    }
}

/// Lowercase hex sha256, as `profile.sha256` records it.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PROFILE: &[u8] = br#"{"id":"default-writer"}"#;

    fn manifest() -> RunManifest {
        let mut roots = RootSpec::default_universe();
        roots.push(RootSpec::tool_results());
        RunManifest::new(
            "run_20261203T022709Z_0123abcd",
            "default-writer",
            PROFILE,
            roots,
        )
    }

    #[test]
    fn inputs_are_recorded_only_when_given() {
        let plain = manifest();
        let value: Value = serde_json::from_slice(&plain.to_json_bytes()).expect("json");
        assert!(value.get("inputs").is_none(), "no bindings, no field");

        let mut bound = manifest();
        bound.inputs = RunInputs {
            chat: Some(ChatBinding {
                path: "/chats/seraphina.jsonl".into(),
                visible_messages: 42,
                prefix_sha256: "ab".repeat(32),
                generation_type: None,
                target: None,
            }),
            skills: vec![SkillSourceRef {
                scope: "global".into(),
                dir: "/skills".into(),
            }],
            prompt_snapshot: true,
            prompt: Some(PromptOrigin::Snapshot),
        };
        let bytes = bound.to_json_bytes();
        let value: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(value["inputs"]["chat"]["visibleMessages"], 42);
        assert_eq!(value["inputs"]["skills"][0]["scope"], "global");
        assert_eq!(value["inputs"]["promptSnapshot"], true);
        assert_eq!(value["inputs"]["prompt"], "snapshot");
        assert_eq!(
            RunManifest::from_json_bytes(&bytes).expect("round trip"),
            bound
        );
    }

    #[test]
    fn round_trips_with_the_documented_shape() {
        let manifest = manifest();
        let bytes = manifest.to_json_bytes();
        assert_eq!(
            RunManifest::from_json_bytes(&bytes).expect("round trip"),
            manifest
        );
        let value: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(value["manifestVersion"], 1);
        assert_eq!(value["toolhostVersion"], "0.1.0");
        assert_eq!(value["profile"]["id"], "default-writer");
        assert_eq!(value["profile"]["sha256"], sha256_hex(PROFILE));
        assert_eq!(value["profile"]["path"], "input/resolved_profile.json");
        assert_eq!(
            value["journal"],
            json!({"path": "events.jsonl", "durability": "batched"})
        );
        assert_eq!(
            value["roots"][0],
            json!({"path":"output","visible":true,"writable":true,"lifecycle":"run","commit":"never"})
        );
        assert_eq!(
            value["roots"][4],
            json!({"path":"persist","visible":true,"writable":true,"lifecycle":"persistent","commit":"onRunCompleted"})
        );
        assert_eq!(
            value["roots"][5],
            json!({"path":"tool-results","visible":true,"writable":false,"lifecycle":"run","commit":"never","runtime":true})
        );
        assert_eq!(
            value["hidden"],
            json!([
                "run.json",
                "events.jsonl",
                "input",
                "tool-args",
                "model-responses",
                "agent-results",
                ".tmp"
            ])
        );
        let created = value["createdAt"].as_str().expect("createdAt");
        assert_eq!(created.len(), "2026-12-03T02:27:09.123Z".len(), "{created}");
    }

    fn edited(edit: impl FnOnce(&mut Value)) -> Result<RunManifest, ManifestError> {
        let mut value = serde_json::to_value(manifest()).expect("json");
        edit(&mut value);
        RunManifest::from_json_bytes(&serde_json::to_vec(&value).expect("bytes"))
    }

    #[test]
    fn an_unknown_field_is_an_error_naming_it() {
        for edit in [
            (|value: &mut Value| value["surprise"] = json!(1)) as fn(&mut Value),
            |value| value["profile"]["surprise"] = json!(1),
            |value| value["roots"][0]["surprise"] = json!(1),
        ] {
            let error = edited(edit).expect_err("unknown field");
            assert!(matches!(error, ManifestError::Malformed(_)), "{error:?}");
            assert!(error.to_string().contains("surprise"), "{error}");
        }
    }

    #[test]
    fn another_version_is_an_error_naming_it() {
        let error = edited(|value| {
            value["manifestVersion"] = json!(2);
            value["newInV2"] = json!(true);
        })
        .expect_err("version 2");
        assert!(
            matches!(&error, ManifestError::UnsupportedVersion { found } if found == "2"),
            "{error:?}"
        );
        assert!(error.to_string().contains('2'));
        assert!(matches!(
            edited(|value| value["manifestVersion"] = json!("1")),
            Err(ManifestError::UnsupportedVersion { .. })
        ));
        assert!(matches!(
            edited(|value| {
                value
                    .as_object_mut()
                    .expect("object")
                    .remove("manifestVersion");
            }),
            Err(ManifestError::MissingVersion)
        ));
        assert!(matches!(
            RunManifest::from_json_bytes(b"[1]"),
            Err(ManifestError::Malformed(_))
        ));
    }

    #[test]
    fn validation_refuses_what_reopening_cannot_use() {
        assert!(matches!(
            edited(|value| value["runId"] = json!("../x")),
            Err(ManifestError::InvalidRunId(_))
        ));
        assert!(matches!(
            edited(|value| value["createdAt"] = json!("yesterday")),
            Err(ManifestError::InvalidTimestamp(_))
        ));
        assert!(matches!(
            edited(|value| value["profile"]["sha256"] = json!("ABC")),
            Err(ManifestError::InvalidDigest(_))
        ));
        assert!(matches!(
            edited(|value| value["journal"]["path"] = json!("other.jsonl")),
            Err(ManifestError::UnsupportedPath {
                field: "journal.path",
                ..
            })
        ));
        for bad_root in ["input", "a/b", "output"] {
            let error = edited(|value| {
                value["roots"]
                    .as_array_mut()
                    .expect("roots")
                    .push(json!({"path": bad_root, "visible": true, "writable": true, "lifecycle": "run", "commit": "never"}));
            })
            .expect_err(bad_root);
            assert!(
                matches!(error, ManifestError::InvalidRoot { .. }),
                "{error:?}"
            );
        }
    }
}
