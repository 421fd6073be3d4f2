//! [`BoundChat`]: the chat a run is bound to, frozen at its input prefix.
//!
//! The prefix is the first N messages at bind time (all of them by default).
//! Messages after it — appended later by SillyTavern, a swipe or regenerate
//! target, the run's own reply — are invisible to every read. Its bytes
//! (message lines 1..=N with their line endings, not the header: SillyTavern
//! rewrites `chat_metadata` for reasons unrelated to the history) are hashed
//! so a commit can refuse to write into a chat whose history changed under
//! the run (`agent.input_history_conflict`).
//!
//! [`BoundChat::bind_for`] binds for a [`GenerationType`]: for `swipe` and
//! `regenerate` the last message (the one the reply replaces) is left out of
//! the prefix; for `continue` it is read but not hashed, as the commit
//! changes it (see [`generation`](crate::generation)).

use std::collections::HashSet;
use std::path::Path;

use sha2::{Digest, Sha256};

use toolhost_text::PackedTexts;

use crate::dates::SendDateStyle;
use crate::error::ChatError;
use crate::file::{ChatFile, ChatHeader, ChatMessage, GROUP_HEADER_NAME, Role};
use crate::generation::{ChatBinding, ChatTarget, GenerationType};

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
    /// Messages the run reads (`prefix.message_count`, plus the target for
    /// `continue`).
    visible: u32,
    generation_type: GenerationType,
    target: Option<ChatTarget>,
    date_style: SendDateStyle,
}

