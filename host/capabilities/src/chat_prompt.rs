//! A prompt snapshot built from the bound chat, for a run given none: what a
//! chat app would have put in front of the model, as far as toolhost knows
//! it — who talks with whom, the activated world info, and the chat's
//! messages. Built from the frozen prefix and the stored activation alone,
//! so a reopened run builds the same one and nothing is stored.

use toolhost_chat::{BoundChat, GenerationType, Role};
use toolhost_core::prompt_snapshot::{
    MAX_SNAPSHOT_MESSAGES, MAX_SNAPSHOT_TEXT_BYTES, PROMPT_SNAPSHOT_SCHEMA, PromptSnapshot,
    SnapshotMessage, SnapshotRole, SnapshotSource,
};
use toolhost_worldinfo::Activation;

/// The snapshot a SillyTavern chat stands for. Messages SillyTavern keeps
/// out of the prompt (`is_system`: hidden and narrator notes) stay out; the
/// newest messages are kept within the bounds of a given snapshot (the
/// window cuts further). In a group chat each message carries its
/// speaker's name, as SillyTavern's own prompt does.
pub fn from_chat(chat: &BoundChat, activation: Option<&Activation>) -> PromptSnapshot {
    let info = chat.info();
    let reply = chat.reply_name();
    // What the reply is, by the run's generation type.
    let next = match chat.generation_type() {
        GenerationType::Normal => format!("the next reply is {reply}'s."),
        GenerationType::Swipe | GenerationType::Regenerate => format!(
            "write another version of {reply}'s last reply, which is left out here: yours takes its place."
        ),
        GenerationType::Continue => format!(
            "continue {reply}'s last message from where it stops: what you commit is appended to it."
        ),
    };
    let mut head = vec![SnapshotMessage::new(
        SnapshotRole::System,
        format!(
            "This is a chat between {user} and {character}. The messages that follow are the chat so far, oldest first; {next}",
            user = info.user_name,
            character = info.character_name,
        ),
    )];
    if let Some(text) = activation.and_then(world_info_text) {
        let mut message = SnapshotMessage::new(SnapshotRole::System, text);
        message.source = Some(SnapshotSource::WorldInfo);
        head.push(message);
    }
    let mut budget = MAX_SNAPSHOT_TEXT_BYTES
        .saturating_sub(head.iter().map(|message| message.content.len()).sum());
    let mut history = Vec::new();
    // Newest first, one by one: a batch read stops at a thousand messages.
    for index in (0..chat.message_count()).rev() {
        let Ok(message) = chat.message(index) else {
            break;
        };
        let role = match message.role() {
            Role::User => SnapshotRole::User,
            Role::Assistant => SnapshotRole::Assistant,
            Role::System => continue,
        };
        let cost = message.text().len() + message.name().len();
        if history.len() + head.len() >= MAX_SNAPSHOT_MESSAGES || cost > budget {
            break;
        }
        budget -= cost;
        let mut kept = SnapshotMessage::new(role, message.text());
        kept.source = Some(SnapshotSource::ChatHistory);
        if info.group && !message.name().is_empty() {
            kept.name = Some(message.name().to_owned());
        }
        history.push(kept);
    }
    history.reverse();
    head.extend(history);
    PromptSnapshot {
        schema_version: PROMPT_SNAPSHOT_SCHEMA,
        chat_id: None,
        character_name: Some(info.character_name.clone()),
        user_name: Some(info.user_name.clone()),
        messages: head,
    }
}

/// The activated entries as one system message, in activation order.
fn world_info_text(activation: &Activation) -> Option<String> {
    let entries = activation.entries();
    if entries.is_empty() {
        return None;
    }
    let mut text = String::from("Activated world info:");
    for entry in entries {
        text.push_str("\n\n");
        if let Some(name) = entry
            .display_name
            .as_deref()
            .filter(|name| !name.is_empty())
        {
            text.push('[');
            text.push_str(name);
            text.push_str("]\n");
        }
        text.push_str(&entry.content);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use toolhost_chat::{ChatFile, generate_chat};

    use super::*;

    fn bound(messages: u32) -> BoundChat {
        let file = ChatFile::parse("generated.jsonl", generate_chat(messages, 7).into_bytes())
            .expect("chat");
        BoundChat::from_file(file, None).expect("bound")
    }

    #[test]
    fn a_long_chat_gives_its_newest_messages_oldest_first() {
        let chat = bound(2_500);
        let snapshot = from_chat(&chat, None);
        let history: Vec<&SnapshotMessage> = snapshot
            .messages
            .iter()
            .filter(|message| message.is(SnapshotSource::ChatHistory))
            .collect();
        let last = chat.message(2_499).expect("last");
        assert_eq!(
            history.last().map(|m| m.content.as_str()),
            Some(last.text())
        );
        let sent = (0..2_500)
            .filter(|&index| chat.message(index).is_ok_and(|m| m.role() != Role::System))
            .count();
        assert_eq!(history.len(), sent, "all fit 10,000 messages and 8 MiB");
        let first_sent = (0..2_500)
            .find_map(|index| {
                chat.message(index)
                    .ok()
                    .filter(|m| m.role() != Role::System)
            })
            .expect("a message");
        assert_eq!(history[0].content, first_sent.text());
        assert_eq!(snapshot.messages[0].role, SnapshotRole::System);
        assert!(snapshot.messages[0].content.contains("Traveler"));
    }
}
