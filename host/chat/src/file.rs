//! [`ChatFile`]: a SillyTavern chat (JSONL) read whole and checked line by
//! line, each message keeping its exact original bytes.
//!
//! Line 1 is the header (`user_name`, `character_name`, `create_date`,
//! `chat_metadata`, sometimes more); every later line is one message. What is
//! read: `name`, `is_user`, `is_system`, `send_date`, `mes`, `swipes`; every
//! other field is left alone (and survives a rewrite byte for byte). What is
//! refused, naming the file and the 1-based line: an empty file, a first line
//! that is a message rather than a header, a line that is not UTF-8, not JSON
//! or not an object, a blank line before the last message, a `mes` that is
//! missing or not a string, an `is_user` that is missing or not a boolean, a
//! `name` that is not a string, an `is_system` that is not a boolean, a
//! `send_date` that is neither a string nor a number, `swipes` that are not
//! an array. Blank lines after the last message are tolerated, `\r\n` line
//! endings and a UTF-8 byte order mark too.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize as DeriveDeserialize, Serialize};

use crate::error::ChatError;
use crate::lines::{BOM, LineSpan, is_blank, split_lines};

/// Who wrote a message: `user` if `is_user`, else `system` if `is_system`,
/// else `assistant` (a character).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
    System,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The header line (line 1) of a chat file.
#[derive(Debug, Clone)]
pub struct ChatHeader {
    user_name: Option<String>,
    character_name: Option<String>,
    create_date: Option<String>,
    has_chat_metadata: bool,
    content: Arc<str>,
    span: LineSpan,
}

/// What SillyTavern writes as `user_name` and `character_name` in the
/// header of a group chat.
pub const GROUP_HEADER_NAME: &str = "unused";

impl ChatHeader {
    pub fn user_name(&self) -> Option<&str> {
        self.user_name.as_deref()
    }

    pub fn character_name(&self) -> Option<&str> {
        self.character_name.as_deref()
    }

    /// `create_date` as written (a number is given in its JSON form).
    pub fn create_date(&self) -> Option<&str> {
        self.create_date.as_deref()
    }

    pub fn has_chat_metadata(&self) -> bool {
        self.has_chat_metadata
    }

    /// SillyTavern's group-chat header: `user_name` and `character_name`
    /// both `"unused"` (its group chats name each speaker per message).
    pub fn is_group_marker(&self) -> bool {
        self.user_name.as_deref() == Some(GROUP_HEADER_NAME)
            && self.character_name.as_deref() == Some(GROUP_HEADER_NAME)
    }

    /// The header line exactly as in the file, without its line ending.
    pub fn raw_line(&self) -> &str {
        &self.content[self.span.content()]
    }
}

/// One message of a chat. `index` 0 is the first message after the header
/// (file line 2).
#[derive(Debug, Clone)]
pub struct ChatMessage {
    index: u32,
    role: Role,
    name: String,
    send_date: Option<String>,
    text: String,
    swipes: u32,
    line_number: usize,
    content: Arc<str>,
    span: LineSpan,
}

impl ChatMessage {
    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn role(&self) -> Role {
        self.role
    }

    /// The speaker's name (`name`; empty when the line has none).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `send_date` as written; a number (old TavernAI files) in its JSON form.
    pub fn send_date(&self) -> Option<&str> {
        self.send_date.as_deref()
    }

    /// The message text (`mes`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// How many swipes (alternative replies) the message has (`swipes`).
    pub fn swipes(&self) -> u32 {
        self.swipes
    }

    /// The 1-based line of the chat file holding the message.
    pub fn line_number(&self) -> usize {
        self.line_number
    }

    /// The message line exactly as in the file, without its line ending.
    pub fn raw_line(&self) -> &str {
        &self.content[self.span.content()]
    }

    /// The line ending that followed it: `"\n"`, `"\r\n"` or `""` (last line).
    pub fn line_ending(&self) -> &str {
        &self.content[self.span.terminator()]
    }

    pub(crate) fn span(&self) -> LineSpan {
        self.span
    }
}

/// A whole chat file, parsed and checked.
#[derive(Debug, Clone)]
pub struct ChatFile {
    path: PathBuf,
    content: Arc<str>,
    header: ChatHeader,
    messages: Vec<ChatMessage>,
}

