//! `POST /v1/runs`: start an agent run from the tenant's own files — a
//! profile, a chat, skills, agents — with a model the operator configured,
//! named; and `POST /v1/runs/{id}/resume` for one that was interrupted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Extension;
use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_chat::ChatFile;
use toolhost_core::policy::Policies;
use toolhost_core::prompt_snapshot::{PromptSnapshot, PromptSnapshotError};
use toolhost_core::{Classified, Profile};
use toolhost_journal::Durability;
use toolhost_model::ModelSource;
use toolhost_runtime::{
    AgentDirectory, GenerationType, LoopConfig, ReplicaFactory, Run, RunBindings, RunFailure,
};
use toolhost_skills::{Scope, SkillSource};

use super::app_chat::{self, app_chat, cluster_chat_content};
use super::drive::{Launch, launch};
use super::{read_bounded, run_root};
use crate::ServeState;
use crate::body::Body;
use crate::error::ApiError;
use crate::tenant::TenantDirs;
use crate::tokens::Tenant;

/// The first user message when a request gives none.
const DEFAULT_TASK: &str = "Write the next reply of this chat.";
/// Largest profile file read.
const MAX_PROFILE_BYTES: u64 = 1024 * 1024;

/// A profile: the name of one of the tenant's profiles, or one inline.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum ProfileChoice {
    /// `profiles/<name>.json` of the tenant.
    Named(String),
    /// A whole profile (`schemaVersion`, `id`, `tools`, …).
    #[schema(value_type = Object)]
    Inline(Value),
}

/// What a run is started with.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRun {
    /// Default: the built-in writer profile.
    #[serde(default)]
    pub profile: Option<ProfileChoice>,
    /// A model name from the server's model configuration: never a URL.
    pub model: String,
    /// `chats/<name>.jsonl` of the tenant: the SillyTavern chat the run
    /// reads and writes its reply into.
    pub chat: String,
    /// The chat itself, as the chat app has it now: SillyTavern's JSONL
    /// (its header line, then one message per line), at most 24 MiB. With
    /// `commit: "host"` only — the app owns the chat and saves the reply —
    /// it is checked, then replaces `chats/<chat>.jsonl` once no run of
    /// that chat is going, so the run reads the app's chat as it is.
    #[serde(default)]
    pub chat_content: Option<String>,
    /// World info for the world-info tools: only its
    /// `worldInfoActivation` is read. Not with `promptSnapshot`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub world_info: Option<Value>,
    /// The chat app's prompt for this generation (`schemaVersion`,
    /// `characterName`, `userName`, `messages` of `{role, content, name?,
    /// source?}`, `worldInfoActivation`): the model reads its messages
    /// first. Without it the prompt is built from the chat.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub prompt_snapshot: Option<Value>,
    /// Installed skills by scope: `{"global": "<name>"}` binds the
    /// tenant's `skills/<name>/`.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, String>)]
    pub skills: BTreeMap<Scope, String>,
    /// The first user message.
    #[serde(default)]
    pub task: Option<String>,
    /// Who writes the reply into the chat: `file` (default: toolhost
    /// writes the chat file) or `host` (the chat app saves it itself and
    /// answers `POST /v1/runs/{id}/commits/{commitId}`).
    #[serde(default)]
    pub commit: CommitChoice,
    /// How the reply lands: `normal` (a new message), `swipe` (a new swipe
    /// of the last reply), `regenerate` (that reply's shown swipe replaced)
    /// or `continue` (appended to it); a type the chat does not fit is
    /// refused before the run starts.
    #[serde(default)]
    #[schema(value_type = String)]
    pub generation_type: GenerationType,
    /// Profiles (of the tenant's) the run may delegate or hand off to.
    #[serde(default)]
    pub agents: Vec<String>,
    #[serde(default)]
    pub max_rounds: Option<u32>,
    /// The run seed: ids and every call's entropy derive from it.
    #[serde(default)]
    pub seed: Option<u64>,
}

/// Who writes a run's reply into its chat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommitChoice {
    /// toolhost writes the SillyTavern chat file.
    #[default]
    File,
    /// The chat app saves the reply itself, then answers the commit.
    Host,
}

