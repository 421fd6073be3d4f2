//! The runs API: start, list, read, follow, cancel, resume, call into and
//! read files of a tenant's runs. A run id is looked up only in the
//! requesting tenant's own runs directory, so another tenant's run is
//! `404`, exactly like one that does not exist.

mod app_chat;
mod approvals;
mod calls;
mod commits;
mod drive;
mod events;
mod files;
pub mod journal;
mod recorded;
pub mod registry;
mod start;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_journal::{
    Event as _, RunCancelled, RunCompleted, RunFailed, RunManifest, RunPartialSuccess,
};
use toolhost_runtime::Run;

pub use app_chat::MAX_CHAT_CONTENT_BYTES;
pub(crate) use approvals::{__path_approvals, __path_decide, approvals, decide};
pub use approvals::{
    ArgumentsShown, Decided, DecisionChoice, DecisionRequest, PendingCall, PendingCalls,
    ShownArgument,
};
pub(crate) use calls::{__path_call, call};
pub use calls::{CallRequest, CallResponse};
pub(crate) use commits::{__path_answer, __path_commits, answer, commits};
pub use commits::{Answered, CommitAnswer, PendingCommit, PendingCommits};
pub(crate) use events::{__path_events, events};
pub(crate) use files::{__path_file, file};
pub(crate) use start::{
    __path_resume, __path_start, UNKNOWN_PROFILE, named_profile, resume, start,
};
pub use start::{
    CommitChoice, ProfileChoice, StartRun, Started, restart_taken, resume_run, resume_taken,
    start_taken,
};

use crate::ServeState;
use crate::error::ApiError;
use crate::tokens::Tenant;
use registry::Progress;

/// Largest `run.json` or summary read.
const MAX_RECORD_BYTES: u64 = 1024 * 1024;
/// Most runs one list answers.
const MAX_LISTED: usize = 1000;

/// A run as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub id: String,
    /// `running`, `awaiting_host_commit` (running, waiting for the chat
    /// app to answer a commit: `GET …/commits`), `completed`,
    /// `partial_success`, `failed`, `cancelled`, or `interrupted` (stopped
    /// without an end: resumable).
    pub status: &'static str,
    /// The profile's id.
    pub profile: String,
    pub created_at: String,
    /// The journal's last sequence number (an event stream's `Last-Event-ID`).
    pub last_seq: u64,
    /// Commits that reached the chat.
    pub commits: usize,
    /// Model turns so far over every invocation of the run: the foreground
    /// agents', delegated children's, and one per direct call. The
    /// summary's `foregroundRounds` counts the foreground agents' only.
    pub total_rounds: usize,
    /// Tool calls answered so far: ended (completed or failed) and under a
    /// name the request did not offer, as the summary's `toolCalls` counts.
    pub tool_calls: usize,
    /// Calls waiting for a person's approval (`GET …/approvals`).
    pub pending_approvals: usize,
    /// Commits in flight: for a run whose chat app commits the reply, the
    /// ones it waits for the app to answer (`GET …/commits`).
    pub pending_commits: usize,
    /// How the loop ended (`LoopSummary`): once it ended on this server.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub summary: Option<Value>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<RunView>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// At most this many (default 100, at most 1000).
    pub limit: Option<usize>,
}

/// The tenant's run `id`, if there is one: its directory.
pub(crate) fn run_root(state: &ServeState, tenant: &str, id: &str) -> Result<PathBuf, ApiError> {
    let not_found = || ApiError::not_found("such run");
    toolhost_journal::layout::check_segment("run id", id).map_err(|_| not_found())?;
    let root = state.tenant_dirs(tenant).runs().join(id);
    let is_run = root.symlink_metadata().is_ok_and(|meta| meta.is_dir())
        && root
            .join("run.json")
            .symlink_metadata()
            .is_ok_and(|meta| meta.is_file());
    if is_run { Ok(root) } else { Err(not_found()) }
}

