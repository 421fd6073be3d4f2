//! `/mcp/{profile}`: MCP over streamable HTTP (rmcp's server transport,
//! both protocol eras) for one of the tenant's profiles. Each legacy
//! session, and each stateless request of the modern era, is a handler of
//! its own ([`McpTools`]) with its own run in the tenant's runs directory,
//! under the same gate and journal as `toolhost mcp serve` on stdio.
//!
//! Every (tenant, profile version) gets its own rmcp service and session
//! manager: a session id from one tenant means nothing under another's
//! token. `Host`, `Origin` and the token were checked by the guard.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Extension;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use toolhost_core::Profile;
use toolhost_runtime::RunBindings;
use tower_service::Service as _;

use crate::ServeState;
use crate::error::ApiError;
use crate::mcp::{McpTools, NeedingApproval, RunPlace, ServedFor};
use crate::runs::{UNKNOWN_PROFILE, named_profile};
use crate::tenant::TenantDirs;
use crate::tokens::Tenant;

type Endpoint = StreamableHttpService<McpTools, LocalSessionManager>;

/// The endpoints made so far, by tenant, profile digest and the
/// generation of the tools they serve.
#[derive(Default)]
pub struct Endpoints {
    by_profile: Mutex<HashMap<(String, String, u64), Endpoint>>,
    /// Sessions with a call in flight (`mcp_limits`).
    pub(crate) busy: crate::mcp_limits::BusySessions,
}

/// Largest number of (tenant, profile version) endpoints kept; past it the
/// oldest are forgotten (their sessions end).
const MAX_ENDPOINTS: usize = 1024;

pub(crate) async fn endpoint(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(profile_name): UrlPath<String>,
    request: Request,
) -> Response {
    let dirs = state.tenant_dirs(&tenant);
    let profile = match served_profile(&dirs, &profile_name) {
        Ok(profile) => profile,
        Err(refused) => return refused.into_response(),
    };
    // Its tools' limits are the profile's, as in a run: the same caps.
    if let Err(exceeded) = state.caps_of(&tenant).check_limits("profile", &profile) {
        return ApiError::from(exceeded).into_response();
    }
    let (generation, host) = state.host_generation();
    let (policies, policy_digest) = match dirs.policies(&host) {
        Ok(found) => found,
        Err(error) => return error.into_response(),
    };
    // A changed policy makes a new endpoint, as a changed profile does.
    let key = (
        tenant.clone(),
        format!("{}:{policy_digest}", profile.digest()),
        generation,
    );
    let mut service = {
        let mut endpoints = state
            .mcp
            .by_profile
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !endpoints.contains_key(&key) {
            // The same profile on older tools: new sessions get the new
            // tools; a legacy client of a dropped session is told to start
            // a new one (404), as the transport specifies.
            endpoints.retain(|(t, d, _), _| !(t == &key.0 && d == &key.1));
            if endpoints.len() >= MAX_ENDPOINTS {
                endpoints.clear();
            }
        }
        endpoints
            .entry(key)
            .or_insert_with(|| {
                let runs_dir = dirs.runs();
                let owner = tenant.clone();
                let reserve = reserve_for(&state, &tenant);
                let durability = state.durability;
                let mut config = StreamableHttpServerConfig::default()
                    // The guard checked Host and Origin against this
                    // server's own names already.
                    .disable_allowed_hosts();
                config.cancellation_token = state.mcp_stop.child_token();
                config.max_request_body_bytes = crate::MAX_BODY_BYTES;
                let mut sessions = LocalSessionManager::default();
                // A client gone without `DELETE` holds its place no longer.
                sessions.session_config.keep_alive = Some(state.runs.limits.mcp_session_idle);
                StreamableHttpService::new(
                    move || {
                        McpTools::new(
                            Arc::clone(&host),
                            ServedFor {
                                tenant: Some(owner.clone()),
                                policies: Some(Arc::clone(&policies)),
                            },
                            profile.clone(),
                            RunPlace::Under(runs_dir.clone()),
                            RunBindings::default(),
                            durability,
                            // No one to ask over MCP: such tools are not
                            // served here (the runs API and the UI decide).
                            NeedingApproval::LeftOut,
                        )
                        .inspect(|tools| tools.counted().count(Arc::clone(&reserve)))
                        .map_err(std::io::Error::other)
                    },
                    Arc::new(sessions),
                    config,
                )
            })
            .clone()
    };
    let (request, slot) = match crate::mcp_limits::admit(&state, &tenant, request).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused.into_response(),
    };
    let deleting = request.method() == Method::DELETE;
    let served = crate::mcp_limits::RESERVED.scope(slot, service.call(request));
    let response = match served.await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(never) => match never {},
    };
    if deleting && response.status() == StatusCode::ACCEPTED {
        // rmcp answers a closed session `202`; the transport's clients
        // expect `204` (the Python SDK logs "Session termination failed:
        // 202"), and there is nothing more to say.
        return StatusCode::NO_CONTENT.into_response();
    }
    response
}

/// The profile this endpoint serves: the tenant's own of that name, else,
/// for [`DEFAULT_PROFILE`], the built-in default profile — so a fresh
/// server answers an MCP client at `/mcp/default` before any profile is
/// written.
fn served_profile(dirs: &TenantDirs, name: &str) -> Result<Profile, ApiError> {
    match named_profile(dirs, name) {
        Ok(profile) => Ok(profile),
        Err(error) if name == DEFAULT_PROFILE && error.code == UNKNOWN_PROFILE => {
            Profile::default_writer()
                .map_err(|error| ApiError::internal("the default profile", error))
        }
        Err(_) => Err(ApiError::not_found("such profile")),
    }
}

/// The name under which the built-in default profile is served.
pub(crate) const DEFAULT_PROFILE: &str = "default";

/// How a handler of `tenant`'s takes a place among the runs when the
/// request that made it took none. Weak: the endpoints live in the state.
fn reserve_for(state: &Arc<ServeState>, tenant: &str) -> crate::mcp_limits::Reserve {
    let state = Arc::downgrade(state);
    let tenant = tenant.to_owned();
    Arc::new(move || match state.upgrade() {
        Some(state) => state.runs.reserve(&tenant, None),
        None => Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "serve.stopping",
            "the server is stopping",
        )),
    })
}
