//! The prompt snapshot a chat app hands a run (`input/prompt_snapshot.json`):
//! the chat-completion messages it assembled for this generation — preset,
//! character, persona, world info, chat history — with the character's and
//! the user's names and the activated world info. Checked here, field by
//! field, before a run is made from it: a message's role is `system`,
//! `user` or `assistant`, its content is text, and the whole stays within
//! bounds a model request can carry. The activation itself is read by
//! `toolhost-worldinfo`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The schema this host reads.
pub const PROMPT_SNAPSHOT_SCHEMA: u64 = 1;
/// Most messages a snapshot may hold.
pub const MAX_SNAPSHOT_MESSAGES: usize = 10_000;
/// Most bytes of message text (contents and names) a snapshot may hold.
pub const MAX_SNAPSHOT_TEXT_BYTES: usize = 8 * 1024 * 1024;
/// Most bytes of a name (`characterName`, `userName`, `chatId`, a
/// message's `name`): a name goes in front of every message it speaks, so
/// a long one would multiply.
pub const MAX_NAME_BYTES: usize = 256;

/// Who says a snapshot message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotRole {
    System,
    User,
    Assistant,
}

/// What part of the app's prompt a message is, when the app says so. Only
/// tagged messages are cut by the profile's `context`: SillyTavern's prompt
/// carries no marker, so an untagged message is always sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SnapshotSource {
    /// A message of the chat itself (`context.initialChatHistoryMessages`
    /// keeps the last N of these).
    ChatHistory,
    /// Activated world info (`context.includeActivatedWorldInfo`).
    WorldInfo,
}

/// Where a run's prompt came from (`run.json` `inputs.prompt`): the app's
/// snapshot, or one toolhost built from the bound chat. Absent in runs made
/// before prompts were read, which keep their old first request on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PromptOrigin {
    Snapshot,
    Chat,
}

impl PromptOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Snapshot => "snapshot",
            Self::Chat => "chat",
        }
    }
}

/// One message of the app's prompt, in its order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotMessage {
    pub role: SnapshotRole,
    /// The message's text, exactly as the app assembled it.
    pub content: String,
    /// The speaker's name, when the app gave one (group chats, examples).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub source: Option<SnapshotSource>,
}

impl SnapshotMessage {
    pub fn new(role: SnapshotRole, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            name: None,
            source: None,
        }
    }

    pub fn is(&self, source: SnapshotSource) -> bool {
        self.source == Some(source)
    }
}

/// A checked prompt snapshot.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSnapshot {
    /// Absent in a snapshot that only carries world info (`{"worldInfoActivation": …}`).
    #[serde(default = "schema")]
    pub schema_version: u64,
    #[serde(default)]
    pub chat_id: Option<String>,
    #[serde(default)]
    pub character_name: Option<String>,
    #[serde(default)]
    pub user_name: Option<String>,
    #[serde(default)]
    pub messages: Vec<SnapshotMessage>,
    // `worldInfoActivation` is read by `toolhost-worldinfo`, which checks
    // it field by field; skipped here rather than copied (it may be large).
}

fn schema() -> u64 {
    PROMPT_SNAPSHOT_SCHEMA
}

/// A snapshot that does not check: the field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("agent.invalid_prompt_snapshot_file: {field}: {message}")]
pub struct PromptSnapshotError {
    /// Where in the snapshot, as a path (`messages[3].role`); empty for the
    /// whole document.
    pub field: String,
    pub message: String,
}