/// Where a run is read from: its own directory, or on a cluster node that
/// does not drive it, the node's copy of it as the cluster has it now.
pub(crate) struct ReadAt {
    pub root: PathBuf,
    /// The copy of a run another node drives now (its name).
    pub elsewhere: Option<String>,
    /// A copy read from the cluster (not a run driven here): where its
    /// summary is, when the node that ended the run kept one.
    pub copy_summary: Option<PathBuf>,
}

impl ReadAt {
    /// The run's own directory, on this server.
    fn here(root: PathBuf) -> Self {
        Self {
            root,
            elsewhere: None,
            copy_summary: None,
        }
    }

    /// Read from the cluster's copy, not from a run driven here.
    pub fn is_copy(&self) -> bool {
        self.copy_summary.is_some()
    }
}

/// The tenant's run `id` to read: on a cluster node, from the cluster
/// unless the run is driven here (any node answers any read).
pub(crate) async fn read_root(
    state: &ServeState,
    tenant: &str,
    id: &str,
) -> Result<ReadAt, ApiError> {
    let Some(node) = &state.node else {
        return Ok(ReadAt::here(run_root(state, tenant, id)?));
    };
    if state.runs.live(tenant, id).is_some() {
        return Ok(ReadAt::here(run_root(state, tenant, id)?));
    }
    let not_found = || ApiError::not_found("such run");
    toolhost_journal::layout::check_segment("run id", id).map_err(|_| not_found())?;
    let root = node
        .read_copy(tenant, id)
        .await
        .map_err(|error| ApiError::internal("reading the run from the cluster", error))?
        .ok_or_else(not_found)?;
    let elsewhere = node
        .driver_name(tenant, id)
        .await
        .map_err(|error| ApiError::internal("reading the run's lease", error))?;
    Ok(ReadAt {
        root,
        elsewhere,
        copy_summary: Some(node.copy_summary_path(tenant, id)),
    })
}

/// Refuse a change to run `id` on a cluster node that does not drive it:
/// the run's directory is the driving node's (`409 cluster.elsewhere`,
/// saying which node that is); a run no node drives changes only through
/// the queue.
pub(crate) async fn change_here(
    state: &ServeState,
    tenant: &str,
    id: &str,
) -> Result<(), ApiError> {
    let Some(node) = &state.node else {
        return Ok(());
    };
    if state.runs.live(tenant, id).is_some() {
        return Ok(());
    }
    let driver = node.driver(tenant, id).await.ok().flatten();
    let message = match driver {
        // Its lease is this node's, its loop not started yet.
        Some((name, _)) if name == node.cluster().node().as_str() => {
            return Err(ApiError::conflict(
                "cluster.taking_over",
                "this node is taking the run over from the cluster; try again in a moment",
            ));
        }
        Some((name, listen)) => format!("node {name} ({listen}) drives this run: send this there"),
        None => "no node of the cluster drives this run now: a run not in its loop changes only through the cluster's queue".to_owned(),
    };
    Err(ApiError::conflict("cluster.elsewhere", message))
}

/// A file read whole, refused past `limit` bytes.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::other(format!("larger than {limit} bytes")));
    }
    Ok(bytes)
}

fn status_of(ended_by: Option<&str>) -> &'static str {
    match ended_by {
        Some(RunCompleted::TYPE) => "completed",
        Some(RunPartialSuccess::TYPE) => "partial_success",
        Some(RunFailed::TYPE) => "failed",
        Some(RunCancelled::TYPE) => "cancelled",
        _ => "interrupted",
    }
}

/// A run's `run.json`, read (bounded) through the journal's own type.
pub(crate) fn manifest(root: &Path) -> std::io::Result<RunManifest> {
    let bytes = read_bounded(&root.join("run.json"), MAX_RECORD_BYTES)?;
    RunManifest::from_json_bytes(&bytes).map_err(std::io::Error::other)
}

