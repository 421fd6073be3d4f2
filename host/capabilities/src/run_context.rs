//! What a run reads besides its own directory: the chat it is bound to
//! (frozen at its input prefix), the prompt snapshot with the activated
//! world info, and the installed skills. Given once when the run is created,
//! recorded in `run.json` (`inputs`), and bound again, unchanged, when the
//! run is reopened. Loaded here, where the capabilities that read them
//! live, so the runtime never names a chat, a skill or a world-info entry.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolhost_chat::{BoundChat, ChatError, ChatTarget, GenerationType};
use toolhost_core::file::read_regular;
use toolhost_core::prompt_snapshot::{PromptOrigin, PromptSnapshot, PromptSnapshotError};
use toolhost_journal::{ChatBinding, RunInputs, SkillSourceRef};
use toolhost_skills::{Scope, SkillError, SkillLibrary, SkillSource};
use toolhost_worldinfo::{ACTIVATION_KEY, Activation, MAX_SNAPSHOT_BYTES, WorldInfoError};

use crate::chat_prompt;

/// A run's inputs that do not bind: the run is not created (or not
/// reopened).
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The chat is unreadable, or its frozen history changed.
    #[error(transparent)]
    Chat(#[from] ChatError),
    /// An installed-skills directory cannot be read.
    #[error(transparent)]
    Skills(#[from] SkillError),
    /// The prompt snapshot's world info is malformed.
    #[error(transparent)]
    WorldInfo(#[from] WorldInfoError),
    /// The prompt snapshot's messages or names do not check (a field
    /// path and why).
    #[error(transparent)]
    Snapshot(#[from] PromptSnapshotError),
    /// A path or file given is unusable.
    #[error("run.state_invalid: {0}")]
    State(String),
}

impl ContextError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Chat(error) => error.code(),
            Self::Skills(error) => error.code(),
            Self::WorldInfo(error) => error.code(),
            Self::Snapshot(_) => PromptSnapshotError::CODE,
            Self::State(_) => "run.state_invalid",
        }
    }
}

/// What a host application binds a new run to.
#[derive(Debug, Clone, Default)]
pub struct RunBindings {
    /// A SillyTavern JSONL chat; its messages now are the run's frozen prefix.
    pub chat: Option<PathBuf>,
    /// The chat app's prompt for this generation (its messages, names and
    /// `worldInfoActivation`), copied into the run as
    /// `input/prompt_snapshot.json`: the model reads it first.
    pub prompt_snapshot: Option<PathBuf>,
    /// A file whose `worldInfoActivation` alone is read (`--worldinfo`):
    /// the world-info tools see it; the model's prompt is built from the
    /// chat. Stored as `{"worldInfoActivation": …}`. Not with
    /// `prompt_snapshot`.
    pub world_info: Option<PathBuf>,
    /// Installed-skills directories, one per scope.
    pub skills: Vec<SkillSource>,
    /// How the reply lands in the chat: a new message (`normal`), a new
    /// swipe of the last reply, that reply regenerated, or continued.
    pub generation_type: GenerationType,
}

/// What a run is bound to, loaded: the part of every invocation's inputs
/// that is the run's ([`BindInputs::run`](crate::BindInputs)).
#[derive(Debug, Clone)]
pub struct RunContext {
    pub(crate) chat: Option<Arc<BoundChat>>,
    pub(crate) worldinfo: Option<Arc<Activation>>,
    pub(crate) skills: Arc<SkillLibrary>,
    /// The app's prompt for this generation, checked, or the one built from
    /// the bound chat; with where it came from.
    pub(crate) prompt: Option<(PromptOrigin, Arc<PromptSnapshot>)>,
}

impl RunContext {
    /// Bound to nothing: no chat, no world info, no skill.
    pub fn none() -> Self {
        Self {
            chat: None,
            worldinfo: None,
            skills: Arc::new(SkillLibrary::empty()),
            prompt: None,
        }
    }

    /// Bound to `chat` too (an embedder's or a bench's own bound chat).
    pub fn with_chat(mut self, chat: Arc<BoundChat>) -> Self {
        self.chat = Some(chat);
        self
    }

    /// With `skills` installed (an embedder's or a test's own library).
    pub fn with_skills(mut self, skills: Arc<SkillLibrary>) -> Self {
        self.skills = skills;
        self
    }

    /// The prompt the run's model reads first: the snapshot the run was
    /// given, checked, or the one built from its chat.
    pub fn prompt_snapshot(&self) -> Option<&Arc<PromptSnapshot>> {
        self.prompt.as_ref().map(|(_, snapshot)| snapshot)
    }