impl ChatFile {
    /// Read and check the chat file at `path`. A missing file is
    /// `chat.not_found`; a bad line is `chat.malformed` naming the line.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ChatError> {
        let path = path.as_ref();
        let bytes = fs::read(path).map_err(|e| ChatError::io(path, e))?;
        Self::parse(path, bytes)
    }

    /// Check `bytes` as the chat file `path` (used in errors only).
    pub fn parse(path: impl AsRef<Path>, bytes: Vec<u8>) -> Result<Self, ChatError> {
        let path = path.as_ref();
        let spans = split_lines(&bytes);
        let Some(last) = spans.iter().rposition(|s| !is_blank(&bytes[s.content()])) else {
            return Err(ChatError::malformed(
                path,
                1,
                "the file is empty; a chat file starts with its header line",
            ));
        };
        // Blank lines are only tolerated after the last message.
        if let Some(blank) = spans[..last]
            .iter()
            .position(|s| is_blank(&bytes[s.content()]))
        {
            return Err(ChatError::malformed(
                path,
                blank + 1,
                "blank line before the last message",
            ));
        }
        let content: Arc<str> = match String::from_utf8(bytes) {
            Ok(text) => Arc::from(text),
            Err(error) => {
                let at = error.utf8_error().valid_up_to();
                let line = spans.iter().take_while(|s| s.next <= at).count() + 1;
                return Err(ChatError::malformed(path, line, "not UTF-8 text"));
            }
        };

        let header = parse_header(path, &content, spans[0])?;
        let count = u32::try_from(last).map_err(|_| {
            ChatError::malformed(path, last + 1, "more than 4,294,967,295 messages")
        })?;
        let mut messages = Vec::with_capacity(count as usize);
        for (offset, span) in spans[1..=last].iter().enumerate() {
            // `offset < count`, which fits in u32.
            let index = offset as u32;
            messages.push(parse_message(path, &content, *span, index)?);
        }
        Ok(ChatFile {
            path: path.to_owned(),
            content,
            header,
            messages,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &ChatHeader {
        &self.header
    }

    pub fn messages(&self) -> &[ChatMessage] {
        &self.messages
    }

    pub fn message_count(&self) -> u32 {
        // At most u32::MAX, checked in `parse`.
        self.messages.len() as u32
    }

    /// The whole file as read.
    pub fn bytes(&self) -> &[u8] {
        self.content.as_bytes()
    }

    pub(crate) fn header_span(&self) -> LineSpan {
        self.header.span
    }

    pub(crate) fn truncate(&mut self, count: u32) {
        self.messages.truncate(count as usize);
    }

    /// Read message `index` as having `text` (a reopened `continue` run
    /// reads its target's text as it was at bind time, not with the run's
    /// own continuation).
    pub(crate) fn set_text(&mut self, index: u32, text: String) {
        if let Some(message) = self.messages.get_mut(index as usize) {
            message.text = text;
        }
    }
}

fn parse_header(path: &Path, content: &Arc<str>, span: LineSpan) -> Result<ChatHeader, ChatError> {
    let mut line = &content[span.content()];
    if let Some(rest) = line.strip_prefix(BOM) {
        line = rest;
    }
    let fields: HeaderFields = parse_object(path, 1, line)?;
    if fields.mes.is_some() || fields.is_user.is_some() {
        return Err(ChatError::malformed(
            path,
            1,
            "line 1 is a message, not the chat header \
             (a chat file starts with user_name, character_name, create_date, chat_metadata)",
        ));
    }
    let field = |name: &str, value: Option<Json>| -> Result<Option<String>, ChatError> {
        match value {
            None => Ok(None),
            Some(Json::String(text)) => Ok(Some(text)),
            Some(other) => Err(ChatError::malformed(
                path,
                1,
                format!("`{name}` must be a string, found {}", other.kind()),
            )),
        }
    };
    let user_name = field("user_name", fields.user_name)?;
    let character_name = field("character_name", fields.character_name)?;
    let create_date = match fields.create_date {
        Some(Json::Number(number)) => Some(number),
        other => field("create_date", other)?,
    };
    Ok(ChatHeader {
        user_name,
        character_name,
        create_date,
        has_chat_metadata: fields.chat_metadata.is_some(),
        content: Arc::clone(content),
        span,
    })
}

fn parse_message(
    path: &Path,
    content: &Arc<str>,
    span: LineSpan,
    index: u32,
) -> Result<ChatMessage, ChatError> {
    let line_number = index as usize + 2;
    let fields: MessageFields = parse_object(path, line_number, &content[span.content()])?;
    let bad = |reason: String| ChatError::malformed(path, line_number, reason);
    let text = match fields.mes {
        Some(Json::String(text)) => text,
        None => return Err(bad("`mes` is missing or null".into())),
        Some(other) => {
            return Err(bad(format!(
                "`mes` must be a string, found {}",
                other.kind()
            )));
        }
    };
    let is_user = match fields.is_user {
        Some(Json::Bool(value)) => value,
        None => return Err(bad("`is_user` is missing or null".into())),
        Some(other) => {
            return Err(bad(format!(
                "`is_user` must be a boolean, found {}",
                other.kind()
            )));
        }
    };
    let is_system = match fields.is_system {
        Some(Json::Bool(value)) => value,
        None => false,
        Some(other) => {
            return Err(bad(format!(
                "`is_system` must be a boolean, found {}",
                other.kind()
            )));
        }
    };
    let name = match fields.name {
        Some(Json::String(name)) => name,
        None => String::new(),
        Some(other) => {
            return Err(bad(format!(
                "`name` must be a string, found {}",
                other.kind()
            )));
        }
    };
    let send_date = match fields.send_date {
        Some(Json::String(date) | Json::Number(date)) => Some(date),
        None => None,
        Some(other) => {
            return Err(bad(format!(
                "`send_date` must be a string or a number, found {}",
                other.kind()
            )));
        }
    };
    let swipes = match fields.swipes {
        Some(Json::Array(count)) => count,
        None => 0,
        Some(other) => {
            return Err(bad(format!(
                "`swipes` must be an array, found {}",
                other.kind()
            )));
        }
    };
    let role = if is_user {
        Role::User
    } else if is_system {
        Role::System
    } else {
        Role::Assistant
    };
    Ok(ChatMessage {
        index,
        role,
        name,
        send_date,
        text,
        swipes,
        line_number,
        content: Arc::clone(content),
        span,
    })
}

/// Deserialize one line that must be a JSON object.
pub(crate) fn parse_object<'a, T: Deserialize<'a>>(
    path: &Path,
    line_number: usize,
    line: &'a str,
) -> Result<T, ChatError> {
    match line.trim_start().as_bytes().first() {
        Some(b'{') => {}
        _ => {
            // Say what it is when it is JSON at all.
            let reason = match serde_json::from_str::<Json>(line) {
                Ok(other) => format!("not a JSON object but {}", other.kind()),
                Err(error) => format!("not valid JSON: {}", describe(&error)),
            };
            return Err(ChatError::malformed(path, line_number, reason));
        }
    }
    serde_json::from_str(line).map_err(|error| {
        let reason = if error.is_data() {
            describe(&error)
        } else {
            format!("not valid JSON: {}", describe(&error))
        };
        ChatError::malformed(path, line_number, reason)
    })
}

/// serde_json's message with its "at line 1 column N" (the line is always 1
/// here) turned into "(column N)".
fn describe(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) if error.column() > 0 => {
            format!("{message} (column {})", error.column())
        }
        _ => text,
    }
}

#[derive(DeriveDeserialize)]
struct HeaderFields {
    user_name: Option<Json>,
    character_name: Option<Json>,
    create_date: Option<Json>,
    chat_metadata: Option<Json>,
    mes: Option<Json>,
    is_user: Option<Json>,
}

#[derive(DeriveDeserialize)]
struct MessageFields {
    name: Option<Json>,
    is_user: Option<Json>,
    is_system: Option<Json>,
    send_date: Option<Json>,
    mes: Option<Json>,
    swipes: Option<Json>,
}

/// Just enough of a JSON value to check a field's type: strings and numbers
/// kept as text, arrays counted, objects skipped. `null` never gets here
/// (an `Option` field reads it as `None`).
#[derive(Debug)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(String),
    String(String),
    Array(u32),
    Object,
}

impl Json {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object => "an object",
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Json, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Json, E> {
        Ok(Json::Number(value.to_string()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Json, E> {
        Ok(Json::Number(value.to_string()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Json, E> {
        Ok(Json::Number(value.to_string()))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Json, E> {
        Ok(Json::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Json, E> {
        Ok(Json::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut count = 0u32;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            count = count.saturating_add(1);
        }
        Ok(Json::Array(count))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Json::Object)
    }
}
