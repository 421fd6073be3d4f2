//! The read-only capabilities of 0.1.2 — the run's chat, its activated world
//! info, installed skills — behind traits, so a tool's logic runs the same
//! against the host and against an in-memory double in native tests.
//!
//! Every host error comes back as the [`ToolError`] the model reads.

use crate::ToolError;
use crate::bindings::toolhost::host::{
    capability_types as types, chat_read, skill_read, worldinfo_read,
};

pub use chat_read::{ChatInfo, ChatMessage, Role};
pub use skill_read::{Budget, Skill, SkillFile, SkillText};
pub use worldinfo_read::{Activation, Entry as WorldInfoEntry};

/// Most messages one `messages` call returns.
pub const MAX_CHAT_BATCH: u32 = 1_000;

fn tool_error(error: types::CapabilityError) -> ToolError {
    ToolError::new(error.code, error.message)
}

/// The run's chat, up to its frozen input prefix (`chat-read`).
pub trait Chat {
    fn info(&self) -> Result<ChatInfo, ToolError>;
    /// Messages `start..start + count` (at most [`MAX_CHAT_BATCH`]), clipped
    /// to the prefix.
    fn messages(&self, start: u32, count: u32) -> Result<Vec<ChatMessage>, ToolError>;
}

/// The run's activated world info (`worldinfo-read`).
pub trait WorldInfo {
    fn activation(&self) -> Result<Activation, ToolError>;
}

/// Installed skills under the profile's visibility and budgets (`skill-read`).
pub trait Skills {
    fn list_skills(&self) -> Vec<Skill>;
    fn files(&self, name: &str) -> Result<Vec<SkillFile>, ToolError>;
    /// `path` empty means `SKILL.md`.
    fn read_text(&self, name: &str, path: &str) -> Result<SkillText, ToolError>;
    fn budget(&self) -> Budget;
    /// Charge what was shown to the model; nothing is charged on refusal.
    fn charge(&self, chars: u64) -> Result<(), ToolError>;
}

/// The host's capabilities, as imported by the component.
#[derive(Debug, Clone, Copy, Default)]
pub struct Host;

impl Chat for Host {
    fn info(&self) -> Result<ChatInfo, ToolError> {
        chat_read::info().map_err(tool_error)
    }

    fn messages(&self, start: u32, count: u32) -> Result<Vec<ChatMessage>, ToolError> {
        chat_read::messages(start, count).map_err(tool_error)
    }
}

impl WorldInfo for Host {
    fn activation(&self) -> Result<Activation, ToolError> {
        worldinfo_read::activated().map_err(tool_error)
    }
}

impl Skills for Host {
    fn list_skills(&self) -> Vec<Skill> {
        skill_read::list_skills()
    }

    fn files(&self, name: &str) -> Result<Vec<SkillFile>, ToolError> {
        skill_read::files(name).map_err(tool_error)
    }

    fn read_text(&self, name: &str, path: &str) -> Result<SkillText, ToolError> {
        skill_read::read_text(name, path).map_err(tool_error)
    }

    fn budget(&self) -> Budget {
        skill_read::read_budget()
    }

    fn charge(&self, chars: u64) -> Result<(), ToolError> {
        skill_read::charge(chars).map_err(tool_error)
    }
}

/// `chat:current#<index>`, the reference of a whole message.
pub fn chat_ref(index: u32) -> String {
    format!("chat:current#{index}")
}

/// The role as the model and the schemas name it.
pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
    }
}
