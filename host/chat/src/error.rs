//! [`ChatError`]: every failure of this crate, each with a stable dotted code.

use std::io;
use std::path::{Path, PathBuf};

use crate::generation::GenerationType;

/// `chat.not_found`: no chat file, or no chat bound to the run.
pub const CODE_NOT_FOUND: &str = "chat.not_found";
/// `chat.malformed`: a line of the chat file is not what SillyTavern writes.
pub const CODE_MALFORMED: &str = "chat.malformed";
/// `chat.message_not_found`: an index beyond the visible messages, or a
/// commit aimed at a message that is not the run's own.
pub const CODE_MESSAGE_NOT_FOUND: &str = "chat.message_not_found";
/// `agent.input_history_conflict`: the frozen input prefix changed on disk.
pub const CODE_INPUT_HISTORY_CONFLICT: &str = "agent.input_history_conflict";
/// `chat.io_error`: reading or writing the chat file failed.
pub const CODE_IO_ERROR: &str = "chat.io_error";
/// `chat.generation_type_unfit`: the chat has no message the generation
/// type could write into (a `swipe` of a chat whose last message is the
/// user's, a `continue` of an empty chat).
pub const CODE_GENERATION_TYPE_UNFIT: &str = "chat.generation_type_unfit";

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The run has no chat (a chat-read capability asked anyway).
    #[error("no chat is bound to this run")]
    NotBound,

    #[error("chat file {} does not exist", path.display())]
    NotFound { path: PathBuf },

    /// `line` is 1-based; line 1 is the header.
    #[error("chat file {} line {line}: {reason}", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    #[error("message index {index} does not exist in this chat; total messages: {total}")]
    MessageNotFound { index: u32, total: u32 },

    /// A commit named a message the run does not own (deleted, edited or
    /// never written by this run).
    #[error("message {index} of chat file {} is not this run's message: {reason}", path.display())]
    NotRunMessage {
        path: PathBuf,
        index: u32,
        reason: String,
    },

    #[error("the input history of chat file {} changed since the run started: {reason}", path.display())]
    InputHistoryConflict { path: PathBuf, reason: String },

    /// A `swipe`, `regenerate` or `continue` of a chat whose last message
    /// is not an assistant message (or that has none).
    #[error("chat file {}: cannot {generation_type} this chat: {reason}", path.display())]
    GenerationTypeUnfit {
        path: PathBuf,
        generation_type: GenerationType,
        reason: String,
    },

    #[error("chat file {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ChatError {
    /// The stable dotted code the model and the journal see.
    pub fn code(&self) -> &'static str {
        match self {
            ChatError::NotBound | ChatError::NotFound { .. } => CODE_NOT_FOUND,
            ChatError::Malformed { .. } => CODE_MALFORMED,
            ChatError::MessageNotFound { .. } | ChatError::NotRunMessage { .. } => {
                CODE_MESSAGE_NOT_FOUND
            }
            ChatError::InputHistoryConflict { .. } => CODE_INPUT_HISTORY_CONFLICT,
            ChatError::Io { .. } => CODE_IO_ERROR,
            ChatError::GenerationTypeUnfit { .. } => CODE_GENERATION_TYPE_UNFIT,
        }
    }

    pub(crate) fn malformed(path: &Path, line: usize, reason: impl Into<String>) -> Self {
        ChatError::Malformed {
            path: path.to_owned(),
            line,
            reason: reason.into(),
        }
    }

    pub(crate) fn conflict(path: &Path, reason: impl Into<String>) -> Self {
        ChatError::InputHistoryConflict {
            path: path.to_owned(),
            reason: reason.into(),
        }
    }

    /// An I/O failure; a missing file becomes [`ChatError::NotFound`].
    pub(crate) fn io(path: &Path, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            ChatError::NotFound {
                path: path.to_owned(),
            }
        } else {
            ChatError::Io {
                path: path.to_owned(),
                source,
            }
        }
    }
}
