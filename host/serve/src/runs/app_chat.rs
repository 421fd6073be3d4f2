//! A start request's `chatContent`: the chat app's own chat (a SillyTavern
//! extension's), for a run whose reply the app saves itself. Taken out of
//! the request without a copy and checked — a chat file that fits the
//! generation type — before anything is reserved or written; put in place
//! of the tenant's copy under the chat's reservation; the old copy put
//! back when the run cannot start after all.

use std::path::{Path, PathBuf};

use axum::http::StatusCode;
use toolhost_chat::{BoundChat, ChatError, ChatFile, Replaced};

use super::start::{CommitChoice, StartRun};
use crate::error::ApiError;

/// The largest chat a start request may carry (`chatContent`).
pub const MAX_CHAT_CONTENT_BYTES: usize = 24 * 1024 * 1024;

/// The chat app's copy of its chat, taken out of `request` and checked on
/// the blocking pool; `None` when it carries none.
pub(super) async fn app_chat(request: &mut StartRun) -> Result<Option<ChatFile>, ApiError> {
    let Some(content) = request.chat_content.take() else {
        return Ok(None);
    };
    if request.commit != CommitChoice::Host {
        return Err(ApiError::bad_request(
            "serve.chat_content_needs_host_commit",
            "chatContent is the chat app's own chat: give it with commit \"host\", where the app saves the reply",
        ));
    }
    if content.len() > MAX_CHAT_CONTENT_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "serve.chat_too_large",
            format!(
                "chatContent is {} bytes; at most {MAX_CHAT_CONTENT_BYTES} are taken",
                content.len()
            ),
        ));
    }
    let generation_type = request.generation_type;
    tokio::task::spawn_blocking(move || {
        let file = ChatFile::parse(Path::new("chatContent"), content.into_bytes())?;
        BoundChat::target_for(&file, generation_type)?;
        Ok::<_, ChatError>(file)
    })
    .await
    .map_err(|error| ApiError::internal("checking the chat app's chat", error))?
    .map(Some)
    .map_err(|error| ApiError::bad_request(error.code(), error.to_string()))
}

/// A cluster's nodes share their chats under the cluster's chat locks and
/// its tickets carry no chat: the app's copy is refused there.
pub(super) fn cluster_chat_content() -> ApiError {
    ApiError::bad_request(
        "cluster.chat_content_refused",
        "a cluster takes no chatContent: its nodes read the tenant's chats from their shared data directory; start the run without it, or use a single server",
    )
}

/// `copy` in place of the chat file at `chat` — no run of it goes on (the
/// caller holds its reservation) — the old file kept aside.
pub(super) async fn put_in_place(chat: PathBuf, copy: ChatFile) -> Result<Replaced, ApiError> {
    tokio::task::spawn_blocking(move || toolhost_chat::replace_whole(&chat, &copy))
        .await
        .map_err(|error| ApiError::internal("saving the chat app's chat", error))?
        .map_err(|error| ApiError::internal("saving the chat app's chat", error))
}

/// The copy stays when the run `started`; else the old file goes back.
pub(super) async fn settle(replaced: Replaced, started: bool) -> Result<(), ApiError> {
    if started {
        replaced.keep();
        return Ok(());
    }
    tokio::task::spawn_blocking(move || replaced.undo())
        .await
        .map_err(|error| ApiError::internal("putting the old chat back", error))?
        .map_err(|error| ApiError::internal("putting the old chat back", error))
}
