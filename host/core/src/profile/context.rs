//! What of the chat app's prompt a profile's model reads (`context`) and the
//! agent's own system prompt (`instructions`): the reference's fields
//! (TauriTavern's profile `context` / `instructions`), with its defaults.

use serde::{Deserialize, Serialize};

use super::ProfileError;

/// Most chat-history messages a profile may ask for by count.
pub const MAX_HISTORY_MESSAGES: i64 = 100_000;
/// The smallest window a profile may set: below it the system prompt and a
/// handful of tool declarations alone would not fit.
pub const MIN_INPUT_CHARS: u32 = 4_096;
/// Most characters of a profile's own system prompt.
pub const MAX_SYSTEM_PROMPT_CHARS: usize = 100_000;

/// How much of the run's prompt snapshot goes into an invocation's first
/// request, and how large a request may grow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextPolicy {
    /// Chat-history messages of the snapshot to send: `-1` all of them
    /// (then the window drops the oldest), `0` none, `N` the last N. Unset:
    /// all for the root and a handoff target, none for a delegated child,
    /// which works from its brief.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_chat_history_messages: Option<i64>,
    /// Whether the snapshot's activated world info is sent.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub include_activated_world_info: bool,
    /// The model's window, in Unicode scalars (the seed's text metric, no
    /// tokenizer). Unset: the model's `contextChars` in `models.json`, else
    /// the runtime's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_chars: Option<u32>,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        Self {
            initial_chat_history_messages: None,
            include_activated_world_info: true,
            max_input_chars: None,
        }
    }
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// How many chat-history messages an invocation's first request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryCut {
    All,
    Last(usize),
}

impl ContextPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The history cut for an invocation; `delegated` for a child, which
    /// reads none unless the profile asks.
    pub fn history(&self, delegated: bool) -> HistoryCut {
        match self.initial_chat_history_messages {
            None if delegated => HistoryCut::Last(0),
            None => HistoryCut::All,
            Some(n) => usize::try_from(n).map_or(HistoryCut::All, HistoryCut::Last),
        }
    }

    pub(super) fn validate(&self) -> Result<(), ProfileError> {
        if let Some(n) = self.initial_chat_history_messages
            && !(n == -1 || (0..=MAX_HISTORY_MESSAGES).contains(&n))
        {
            return Err(ProfileError::invalid(
                "context.initialChatHistoryMessages",
                format!("is {n}; -1 (all), 0 (none) or a count up to {MAX_HISTORY_MESSAGES}"),
            ));
        }
        if let Some(chars) = self.max_input_chars
            && chars < MIN_INPUT_CHARS
        {
            return Err(ProfileError::invalid(
                "context.maxInputChars",
                format!("is {chars}; at least {MIN_INPUT_CHARS}"),
            ));
        }
        Ok(())
    }
}

/// The agent's own instructions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Instructions {
    /// The system prompt, in place of the one toolhost writes (which names
    /// the agent, its roots and its tools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_system_prompt: Option<String>,
}

impl Instructions {
    pub fn is_default(&self) -> bool {
        self.agent_system_prompt.is_none()
    }

    pub(super) fn validate(&self) -> Result<(), ProfileError> {
        const FIELD: &str = "instructions.agentSystemPrompt";
        if let Some(prompt) = &self.agent_system_prompt {
            if prompt.trim().is_empty() {
                return Err(ProfileError::invalid(FIELD, "must not be blank"));
            }
            let chars = prompt.chars().count();
            if chars > MAX_SYSTEM_PROMPT_CHARS {
                return Err(ProfileError::invalid(
                    FIELD,
                    format!("holds {chars} characters; at most {MAX_SYSTEM_PROMPT_CHARS}"),
                ));
            }
        }
        Ok(())
    }
}
