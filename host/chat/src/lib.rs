//! The host side of the chat, no wasmtime: SillyTavern chat files (JSONL),
//! the chat a run is bound to with its frozen input prefix (what the
//! `chat-read` capability serves), and committing the run's reply into it.
//!
//! - [`file`](mod@file): [`ChatFile`] reads and checks a chat file line by line, every
//!   message keeping its exact original bytes; a bad line is an error naming
//!   the file and the line, never a dropped message.
//! - [`bound`]: [`BoundChat`], the run's chat frozen at its first N messages
//!   (`info`, `message`, `messages` batches of at most 1,000), with the
//!   sha256 of the prefix bytes.
//! - [`commit`](mod@commit): [`commit_replace`] / [`commit_append`] write the run's one
//!   message atomically, every other line byte for byte, after checking the
//!   prefix is unchanged (`agent.input_history_conflict`).
//! - [`generation`]: [`GenerationType`] (`normal`, `swipe`, `regenerate`,
//!   `continue`) and [`ChatBinding`], what [`BoundChat::bind_for`] freezes and
//!   [`BoundChat::rebind_for`] binds again.
//! - [`reply`]: [`commit_reply`] writes the reply as SillyTavern's
//!   `saveReply` would for the type — a new message, a swipe, a regenerated
//!   or continued one — with `swipes`, `swipe_info`, `gen_started`,
//!   `gen_finished`, `extra.model`, the chat's `send_date` form
//!   ([`dates`]) and a group member's avatars.
//! - [`mirror`]: [`replace_whole`], the chat app's own copy of a chat
//!   (sent by its extension) checked and put in place of the old one.
//! - [`generate`]: [`generate_chat`], a deterministic big chat for
//!   benchmarks and tests.
//!
//! `chat.search` runs in the guest over [`BoundChat::messages`] batches; the
//! host does not search.

pub mod bound;
pub mod commit;
pub mod dates;
pub mod error;
pub mod file;
pub mod generate;
pub mod generation;
mod lines;
pub mod mirror;
pub mod reply;
mod splice;

pub use bound::{BoundChat, ChatInfo, FALLBACK_REPLY_NAME, MAX_MESSAGES_PER_BATCH, PackedMessages};
pub use commit::{
    COMMIT_API, COMMIT_ATTEMPTS, CommitMode, Committed, TEMP_SUFFIX, commit, commit_append,
    commit_replace, find_commit, format_send_date,
};
pub use dates::SendDateStyle;
pub use error::ChatError;
pub use file::{ChatFile, ChatHeader, ChatMessage, GROUP_HEADER_NAME, Role};
pub use generate::generate_chat;
pub use generation::{ChatBinding, ChatTarget, GenerationType};
pub use mirror::{Replaced, replace_whole};
pub use reply::{Reply, commit_reply};
