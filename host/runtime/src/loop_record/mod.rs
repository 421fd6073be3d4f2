//! `input/loop.json`: every input of an agent run that is not a secret,
//! written create-only before the loop's first step, so that a resumed run
//! continues with exactly what it started with. Also the run seed, from
//! which every id the loop makes and every call's entropy derive: a resumed
//! run makes the same ids again, and two runs of one script with one
//! `--seed` are comparable.

mod cancel;
mod config;

pub use cancel::RunCancel;
pub use config::{DEFAULT_CONTEXT_CHARS, LoopConfig, RetryPolicy};

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolhost_core::Profile;
use toolhost_sandbox::CallEntropy;

use crate::agents::AgentDirectory;
use crate::failure::RunFailure;

/// Where the record is kept (hidden: under `input/`).
pub const LOOP_RECORD_PATH: &str = "input/loop.json";

const KIND: &str = "toolhost.loopRecord";
const MAX_RETRIES: u32 = 10;
/// `commit` of a run whose chat app commits the reply itself.
const HOST_COMMIT: &str = "host";
const MAX_DELAY_MS: u64 = 60_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoopRecord {
    pub schema_version: u32,
    pub kind: String,
    pub task: String,
    pub model_name: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub max_rounds: Option<u32>,
    /// The window the run was started with. Absent in runs recorded before
    /// windows existed: they resume without one, so their requests stay
    /// what they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_chars: Option<u32>,
    /// `host` when the chat app commits the reply itself; absent for the
    /// file (and in runs recorded before host commits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    pub persist_dir: Option<PathBuf>,
    pub retry: RetryRecord,
    /// The models as the embedder describes them, never a key (the CLI
    /// keeps its `--model` spec, the key's variable name and its options).
    pub model: Value,
    /// The agents the run may delegate or hand off to, copied in.
    pub agents: Vec<AgentRecord>,
    pub seed: u64,
    /// Whether the seed was given (`--seed`): then every call's clock reads
    /// `startedAtMs` too, so two runs of one script see the same time.
    pub seed_given: bool,
    pub started_at_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryRecord {
    pub max_retries: u32,
    pub initial_delay_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentRecord {
    pub id: String,
    pub sha256: String,
    /// The resolved profile (`Profile::to_resolved_json`).
    pub profile: Value,
}

impl LoopRecord {
    /// The record of a loop about to start with `config` and `agents`.
    pub fn new(config: &LoopConfig, agents: &AgentDirectory) -> Result<Self, RunFailure> {
        let started_at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_millis() as u64)
            .unwrap_or_default();
        let agents = agents
            .profiles()
            .map(|profile| {
                let resolved = profile.to_resolved_json();
                serde_json::from_str(&resolved)
                    .map(|value| AgentRecord {
                        id: profile.id.clone(),
                        sha256: profile.digest(),
                        profile: value,
                    })
                    .map_err(|error| RunFailure::State(format!("agent {}: {error}", profile.id)))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            schema_version: 1,
            kind: KIND.to_owned(),
            task: config.task.clone(),
            model_name: config.model_name.clone(),
            max_output_tokens: config.max_output_tokens,
            max_rounds: config.max_rounds,
            context_chars: Some(config.context_chars.unwrap_or(DEFAULT_CONTEXT_CHARS)),
            commit: config.host_commit.then(|| HOST_COMMIT.to_owned()),
            persist_dir: config.persist_dir.clone(),
            retry: RetryRecord {
                max_retries: config.retry.max_retries,
                initial_delay_ms: config.retry.initial_delay.as_millis() as u64,
            },
            model: config.model.clone(),
            agents,
            seed: config.seed.unwrap_or_else(rand_seed),
            seed_given: config.seed.is_some(),
            started_at_ms,
        })
    }

    pub fn from_json(bytes: &[u8]) -> Result<Self, RunFailure> {
        let record: Self = serde_json::from_slice(bytes).map_err(|error| {
            RunFailure::State(format!("{LOOP_RECORD_PATH} does not load: {error}"))
        })?;
        if record.schema_version != 1 || record.kind != KIND {
            return Err(RunFailure::State(format!(
                "{LOOP_RECORD_PATH} is not a version 1 {KIND}"
            )));
        }
        // Read from a directory that may have been changed: bounded like
        // anything else from outside.
        if record.retry.max_retries > MAX_RETRIES || record.retry.initial_delay_ms > MAX_DELAY_MS {
            return Err(RunFailure::State(format!(
                "{LOOP_RECORD_PATH}: at most {MAX_RETRIES} retries {MAX_DELAY_MS} ms apart"
            )));
        }
        Ok(record)
    }

    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// The loop settings this record holds; `cancel` is the caller's.
    pub fn config(&self) -> LoopConfig {
        LoopConfig {
            task: self.task.clone(),
            model_name: self.model_name.clone(),
            max_output_tokens: self.max_output_tokens,
            max_rounds: self.max_rounds,
            context_chars: Some(self.context_chars.unwrap_or(u32::MAX)),
            host_commit: self.commit.as_deref() == Some(HOST_COMMIT),
            retry: RetryPolicy {
                max_retries: self.retry.max_retries,
                initial_delay: Duration::from_millis(self.retry.initial_delay_ms),
            },
            persist_dir: self.persist_dir.clone(),
            seed: Some(self.seed),
            model: self.model.clone(),
            ..LoopConfig::default()
        }
    }

    /// The agents, as recorded.
    pub fn agents(&self) -> Result<AgentDirectory, RunFailure> {
        let profiles = self
            .agents
            .iter()
            .map(|agent| {
                let text = agent.profile.to_string();
                Profile::from_json(&text)
                    .map_err(|error| RunFailure::State(format!("agent {}: {error}", agent.id)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        AgentDirectory::new(profiles).map_err(|error| RunFailure::State(error.to_string()))
    }

    /// Which settings of `config` differ from the record (empty: none). A
    /// resumed loop refuses to go on with different settings.
    pub fn contradictions(&self, config: &LoopConfig) -> Vec<&'static str> {
        let mut differing = Vec::new();
        let mut check = |same: bool, name| {
            if !same {
                differing.push(name);
            }
        };
        check(config.task == self.task, "task");
        check(config.model_name == self.model_name, "model name");
        check(
            config.max_output_tokens == self.max_output_tokens,
            "max output tokens",
        );
        check(config.max_rounds == self.max_rounds, "max rounds");
        check(
            config
                .context_chars
                .is_none_or(|chars| Some(chars) == self.context_chars),
            "context characters",
        );
        check(config.persist_dir == self.persist_dir, "persist directory");
        check(
            config.host_commit == (self.commit.as_deref() == Some(HOST_COMMIT)),
            "commit mode",
        );
        check(config.seed.is_none_or(|seed| seed == self.seed), "run seed");
        differing
    }

    /// A 128-bit id derived from the run seed: the same on every resume.
    pub fn derive_id(&self, prefix: &str, parts: &[&str]) -> String {
        let digest = derive(self.seed, prefix, parts);
        let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        format!("{prefix}_{hex}")
    }

    /// A call's entropy: its seed derived from the run seed, the invocation
    /// and the call id; its clock the run's start with `--seed`, else now.
    pub fn entropy(&self, invocation_id: &str, call_id: &str) -> CallEntropy {
        let digest = derive(self.seed, "entropy", &[invocation_id, call_id]);
        let mut seed = [0_u8; 8];
        seed.copy_from_slice(&digest[..8]);
        let mut entropy = CallEntropy::fresh();
        entropy.seed = u64::from_le_bytes(seed);
        if self.seed_given {
            entropy.clock_ms = self.started_at_ms;
        }
        entropy
    }
}

fn derive(seed: u64, label: &str, parts: &[&str]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(seed.to_le_bytes());
    for part in std::iter::once(label).chain(parts.iter().copied()) {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().into()
}

fn rand_seed() -> u64 {
    u64::from_le_bytes(
        *uuid::Uuid::new_v4()
            .as_bytes()
            .first_chunk::<8>()
            .unwrap_or(&[0; 8]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_entropy_derive_from_the_seed_alone() {
        let config = LoopConfig {
            seed: Some(7),
            ..LoopConfig::default()
        };
        let a = LoopRecord::new(&config, &AgentDirectory::default()).unwrap();
        let b = LoopRecord::new(&config, &AgentDirectory::default()).unwrap();
        assert_eq!(
            a.derive_id("inv", &["inv_root", "c1"]),
            b.derive_id("inv", &["inv_root", "c1"])
        );
        assert_ne!(
            a.derive_id("inv", &["inv_root", "c1"]),
            a.derive_id("inv", &["inv_root", "c2"])
        );
        // Length-prefixed parts: ("ab","c") is not ("a","bc").
        assert_ne!(
            a.derive_id("inv", &["ab", "c"]),
            a.derive_id("inv", &["a", "bc"])
        );
        assert_eq!(
            a.entropy("inv_root", "c1").seed,
            b.entropy("inv_root", "c1").seed
        );
        assert_eq!(a.entropy("inv_root", "c1").clock_ms, a.started_at_ms);
        let other = LoopRecord::new(
            &LoopConfig {
                seed: Some(8),
                ..LoopConfig::default()
            },
            &AgentDirectory::default(),
        )
        .unwrap();
        assert_ne!(
            a.entropy("inv_root", "c1").seed,
            other.entropy("inv_root", "c1").seed
        );
        let round_trip = LoopRecord::from_json(&a.to_json()).unwrap();
        assert_eq!(round_trip, a);
        assert!(a.contradictions(&a.config()).is_empty());
        let mut changed = a.config();
        changed.task = "another".into();
        assert_eq!(a.contradictions(&changed), vec!["task"]);
    }

    #[test]
    fn the_window_is_recorded_and_a_run_recorded_before_windows_resumes_without_one() {
        let record = LoopRecord::new(&LoopConfig::default(), &AgentDirectory::default()).unwrap();
        assert_eq!(record.context_chars, Some(DEFAULT_CONTEXT_CHARS));
        assert_eq!(record.config().context_chars, Some(DEFAULT_CONTEXT_CHARS));
        let mut old: Value = serde_json::from_slice(&record.to_json()).unwrap();
        old.as_object_mut().unwrap().remove("contextChars");
        let old = LoopRecord::from_json(old.to_string().as_bytes()).unwrap();
        assert_eq!(old.config().context_chars, Some(u32::MAX));
        let mut asked = old.config();
        asked.context_chars = Some(100_000);
        assert_eq!(old.contradictions(&asked), vec!["context characters"]);
    }
}