/// Whether the run `id`, driven here, has its chat app commit the reply.
fn driven_host_commit(state: &ServeState, tenant: &str, id: &str) -> bool {
    state
        .runs
        .live(tenant, id)
        .is_some_and(|run| run.host_commit)
}

fn view(state: &ServeState, tenant: &str, id: &str, at: &ReadAt) -> std::io::Result<RunView> {
    let root = &at.root;
    let manifest = manifest(root)?;
    // A run this server drives is counted as it writes: no pass over its
    // journal per status read.
    let driven = state
        .runs
        .live(tenant, id)
        .map(|run| *run.progress.borrow());
    let (counts, live) = match driven {
        Some(Progress {
            ended: false,
            counts: Some(counts),
        }) => (counts, true),
        _ => {
            let path = root.join(toolhost_journal::layout::JOURNAL_FILE);
            let journal = match at.elsewhere {
                // Another node's run, read from this node's copy.
                Some(_) => journal::state(&path)?,
                None => state.runs.ended_runs.state(tenant, id, &path)?,
            };
            let live = driven.is_some_and(|progress| !progress.ended)
                || (at.elsewhere.is_some() && journal.ended_by.is_none());
            (journal, live)
        }
    };
    let (status, summary) = if live {
        // A run whose chat app commits the reply waits for its answer.
        let host_commit = driven_host_commit(state, tenant, id);
        let status = if host_commit && counts.pending_commits > 0 {
            "awaiting_host_commit"
        } else {
            "running"
        };
        (status, None)
    } else {
        let summary_path = state
            .tenant_dirs(tenant)
            .summaries()
            .join(format!("{id}.json"));
        // Kept here if this node ended the run, else (a copy) the one the
        // node that ended it kept in the cluster.
        let summary = read_bounded(&summary_path, MAX_RECORD_BYTES)
            .ok()
            .or_else(|| {
                let copied = at.copy_summary.as_ref()?;
                read_bounded(copied, MAX_RECORD_BYTES).ok()
            })
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        (status_of(counts.ended_by), summary)
    };
    Ok(RunView {
        id: id.to_owned(),
        status,
        profile: manifest.profile.id,
        created_at: manifest.created_at,
        last_seq: counts.last_seq,
        commits: counts.commits,
        total_rounds: counts.rounds,
        tool_calls: counts.tool_calls,
        pending_approvals: counts.pending_approvals,
        pending_commits: counts.pending_commits,
        summary,
    })
}