    /// Where [`Self::prompt_snapshot`] came from.
    pub fn prompt_origin(&self) -> Option<PromptOrigin> {
        self.prompt.as_ref().map(|(origin, _)| *origin)
    }

    /// The chat the run is bound to, if any.
    pub fn chat(&self) -> Option<&Arc<BoundChat>> {
        self.chat.as_ref()
    }

    /// How the reply lands (`swipe`, `regenerate`, `continue`) and the
    /// message it lands in, for a run bound to a chat with a generation
    /// type other than `normal`.
    pub fn reply_target(&self) -> Option<(&'static str, u32)> {
        let chat = self.chat.as_ref()?;
        let target = chat.target()?;
        Some((chat.generation_type().as_str(), target.index))
    }
}

/// Checked and loaded before the run directory exists, so a bad chat or
/// snapshot never leaves a half-made run behind.
pub struct Loaded {
    /// What `run.json` records of the inputs.
    pub record: RunInputs,
    pub loaded: RunContext,
    /// The prompt snapshot to store once the run directory exists.
    pub snapshot: Option<Value>,
}

impl Loaded {
    /// Store the prompt snapshot (create-only) in the run directory at
    /// `root`, once it exists.
    pub fn store_snapshot(&self, root: &Path) -> Result<(), ContextError> {
        if let Some(snapshot) = &self.snapshot {
            Activation::store_prompt_snapshot(root, snapshot)?;
        }
        Ok(())
    }
}

fn absolute(path: &Path) -> Result<PathBuf, ContextError> {
    std::path::absolute(path)
        .map_err(|error| ContextError::State(format!("{}: {error}", path.display())))
}

/// Check and load what a new run is bound to.
pub fn load(bindings: &RunBindings) -> Result<Loaded, ContextError> {
    let mut record = RunInputs::default();
    let mut loaded = RunContext {
        chat: None,
        worldinfo: None,
        skills: Arc::new(SkillLibrary::empty()),
        prompt: None,
    };
    if let Some(path) = &bindings.chat {
        let path = absolute(path)?;
        // A swipe, regeneration or continuation that does not fit the chat
        // (no reply of the character's last) is refused here, before the
        // run exists.
        let bound = BoundChat::bind_for(&path, bindings.generation_type)?;
        let binding = bound.binding();
        record.chat = Some(ChatBinding {
            path: path.to_string_lossy().into_owned(),
            visible_messages: binding.visible_messages,
            prefix_sha256: binding.prefix_sha256,
            generation_type: binding
                .generation_type
                .has_target()
                .then(|| binding.generation_type.as_str().to_owned()),
            target: binding
                .target
                .map(|target| serde_json::to_value(target).unwrap_or(Value::Null)),
        });
        loaded.chat = Some(Arc::new(bound));
    }
    if bindings.prompt_snapshot.is_some() && bindings.world_info.is_some() {
        return Err(ContextError::State(
            "give a prompt snapshot or world info, not both: the snapshot carries its world info"
                .into(),
        ));
    }
    let mut snapshot = None;
    if let Some(path) = &bindings.prompt_snapshot {
        let value = read_snapshot_file(path)?;
        // Checked now; stored (create-only) once the directory exists.
        loaded.worldinfo = Activation::from_prompt_snapshot(&value)?.map(Arc::new);
        let prompt = PromptSnapshot::from_json(&value)?;
        loaded.prompt = Some((PromptOrigin::Snapshot, Arc::new(prompt)));
        record.prompt_snapshot = true;
        snapshot = Some(value);
    } else if let Some(path) = &bindings.world_info {
        let mut value = read_snapshot_file(path)?;
        loaded.worldinfo = Activation::from_prompt_snapshot(&value)?.map(Arc::new);
        record.prompt_snapshot = true;
        // Only the activation is the run's: the file's other fields (a
        // whole snapshot's messages) are not read, so not kept either.
        let activation = value
            .as_object_mut()
            .and_then(|object| object.remove(ACTIVATION_KEY))
            .unwrap_or(Value::Null);
        snapshot = Some(serde_json::json!({ ACTIVATION_KEY: activation }));
    }
    if loaded.prompt.is_none()
        && let Some(chat) = &loaded.chat
    {
        let built = chat_prompt::from_chat(chat, loaded.worldinfo.as_deref());
        loaded.prompt = Some((PromptOrigin::Chat, Arc::new(built)));
    }
    record.prompt = loaded.prompt.as_ref().map(|(origin, _)| *origin);
    for source in &bindings.skills {
        record.skills.push(SkillSourceRef {
            scope: source.scope.as_str().to_owned(),
            dir: absolute(&source.dir)?.to_string_lossy().into_owned(),
        });
    }
    loaded.skills = Arc::new(load_skills(&record.skills)?);
    Ok(Loaded {
        record,
        loaded,
        snapshot,
    })
}

