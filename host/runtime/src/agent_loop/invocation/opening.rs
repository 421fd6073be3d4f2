//! The messages of an invocation's first request after the system prompt:
//! the chat app's prompt (the run's snapshot, or the one built from its
//! chat), as much of it as the profile's `context` lets in, then the task or
//! the brief. So a model reads what the app would have sent, then what to
//! do through its tools.

use serde::Serialize;
use toolhost_core::prompt_snapshot::{
    PromptOrigin, PromptSnapshot, SnapshotMessage, SnapshotRole, SnapshotSource,
};
use toolhost_core::{AgentModelMessage, AgentModelRole, profile::HistoryCut, profile::Profile};

/// The opening of a conversation, and what the window may later drop of it.
pub(super) struct Opening {
    pub messages: Vec<AgentModelMessage>,
    /// One flag per message: whether it is the snapshot's chat history,
    /// the only opening messages the window may drop.
    pub chat_history: Vec<bool>,
    pub summary: PromptSummary,
}

/// What `context_assembled` records of the prompt (`prompt`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptSummary {
    /// `snapshot`, `chat`, or `none` (a delegated child, or a run without
    /// either).
    pub source: &'static str,
    /// Opening messages sent, the task included.
    pub messages: usize,
    pub history_kept: usize,
    pub history_total: usize,
    pub world_info: bool,
    /// Unicode scalars of the opening messages.
    pub chars: usize,
}

/// The opening for an invocation of `profile` whose first user message is
/// `first_message`; `delegated` for a child, which reads its brief alone
/// unless its profile asks for the chat's history.
pub(super) fn opening(
    profile: &Profile,
    prompt: Option<(PromptOrigin, &PromptSnapshot)>,
    first_message: &str,
    delegated: bool,
) -> Opening {
    let context = &profile.context;
    let cut = context.history(delegated);
    // A child whose profile says nothing of the chat reads its brief alone,
    // as before; one that sets a count (0 too) reads the prompt.
    let read_prompt =
        prompt.filter(|_| !delegated || context.initial_chat_history_messages.is_some());
    let mut messages = Vec::new();
    let mut chat_history = Vec::new();
    let mut summary = PromptSummary {
        source: read_prompt.map_or("none", |(origin, _)| origin.as_str()),
        messages: 0,
        history_kept: 0,
        history_total: 0,
        world_info: false,
        chars: 0,
    };
    if let Some((_, snapshot)) = read_prompt {
        let history_total = snapshot
            .messages
            .iter()
            .filter(|message| message.is(SnapshotSource::ChatHistory))
            .count();
        let keep_from = match cut {
            HistoryCut::All => 0,
            HistoryCut::Last(n) => history_total.saturating_sub(n),
        };
        let mut history_seen = 0;
        for message in &snapshot.messages {
            let history = message.is(SnapshotSource::ChatHistory);
            if history {
                history_seen += 1;
                if history_seen <= keep_from {
                    continue;
                }
            }
            if message.is(SnapshotSource::WorldInfo) {
                if !context.include_activated_world_info {
                    continue;
                }
                summary.world_info = true;
            }
            messages.push(to_model(message, snapshot));
            chat_history.push(history);
        }
        summary.history_total = history_total;
        summary.history_kept = chat_history.iter().filter(|&&history| history).count();
    }
    messages.push(AgentModelMessage::user_text(first_message));
    chat_history.push(false);
    summary.messages = messages.len();
    summary.chars = messages
        .iter()
        .map(|message| message.text().chars().count())
        .sum();
    Opening {
        messages,
        chat_history,
        summary,
    }
}

