//! What a loop is asked to do beyond the run's profile, and how it is
//! stopped from outside.

use std::path::PathBuf;
use std::time::Duration;

use super::RunCancel;

/// The model's window, in characters, when neither the profile
/// (`context.maxInputChars`) nor the model (`contextChars`, `--context-chars`)
/// says: about 40k tokens of English prose, and up to about 160k of CJK
/// text (a character is near a token there) — within the windows of today's
/// chat models.
pub const DEFAULT_CONTEXT_CHARS: u32 = 160_000;

/// Model calls that fail with a retryable error are tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// Before the first retry; doubled for each next one.
    pub initial_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            initial_delay: Duration::from_secs(1),
        }
    }
}

/// What a loop is asked to do, beyond the run's profile.
#[derive(Debug, Clone, Default)]
pub struct LoopConfig {
    /// The first user message: what this run is for.
    pub task: String,
    /// The provider's model name; overrides the profiles' `model.id`.
    pub model_name: Option<String>,
    /// Overrides the profiles' `model.maxOutputTokens`.
    pub max_output_tokens: Option<u32>,
    /// Overrides the root profile's `tools.maxRounds`.
    pub max_rounds: Option<u32>,
    /// The model's window in characters (`models.json` `contextChars`, the
    /// CLI's `--context-chars`); a profile's `context.maxInputChars` wins.
    /// `None`: [`DEFAULT_CONTEXT_CHARS`], written into `input/loop.json` so a
    /// resume keeps it.
    pub context_chars: Option<u32>,
    pub retry: RetryPolicy,
    /// The chat's persist directory: projected into `persist/` when the
    /// loop starts, changed files copied back when the run finishes.
    pub persist_dir: Option<PathBuf>,
    /// Stops the run from outside.
    pub cancel: RunCancel,
    /// The run seed (`toolhost run --seed`): ids and every call's entropy
    /// derive from it. `None`: a random one, recorded all the same.
    pub seed: Option<u64>,
    /// How the embedder describes its models, for `input/loop.json` (never
    /// a key): what it needs to open them again when the run is resumed.
    pub model: serde_json::Value,
    /// The chat app commits the reply itself (`commit: "host"`): the host
    /// that drives the loop gives it a chat host that asks the app
    /// ([`HostCommits`](crate::host_commit::HostCommits)). Recorded, so a
    /// resume asks the app again rather than writing the chat.
    pub host_commit: bool,
}
