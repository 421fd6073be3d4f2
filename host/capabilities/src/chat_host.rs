//! [`ChatHost`]: where a committed reply goes. The run loop reads the file
//! a `workspace.commit` names and hands its text to the chat host; the host
//! writes it as the run's one message and says where it is.
//!
//! [`SillyTavernChatHost`] is the default: it writes the run's bound
//! SillyTavern JSONL chat through `toolhost_chat::commit` (atomic, every
//! other line byte for byte, refused when the frozen input history
//! changed). An application with its own chat store implements the trait.

use std::sync::Arc;

use toolhost_chat::BoundChat;
use toolhost_core::CommitMode;

/// A commit the chat host could not make. The run fails fast with
/// `agent.chat_commit_failed` (the message carries `code`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ChatHostError {
    pub code: String,
    pub message: String,
}

pub trait ChatHost: Send + Sync {
    /// Write `text` as the run's message: `Replace` makes it the message,
    /// `Append` adds it to the end. `run_message` is the index an earlier
    /// commit of this run returned (`None` before the first: the message is
    /// created). Returns the message's index. `commit_id` names this commit
    /// (`<runId>:commit_NNN`); the host keeps it with the message so
    /// [`ChatHost::find_commit`] can answer for it later. Called on the
    /// run's task: a host that waits on a disk should not hold a runtime
    /// worker meanwhile — wrap the write in [`may_block`](toolhost_journal::may_block),
    /// as the SillyTavern host does (a host that waits on the network is
    /// better made async on its own side).
    fn commit(
        &self,
        text: &str,
        mode: CommitMode,
        run_message: Option<u32>,
        commit_id: &str,
    ) -> Result<u32, ChatHostError>;

    /// The index of the message the commit `commit_id` reached, or `None`
    /// when it never landed. Only the run's latest commit is ever asked
    /// about: a resumed run asks for a commit it requested but did not see
    /// complete, and commits again only on `None` — that is how a commit
    /// stays exactly-once across a crash.
    fn find_commit(&self, commit_id: &str) -> Result<Option<u32>, ChatHostError>;

    /// Where commits go, for progress lines (`chats/alice.jsonl`).
    fn describe(&self) -> String;
}

/// Writes the run's bound SillyTavern chat file.
#[derive(Debug, Clone)]
pub struct SillyTavernChatHost {
    chat: Arc<BoundChat>,
}

impl SillyTavernChatHost {
    pub fn new(chat: Arc<BoundChat>) -> Self {
        Self { chat }
    }
}

impl ChatHost for SillyTavernChatHost {
    fn commit(
        &self,
        text: &str,
        mode: CommitMode,
        run_message: Option<u32>,
        commit_id: &str,
    ) -> Result<u32, ChatHostError> {
        let mode = match mode {
            CommitMode::Replace => toolhost_chat::CommitMode::Replace,
            CommitMode::Append => toolhost_chat::CommitMode::Append,
        };
        // It syncs the file and its directory: off the runtime worker.
        toolhost_journal::may_block(self.chat.path(), || {
            toolhost_chat::commit(&self.chat, run_message, text, mode, Some(commit_id))
        })
        .map(|committed| committed.index)
        .map_err(chat_host_error)
    }

    fn find_commit(&self, commit_id: &str) -> Result<Option<u32>, ChatHostError> {
        toolhost_chat::find_commit(&self.chat, commit_id).map_err(chat_host_error)
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
