//! `POST /v1/runs/{id}/calls`: one tool call through a run's frozen
//! snapshot, gate and budgets, journalled and audited in its directory
//! like `toolhost call --run-dir`: for a host application that drives
//! its own model, or a person trying a tool in a run's context. Refused
//! (`409`) while the run is in its agent loop or was interrupted (resume
//! or cancel it first). The call is journalled after a `run_resumed`; the
//! run's status stays what its loop ended with.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_core::{Classified, ErrorClass, ExitPolicy, snapshot};
use toolhost_journal::ROOT_INVOCATION_ID;
use toolhost_runtime::{DirectCaller, Run, RunFailure};
use toolhost_sandbox::CallEntropy;

use super::{journal, run_root};
use crate::ServeState;
use crate::body::Body;
use crate::error::ApiError;
use crate::tokens::Tenant;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallRequest {
    /// A canonical id (`builtin:dice.roll`) or a unique native name.
    pub tool: String,
    /// The arguments: a JSON object.
    #[serde(default = "empty_object")]
    #[schema(value_type = Object)]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CallResponse {
    /// Exactly what a model reads for this call.
    pub text: String,
    pub is_error: bool,
    /// The whole result (`AgentToolResult`).
    #[schema(value_type = Object)]
    pub result: Value,
    /// The sandbox's report, when the call reached the sandbox.
    #[schema(value_type = Option<Object>)]
    pub report: Value,
    /// Where the result is stored (`GET …/files/{resultRef}`).
    pub result_ref: String,
}

/// Call one tool in a run.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/calls",
    params(("id" = String, Path, description = "The run id")),
    request_body = CallRequest,
    responses(
        (status = 200, description = "The call ran (a tool error is `isError`)", body = CallResponse),
        (status = 400, description = "Bad JSON, an unknown tool, arguments the gate refused", body = ApiError),
        (status = 403, description = "The run's snapshot does not offer the tool", body = ApiError),
        (status = 404, description = "No such run of this tenant", body = ApiError),
        (status = 409, description = "The run is in its agent loop, interrupted, another call holds it, or its stored snapshot grants more than its profile and the tenant's policies do now (`tool.snapshot_loosened`)", body = ApiError),
        (status = 429, description = "Too many calls in flight; see `Retry-After`", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn call(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
    Body(request): Body<CallRequest>,
) -> Result<Json<CallResponse>, ApiError> {
    super::change_here(&state, &tenant, &id).await?;
    let root = run_root(&state, &tenant, &id)?;
    if state.runs.live(&tenant, &id).is_some() {
        return Err(ApiError::conflict(
            "run.in_loop",
            "the run is in its agent loop; call once it ended",
        ));
    }
    if !request.arguments.is_object() {
        return Err(ApiError::bad_request(
            "serve.invalid_request",
            "`arguments` is a JSON object",
        ));
    }
    let host = state.host();
    let tool = host
        .catalog()
        .lookup(&request.tool)
        .map_err(|error| ApiError::bad_request("tool.not_found", error.to_string()))?
        .id
        .clone();
    let _permit = state.runs.call_permit()?;
    let caller = tenant.clone();
    let (run, mut session) = tokio::task::spawn_blocking(move || {
        let ended = journal::has_ended(&root.join(toolhost_journal::layout::JOURNAL_FILE))
            .map_err(|error| ApiError::internal("reading the journal", error))?;
        if !ended {
            return Err(ApiError::conflict(
                "run.interrupted",
                "the run was interrupted: resume or cancel it first",
            ));
        }
        let (run, _) = Run::open(&root).map_err(open_refused)?;
        let session = run
            .resume_invocation(ROOT_INVOCATION_ID, Some(&caller))
            .map_err(|failure| ApiError::internal("reopening the invocation", failure))?
            .ok_or_else(|| {
                ApiError::conflict("run.not_resumable", "the run has no root invocation")
            })?;
        Ok((run, session))
    })
    .await
    .map_err(|error| ApiError::internal("opening the run", error))??;
    // The stored snapshot is a file of the run: it may grant nothing that
    // the run's profile, today's catalog and the tenant's policies would
    // not (a tool since denied, an approval since required, an edit).
    let (policies, _) = state.tenant_dirs(&tenant).policies(&host)?;
    let fresh = snapshot::compile(
        run.profile(),
        host.snapshot_sources_under(Some(policies.as_ref()), Some(&tenant)),
        ROOT_INVOCATION_ID,
        ExitPolicy::RunFinishAllowed,
    )
    .map_err(|error| ApiError::internal("compiling the run's snapshot", error))?;
    session
        .snapshot()
        .recheck_against(&fresh)
        .map_err(|error| ApiError::conflict(error.code(), error.to_string()))?;
    if !session.snapshot().contains(&tool) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "agent.tool_policy_denied",
            format!("the run's snapshot does not offer `{tool}`"),
        ));
    }
    let caller = DirectCaller {
        requester: "api",
        call_id_prefix: "api",
    };
    let outcome = session
        .call_directly(
            host.as_ref(),
            caller,
            &tool,
            Some(request.arguments),
            CallEntropy::fresh(),
        )
        .await
        .map_err(|error| call_refused(error.into()))?;
    let synced = tokio::task::spawn_blocking(move || run.sync()).await;
    if !matches!(synced, Ok(Ok(()))) {
        return Err(ApiError::internal(
            "syncing the run",
            "the run directory could not be synced",
        ));
    }
    Ok(Json(CallResponse {
        text: outcome.model_text(),
        is_error: outcome.result.is_error,
        result: serde_json::to_value(&outcome.result).unwrap_or(Value::Null),
        report: serde_json::to_value(&outcome.report).unwrap_or(Value::Null),
        result_ref: outcome.result_ref,
    }))
}

/// A run that could not be reopened: held by another call (`409`), or
/// broken (`500`).
pub(crate) fn open_refused(failure: RunFailure) -> ApiError {
    use toolhost_journal::{JournalError, RunError};
    let busy = matches!(
        &failure,
        RunFailure::Directory(RunError::Journal(JournalError::InUse { .. }))
            | RunFailure::Journal(JournalError::InUse { .. })
    );
    if busy {
        ApiError::conflict(
            "run.busy",
            "another request is working on the run; try again",
        )
    } else {
        ApiError::internal("reopening the run", failure)
    }
}

/// A call the control plane refused before or after the sandbox.
fn call_refused(failure: RunFailure) -> ApiError {
    match failure.class() {
        ErrorClass::SystemFailure => ApiError::internal("the call", failure),
        _ => ApiError::bad_request(failure.code(), failure.to_string()),
    }
}
