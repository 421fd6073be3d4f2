//! `GET /v1/health`: whether the server is ready for load, for a load
//! balancer's or an orchestrator's readiness probe and for a host that
//! starts the server and waits before sending runs.
//!
//! A server answers every request from its first moment: a call whose
//! builtin is still loading waits for that load. But a fresh server loads
//! every builtin in the background ([`ServeState::warm`]), and until that
//! is done the loads take CPU from the runs; a probe that waits for
//! `ready` keeps load off a server that is still warming up (and a
//! catalog replaced by `mcp refresh` warms up again). No token: the answer
//! says nothing about any tenant; `Host` and `Origin` are checked as for
//! every route.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use toolhost_runtime::ToolHost;

use crate::ServeState;

/// The server's readiness.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ready`; `warming` while builtins load in the background;
    /// `stopping` once the server stops taking work.
    pub status: &'static str,
    /// The builtins of the catalog new runs get: loaded of total.
    pub builtins: BuiltinsLoaded,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BuiltinsLoaded {
    pub loaded: usize,
    pub total: usize,
}

/// How many warm-ups are going on: one per catalog being loaded.
#[derive(Debug, Default)]
pub(crate) struct WarmUps(Arc<AtomicUsize>);

/// A warm-up in progress; it ends when this is dropped, however the
/// warm-up ended (a load that panics included).
pub struct WarmingUp(Arc<AtomicUsize>);

impl Drop for WarmingUp {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl WarmUps {
    pub(crate) fn begin(&self) -> WarmingUp {
        self.0.fetch_add(1, Ordering::AcqRel);
        WarmingUp(Arc::clone(&self.0))
    }

    fn going(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }
}

impl ServeState {
    /// Load every builtin of `host` in the background (from the cache, or
    /// compiled on every core the first time), so that no run's first
    /// call of a tool waits for it; `/v1/health` says `warming` until
    /// it is done. A call that comes first waits for that load, not a
    /// second one. A load that fails is logged; the tool's next call
    /// tries again.
    pub fn warm(&self, host: &Arc<ToolHost>) {
        let host = Arc::clone(host);
        let warming = self.begin_warming();
        tokio::spawn(async move {
            let _warming = warming;
            let ids = host.builtin_ids();
            for (id, outcome) in host.preload(&ids, &|_| {}).await {
                if let Err(error) = outcome {
                    tracing::warn!(tool = %id, "builtin does not load: {error}");
                }
            }
        });
    }

    /// Mark a warm-up as going on until the guard is dropped.
    pub fn begin_warming(&self) -> WarmingUp {
        self.warm_ups.begin()
    }
}

/// Whether the server is ready.
#[utoipa::path(
    get,
    path = "/v1/health",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Warming up or stopping; `Retry-After` says when to ask again", body = Health),
    )
)]
pub(crate) async fn get(State(state): State<Arc<ServeState>>) -> Response {
    let host = state.host();
    let ids = host.builtin_ids();
    let builtins = BuiltinsLoaded {
        loaded: ids.iter().filter(|id| host.is_loaded(id)).count(),
        total: ids.len(),
    };
    let status = if *state.stopping().borrow() {
        "stopping"
    } else if state.warm_ups.going() {
        "warming"
    } else {
        "ready"
    };
    let health = Json(Health { status, builtins });
    if status == "ready" {
        return health.into_response();
    }
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, health).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}