/// Where the frozen prefix ends and what its bytes hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrozenPrefix {
    /// Messages hashed: all the visible ones, but a `continue` run's target.
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
    pub fn from_file(file: ChatFile, visible_messages: Option<u32>) -> Result<Self, ChatError> {
        let total = file.message_count();
        let count = visible_messages.unwrap_or(total);
        if count > total {
            return Err(ChatError::conflict(
                file.path(),
                format!("the run's input has {count} messages, the chat file only {total}"),
            ));
        }
        Ok(Self::freeze(file, GenerationType::Normal, count, None))
    }

    /// Load the chat at `path` and bind it for a reply of type
    /// `generation_type`: `normal` is [`bind`](Self::bind) with every
    /// message; `swipe`, `regenerate` and `continue` need the last message
    /// to be an assistant message (the target), else
    /// `chat.generation_type_unfit` (an empty chat, a last message that is
    /// the user's or a system note). Record [`binding`](Self::binding) to
    /// bind the same way again with [`rebind_for`](Self::rebind_for).
    pub fn bind_for(
        path: impl AsRef<Path>,
        generation_type: GenerationType,
    ) -> Result<Self, ChatError> {
        let file = ChatFile::load(path)?;
        let Some(target) = Self::target_for(&file, generation_type)? else {
            return Self::from_file(file, None);
        };
        let visible = if generation_type.reads_target() {
            target.index + 1
        } else {
            target.index
        };
        Ok(Self::freeze(file, generation_type, visible, Some(target)))
    }

    /// The message a reply of `generation_type` goes into in `file`: none
    /// for `normal`; for `swipe`, `regenerate` and `continue` its last
    /// message, which must be an assistant message, else
    /// `chat.generation_type_unfit` (an empty chat, a last message that is
    /// the user's or a system note).
    pub fn target_for(
        file: &ChatFile,
        generation_type: GenerationType,
    ) -> Result<Option<ChatTarget>, ChatError> {
        if !generation_type.has_target() {
            return Ok(None);
        }
        let unfit = |reason: String| ChatError::GenerationTypeUnfit {
            path: file.path().to_owned(),
            generation_type,
            reason,
        };
        let Some(last) = file.messages().last() else {
            return Err(unfit("the chat has no messages".into()));
        };
        match last.role() {
            Role::Assistant => {}
            Role::User => {
                return Err(unfit(format!(
                    "its last message ({}) is the user's, not a reply",
                    last.index()
                )));
            }
            Role::System => {
                return Err(unfit(format!(
                    "its last message ({}) is a system note, not a reply",
                    last.index()
                )));
            }
        }
        Ok(Some(ChatTarget {
            index: last.index(),
            text_len: last.text().len() as u64,
            text_sha256: sha256_hex(last.text().as_bytes()),
        }))
    }

    /// Bind again as [`binding`](Self::binding) recorded (a reopened run):
    /// the same prefix, whose bytes must still hash to
    /// `binding.prefix_sha256`, and the same target, which must still be an
    /// assistant message; for `continue` its text must still start with the
    /// text read at bind time (the run's own continuation may follow), and
    /// that text is what the run reads. Else `agent.input_history_conflict`;
    /// a binding whose target does not fit its type is
    /// `chat.generation_type_unfit`.
    pub fn rebind_for(path: impl AsRef<Path>, binding: &ChatBinding) -> Result<Self, ChatError> {
        let path = path.as_ref();
        let generation_type = binding.generation_type;
        let visible = binding.visible_messages;
        let target = match (&binding.target, generation_type) {
            (None, GenerationType::Normal) => {
                return Self::rebind(path, visible, &binding.prefix_sha256);
            }
            (Some(target), GenerationType::Swipe | GenerationType::Regenerate)
                if target.index == visible =>
            {
                target
            }
            (Some(target), GenerationType::Continue)
                if target.index.checked_add(1) == Some(visible) =>
            {
                target
            }
            _ => {
                return Err(ChatError::GenerationTypeUnfit {
                    path: path.to_owned(),
                    generation_type,
                    reason: format!(
                        "the recorded binding ({visible} visible messages, target {:?}) does not fit the type",
                        binding.target.as_ref().map(|t| t.index)
                    ),
                });
            }
        };
        let mut file = ChatFile::load(path)?;
        let changed = |reason: String| ChatError::conflict(path, reason);
        let Some(message) = file.messages().get(target.index as usize) else {
            return Err(changed(format!(
                "message {}, the one the run writes into, is gone",
                target.index
            )));
        };
        if message.role() != Role::Assistant {
            return Err(changed(format!(
                "message {}, the one the run writes into, is no longer an assistant message",
                target.index
            )));
        }
        if generation_type.reads_target() {
            let Some(base) = target_base(message.text(), target) else {
                return Err(changed(format!(
                    "message {}, the one the run continues, no longer starts with the text it read",
                    target.index
                )));
            };
            let base = base.to_owned();
            file.set_text(target.index, base);
        }
        let bound = Self::freeze(file, generation_type, visible, Some(target.clone()));
        if !bound
            .prefix
            .sha256
            .eq_ignore_ascii_case(&binding.prefix_sha256)
        {
            return Err(changed(format!(
                "messages 0..{} hash to {}, the run recorded {}",
                bound.prefix.message_count, bound.prefix.sha256, binding.prefix_sha256
            )));
        }
        Ok(bound)
    }

    /// The bound chat with its first `visible` messages (`visible` is at
    /// most the file's count; a target is one of the file's messages).
    fn freeze(
        mut file: ChatFile,
        generation_type: GenerationType,
        visible: u32,
        target: Option<ChatTarget>,
    ) -> Self {
        let hashed = target.as_ref().map_or(visible, |t| t.index.min(visible));
        // The form of `send_date` comes from the messages up to the one
        // written into (or the last one read).
        let dated = target.as_ref().map_or(visible, |t| t.index + 1) as usize;
        let date_style = SendDateStyle::detect(
            file.messages()[..dated.min(file.messages().len())]
                .iter()
                .map(ChatMessage::send_date),
        );
        let prefix = frozen_prefix(&file, hashed);
        file.truncate(visible);
        let info = chat_info(file.header(), file.messages());
        let reply_name = reply_name(file.header(), file.messages());
        BoundChat {
            file,
            prefix,
            info,
            reply_name,
            visible,
            generation_type,
            target,
            date_style,
        }
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
        self.visible
    }

    /// How the run's reply lands ([`bind`](Self::bind): `normal`).
    pub fn generation_type(&self) -> GenerationType {
        self.generation_type
    }

    /// The message a `swipe`, `regenerate` or `continue` run writes into.
    pub fn target(&self) -> Option<&ChatTarget> {
        self.target.as_ref()
    }

    /// What to record to bind the same way again ([`rebind_for`](Self::rebind_for)).
    pub fn binding(&self) -> ChatBinding {
        ChatBinding {
            generation_type: self.generation_type,
            visible_messages: self.visible,
            prefix_sha256: self.prefix.sha256.clone(),
            target: self.target.clone(),
        }
    }

    /// The form a committed message's `send_date` takes in this chat.
    pub fn send_date_style(&self) -> SendDateStyle {
        self.date_style
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
    /// after the last (the header line excluded). For `continue`, N is the
    /// target's index: the target is read but not hashed.
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

    /// Every visible message.
    pub(crate) fn visible_messages(&self) -> &[ChatMessage] {
        self.file.messages()
    }
}

/// The text a `continue` target had at bind time, when `text` still starts
/// with it.
pub(crate) fn target_base<'t>(text: &'t str, target: &ChatTarget) -> Option<&'t str> {
    let len = usize::try_from(target.text_len).ok()?;
    let base = text.get(..len)?;
    sha256_hex(base.as_bytes())
        .eq_ignore_ascii_case(&target.text_sha256)
        .then_some(base)
}

/// The first `count` messages' bytes and hash (`count` at most the file's).
fn frozen_prefix(file: &ChatFile, count: u32) -> FrozenPrefix {
    let start = file.header_span().next;
    let end = file
        .messages()
        .get(..count as usize)
        .and_then(<[ChatMessage]>::last)
        .map_or(start, |last| last.span().end);
    let bytes = &file.bytes()[start..end];
    FrozenPrefix {
        message_count: count,
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
