//! MCP over HTTP within the server's limits. A handler that may make a run
//! — a legacy session, a stateless request — holds a place among the runs
//! (`--max-runs`, `--max-runs-per-tenant`) for as long as it lives, and
//! every `tools/call` in flight holds one of the calls (`--max-calls`).
//!
//! Both are taken in [`admit`], before rmcp sees the request, so a refusal
//! is the API's `429` with `Retry-After`. The place reaches the handler rmcp
//! makes for the request through [`RESERVED`] (rmcp calls its service
//! factory inside the request's own future); the call permit through the
//! request's extensions, which rmcp hands to the handler with the message.
//!
//! A session's place is freed when its handler is dropped: a `DELETE`, the
//! session idle for `Limits::mcp_session_idle` (rmcp's session manager
//! closes it), the server stopping, or the stateless request answered. A
//! handler rmcp made without a place in scope (one it routes statelessly
//! although the request named a session) takes one at its first call, and
//! is refused with a JSON-RPC error then.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use rmcp::ErrorData;
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::sync::OwnedSemaphorePermit;

use crate::ServeState;
use crate::error::ApiError;
use crate::runs::registry::Slot;

tokio::task_local! {
    /// The place [`admit`] took for the handler the current request makes.
    pub(crate) static RESERVED: Option<Arc<Slot>>;
}

/// How a handler without a place takes one.
pub(crate) type Reserve = Arc<dyn Fn() -> Result<Slot, ApiError> + Send + Sync>;

/// A handler's count among the server's runs (`toolhost serve` only: on
/// stdio nothing is set and nothing is counted).
#[derive(Default)]
pub(crate) struct Counted {
    slot: OnceLock<Arc<Slot>>,
    reserve: OnceLock<Reserve>,
}

impl Counted {
    /// Count the handler: it holds the place in [`RESERVED`] if the request
    /// that made it took one, else it takes one with `reserve` before its
    /// run is made.
    pub(crate) fn count(&self, reserve: Reserve) {
        if let Ok(Some(slot)) = RESERVED.try_with(Clone::clone) {
            let _ = self.slot.set(slot);
        }
        let _ = self.reserve.set(reserve);
    }

    /// Before the handler's run is made: its place, taken now if it holds
    /// none.
    pub(crate) fn place(&self) -> Result<(), ErrorData> {
        let Some(reserve) = self.reserve.get() else {
            return Ok(());
        };
        if self.slot.get().is_some() {
            return Ok(());
        }
        let slot = reserve().map_err(|refused| refusal(&refused))?;
        let _ = self.slot.set(Arc::new(slot));
        Ok(())
    }
}

/// The call permit [`admit`] took for a `tools/call`: the handler takes it
/// out and holds it for the call; untaken, it goes with the request.
#[derive(Clone)]
struct CallPermit(Arc<Mutex<Option<CallHold>>>);

/// A call's hold on the server's calls, and on its session's one call in
/// flight.
pub(crate) struct CallHold {
    _permit: OwnedSemaphorePermit,
    _session: Option<SessionCall>,
}

/// The sessions with a call in flight, by tenant and session id. A
/// session's calls run one at a time (they share its run), so a second
/// call while one is in flight would only wait — holding one of the
/// server's calls, which a single client could so take them all.
#[derive(Default)]
pub(crate) struct BusySessions(Arc<Mutex<HashSet<(String, String)>>>);

/// A session's call in flight; the session is free again when dropped.
#[derive(Debug)]
struct SessionCall {
    busy: Arc<Mutex<HashSet<(String, String)>>>,
    key: (String, String),
}

impl Drop for SessionCall {
    fn drop(&mut self) {
        self.busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .remove(&self.key);
    }
}

