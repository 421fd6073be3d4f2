//! What a run reads besides its own directory: the chat it is bound to
//! (frozen at its input prefix), the prompt snapshot with the activated
//! world info, and the installed skills. Given once when the run is created,
//! recorded in `run.json` (`inputs`), and bound again, unchanged, when the
//! run is reopened.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolhost_chat::BoundChat;
use toolhost_journal::{ChatBinding, RunInputs, SkillSourceRef};
use toolhost_skills::{Scope, SkillLibrary, SkillSource};
use toolhost_worldinfo::Activation;

use crate::failure::RunFailure;

/// What a host application binds a new run to.
#[derive(Debug, Clone, Default)]
pub struct RunBindings {
    /// A SillyTavern JSONL chat; its messages now are the run's frozen prefix.
    pub chat: Option<PathBuf>,
    /// A prompt snapshot (`{"worldInfoActivation": …}`), copied into the run
    /// as `input/prompt_snapshot.json`.
    pub prompt_snapshot: Option<PathBuf>,
    /// Installed-skills directories, one per scope.
    pub skills: Vec<SkillSource>,
}

/// The bound inputs, loaded.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub chat: Option<Arc<BoundChat>>,
    pub worldinfo: Option<Arc<Activation>>,
    pub skills: Arc<SkillLibrary>,
}

/// Checked and loaded before the run directory exists, so a bad chat or
/// snapshot never leaves a half-made run behind.
pub(crate) struct Prepared {
    pub record: RunInputs,
    pub loaded: Loaded,
    /// The prompt snapshot to store once the run directory exists.
    pub snapshot: Option<Value>,
}

fn absolute(path: &Path) -> Result<PathBuf, RunFailure> {
    std::path::absolute(path)
        .map_err(|error| RunFailure::State(format!("{}: {error}", path.display())))
}

pub(crate) fn prepare(bindings: &RunBindings) -> Result<Prepared, RunFailure> {
    let mut record = RunInputs::default();
    let mut loaded = Loaded {
        chat: None,
        worldinfo: None,
        skills: Arc::new(SkillLibrary::empty()),
    };
    if let Some(path) = &bindings.chat {
        let path = absolute(path)?;
        let bound = BoundChat::bind(&path, None)?;
        record.chat = Some(ChatBinding {
            path: path.to_string_lossy().into_owned(),
            visible_messages: bound.message_count(),
            prefix_sha256: bound.prefix_sha256().to_owned(),
        });
        loaded.chat = Some(Arc::new(bound));
    }
    let snapshot = match &bindings.prompt_snapshot {
        None => None,
        Some(path) => {
            let bytes = std::fs::read(path).map_err(|error| {
                RunFailure::State(format!("prompt snapshot {}: {error}", path.display()))
            })?;
            let value: Value = serde_json::from_slice(&bytes).map_err(|error| {
                RunFailure::State(format!(
                    "agent.invalid_prompt_snapshot_file: {} is not JSON: {error}",
                    path.display()
                ))
            })?;
            // Checked now; stored (create-only) once the directory exists.
            loaded.worldinfo = Activation::from_prompt_snapshot(&value)?.map(Arc::new);
            record.prompt_snapshot = true;
            Some(value)
        }
    };
    for source in &bindings.skills {
        record.skills.push(SkillSourceRef {
            scope: source.scope.as_str().to_owned(),
            dir: absolute(&source.dir)?.to_string_lossy().into_owned(),
        });
    }
    loaded.skills = Arc::new(load_skills(&record.skills)?);
    Ok(Prepared {
        record,
        loaded,
        snapshot,
    })
}

/// Bind a reopened run to what its manifest records: the same chat prefix
/// (a changed history is `agent.input_history_conflict`), its stored
/// snapshot, its skill sources.
pub(crate) fn rebind(record: &RunInputs, run_dir: &Path) -> Result<Loaded, RunFailure> {
    let chat = match &record.chat {
        None => None,
        Some(binding) => Some(Arc::new(BoundChat::rebind(
            &binding.path,
            binding.visible_messages,
            &binding.prefix_sha256,
        )?)),
    };
    let worldinfo = if record.prompt_snapshot {
        Activation::load(run_dir)?.map(Arc::new)
    } else {
        None
    };
    Ok(Loaded {
        chat,
        worldinfo,
        skills: Arc::new(load_skills(&record.skills)?),
    })
}

fn load_skills(sources: &[SkillSourceRef]) -> Result<SkillLibrary, RunFailure> {
    let sources = sources
        .iter()
        .map(|source| {
            let scope = Scope::ALL
                .iter()
                .copied()
                .find(|scope| scope.as_str() == source.scope)
                .ok_or_else(|| {
                    RunFailure::State(format!("unknown skill scope `{}`", source.scope))
                })?;
            Ok(SkillSource::new(scope, PathBuf::from(&source.dir)))
        })
        .collect::<Result<Vec<_>, RunFailure>>()?;
    // Skipped skills are logged (and listed) by the library itself.
    Ok(SkillLibrary::load(&sources)?)
}
