//! [`GenerationType`]: how a run's reply lands in its chat, SillyTavern's
//! generation types, and [`ChatBinding`], what a run records to bind the
//! same chat again when it is reopened.
//!
//! | type | the model reads | the reply |
//! |---|---|---|
//! | `normal` | every message | a new message after the last line |
//! | `swipe` | every message but the last (an assistant message) | a new swipe of the last message, shown |
//! | `regenerate` | every message but the last (an assistant message) | replaces the last message's shown swipe |
//! | `continue` | every message, the last one (an assistant message) included | appended to the last message |
//!
//! The message a `swipe`, `regenerate` or `continue` writes into is the
//! run's *target*. The frozen prefix's sha256 covers the messages before it
//! (the commit changes the target itself); the target's text at bind time is
//! kept as a length and a sha256 ([`ChatTarget`]), so a commit can tell it
//! is still the message the run was started for, and a reopened `continue`
//! run finds the text its model continued.

use std::fmt;

use serde::{Deserialize, Serialize};

/// SillyTavern's generation types a run can answer with (its
/// `Generate(type)`; `normal` is its `undefined`/`'normal'`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GenerationType {
    /// A new assistant message after the last line of the file.
    #[default]
    Normal,
    /// A new swipe of the last (assistant) message, which becomes the shown one.
    Swipe,
    /// The last (assistant) message's shown swipe, replaced.
    Regenerate,
    /// The reply appended to the last (assistant) message's text.
    Continue,
}

impl GenerationType {
    pub const ALL: [GenerationType; 4] = [
        GenerationType::Normal,
        GenerationType::Swipe,
        GenerationType::Regenerate,
        GenerationType::Continue,
    ];

    /// `normal`, `swipe`, `regenerate` or `continue` (the serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            GenerationType::Normal => "normal",
            GenerationType::Swipe => "swipe",
            GenerationType::Regenerate => "regenerate",
            GenerationType::Continue => "continue",
        }
    }

    /// The type named `name` (exactly one of [`as_str`](Self::as_str)'s
    /// names), else `None`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether the reply goes into the chat's last message rather than a
    /// new one.
    pub fn has_target(self) -> bool {
        self != GenerationType::Normal
    }

    /// Whether the model reads the target (only `continue`: it continues it).
    pub fn reads_target(self) -> bool {
        self == GenerationType::Continue
    }
}

impl fmt::Display for GenerationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The message a `swipe`, `regenerate` or `continue` run writes into, as it
/// was when the run was bound.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatTarget {
    /// Its message index (0 = the first message after the header).
    pub index: u32,
    /// The byte length of its `mes` at bind time.
    pub text_len: u64,
    /// Hex sha256 of its `mes` at bind time.
    pub text_sha256: String,
}

/// What a run records of its chat binding (in `run.json`), everything
/// [`BoundChat::rebind_for`](crate::BoundChat::rebind_for) needs to give the
/// same prefix and target again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatBinding {
    pub generation_type: GenerationType,
    /// Messages the run reads: the target excluded for `swipe` and
    /// `regenerate`, included for `continue`.
    pub visible_messages: u32,
    /// Hex sha256 of the frozen prefix bytes: messages `0..visible_messages`,
    /// or `0..target` for `continue` (the target is checked through
    /// [`ChatTarget`], as the commit changes it).
    pub prefix_sha256: String,
    /// `None` for `normal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ChatTarget>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_parse_and_serde() {
        for t in GenerationType::ALL {
            assert_eq!(GenerationType::parse(t.as_str()), Some(t));
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
            assert_eq!(serde_json::from_str::<GenerationType>(&json).unwrap(), t);
        }
        assert_eq!(GenerationType::parse("Swipe"), None);
        assert_eq!(GenerationType::parse("impersonate"), None);
        assert!(serde_json::from_str::<GenerationType>("\"append\"").is_err());
        assert_eq!(GenerationType::default(), GenerationType::Normal);
    }
}
