//! A person's decisions on a run's calls that wait for approval
//! (docs/policy.md, "Approvals"): the waiting calls, and a decision on one.
//! A decision is a create-only file in the run directory, which the run's
//! loop reads (the same file `toolhost approvals approve|deny` writes).

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_runtime::approval::{self, DecisionError, DecisionFile, Verdict};

use super::{change_here, read_root, run_root};
use crate::ServeState;
use crate::body::Body;
use crate::error::ApiError;
use crate::tokens::Tenant;

/// A call waiting for a decision.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    pub call_id: String,
    pub invocation_id: String,
    pub tool_id: String,
    pub title: Option<String>,
    /// The arguments as a person is shown them: the fields that decide
    /// the effect first, long values cut with their size. Built once by
    /// the run when it asked; empty for a run recorded before it was.
    pub arguments_shown: ArgumentsShown,
    /// The same on one line.
    pub arguments_summary: String,
    #[schema(value_type = Object)]
    pub annotations: Value,
    pub source: String,
    /// Why approval is required.
    pub reason: String,
    /// When it was asked for.
    pub requested_at: String,
    /// A decision was made and the run has not read it yet.
    pub decided: bool,
}

/// A call's arguments as a person is shown them
/// (`toolhost_runtime::approval::ArgumentsSummary`, as the journal holds
/// it).
#[derive(Debug, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArgumentsShown {
    /// In the order shown: deciding fields (path, URL, host, command,
    /// mode…) first, then the rest.
    pub fields: Vec<ShownArgument>,
    /// Fields left out to keep the summary short.
    #[serde(default)]
    pub omitted: u64,
}

/// One argument as a person is shown it.
#[derive(Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShownArgument {
    /// The argument's name.
    pub name: String,
    /// Its value as JSON, cut with `…` where it is longer than shown.
    pub value: String,
    /// The whole value's size when it is cut (`100.0 KiB, 5 389 lines`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Its name says it decides the call's effect.
    #[serde(default)]
    pub deciding: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PendingCalls {
    pub approvals: Vec<PendingCall>,
}

/// `approve` (this call), `approve_for_run` (and every later call of the
/// same tool in this run), `deny`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionChoice {
    Approve,
    ApproveForRun,
    Deny,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionRequest {
    pub decision: DecisionChoice,
    /// What to tell the run; the model reads it when the call is denied
    /// (at most 2,000 characters are kept).
    #[serde(default)]
    pub note: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    pub call_id: String,
    pub decision: DecisionChoice,
}

/// The run's calls waiting for a person's decision, oldest first.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/approvals",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "The waiting calls", body = PendingCalls),
        (status = 404, description = "No such run of this tenant", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn approvals(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<PendingCalls>, ApiError> {
    let root = read_root(&state, &tenant, &id).await?.root;
    let pending = tokio::task::spawn_blocking(move || approval::pending(&root))
        .await
        .map_err(|error| ApiError::internal("reading the approvals", error))?
        .map_err(|error| ApiError::internal("reading the approvals", error))?;
    let text = |value: &Value, key: &str| value[key].as_str().unwrap_or_default().to_owned();
    let approvals = pending
        .into_iter()
        .map(|waiting| PendingCall {
            call_id: text(&waiting.request, "callId"),
            invocation_id: text(&waiting.request, "invocationId"),
            tool_id: text(&waiting.request, "toolId"),
            title: waiting.request["title"].as_str().map(str::to_owned),
            // A payload this server cannot read shows its one line only.
            arguments_shown: serde_json::from_value(waiting.request["argumentsShown"].clone())
                .unwrap_or_default(),
            arguments_summary: text(&waiting.request, "argumentsSummary"),
            annotations: waiting.request["annotations"].clone(),
            source: text(&waiting.request, "source"),
            reason: text(&waiting.request, "reason"),
            requested_at: waiting.timestamp,
            decided: waiting.decided,
        })
        .collect();
    Ok(Json(PendingCalls { approvals }))
}

/// Decide a waiting call. A call is decided once.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/approvals/{callId}",
    params(
        ("id" = String, Path, description = "The run id"),
        ("callId" = String, Path, description = "The waiting call's id"),
    ),
    request_body = DecisionRequest,
    responses(
        (status = 200, description = "Decided; the run goes on", body = Decided),
        (status = 404, description = "No such run of this tenant, or no such waiting call", body = ApiError),
        (status = 409, description = "The call is decided already", body = ApiError),
        (status = 400, description = "Bad JSON or an unknown field", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn decide(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath((id, call_id)): UrlPath<(String, String)>,
    Body(request): Body<DecisionRequest>,
) -> Result<Json<Decided>, ApiError> {
    change_here(&state, &tenant, &id).await?;
    let root = run_root(&state, &tenant, &id)?;
    let verdict = match request.decision {
        DecisionChoice::Approve => Verdict::Approved,
        DecisionChoice::ApproveForRun => Verdict::ApprovedForRun,
        DecisionChoice::Deny => Verdict::Denied,
    };
    let by = format!("tenant {tenant}");
    let wanted = call_id.clone();
    tokio::task::spawn_blocking(move || {
        let file = DecisionFile::new(&wanted, verdict, &by, request.note.as_deref());
        approval::decide_waiting(&root, &file).map_err(|error| match error {
            DecisionError::NotPending(_) => ApiError::not_found("such waiting call"),
            DecisionError::AlreadyDecided(_) => {
                ApiError::conflict("approval.already_decided", error.to_string())
            }
            other => ApiError::internal("writing the decision", other),
        })
    })
    .await
    .map_err(|error| ApiError::internal("writing the decision", error))??;
    Ok(Json(Decided {
        call_id,
        decision: request.decision,
    }))
}