/// Bind a reopened run to what its manifest records: the same chat prefix
/// (a changed history is `agent.input_history_conflict`), its stored
/// snapshot, its skill sources.
pub fn reload(record: &RunInputs, run_dir: &Path) -> Result<RunContext, ContextError> {
    let chat = match &record.chat {
        None => None,
        Some(binding) => Some(Arc::new(rebind(binding)?)),
    };
    let stored = if record.prompt_snapshot {
        Activation::load_snapshot(run_dir)?
    } else {
        None
    };
    let worldinfo = match &stored {
        Some(value) => Activation::from_prompt_snapshot(value)?.map(Arc::new),
        None => None,
    };
    // The same prompt as when the run was made: its stored snapshot, or
    // one built again from the same frozen prefix and activation. A run
    // made before prompts were read records no origin and gets none.
    let prompt = match (record.prompt, &stored, &chat) {
        (Some(PromptOrigin::Snapshot), Some(value), _) => Some((
            PromptOrigin::Snapshot,
            Arc::new(PromptSnapshot::from_json(value)?),
        )),
        (Some(PromptOrigin::Chat), _, Some(chat)) => Some((
            PromptOrigin::Chat,
            Arc::new(chat_prompt::from_chat(chat, worldinfo.as_deref())),
        )),
        (None, _, _) => None,
        (Some(origin), _, _) => {
            return Err(ContextError::State(format!(
                "run.json says the prompt came from the {}, which the run no longer has",
                origin.as_str()
            )));
        }
    };
    Ok(RunContext {
        chat,
        worldinfo,
        skills: Arc::new(load_skills(&record.skills)?),
        prompt,
    })
}

/// The chat as `run.json` binds it: the same prefix (and target) again.
fn rebind(binding: &ChatBinding) -> Result<BoundChat, ContextError> {
    let Some(name) = &binding.generation_type else {
        return Ok(BoundChat::rebind(
            &binding.path,
            binding.visible_messages,
            &binding.prefix_sha256,
        )?);
    };
    let generation_type = GenerationType::parse(name)
        .ok_or_else(|| ContextError::State(format!("run.json names generation type `{name}`")))?;
    let target = match &binding.target {
        Some(target) => Some(
            serde_json::from_value::<ChatTarget>(target.clone())
                .map_err(|error| ContextError::State(format!("run.json's chat target: {error}")))?,
        ),
        None => None,
    };
    Ok(BoundChat::rebind_for(
        &binding.path,
        &toolhost_chat::ChatBinding {
            generation_type,
            visible_messages: binding.visible_messages,
            prefix_sha256: binding.prefix_sha256.clone(),
            target,
        },
    )?)
}

/// A snapshot file a user named, as JSON: no fifo, no device, no endless
/// read.
fn read_snapshot_file(path: &Path) -> Result<Value, ContextError> {
    let bytes = read_regular(path, MAX_SNAPSHOT_BYTES)
        .map_err(|error| {
            ContextError::State(format!("prompt snapshot {}: {error}", path.display()))
        })?
        .ok_or_else(|| {
            ContextError::Snapshot(PromptSnapshotError {
                field: String::new(),
                message: format!(
                    "{} holds more than {MAX_SNAPSHOT_BYTES} bytes",
                    path.display()
                ),
            })
        })?;
    serde_json::from_slice(&bytes).map_err(|error| {
        ContextError::State(format!(
            "agent.invalid_prompt_snapshot_file: {} is not JSON: {error}",
            path.display()
        ))
    })
}

fn load_skills(sources: &[SkillSourceRef]) -> Result<SkillLibrary, ContextError> {
    let sources = sources
        .iter()
        .map(|source| {
            let scope = Scope::ALL
                .iter()
                .copied()
                .find(|scope| scope.as_str() == source.scope)
                .ok_or_else(|| {
                    ContextError::State(format!("unknown skill scope `{}`", source.scope))
                })?;
            Ok(SkillSource::new(scope, PathBuf::from(&source.dir)))
        })
        .collect::<Result<Vec<_>, ContextError>>()?;
    // Skipped skills are logged (and listed) by the library itself.
    Ok(SkillLibrary::load(&sources)?)
}
