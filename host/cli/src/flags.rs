//! The flag groups more than one command takes, each defined once and
//! flattened (`#[command(flatten)]`) into the commands' own flag structs.

use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use toolhost_journal::Durability;
use toolhost_runtime::{GenerationType, RunBindings};
use toolhost_skills::{Scope, SkillSource};

/// What a new run is bound to (`call`, `run`).
#[derive(clap::Args)]
pub struct InputArgs {
    /// Bind a new run to this SillyTavern chat (JSONL); its messages now
    /// are all the chat tools will ever see of it.
    #[arg(long, value_name = "FILE")]
    pub chat: Option<PathBuf>,
    /// Installed skills (one folder per skill, each with a SKILL.md);
    /// repeatable, `[global|preset|profile|character:]DIR`, later scopes
    /// override earlier ones.
    #[arg(long, value_name = "[SCOPE:]DIR")]
    pub skills: Vec<String>,
    /// Activated world info for the world-info tools: only the file's
    /// `worldInfoActivation` (`{"entries": [...]}`) is read.
    #[arg(long, value_name = "FILE", conflicts_with = "prompt_snapshot")]
    pub worldinfo: Option<PathBuf>,
    /// The chat app's prompt for this generation (docs/agents.md, "What the
    /// model reads"): its messages go to the model first, its
    /// `worldInfoActivation` to the world-info tools.
    #[arg(long, value_name = "FILE")]
    pub prompt_snapshot: Option<PathBuf>,
    /// How the reply lands in the chat: a new message, a new swipe of the
    /// last reply, that reply regenerated, or continued (the model reads
    /// it then; a swipe or regeneration hides it) [default: normal].
    #[arg(long, value_enum)]
    pub generation_type: Option<GenerationArg>,
}

/// `--generation-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenerationArg {
    Normal,
    Swipe,
    Regenerate,
    Continue,
}

impl From<GenerationArg> for GenerationType {
    fn from(value: GenerationArg) -> Self {
        match value {
            GenerationArg::Normal => GenerationType::Normal,
            GenerationArg::Swipe => GenerationType::Swipe,
            GenerationArg::Regenerate => GenerationType::Regenerate,
            GenerationArg::Continue => GenerationType::Continue,
        }
    }
}

impl InputArgs {
    /// Whether any binding was given (a resumed run takes none).
    pub fn any(&self) -> bool {
        self.chat.is_some()
            || self.worldinfo.is_some()
            || self.prompt_snapshot.is_some()
            || self.generation_type.is_some()
            || !self.skills.is_empty()
    }

    pub fn bindings(&self) -> Result<RunBindings> {
        Ok(RunBindings {
            chat: self.chat.clone(),
            prompt_snapshot: self.prompt_snapshot.clone(),
            world_info: self.worldinfo.clone(),
            generation_type: self.generation_type.map(Into::into).unwrap_or_default(),
            skills: self
                .skills
                .iter()
                .map(|text| skill_source(text))
                .collect::<Result<_>>()?,
        })
    }
}

/// `--durability` (`serve`, `call`, `run`).
#[derive(Clone, Copy, ValueEnum)]
pub enum DurabilityArg {
    /// fsync after every event and audit file.
    Fsync,
    /// Write every event at once; fsync at run end and on errors.
    Batched,
}

impl From<DurabilityArg> for Durability {
    fn from(value: DurabilityArg) -> Self {
        match value {
            DurabilityArg::Fsync => Durability::Fsync,
            DurabilityArg::Batched => Durability::Batched,
        }
    }
}

/// `[scope:]DIR`, global when no scope is given.
fn skill_source(text: &str) -> Result<SkillSource> {
    for scope in Scope::ALL {
        if let Some(dir) = text.strip_prefix(&format!("{}:", scope.as_str())) {
            return Ok(SkillSource::new(scope, PathBuf::from(dir)));
        }
    }
    Ok(SkillSource::new(Scope::Global, PathBuf::from(text)))
}
