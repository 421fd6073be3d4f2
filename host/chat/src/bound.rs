//! [`BoundChat`]: the chat a run is bound to, frozen at its input prefix.
//!
//! The prefix is the first N messages at bind time (all of them by default).
//! Messages after it — appended later by SillyTavern, a swipe or regenerate
//! target, the run's own reply — are invisible to every read. Its bytes
//! (message lines 1..=N with their line endings, not the header: SillyTavern
//! rewrites `chat_metadata` for reasons unrelated to the history) are hashed
//! so a commit can refuse to write into a chat whose history changed under
//! the run (`agent.input_history_conflict`).

use std::collections::HashSet;
use std::path::Path;

use sha2::{Digest, Sha256};

use toolhost_text::PackedTexts;

use crate::error::ChatError;
use crate::file::{ChatFile, ChatHeader, ChatMessage, GROUP_HEADER_NAME, Role};

/// At most this many messages per [`BoundChat::messages`] call.
pub const MAX_MESSAGES_PER_BATCH: u32 = 1_000;

/// The name a committed reply gets when neither the header nor the history
/// names a character.
pub const FALLBACK_REPLY_NAME: &str = "Assistant";

/// What `chat-read.info` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatInfo {
    /// The header's `user_name`; for a group chat (whose header says
    /// `"unused"`) the name on the latest user message of the prefix.
    pub user_name: String,
    /// The header's `character_name`; for a group chat the speakers, in
    /// order of first appearance, joined with `", "`.
    pub character_name: String,
    /// A group chat: the SillyTavern group header (`user_name` and
    /// `character_name` both `"unused"`), or at least two distinct
    /// assistant speakers in the prefix.
    pub group: bool,
    /// Messages visible to the run (the frozen prefix).
    pub message_count: u32,
    /// The distinct names of assistant (character) messages in the prefix,
    /// in order of first appearance.
    pub speakers: Vec<String>,
}

/// Consecutive messages packed for scanning: see [`BoundChat::pack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedMessages {
    /// Index of the first message.
    pub start: u32,
    /// Texts and names, laid out as `chat-read.scan` sends them.
    pub packed: PackedTexts,
    pub roles: Vec<Role>,
}

/// The run's chat, frozen at its input prefix.
#[derive(Debug, Clone)]
pub struct BoundChat {
    file: ChatFile,
    prefix: FrozenPrefix,
    info: ChatInfo,
    reply_name: String,
}

/// Where the frozen prefix ends and what its bytes hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrozenPrefix {
    pub message_count: u32,
    /// Bytes from the start of line 2 through the end of message N's
    /// content, without its line ending: a line ending added after it (when
    /// SillyTavern appends the next message to a file that had none) does not
    /// change the history.
    pub len: usize,
    pub sha256: String,
}

impl BoundChat {
    /// Load the chat at `path` and freeze its first `visible_messages`
    /// messages (all of them when `None`). Asking for more messages than the
    /// file holds is `agent.input_history_conflict`: the history the run was
    /// started with is gone.
    pub fn bind(path: impl AsRef<Path>, visible_messages: Option<u32>) -> Result<Self, ChatError> {
        Self::from_file(ChatFile::load(path)?, visible_messages)
    }

    /// Bind again (a resumed run): the prefix must hash to `expected_sha256`
    /// (from [`BoundChat::prefix_sha256`] at the first bind), else
    /// `agent.input_history_conflict`.
    pub fn rebind(
        path: impl AsRef<Path>,
        visible_messages: u32,
        expected_sha256: &str,
    ) -> Result<Self, ChatError> {
        let bound = Self::bind(path, Some(visible_messages))?;
        if !bound.prefix.sha256.eq_ignore_ascii_case(expected_sha256) {
            return Err(ChatError::conflict(
                bound.path(),
                format!(
                    "messages 0..{visible_messages} hash to {}, the run recorded {expected_sha256}",
                    bound.prefix.sha256
                ),
            ));
        }
        Ok(bound)
    }

