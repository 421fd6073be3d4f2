//! The read-only capabilities of 0.1.2 — the run's chat (packed scans since
//! 0.1.4), its activated world info, installed skills — behind traits, so a tool's logic runs the same
//! against the host and against an in-memory double in native tests.
//!
//! Every host error comes back as the [`ToolError`] the model reads.

use crate::ToolError;
use crate::bindings::toolhost::host::{
    capability_types as types, chat_read, skill_read, worldinfo_read,
};
use crate::text::PackedTexts;

pub use chat_read::{ChatInfo, ChatMessage, MessagePack, Role};
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
    /// The same messages packed for a scan: one string for the texts, names
    /// interned. Built from [`messages`](Self::messages) unless overridden;
    /// the host answers it directly, in far fewer copies.
    fn scan(&self, start: u32, count: u32) -> Result<MessagePack, ToolError> {
        Ok(MessagePack::from_messages(
            start,
            self.messages(start, count)?,
        ))
    }
}

/// One message of a [`MessagePack`], borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackedMessage<'a> {
    pub index: u32,
    pub role: Role,
    pub name: &'a str,
    pub text: &'a str,
}

impl MessagePack {
    pub fn from_messages(start: u32, messages: Vec<ChatMessage>) -> Self {
        let mut packed =
            PackedTexts::with_capacity(messages.len(), messages.iter().map(|m| m.text.len()).sum());
        for message in &messages {
            packed.push(&message.text, &message.name);
        }
        Self {
            start: messages.first().map_or(start, |m| m.index),
            texts: packed.texts,
            text_ends: packed.text_ends,
            roles: messages.iter().map(|m| m.role).collect(),
            name_ids: packed.name_ids,
            names: packed.names,
        }
    }

    pub fn len(&self) -> usize {
        self.text_ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text_ends.is_empty()
    }

    /// Message `at` of the pack; `None` past its end or where the pack is
    /// inconsistent (never from the host, but a pack is only data).
    pub fn get(&self, at: usize) -> Option<PackedMessage<'_>> {
        let from = match at {
            0 => 0,
            _ => *self.text_ends.get(at - 1)? as usize,
        };
        let to = *self.text_ends.get(at)? as usize;
        Some(PackedMessage {
            index: self.start.checked_add(u32::try_from(at).ok()?)?,
            role: *self.roles.get(at)?,
            name: self.names.get(*self.name_ids.get(at)? as usize)?,
            text: self.texts.get(from..to)?,
        })
    }
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

    fn scan(&self, start: u32, count: u32) -> Result<MessagePack, ToolError> {
        chat_read::scan(start, count).map_err(tool_error)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn message(index: u32, role: Role, name: &str, text: &str) -> ChatMessage {
        ChatMessage {
            index,
            role,
            name: name.into(),
            send_date: None,
            text: text.into(),
            swipes: 1,
        }
    }

    #[test]
    fn a_pack_gives_back_each_message_and_refuses_inconsistency() {
        let pack = MessagePack::from_messages(
            7,
            vec![
                message(7, Role::User, "Ann", "héllo"),
                message(8, Role::Assistant, "Bo", ""),
                message(9, Role::User, "Ann", "龍"),
            ],
        );
        assert_eq!(pack.names, ["Ann", "Bo"]);
        let got: Vec<_> = (0..pack.len()).filter_map(|at| pack.get(at)).collect();
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].index, got[0].name, got[0].text),
            (7, "Ann", "héllo")
        );
        assert_eq!(
            (got[1].index, got[1].role, got[1].text),
            (8, Role::Assistant, "")
        );
        assert_eq!((got[2].index, got[2].name, got[2].text), (9, "Ann", "龍"));
        assert!(pack.get(3).is_none());

        let mut broken = pack.clone();
        broken.text_ends[0] = 2; // inside `é`
        assert!(broken.get(0).is_none());
        let mut broken = pack;
        broken.name_ids[1] = 9;
        assert!(broken.get(1).is_none());
    }
}
