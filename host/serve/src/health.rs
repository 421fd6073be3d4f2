//! `GET /v1/health`: whether the server is ready for load — a readiness
//! probe's answer, and what a host that starts the server waits for
//! before sending runs. (As a liveness probe, any answer means alive.)
//!
//! A server answers every request from its first moment: a call whose
//! builtin is still loading waits for that load. But a fresh server loads
//! every builtin in the background ([`ServeState::warm`]), and until that
//! is done the loads take CPU from the runs; the first warm-up's end makes
//! the server `ready`. A catalog replaced later (`mcp refresh`, SIGHUP)
//! warms up again while the server keeps serving: it stays `ready` (the
//! counts show the loads), so servers reloading together do not all leave
//! a load balancer at once. No token: the answer says nothing about any
//! tenant; `Host` and `Origin` are checked as for every route, so a probe
//! names the server as clients do (`--host-name`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
    /// `ready`; `warming` until the first warm-up of the builtins ends;
    /// `stopping` once the server stops taking work.
    pub status: &'static str,
    /// The builtins of the catalog new runs get.
    pub builtins: BuiltinsLoaded,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BuiltinsLoaded {
    pub loaded: usize,
    pub total: usize,
    /// Whose load failed in the last warm-up that ended (each is tried
    /// again at its next call).
    pub failed: usize,
}

/// The warm-ups of the builtins: how many are going on (one per catalog
/// being loaded), whether none was going at some moment since the first
/// began, and the last one's failures.
#[derive(Debug, Default)]
pub(crate) struct WarmUps(Arc<WarmUpState>);

#[derive(Debug, Default)]
struct WarmUpState {
    going: AtomicUsize,
    ended_once: AtomicBool,
    failed: AtomicUsize,
}

/// A warm-up in progress; it ends when this is dropped, however the
/// warm-up ended (a load that panics included).
pub struct WarmingUp(Arc<WarmUpState>);

impl WarmingUp {
    fn failed(&self, count: usize) {
        self.0.failed.store(count, Ordering::Release);
    }
}

impl Drop for WarmingUp {
    fn drop(&mut self) {
        // The server is warm once every warm-up begun so far has ended.
        if self.0.going.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.ended_once.store(true, Ordering::Release);
        }
    }
}

impl WarmUps {
    pub(crate) fn begin(&self) -> WarmingUp {
        self.0.going.fetch_add(1, Ordering::AcqRel);
        WarmingUp(Arc::clone(&self.0))
    }

    /// Before the first warm-up ended (a server never asked to warm up
    /// is ready).
    fn first_going(&self) -> bool {
        !self.0.ended_once.load(Ordering::Acquire) && self.0.going.load(Ordering::Acquire) > 0
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
            let ids = host.builtin_ids();
            let mut failed = 0;
            for (id, outcome) in host.preload(&ids, &|_| {}).await {
                if let Err(error) = outcome {
                    failed += 1;
                    tracing::warn!(tool = %id, "builtin does not load: {error}");
                }
            }
            warming.failed(failed);
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
        failed: state.warm_ups.0.failed.load(Ordering::Acquire),
    };
    let status = if *state.stopping().borrow() {
        "stopping"
    } else if state.warm_ups.first_going() {
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