impl BusySessions {
    /// Mark `session` of `tenant` busy, or refuse: it has a call in flight.
    fn enter(
        &self,
        tenant: &str,
        session: &str,
        retry_after: u64,
    ) -> Result<SessionCall, ApiError> {
        let key = (
            tenant.to_owned(),
            session.chars().take(256).collect::<String>(),
        );
        let mut busy = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !busy.insert(key.clone()) {
            return Err(ApiError::too_many(
                "serve.session_busy",
                "this MCP session has a call in flight; its calls run one at a time",
                retry_after,
            ));
        }
        Ok(SessionCall {
            busy: Arc::clone(&self.0),
            key,
        })
    }
}

/// The hold the HTTP request of this call brought, if any.
pub(crate) fn call_permit(extensions: &rmcp::model::Extensions) -> Option<CallHold> {
    let parts = extensions.get::<axum::http::request::Parts>()?;
    let permit = parts.extensions.get::<CallPermit>()?;
    permit
        .0
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take()
}

/// What a refusal tells an MCP client that is past the HTTP layer.
fn refusal(refused: &ApiError) -> ErrorData {
    let seconds = refused.retry_after.unwrap_or(1);
    ErrorData::internal_error(
        format!(
            "{}: {}; retry after {seconds} s",
            refused.code, refused.message
        ),
        Some(serde_json::json!({"code": refused.code, "retryAfter": seconds})),
    )
}

/// The fields of a JSON-RPC message that say what it asks for.
#[derive(Deserialize)]
struct Peek {
    method: Option<String>,
    id: Option<IgnoredAny>,
}

/// `request`, admitted within the limits, and the place it took for the
/// handler it makes (to be put in [`RESERVED`] while rmcp serves it).
pub(crate) async fn admit(
    state: &ServeState,
    tenant: &str,
    request: Request,
) -> Result<(Request, Option<Arc<Slot>>), ApiError> {
    if request.method() != Method::POST {
        return Ok((request, None));
    }
    let (mut parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, crate::MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "serve.body_too_large",
                format!(
                    "a request body is at most {} bytes and must arrive whole",
                    crate::MAX_BODY_BYTES
                ),
            )
        })?;
    // What is not one JSON-RPC message is rmcp's to refuse.
    let peek = serde_json::from_slice::<Peek>(&bytes).ok();
    let asks = |method: &str| {
        peek.as_ref()
            .is_some_and(|peek| peek.id.is_some() && peek.method.as_deref() == Some(method))
    };
    let in_session = parts.headers.contains_key("mcp-session-id");
    // An `initialize` starts a session; a call without a session is served
    // by a handler of its own, with a run of its own.
    let slot = if !in_session && (asks("initialize") || asks("tools/call")) {
        Some(Arc::new(state.runs.reserve(tenant, None)?))
    } else {
        None
    };
    if asks("tools/call") {
        // The session first: a refusal here takes none of the server's calls.
        let session = match parts
            .headers
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
        {
            Some(id) => Some(state.mcp.busy.enter(
                tenant,
                id,
                state.runs.limits.retry_after_secs,
            )?),
            None => None,
        };
        let hold = CallHold {
            _permit: state.runs.call_permit()?,
            _session: session,
        };
        parts
            .extensions
            .insert(CallPermit(Arc::new(Mutex::new(Some(hold)))));
    }
    Ok((Request::from_parts(parts, Body::from(bytes)), slot))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call in flight per session: a second one while the first runs
    /// is 429 before it takes one of the server's calls, and the session
    /// is free again once the first ends. Other sessions, and the same
    /// session id of another tenant, are not held up.
    #[test]
    fn a_session_has_one_call_in_flight() {
        let busy = BusySessions::default();
        let first = busy.enter("acme", "s-1", 2).expect("free");
        let refused = busy.enter("acme", "s-1", 2).expect_err("in flight");
        assert_eq!(
            (refused.status, refused.retry_after, refused.code.as_str()),
            (429, Some(2), "serve.session_busy")
        );
        busy.enter("acme", "s-2", 2).expect("another session");
        busy.enter("globex", "s-1", 2).expect("another tenant's");
        drop(first);
        busy.enter("acme", "s-1", 2).expect("free again");
    }
}