/// The tenant's runs.
#[utoipa::path(
    get,
    path = "/v1/runs",
    params(ListQuery),
    responses((status = 200, description = "The tenant's runs, newest first", body = RunList)),
    security(("bearer" = []))
)]
pub(crate) async fn list(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Query(query): Query<ListQuery>,
) -> Result<Json<RunList>, ApiError> {
    let limit = query.limit.unwrap_or(100).min(MAX_LISTED);
    if let Some(node) = &state.node {
        // The cluster's runs of the tenant, whichever node drives them.
        let mut ids = toolhost_cluster::RunLog::runs_of(node.cluster(), &tenant)
            .await
            .map_err(|error| ApiError::internal("listing the runs", error))?;
        ids.sort_unstable_by(|a, b| b.cmp(a));
        let mut runs = Vec::new();
        for id in ids.into_iter().take(limit) {
            let Ok(at) = read_root(&state, &tenant, &id).await else {
                continue;
            };
            let (state, tenant) = (Arc::clone(&state), tenant.clone());
            let seen = tokio::task::spawn_blocking(move || view(&state, &tenant, &id, &at).ok())
                .await
                .map_err(|error| ApiError::internal("listing the runs", error))?;
            runs.extend(seen);
        }
        return Ok(Json(RunList { runs }));
    }
    let runs_dir = state.tenant_dirs(&tenant).runs();
    let state = Arc::clone(&state);
    let runs = tokio::task::spawn_blocking(move || {
        let mut ids: Vec<String> = match std::fs::read_dir(&runs_dir) {
            Ok(entries) => entries
                .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
                .filter(|name| toolhost_journal::layout::check_segment("run id", name).is_ok())
                .collect(),
            Err(_) => Vec::new(),
        };
        // Run ids begin with their creation time.
        ids.sort_unstable_by(|a, b| b.cmp(a));
        ids.into_iter()
            .filter_map(|id| {
                let root = run_root(&state, &tenant, &id).ok()?;
                let at = ReadAt::here(root);
                view(&state, &tenant, &id, &at).ok()
            })
            .take(limit)
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|error| ApiError::internal("listing the runs", error))?;
    Ok(Json(RunList { runs }))
}

/// Every run of every tenant that stopped without an end: `(tenant, id)`.
pub fn interrupted(state: &ServeState) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let Ok(tenants) = std::fs::read_dir(state.data_dir.join("tenants")) else {
        return found;
    };
    for tenant in tenants.filter_map(|entry| entry.ok()?.file_name().into_string().ok()) {
        let Ok(runs) = std::fs::read_dir(state.tenant_dirs(&tenant).runs()) else {
            continue;
        };
        for id in runs.filter_map(|entry| entry.ok()?.file_name().into_string().ok()) {
            let Ok(root) = run_root(state, &tenant, &id) else {
                continue;
            };
            let ended = journal::has_ended(&root.join(toolhost_journal::layout::JOURNAL_FILE))
                .unwrap_or(true);
            if !ended && state.runs.live(&tenant, &id).is_none() {
                found.push((tenant.clone(), id));
            }
        }
    }
    found.sort();
    found
}

/// One run: its status and, once it ended here, its summary.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 200, description = "The run", body = RunView),
        (status = 404, description = "No such run of this tenant", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<RunView>, ApiError> {
    let at = read_root(&state, &tenant, &id).await?;
    let state = Arc::clone(&state);
    tokio::task::spawn_blocking(move || view(&state, &tenant, &id, &at))
        .await
        .map_err(|error| ApiError::internal("reading the run", error))?
        .map(Json)
        .map_err(|error| ApiError::internal("reading the run", error))
}

/// What a cancel did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Cancelled {
    pub id: String,
    /// `cancelling` (a running run stops at its next step) or `cancelled`.
    pub status: &'static str,
}

/// Cancel a run: a running one stops at its next step, an interrupted one
/// ends now. Terminal: a cancelled run is never resumed.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/cancel",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 202, description = "The running run is stopping", body = Cancelled),
        (status = 200, description = "The interrupted run is cancelled", body = Cancelled),
        (status = 404, description = "No such run of this tenant", body = ApiError),
        (status = 409, description = "The run already ended, or a call holds it", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn cancel(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
) -> Result<(StatusCode, Json<Cancelled>), ApiError> {
    change_here(&state, &tenant, &id).await?;
    let root = run_root(&state, &tenant, &id)?;
    if let Some(live) = state.runs.live(&tenant, &id) {
        live.cancel.cancel();
        return Ok((
            StatusCode::ACCEPTED,
            Json(Cancelled {
                id,
                status: "cancelling",
            }),
        ));
    }
    tokio::task::spawn_blocking(move || {
        let journal = journal::state(&root.join("events.jsonl"))
            .map_err(|error| ApiError::internal("reading the journal", error))?;
        if let Some(end) = journal.ended_by {
            return Err(ApiError::conflict(
                "run.already_ended",
                format!("the run ended with {end}"),
            ));
        }
        let (run, _) = Run::open(&root).map_err(calls::open_refused)?;
        run.cancelled(journal.commits, Vec::new())
            .map_err(|error| ApiError::internal("journalling the cancel", error))?;
        Ok(())
    })
    .await
    .map_err(|error| ApiError::internal("cancelling the run", error))??;
    Ok((
        StatusCode::OK,
        Json(Cancelled {
            id,
            status: "cancelled",
        }),
    ))
}
