//! [`ChatHost`]: where a committed reply goes. The run loop reads the file
//! a `workspace.commit` names and hands its text to the chat host; the host
//! writes it as the run's one message and says where it is.
//!
//! [`SillyTavernChatHost`] is the default: it writes the run's bound
//! SillyTavern JSONL chat through `toolhost_chat::commit` (atomic, every
//! other line byte for byte, refused when the frozen input history
//! changed). An application with its own chat store implements the trait.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use toolhost_chat::{BoundChat, Reply};
use toolhost_core::CommitMode;

/// A commit the chat host could not make. The run fails fast with
/// `agent.chat_commit_failed` (the message carries `code`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ChatHostError {
    pub code: String,
    pub message: String,
}

/// A commit the run asks for: the text to write as its message, and where.
#[derive(Debug, Clone, Copy)]
pub struct CommitRequest<'a> {
    /// `<runId>:commit_NNN`: the host keeps it with the message so
    /// [`ChatHost::find_commit`] can answer for it later.
    pub commit_id: &'a str,
    pub text: &'a str,
    /// `Replace` makes `text` the message, `Append` adds it to the end.
    pub mode: CommitMode,
    /// The index an earlier commit of this run returned (`None` before the
    /// first: the message is created).
    pub run_message: Option<u32>,
}

/// What became of a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitOutcome {
    /// The message is at this index.
    Committed(u32),
    /// The chat app did not commit it, and says why: the model reads it as
    /// a recoverable error (`code`) and may commit again.
    Refused { code: String, message: String },
}

/// A commit under way: the file host writes at once, an app that commits
/// itself answers when it has.
pub type CommitFuture<'a> =
    Pin<Box<dyn Future<Output = Result<CommitOutcome, ChatHostError>> + Send + 'a>>;

pub trait ChatHost: Send + Sync {
    /// Make `request`'s text the run's message and say where it is. An
    /// error ends the run (`agent.chat_commit_failed`); a refusal goes
    /// back to the model. Awaited on the run's task: a host that waits on a
    /// disk should not hold a runtime worker meanwhile — wrap the write in
    /// [`may_block`](toolhost_journal::may_block), as the SillyTavern host
    /// does.
    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> CommitFuture<'a>;

    /// What became of the commit `commit_id`, or `None` when nothing is
    /// known of it. Only the run's latest commit is ever asked about: a
    /// resumed run asks for a commit it requested but did not see end, and
    /// commits again only on `None` — that is how a commit stays
    /// exactly-once across a crash.
    fn find_commit(&self, commit_id: &str) -> Result<Option<CommitOutcome>, ChatHostError>;

    /// Whether the chat app makes the commit itself from the request
    /// (`chat_commit_requested` then carries the text for it), rather than
    /// toolhost writing the chat.
    fn app_commits(&self) -> bool {
        false
    }

    /// Where commits go, for progress lines (`chats/alice.jsonl`).
    fn describe(&self) -> String;
}

/// Writes the run's bound SillyTavern chat file, each reply as SillyTavern
/// writes one (its generation type's way: a new message, a swipe, a
/// regeneration, a continuation; `gen_started`, `gen_finished`,
/// `extra.model`, the chat's own `send_date` form).
#[derive(Debug, Clone)]
pub struct SillyTavernChatHost {
    chat: Arc<BoundChat>,
    model: String,
    /// When the generation began: the run's loop started (or resumed).
    started: SystemTime,
}

impl SillyTavernChatHost {
    pub fn new(chat: Arc<BoundChat>) -> Self {
        Self {
            chat,
            model: String::new(),
            started: SystemTime::now(),
        }
    }

    /// Replies name `model` (`extra.model`), as SillyTavern's do.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }
}

impl ChatHost for SillyTavernChatHost {
    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> CommitFuture<'a> {
        let mode = match request.mode {
            CommitMode::Replace => toolhost_chat::CommitMode::Replace,
            CommitMode::Append => toolhost_chat::CommitMode::Append,
        };
        let reply = Reply {
            text: request.text,
            mode,
            commit_id: Some(request.commit_id),
            model: &self.model,
            speaker: None,
            gen_started: self.started,
            gen_finished: SystemTime::now(),
        };
        // It syncs the file and its directory: off the runtime worker.
        let written = toolhost_journal::may_block(self.chat.path(), || {
            toolhost_chat::commit_reply(&self.chat, request.run_message, &reply)
        })
        .map(|committed| CommitOutcome::Committed(committed.index))
        .map_err(chat_host_error);
        Box::pin(std::future::ready(written))
    }

    fn find_commit(&self, commit_id: &str) -> Result<Option<CommitOutcome>, ChatHostError> {
        toolhost_chat::find_commit(&self.chat, commit_id)
            .map(|found| found.map(CommitOutcome::Committed))
            .map_err(chat_host_error)
    }

    fn describe(&self) -> String {
        self.chat.path().display().to_string()
    }
}

fn chat_host_error(error: toolhost_chat::ChatError) -> ChatHostError {
    ChatHostError {
        code: error.code().to_owned(),
        message: error.to_string(),
    }
}
