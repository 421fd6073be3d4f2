//! The chat app's side of a host commit (`commit: "host"`, docs/serve.md):
//! the commits a run asked the app to make, and the app's answer to one —
//! a create-only file in the run directory, which the run's loop reads.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use toolhost_runtime::host_commit::{self, AnswerFile, HostAnswer, HostCommitError};

use super::{change_here, read_root, run_root};
use crate::ServeState;
use crate::body::Body;
use crate::error::ApiError;
use crate::tokens::Tenant;

/// A commit the chat app is asked to make.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingCommit {
    /// `<runId>:commit_NNN`: answer it under this id.
    pub commit_id: String,
    pub invocation_id: String,
    /// The reply to save, exactly.
    pub text: String,
    pub chars: u64,
    pub sha256: String,
    /// `replace` (the text is the message) or `append` (add it to the
    /// message's end).
    pub mode: String,
    /// The message an earlier commit of this run made, which this one
    /// rewrites; absent for the run's first commit (a new message).
    pub run_message: Option<u32>,
    /// `swipe`, `regenerate` or `continue`: the reply goes into message
    /// `targetIndex` that way (a new swipe shown, the shown swipe replaced,
    /// appended to its text); absent: a new message.
    pub generation_type: Option<String>,
    pub target_index: Option<u32>,
    pub requested_at: String,
    /// An answer is written and the run has not read it yet.
    pub answered: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PendingCommits {
    pub commits: Vec<PendingCommit>,
}

/// What the app did: `{"outcome": "committed", "messageIndex": 12}` or
/// `{"outcome": "failed", "message": "…"}` (the model reads the message;
/// at most 2,000 characters are kept).
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(tag = "outcome", rename_all = "camelCase", deny_unknown_fields)]
pub enum CommitAnswer {
    #[serde(rename_all = "camelCase")]
    Committed {
        message_index: u32,
    },
    Failed {
        message: String,
    },
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Answered {
    pub commit_id: String,
    /// `committed` or `failed`.
    pub outcome: &'static str,
}

/// The commits the run waits for the chat app to make, oldest first.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/commits",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "The waiting commits", body = PendingCommits),
        (status = 404, description = "No such run of this tenant", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn commits(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<PendingCommits>, ApiError> {
    let root = read_root(&state, &tenant, &id).await?.root;
    let pending = tokio::task::spawn_blocking(move || host_commit::pending(&root))
        .await
        .map_err(|error| ApiError::internal("reading the commits", error))?
        .map_err(|error| ApiError::internal("reading the commits", error))?;
    let commits = pending
        .into_iter()
        .map(|waiting| {
            let text = |key: &str| waiting.request[key].as_str().unwrap_or_default().to_owned();
            let index = |key: &str| {
                waiting.request[key]
                    .as_u64()
                    .and_then(|index| u32::try_from(index).ok())
            };
            PendingCommit {
                commit_id: text("commitId"),
                invocation_id: text("invocationId"),
                text: text("text"),
                chars: waiting.request["chars"].as_u64().unwrap_or_default(),
                sha256: text("sha256"),
                mode: text("mode"),
                run_message: index("runMessage"),
                generation_type: waiting.request["generationType"]
                    .as_str()
                    .map(str::to_owned),
                target_index: index("targetIndex"),
                requested_at: waiting.timestamp.clone(),
                answered: waiting.answered,
            }
        })
        .collect();
    Ok(Json(PendingCommits { commits }))
}

/// Answer a commit the run asked the chat app to make. A commit is
/// answered once; an answer for a commit this run is not waiting for (of
/// another run, never asked, already read) is `404`.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/commits/{commitId}",
    params(
        ("id" = String, Path, description = "The run id"),
        ("commitId" = String, Path, description = "The waiting commit's id"),
    ),
    request_body = CommitAnswer,
    responses(
        (status = 200, description = "Answered; the run goes on", body = Answered),
        (status = 404, description = "No such run of this tenant, or no such waiting commit", body = ApiError),
        (status = 409, description = "The commit is answered already", body = ApiError),
        (status = 400, description = "Bad JSON or an unknown field", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn answer(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath((id, commit_id)): UrlPath<(String, String)>,
    Body(request): Body<CommitAnswer>,
) -> Result<Json<Answered>, ApiError> {
    change_here(&state, &tenant, &id).await?;
    let root = run_root(&state, &tenant, &id)?;
    let (answer, outcome) = match request {
        CommitAnswer::Committed { message_index } => {
            (HostAnswer::Committed { message_index }, "committed")
        }
        CommitAnswer::Failed { message } => (HostAnswer::Failed { message }, "failed"),
    };
    let by = format!("tenant {tenant}");
    let wanted = commit_id.clone();
    tokio::task::spawn_blocking(move || {
        let file = AnswerFile::new(&wanted, answer, &by);
        host_commit::answer_waiting(&root, &file).map_err(|error| match error {
            HostCommitError::NotPending(_) => ApiError::not_found("such waiting commit"),
            HostCommitError::AlreadyAnswered(_) => {
                ApiError::conflict("chat.commit_already_answered", error.to_string())
            }
            HostCommitError::TimedOut(_) => {
                ApiError::conflict("chat.commit_timed_out", error.to_string())
            }
            other => ApiError::internal("writing the answer", other),
        })
    })
    .await
    .map_err(|error| ApiError::internal("writing the answer", error))??;
    Ok(Json(Answered { commit_id, outcome }))
}