impl PromptSnapshotError {
    pub const CODE: &'static str = "agent.invalid_prompt_snapshot_file";

    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl PromptSnapshot {
    /// Check `value` and read it.
    pub fn from_json(value: &Value) -> Result<Self, PromptSnapshotError> {
        let Some(object) = value.as_object() else {
            return Err(PromptSnapshotError::new(
                "",
                "the snapshot must be a JSON object",
            ));
        };
        // Counted before anything is copied: a huge array is refused as it is.
        if let Some(messages) = object.get("messages").and_then(Value::as_array)
            && messages.len() > MAX_SNAPSHOT_MESSAGES
        {
            return Err(PromptSnapshotError::new(
                "messages",
                format!(
                    "holds {} messages; at most {MAX_SNAPSHOT_MESSAGES} are read",
                    messages.len()
                ),
            ));
        }
        let snapshot: Self = serde_path_to_error::deserialize(value).map_err(|error| {
            let field = error.path().to_string();
            let field = if field == "." { String::new() } else { field };
            PromptSnapshotError::new(field, error.into_inner().to_string())
        })?;
        if snapshot.schema_version != PROMPT_SNAPSHOT_SCHEMA {
            return Err(PromptSnapshotError::new(
                "schemaVersion",
                format!(
                    "is {}; this host reads version {PROMPT_SNAPSHOT_SCHEMA}",
                    snapshot.schema_version
                ),
            ));
        }
        let names = [
            (
                "characterName".to_owned(),
                snapshot.character_name.as_deref(),
            ),
            ("userName".to_owned(), snapshot.user_name.as_deref()),
            ("chatId".to_owned(), snapshot.chat_id.as_deref()),
        ]
        .into_iter()
        .chain(
            snapshot
                .messages
                .iter()
                .enumerate()
                .map(|(index, message)| {
                    (format!("messages[{index}].name"), message.name.as_deref())
                }),
        );
        for (field, name) in names {
            if let Some(name) = name
                && name.len() > MAX_NAME_BYTES
            {
                return Err(PromptSnapshotError::new(
                    field,
                    format!("is {} bytes long; at most {MAX_NAME_BYTES}", name.len()),
                ));
            }
        }
        let text: usize = snapshot
            .messages
            .iter()
            .map(|message| message.content.len() + message.name.as_ref().map_or(0, String::len))
            .sum();
        if text > MAX_SNAPSHOT_TEXT_BYTES {
            return Err(PromptSnapshotError::new(
                "messages",
                format!("hold {text} bytes of text; at most {MAX_SNAPSHOT_TEXT_BYTES} are read"),
            ));
        }
        Ok(snapshot)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refused(value: Value) -> PromptSnapshotError {
        PromptSnapshot::from_json(&value).expect_err("refused")
    }

    #[test]
    fn a_snapshot_reads_its_messages_in_order_byte_for_byte() {
        let snapshot = PromptSnapshot::from_json(&json!({
            "schemaVersion": 1,
            "characterName": "Mara",
            "userName": "Tomas",
            "messages": [
                {"role": "system", "content": "You are Mara."},
                {"role": "user", "content": "灯台へ行こう。", "name": "Tomas"},
                {"role": "assistant", "content": "Tonight, then.", "source": "chatHistory"}
            ],
            "worldInfoActivation": {"entries": []}
        }))
        .expect("valid");
        assert_eq!(snapshot.messages.len(), 3);
        assert_eq!(snapshot.messages[1].role, SnapshotRole::User);
        assert_eq!(
            snapshot.messages[1].content.as_bytes(),
            "灯台へ行こう。".as_bytes()
        );
        assert_eq!(snapshot.messages[1].name.as_deref(), Some("Tomas"));
        assert!(snapshot.messages[2].is(SnapshotSource::ChatHistory));
        assert_eq!(snapshot.messages[1].source, None);
        assert_eq!(snapshot.character_name.as_deref(), Some("Mara"));
    }

    #[test]
    fn world_info_alone_is_a_snapshot_without_messages() {
        let snapshot = PromptSnapshot::from_json(&json!({"worldInfoActivation": {"entries": []}}))
            .expect("valid");
        assert!(snapshot.messages.is_empty());
        assert_eq!(snapshot.schema_version, PROMPT_SNAPSHOT_SCHEMA);
    }

    #[test]
    fn every_bad_field_is_named() {
        let error = refused(json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "content": "x"}
        ]}));
        assert_eq!(error.field, "messages[1].role");
        let error = refused(json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]}
        ]}));
        assert_eq!(error.field, "messages[0].content");
        let error = refused(json!({"messages": [{"role": "user"}]}));
        assert_eq!(error.field, "messages[0]");
        assert!(error.message.contains("content"), "{}", error.message);
        let error = refused(json!({"messages": [{"role": "user", "content": "a", "extra": 1}]}));
        assert_eq!(error.field, "messages[0].extra");
        let error =
            refused(json!({"messages": [{"role": "user", "content": "a", "source": "preset"}]}));
        assert_eq!(error.field, "messages[0].source");
        let long = "名".repeat(MAX_NAME_BYTES / 3 + 1);
        let error = refused(json!({"userName": long}));
        assert_eq!(error.field, "userName");
        let error = refused(json!({"messages": [
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b", "name": long}
        ]}));
        assert_eq!(error.field, "messages[1].name");
        let error = refused(json!({"characterName": 7}));
        assert_eq!(error.field, "characterName");
        let error = refused(json!({"schemaVersion": 2}));
        assert_eq!(error.field, "schemaVersion");
        let error = refused(json!(["not", "an", "object"]));
        assert_eq!(error.field, "");
        assert!(error.to_string().starts_with(PromptSnapshotError::CODE));
    }

    #[test]
    fn a_snapshot_too_large_for_a_request_is_refused() {
        let big = "x".repeat(MAX_SNAPSHOT_TEXT_BYTES / 4 + 1);
        let messages: Vec<Value> = (0..4)
            .map(|_| json!({"role": "user", "content": big}))
            .collect();
        let error = refused(json!({"messages": messages}));
        assert_eq!(error.field, "messages");
        let many: Vec<Value> = (0..=MAX_SNAPSHOT_MESSAGES)
            .map(|_| json!({"role": "user", "content": ""}))
            .collect();
        let error = refused(json!({"messages": many}));
        assert_eq!(error.field, "messages");
        assert!(
            error.message.contains("10001 messages"),
            "{}",
            error.message
        );
    }
}