/// A run started or resumed.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Started {
    pub id: String,
    /// `running`.
    pub status: &'static str,
}

fn invalid(code: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message)
}

/// Start a run.
#[utoipa::path(
    post,
    path = "/v1/runs",
    request_body = StartRun,
    responses(
        (status = 201, description = "The run started", body = Started),
        (status = 400, description = "Bad JSON, an unknown field, a model, profile or agent that is not the tenant's, a profile or `maxRounds` beyond the tenant's caps (`serve.cap_exceeded`), a `chatContent` that is not a chat file (`chat.malformed`, naming the line) or without `commit: \"host\"`", body = ApiError),
        (status = 404, description = "No such chat", body = ApiError),
        (status = 409, description = "`chat.busy`: another run is writing the chat", body = ApiError),
        (status = 413, description = "The body is over the limit, or `chatContent` over 24 MiB (`serve.chat_too_large`)", body = ApiError),
        (status = 415, description = "Not `application/json`", body = ApiError),
        (status = 429, description = "Too many runs; see `Retry-After`", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn start(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    Body(mut request): Body<StartRun>,
) -> Result<Response, ApiError> {
    if state.node.is_some() && request.chat_content.is_some() {
        return Err(cluster_chat_content());
    }
    let chat_copy = app_chat(&mut request).await?;
    let prepared = prepare(&state, &tenant, &request, chat_copy)?;
    // A cluster node queues the run for whichever node has room.
    if let Some(node) = &state.node {
        let id = toolhost_journal::new_run_id();
        node.submit(&tenant, &id, &request).await?;
        return Ok(created_response(id));
    }
    let runs_dir = state.tenant_dirs(&tenant).runs();
    let id = create_and_launch(
        &state,
        &tenant,
        request,
        prepared,
        move |profile, durability, bindings| {
            Run::under(&runs_dir)
                .durability(durability)
                .bindings(bindings)
                .create(profile)
        },
    )
    .await?;
    Ok(created_response(id))
}

/// Start the run `id` of `tenant`, taken from the cluster's queue, with its
/// journal replicated by `replica`.
pub async fn start_taken(
    state: &Arc<ServeState>,
    tenant: &str,
    id: &str,
    request: StartRun,
    replica: ReplicaFactory,
) -> Result<(), ApiError> {
    let prepared = prepare(state, tenant, &request, None)?;
    let root = state.tenant_dirs(tenant).runs().join(id);
    let id = id.to_owned();
    create_and_launch(
        state,
        tenant,
        request,
        prepared,
        move |profile, durability, bindings| {
            Run::at(&root)
                .id(&id)
                .durability(durability)
                .bindings(bindings)
                .replicated(replica)
                .create(profile)
        },
    )
    .await
    .map(drop)
}

/// Start a new loop in the run `id` a cluster node took and rebuilt whose
/// loop never started (its last owner stopped between making it and the
/// loop's first step: nothing was asked or done yet), from `request`.
pub async fn restart_taken(
    state: &Arc<ServeState>,
    tenant: &str,
    id: &str,
    request: StartRun,
    replica: ReplicaFactory,
) -> Result<(), ApiError> {
    let prepared = prepare(state, tenant, &request, None)?;
    let root = run_root(state, tenant, id)?;
    // The rebuilt record is opened, not made from the request: it must be
    // this tenant's, and be the run the request describes (its chat, its
    // profile), before anything of it is used.
    let record = super::recorded::read(&root, &state.tenant_dirs(tenant), id)?;
    let chat = record
        .inputs
        .chat
        .as_ref()
        .map(|chat| PathBuf::from(&chat.path));
    let requested = std::path::absolute(&prepared.chat).ok();
    if chat != requested || record.profile.sha256 != prepared.profile.digest() {
        return Err(ApiError::conflict(
            "run.foreign_inputs",
            "the run's record cannot be restarted: its chat or profile is not the one its request names",
        ));
    }
    create_and_launch(state, tenant, request, prepared, move |_, _, _| {
        Run::at(&root)
            .replicated(replica)
            .open()
            .map(|(run, _)| run)
    })
    .await
    .map(drop)
}

/// What a start request names, found and checked before anything is made.
struct Prepared {
    policies: Arc<Policies>,
    models: Arc<dyn ModelSource>,
    config: LoopConfig,
    profile: Profile,
    agents: AgentDirectory,
    chat: PathBuf,
    /// The app's copy of the chat, checked, to put in place of `chat`.
    chat_copy: Option<ChatFile>,
    bindings: RunBindings,
}

/// `chat_copy` is the app's chat, taken out of the request and checked
/// ([`app_chat`]); a request still carrying one came from a cluster's
/// queue, which takes none.
fn prepare(
    state: &ServeState,
    tenant: &str,
    request: &StartRun,
    chat_copy: Option<ChatFile>,
) -> Result<Prepared, ApiError> {
    if request.chat_content.is_some() {
        return Err(cluster_chat_content());
    }
    let dirs = state.tenant_dirs(tenant);
    dirs.ensure()
        .map_err(|error| ApiError::internal("creating the tenant's directories", error))?;
    let (policies, _) = dirs.policies(&state.host())?;
    let model = state.models.get(tenant, &request.model).ok_or_else(|| {
        invalid(
            "serve.unknown_model",
            format!(
                "no model `{}` here; name one of: {}",
                request.model.chars().take(64).collect::<String>(),
                state.models.names_for(tenant).join(", ")
            ),
        )
    })?;
    let models = model
        .open()
        .map_err(|error| ApiError::internal("opening the model", error))?;
    let profile = match &request.profile {
        None => {
            Profile::default_writer().map_err(|error| invalid(error.code(), error.to_string()))?
        }
        Some(ProfileChoice::Named(name)) => named_profile(&dirs, name)?,
        Some(ProfileChoice::Inline(value)) => Profile::from_json(&value.to_string())
            .map_err(|error| invalid(error.code(), error.to_string()))?,
    };
    let agents = request
        .agents
        .iter()
        .map(|name| named_profile(&dirs, name))
        .collect::<Result<Vec<_>, _>>()?;
    // The operator's caps on this tenant, before anything is made.
    state
        .caps_of(tenant)
        .check_run(&profile, request.max_rounds, &agents)?;
    let agents = AgentDirectory::new(agents)
        .map_err(|error| invalid("agent.invalid_directory", error.to_string()))?;
    if let Some(snapshot) = &request.prompt_snapshot {
        if request.world_info.is_some() {
            return Err(invalid(
                PromptSnapshotError::CODE,
                "give promptSnapshot or worldInfo, not both: the snapshot carries its world info",
            ));
        }
        // Checked before a place is taken or a file is staged.
        PromptSnapshot::from_json(snapshot).map_err(|error| {
            invalid(
                PromptSnapshotError::CODE,
                format!("promptSnapshot.{}: {}", error.field, error.message),
            )
        })?;
    }
    let chat = TenantDirs::named(dirs.chats(), &request.chat, ".jsonl")
        .filter(|path| match &chat_copy {
            None => is_plain_file(path),
            // The app's copy makes the file, or replaces a plain one.
            Some(_) => path.symlink_metadata().map_or_else(
                |e| e.kind() == std::io::ErrorKind::NotFound,
                |m| m.is_file(),
            ),
        })
        .ok_or_else(|| ApiError::not_found("such chat"))?;
    let mut bindings = RunBindings {
        chat: Some(chat.clone()),
        generation_type: request.generation_type,
        ..RunBindings::default()
    };
    for (scope, name) in &request.skills {
        let dir = TenantDirs::named(dirs.skills(), name, "")
            .filter(|dir| dir.symlink_metadata().is_ok_and(|meta| meta.is_dir()))
            .ok_or_else(|| {
                invalid(
                    "serve.unknown_skills",
                    format!("no skills directory `{name}`"),
                )
            })?;
        bindings.skills.push(SkillSource { scope: *scope, dir });
    }
    // The chat's persist directory: projected into the run's `persist/`,
    // promoted back only when the run finishes.
    let persist_dir = dirs.chat_persist(&chat)?;
    let config = LoopConfig {
        task: request
            .task
            .clone()
            .unwrap_or_else(|| DEFAULT_TASK.to_owned()),
        model_name: model.model_name.clone(),
        max_output_tokens: model.max_output_tokens,
        max_rounds: request.max_rounds,
        context_chars: model.context_chars,
        host_commit: request.commit == CommitChoice::Host,
        seed: request.seed,
        model: model.record(),
        persist_dir: Some(persist_dir),
        ..LoopConfig::default()
    };
    Ok(Prepared {
        policies,
        models,
        config,
        profile,
        agents,
        chat,
        chat_copy,
        bindings,
    })
}

/// Take a place, make the run with `create` and start its loop; its id.
async fn create_and_launch(
    state: &Arc<ServeState>,
    tenant: &str,
    request: StartRun,
    prepared: Prepared,
    create: impl FnOnce(&Profile, Durability, &RunBindings) -> Result<Arc<Run>, RunFailure>
    + Send
    + 'static,
) -> Result<String, ApiError> {
    let Prepared {
        policies,
        models,
        config,
        profile,
        agents,
        chat,
        chat_copy,
        mut bindings,
    } = prepared;
    let dirs = state.tenant_dirs(tenant);
    let slot = state.runs.reserve(tenant, Some(&chat))?;
    // No run of the chat goes on now (`reserve`): the app's copy replaces
    // the old one before the run freezes its prefix — and the old one is
    // put back if the run cannot start after all.
    let replaced = match chat_copy {
        None => None,
        Some(copy) => Some(app_chat::put_in_place(chat.clone(), copy).await?),
    };
    let started = async {
        let world_info = match &request.world_info {
            None => None,
            Some(value) => Some(staged(&dirs.tmp(), value)?),
        };
        bindings.world_info = world_info.as_ref().map(|file| file.path().to_owned());
        let snapshot = match &request.prompt_snapshot {
            None => None,
            Some(value) => Some(staged(&dirs.tmp(), value)?),
        };
        bindings.prompt_snapshot = snapshot.as_ref().map(|file| file.path().to_owned());
        let durability = state.durability;
        let created = tokio::task::spawn_blocking(move || create(&profile, durability, &bindings))
            .await
            .map_err(|error| ApiError::internal("creating the run", error))?;
        drop((world_info, snapshot));
        let run = created.map_err(creation_refused)?;
        let id = run.run_id().to_owned();
        launch(
            state,
            run,
            Launch {
                tenant: tenant.to_owned(),
                slot,
                models,
                agents,
                config,
                policies,
            },
        )?;
        Ok::<_, ApiError>(id)
    }
    .await;
    if let Some(replaced) = replaced {
        app_chat::settle(replaced, started.is_ok()).await?;
    }
    started
}

/// Resume an interrupted run.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/resume",
    params(("id" = String, Path, description = "The run id")),
    responses(
        (status = 201, description = "The run goes on", body = Started),
        (status = 404, description = "No such run of this tenant", body = ApiError),
        (status = 409, description = "The run is running, ended, or its chat is busy", body = ApiError),
        (status = 429, description = "Too many runs; see `Retry-After`", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn resume(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    if state.node.is_some() {
        return Err(ApiError::conflict(
            "cluster.elsewhere",
            "in a cluster an interrupted run goes on by itself: the cluster's queue hands it to a node",
        ));
    }
    resume_run(&state, &tenant, &id).await?;
    Ok(created_response(id))
}

/// Go on with the interrupted run `id` of `tenant`, in a task of its own.
pub async fn resume_run(state: &Arc<ServeState>, tenant: &str, id: &str) -> Result<(), ApiError> {
    resume_with(state, tenant, id, None).await
}

/// Go on with the run `id` of `tenant` a cluster node took and rebuilt, its
/// journal replicated by `replica` from `run_resumed` on.
pub async fn resume_taken(
    state: &Arc<ServeState>,
    tenant: &str,
    id: &str,
    replica: ReplicaFactory,
) -> Result<(), ApiError> {
    resume_with(state, tenant, id, Some(replica)).await
}

async fn resume_with(
    state: &Arc<ServeState>,
    tenant: &str,
    id: &str,
    replica: Option<ReplicaFactory>,
) -> Result<(), ApiError> {
    let root = run_root(state, tenant, id)?;
    let (policies, _) = state.tenant_dirs(tenant).policies(&state.host())?;
    if state.runs.live(tenant, id).is_some() {
        return Err(ApiError::conflict("run.running", "the run is running"));
    }
    // What the record names must be this tenant's before anything of it
    // is opened (on a cluster node it was rebuilt from NATS).
    let record = super::recorded::read(&root, &state.tenant_dirs(tenant), id)?;
    let chat = record.inputs.chat.map(|chat| PathBuf::from(chat.path));
    let slot = state.runs.reserve(tenant, chat.as_deref())?;
    let (run, record) = tokio::task::spawn_blocking(move || match replica {
        Some(replica) => Run::at(&root).replicated(replica).resume(),
        None => Run::resume(&root),
    })
    .await
    .map_err(|error| ApiError::internal("resuming the run", error))?
    .map_err(resume_refused)?;
    let name = record
        .model
        .get("served")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let model = state.models.get(tenant, name).ok_or_else(|| {
        ApiError::conflict(
            "run.not_resumable",
            format!("the run's model `{name}` is no longer configured for this tenant"),
        )
    })?;
    let models = model
        .open()
        .map_err(|error| ApiError::internal("opening the model", error))?;
    let agents = record.agents().map_err(resume_refused)?;
    let config = record.config();
    // It will copy files into its recorded persist directory: its chat's.
    super::recorded::check_persist(
        config.persist_dir.as_deref(),
        chat.as_deref(),
        &state.tenant_dirs(tenant),
    )?;
    // Held to the operator's caps as at its start: what the run resumes
    // with was read from its directory (on a cluster node, from NATS).
    state.caps_of(tenant).check_run(
        run.profile(),
        config.max_rounds,
        agents.profiles().map(|profile| profile.as_ref()),
    )?;
    launch(
        state,
        run,
        Launch {
            tenant: tenant.to_owned(),
            slot,
            models,
            agents,
            config,
            policies,
        },
    )
}

fn created_response(id: String) -> Response {
    let location = format!("/v1/runs/{id}");
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(Started {
            id,
            status: "running",
        }),
    )
        .into_response()
}

/// The code of a profile name the tenant has no file for.
pub(crate) const UNKNOWN_PROFILE: &str = "serve.unknown_profile";

/// The profile `profiles/<name>.json` of the tenant.
pub(crate) fn named_profile(dirs: &TenantDirs, name: &str) -> Result<Profile, ApiError> {
    let unknown = || {
        invalid(
            UNKNOWN_PROFILE,
            format!("no profile `{}`", name.chars().take(64).collect::<String>()),
        )
    };
    let path = TenantDirs::named(dirs.profiles(), name, ".json")
        .filter(|path| is_plain_file(path))
        .ok_or_else(unknown)?;
    let bytes = read_bounded(&path, MAX_PROFILE_BYTES).map_err(|_| unknown())?;
    let text = String::from_utf8(bytes)
        .map_err(|_| invalid("profile.invalid", "the profile is not UTF-8"))?;
    Profile::from_json(&text)
        .map_err(|error| invalid(error.code(), format!("profile `{name}`: {error}")))
}

/// A regular file, not a link to one.
fn is_plain_file(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|meta| meta.is_file())
}

/// An inline snapshot or world info, in a file for the run to copy;
/// removed when dropped.
fn staged(tmp: &Path, value: &Value) -> Result<tempfile::NamedTempFile, ApiError> {
    let mut file = tempfile::NamedTempFile::new_in(tmp)
        .map_err(|error| ApiError::internal("staging the prompt snapshot", error))?;
    serde_json::to_writer(&mut file, value)
        .map_err(|error| ApiError::internal("staging the prompt snapshot", error))?;
    Ok(file)
}

/// A run that could not be created: the request's inputs were refused
/// (`400`), or the server failed (`500`).
fn creation_refused(failure: RunFailure) -> ApiError {
    match failure {
        RunFailure::Context(_) | RunFailure::Snapshot(_) | RunFailure::State(_) => {
            invalid(failure.code(), failure.to_string())
        }
        other => ApiError::internal("creating the run", other),
    }
}

fn resume_refused(failure: RunFailure) -> ApiError {
    match failure {
        RunFailure::AlreadyEnded { .. } | RunFailure::NotResumable(_) => {
            ApiError::conflict(failure.code(), failure.to_string())
        }
        other => creation_refused(other),
    }
}
