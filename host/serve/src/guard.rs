//! What every request passes before a handler: its `Host` must name this
//! server (no DNS rebinding of a browser onto the loopback port), an
//! `Origin`, when a browser sends one, must be this server's own or one the
//! operator let in (`--allow-origin`, answered with CORS by `cors`): no
//! other site's page may drive it; and but for the web UI's files, its
//! bearer token must name a tenant — from a client address not past its
//! failed tokens (`attempts`).

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::tokens::Tenant;
use crate::{ServeState, TenantAccess};

/// The tenant of a local server without a tokens file (loopback only).
pub const LOCAL_TENANT: &str = "local";

pub(crate) async fn guard(
    State(state): State<Arc<ServeState>>,
    mut request: Request,
    next: Next,
) -> Response {
    match admit(&state, &request) {
        Ok(tenant) => {
            request.extensions_mut().insert(tenant);
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}

/// Every request, first: this server's `Host`, and an `Origin` of its own
/// or let in. The web UI's files need nothing more (the pages hold no
/// data; the script sends the token with each API request).
pub(crate) async fn site_guard(
    State(state): State<Arc<ServeState>>,
    request: Request,
    next: Next,
) -> Response {
    match own_site(&state, &request) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

/// The tenant of a request that passed [`site_guard`].
fn admit(state: &ServeState, request: &Request) -> Result<Tenant, ApiError> {
    let headers = request.headers();
    match &*state.access() {
        TenantAccess::Local => Ok(Tenant(LOCAL_TENANT.to_owned())),
        TenantAccess::Tokens(tokens) => {
            // `listen` gives every request its client's address.
            let peer = request
                .extensions()
                .get::<ConnectInfo<std::net::SocketAddr>>()
                .map(|ConnectInfo(address)| address.ip());
            let now = std::time::Instant::now();
            if let Some(peer) = peer
                && let Err(seconds) = state.token_attempts.check(peer, now)
            {
                return Err(ApiError::too_many(
                    "serve.too_many_attempts",
                    "too many failed tokens from this address; wait before trying again",
                    seconds,
                ));
            }
            let Some(presented) = headers.get(header::AUTHORIZATION) else {
                return Err(ApiError::unauthorized());
            };
            let tenant = presented
                .to_str()
                .ok()
                .and_then(|value| value.strip_prefix("Bearer "))
                .and_then(|token| tokens.tenant_of(token.trim()));
            tenant.ok_or_else(|| {
                if let Some(peer) = peer {
                    state.token_attempts.failed(peer, now);
                }
                ApiError::unauthorized()
            })
        }
    }
}

/// `Host` names this server, and an `Origin`, when sent, is its own or
/// one the operator let in.
fn own_site(state: &ServeState, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if !state
        .hosts
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(host))
    {
        return Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "serve.host_refused",
            format!("this server answers to {} only", state.hosts.join(", ")),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let own = state
            .hosts
            .iter()
            .any(|allowed| origin.eq_ignore_ascii_case(&format!("{}://{allowed}", state.scheme)));
        if !own && !state.origins.contains(origin) {
            // The flag that would let it in, when it is an origin at all.
            let message = match crate::cors::AllowedOrigins::parse(&[origin.to_owned()]) {
                Ok(parsed) if !parsed.is_empty() => format!(
                    "requests from another site's pages are refused: to let the pages of {0} in, start the server with --allow-origin {0}",
                    parsed.as_slice()[0]
                ),
                _ => "requests from another site's pages are refused".to_owned(),
            };
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "serve.origin_refused",
                message,
            ));
        }
    }
    Ok(())
}