/// A snapshot message as the model reads it. A speaker's name goes in front
/// of the text (no provider but OpenAI Chat has a name field, and that one
/// takes only ASCII names), as SillyTavern's own converters do; its example
/// speakers are the chat's user and character.
fn to_model(message: &SnapshotMessage, snapshot: &PromptSnapshot) -> AgentModelMessage {
    let role = match message.role {
        SnapshotRole::System => AgentModelRole::System,
        SnapshotRole::User => AgentModelRole::User,
        SnapshotRole::Assistant => AgentModelRole::Assistant,
    };
    let name = match message.name.as_deref() {
        Some("example_user") => snapshot.user_name.as_deref(),
        Some("example_assistant") => snapshot.character_name.as_deref(),
        other => other,
    }
    .filter(|name| !name.trim().is_empty());
    match name {
        Some(name) if !message.content.starts_with(&format!("{name}:")) => {
            AgentModelMessage::text_of(role, format!("{name}: {}", message.content))
        }
        _ => AgentModelMessage::text_of(role, message.content.clone()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn profile(context: serde_json::Value) -> Profile {
        Profile::from_json(
            &json!({
                "schemaVersion": 1,
                "kind": "toolhost.agentProfile",
                "id": "writer",
                "tools": {"allow": ["workspace.read_file"]},
                "context": context
            })
            .to_string(),
        )
        .expect("profile")
    }

    fn snapshot() -> PromptSnapshot {
        PromptSnapshot::from_json(&json!({
            "characterName": "米蕾尔",
            "userName": "Tomas",
            "messages": [
                {"role": "system", "content": "Preset: third person."},
                {"role": "system", "content": "[灯塔] 北岸。", "source": "worldInfo"},
                {"role": "user", "content": "Hello.", "name": "example_user"},
                {"role": "assistant", "content": "「欢迎。」", "source": "chatHistory"},
                {"role": "user", "content": "一", "source": "chatHistory"},
                {"role": "assistant", "content": "二", "source": "chatHistory"},
                {"role": "user", "content": "三", "source": "chatHistory"},
                {"role": "assistant", "content": "四", "source": "chatHistory", "name": "米蕾尔"},
                {"role": "user", "content": "五", "source": "chatHistory"},
                {"role": "system", "content": "Post-history: stay in character."}
            ]
        }))
        .expect("snapshot")
    }

    fn history_at(opening: &Opening) -> Vec<usize> {
        (0..opening.chat_history.len())
            .filter(|&index| opening.chat_history[index])
            .collect()
    }

    fn texts(opening: &Opening) -> Vec<(AgentModelRole, String)> {
        opening
            .messages
            .iter()
            .map(|message| (message.role, message.text()))
            .collect()
    }

    #[test]
    fn history_counts_cut_only_tagged_history_and_keep_the_order() {
        let snapshot = snapshot();
        let prompt = Some((PromptOrigin::Snapshot, &snapshot));
        let all = opening(&profile(json!({})), prompt, "Task.", false);
        assert_eq!(all.messages.len(), 11);
        assert_eq!(all.summary.history_kept, 6);
        assert_eq!(history_at(&all), vec![3, 4, 5, 6, 7, 8]);
        assert_eq!(all.chat_history.len(), all.messages.len());
        let three = opening(
            &profile(json!({"initialChatHistoryMessages": 3})),
            prompt,
            "Task.",
            false,
        );
        let kept = texts(&three);
        assert_eq!(
            kept,
            vec![
                (AgentModelRole::System, "Preset: third person.".into()),
                (AgentModelRole::System, "[灯塔] 北岸。".into()),
                (AgentModelRole::User, "Tomas: Hello.".into()),
                (AgentModelRole::User, "三".into()),
                (AgentModelRole::Assistant, "米蕾尔: 四".into()),
                (AgentModelRole::User, "五".into()),
                (
                    AgentModelRole::System,
                    "Post-history: stay in character.".into()
                ),
                (AgentModelRole::User, "Task.".into()),
            ]
        );
        assert_eq!(history_at(&three), vec![3, 4, 5]);
        let none = opening(
            &profile(json!({"initialChatHistoryMessages": 0, "includeActivatedWorldInfo": false})),
            prompt,
            "Task.",
            false,
        );
        assert_eq!(none.messages.len(), 4, "{:?}", texts(&none));
        assert!(!none.summary.world_info);
        assert!(history_at(&none).is_empty());
        assert_eq!(none.chat_history.len(), none.messages.len());
    }

    #[test]
    fn a_child_reads_its_brief_unless_its_profile_asks_for_history() {
        let snapshot = snapshot();
        let prompt = Some((PromptOrigin::Chat, &snapshot));
        let child = opening(&profile(json!({})), prompt, "Brief.", true);
        assert_eq!(texts(&child), vec![(AgentModelRole::User, "Brief.".into())]);
        assert_eq!(child.summary.source, "none");
        let asking = opening(
            &profile(json!({"initialChatHistoryMessages": 2})),
            prompt,
            "Brief.",
            true,
        );
        assert_eq!(asking.summary.history_kept, 2);
        assert_eq!(asking.summary.source, "chat");
        // A count of 0 is asked for too: the prompt without the history.
        let zero = opening(
            &profile(json!({"initialChatHistoryMessages": 0})),
            prompt,
            "Brief.",
            true,
        );
        assert_eq!(zero.summary.source, "chat");
        assert_eq!(zero.messages.len(), 5, "{:?}", texts(&zero));
    }
}