    /// Freeze an already loaded file.
    pub fn from_file(mut file: ChatFile, visible_messages: Option<u32>) -> Result<Self, ChatError> {
        let total = file.message_count();
        let count = visible_messages.unwrap_or(total);
        if count > total {
            return Err(ChatError::conflict(
                file.path(),
                format!("the run's input has {count} messages, the chat file only {total}"),
            ));
        }
        file.truncate(count);
        let prefix = frozen_prefix(&file);
        let info = chat_info(file.header(), file.messages());
        let reply_name = reply_name(file.header(), file.messages());
        Ok(BoundChat {
            file,
            prefix,
            info,
            reply_name,
        })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    pub fn header(&self) -> &ChatHeader {
        self.file.header()
    }

    pub fn info(&self) -> &ChatInfo {
        &self.info
    }

    /// Messages visible to the run.
    pub fn message_count(&self) -> u32 {
        self.prefix.message_count
    }

    /// Message `index` of the prefix, else `chat.message_not_found`.
    pub fn message(&self, index: u32) -> Result<&ChatMessage, ChatError> {
        self.file
            .messages()
            .get(index as usize)
            .ok_or(ChatError::MessageNotFound {
                index,
                total: self.message_count(),
            })
    }

    /// Messages `start`, `start + 1`, … — at most `count`, at most
    /// [`MAX_MESSAGES_PER_BATCH`], clipped to the prefix (empty when `start`
    /// is past its end).
    pub fn messages(&self, start: u32, count: u32) -> &[ChatMessage] {
        let all = self.file.messages();
        let start = (start as usize).min(all.len());
        let end = start
            .saturating_add(count.min(MAX_MESSAGES_PER_BATCH) as usize)
            .min(all.len());
        &all[start..end]
    }

    /// The same messages as [`messages`](Self::messages), packed for a
    /// scan: texts concatenated, names interned (`chat-read.scan`).
    pub fn pack(&self, start: u32, count: u32) -> PackedMessages {
        let messages = self.messages(start, count);
        let mut packed = PackedTexts::with_capacity(
            messages.len(),
            messages.iter().map(|m| m.text().len()).sum(),
        );
        for message in messages {
            packed.push(message.text(), message.name());
        }
        PackedMessages {
            start: messages.first().map_or(start, ChatMessage::index),
            packed,
            roles: messages.iter().map(ChatMessage::role).collect(),
        }
    }

    /// Hex sha256 of the frozen prefix bytes: message lines 1..=N as they
    /// were in the file, with the line endings between them but not the one
    /// after the last (the header line excluded).
    pub fn prefix_sha256(&self) -> &str {
        &self.prefix.sha256
    }

    /// Length in bytes of the frozen prefix.
    pub fn prefix_len(&self) -> u64 {
        self.prefix.len as u64
    }

    /// The name a committed reply is written under: the header's
    /// `character_name`; in a group chat (header `"unused"`) the latest
    /// assistant speaker of the prefix; else [`FALLBACK_REPLY_NAME`].
    pub fn reply_name(&self) -> &str {
        &self.reply_name
    }

    pub(crate) fn prefix(&self) -> &FrozenPrefix {
        &self.prefix
    }
}

fn frozen_prefix(file: &ChatFile) -> FrozenPrefix {
    let start = file.header_span().next;
    let end = file.messages().last().map_or(start, |last| last.span().end);
    let bytes = &file.bytes()[start..end];
    FrozenPrefix {
        message_count: file.message_count(),
        len: bytes.len(),
        sha256: sha256_hex(bytes),
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A header name that names someone (not missing, empty or `"unused"`).
fn meaningful(name: Option<&str>) -> Option<&str> {
    name.filter(|n| !n.trim().is_empty() && *n != GROUP_HEADER_NAME)
}

fn speakers(messages: &[ChatMessage]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut speakers = Vec::new();
    for message in messages {
        if message.role() == Role::Assistant
            && !message.name().is_empty()
            && seen.insert(message.name())
        {
            speakers.push(message.name().to_owned());
        }
    }
    speakers
}

fn chat_info(header: &ChatHeader, messages: &[ChatMessage]) -> ChatInfo {
    let speakers = speakers(messages);
    let group = header.is_group_marker() || speakers.len() >= 2;
    let user_name = meaningful(header.user_name())
        .or_else(|| {
            messages
                .iter()
                .rev()
                .find(|m| m.role() == Role::User && !m.name().is_empty())
                .map(ChatMessage::name)
        })
        .unwrap_or_default()
        .to_owned();
    let character_name = match meaningful(header.character_name()) {
        Some(name) => name.to_owned(),
        None => speakers.join(", "),
    };
    ChatInfo {
        user_name,
        character_name,
        group,
        message_count: messages.len() as u32,
        speakers,
    }
}

fn reply_name(header: &ChatHeader, messages: &[ChatMessage]) -> String {
    meaningful(header.character_name())
        .or_else(|| {
            messages
                .iter()
                .rev()
                .find(|m| m.role() == Role::Assistant && !m.name().is_empty())
                .map(ChatMessage::name)
        })
        .unwrap_or(FALLBACK_REPLY_NAME)
        .to_owned()
}
