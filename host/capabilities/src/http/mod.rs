//! `outbound-http`: `wasi:http/outgoing-handler@0.2` for an extension a user
//! granted hosts to, and for nothing else.
//!
//! Every request is admitted here before anything leaves the process:
//! - its scheme, host and port must match a granted [`HostPattern`];
//! - one call makes at most [`MAX_REQUESTS_PER_CALL`] requests;
//! - the name is resolved by the host and every address checked before the
//!   connection is made ([`send`]): a DNS name reaches only public
//!   addresses, so a name that resolves (or rebinds) into loopback or a
//!   private range is refused unless that address is itself granted as a
//!   literal;
//! - no redirect is followed: a `3xx` goes to the tool, and a request to
//!   its `Location` is admitted like any other;
//! - a stored secret the grant binds to the destination is written into
//!   its header only now, after admission ([`secrets`]): the guest never
//!   holds it, and a request elsewhere (a redirect's too) never carries it;
//! - a response body is capped at [`MAX_RESPONSE_BYTES`], and every wait is
//!   capped by the call's deadline (the sandbox stops the call at it).
//!
//! The state lives in the store's capability slot and its resources (bodies,
//! futures) in WASI's resource table, so both end with the call: dropping
//! the store aborts whatever is still in flight.

mod secrets;
mod send;

pub use secrets::{Injections, SecretHeader};

use std::sync::Arc;
use std::time::Instant;

use secrets::Injected;

use toolhost_core::Capability;
use toolhost_core::allowed_hosts::{AllowedHosts, Destination, Scheme};
use toolhost_sandbox::{CallState, HostFault};
use wasmtime::component::Linker;
use wasmtime_wasi_http::p2::bindings::http as wasi_http;
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiBody, WasiHttp, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
};

use crate::CallGrant;
use crate::lifecycle::{BindInputs, HostCapability};

/// Most requests one call may make (each redirect hop is one).
pub const MAX_REQUESTS_PER_CALL: u32 = 16;
/// Largest response body a tool may read, in bytes.
pub const MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

/// What one call may reach.
#[derive(Debug, Clone)]
pub struct HttpPolicy {
    pub allowed: AllowedHosts,
    pub max_requests: u32,
    pub max_response_bytes: u64,
    /// Secrets written into admitted requests to their hosts.
    pub secrets: Vec<SecretHeader>,
}

impl HttpPolicy {
    /// The granted hosts under the default caps.
    pub fn new(allowed: AllowedHosts) -> Self {
        Self {
            allowed,
            max_requests: MAX_REQUESTS_PER_CALL,
            max_response_bytes: MAX_RESPONSE_BYTES,
            secrets: Vec::new(),
        }
    }
}

/// One call's `outbound-http` state.
pub struct OutboundHttp {
    ctx: WasiHttpCtx,
    hooks: Admission,
}

impl OutboundHttp {
    fn new(policy: Option<Arc<HttpPolicy>>, injected: Arc<Injections>) -> Self {
        Self {
            ctx: WasiHttpCtx::new(),
            hooks: Admission {
                policy,
                sent: 0,
                deadline_at: Instant::now(),
                injected,
            },
        }
    }
}

/// `outbound-http`.
pub struct Http;

impl HostCapability for Http {
    const KEY: &'static str = "outbound-http";
    /// What a call may reach is its grant's; bound is only the record of
    /// which secrets its requests carried, for the call's journal event.
    type Bound = Arc<Injections>;
    type State = OutboundHttp;

    fn bind(_inputs: &BindInputs) -> Option<Self::Bound> {
        Some(Arc::default())
    }

    /// Granted hosts, or none — a component granted `outbound-http` with
    /// no host left (a grant narrowed by hand) gets every request refused.
    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        if !grant.has(Capability::OutboundHttp) {
            return Ok(None);
        }
        let policy = (!grant.allowed_hosts.is_empty()).then(|| {
            Arc::new(HttpPolicy {
                secrets: grant.secrets.to_vec(),
                ..HttpPolicy::new(grant.allowed_hosts.clone())
            })
        });
        let injected = bound.cloned().unwrap_or_default();
        Ok(Some(OutboundHttp::new(policy, injected)))
    }

    fn begin(bound: &Self::Bound, _call: &crate::CallScope) {
        bound.take();
    }

    /// The secrets the call's requests carried, by name: the journal shows
    /// which secret went where, never its value.
    fn settle(bound: &Self::Bound, settlement: &mut crate::Settlement) {
        let injected = bound.take();
        if !injected.is_empty() {
            settlement.recorded.insert(
                Self::KEY.to_owned(),
                serde_json::json!({
                    "secrets": injected.iter().map(Injected::to_json).collect::<Vec<_>>()
                }),
            );
        }
    }

    /// `wasi:http/outgoing-handler` and `wasi:http/types`, over WASI's table.
    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        let options = wasmtime_wasi_http::p2::bindings::LinkOptions::default();
        wasi_http::outgoing_handler::add_to_linker::<_, WasiHttp>(linker, view)?;
        wasi_http::types::add_to_linker::<_, WasiHttp>(linker, &options.into(), view)
    }
}

fn view(state: &mut CallState) -> WasiHttpCtxView<'_> {
    // A call not prepared with the capability (its component was not
    // granted it, so it cannot import it; or an embedder skipped prepare)
    // refuses every request.
    let (core, table, http) =
        state.project_with_table(Http::KEY, || OutboundHttp::new(None, Arc::default()));
    http.hooks.deadline_at = core.deadline_at();
    WasiHttpCtxView {
        ctx: &mut http.ctx,
        table,
        hooks: &mut http.hooks,
    }
}

/// The policy hook: admits or refuses each request, then sends it.
struct Admission {
    policy: Option<Arc<HttpPolicy>>,
    sent: u32,
    deadline_at: Instant,
    injected: Arc<Injections>,
}

/// A request the policy admitted.
pub(crate) struct Admitted {
    pub(crate) destination: Destination,
    pub(crate) policy: Arc<HttpPolicy>,
    pub(crate) deadline_at: Instant,
}

impl Admission {
    fn admit(&mut self, request: &http::Request<WasiBody>) -> Result<Admitted, Error> {
        let Some(policy) = &self.policy else {
            tracing::warn!(uri = %request.uri(), "HTTP request refused: no host is granted");
            return Err(Error::HttpRequestDenied);
        };
        if self.sent >= policy.max_requests {
            return Err(Error::InternalError(Some(format!(
                "toolhost: this call already made {} HTTP requests, the most one call may make",
                policy.max_requests
            ))));
        }
        let destination = destination(request.uri()).ok_or(Error::HttpRequestUriInvalid)?;
        if policy.allowed.allows(&destination).is_none() {
            tracing::warn!(%destination, "HTTP request refused: the host is not granted");
            return Err(Error::HttpRequestDenied);
        }
        self.sent += 1;
        Ok(Admitted {
            destination,
            policy: Arc::clone(policy),
            deadline_at: self.deadline_at,
        })
    }
}

fn destination(uri: &http::Uri) -> Option<Destination> {
    let scheme = Scheme::parse(uri.scheme_str()?)?;
    let authority = uri.authority()?;
    // A user part would go out in `Host` beside the host admitted (and a
    // secret matched against it): refused, as a pattern never has one.
    if authority.as_str().contains('@') {
        return None;
    }
    Some(Destination {
        scheme,
        host: authority.host().to_owned(),
        port: authority.port_u16().unwrap_or(scheme.default_port()),
    })
}

type Driver = Box<dyn Future<Output = Result<(), Error>> + Send>;

impl WasiHttpHooks for Admission {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _response_errors: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, Driver), Error>> + Send> {
        let mut request = request;
        let admitted = self.admit(&request);
        let injected = &self.injected;
        let admitted = admitted.and_then(|admitted| {
            let written = secrets::inject(
                &admitted.policy.secrets,
                &admitted.destination,
                &mut request,
            )?;
            // Recorded as the secret goes into the request, whatever the
            // request meets next: the journal names every secret a request
            // was sent with, and a replay never sends such a call again.
            for secret in written {
                injected.push(Injected {
                    secret: secret.secret.clone(),
                    destination: admitted.destination.to_string(),
                    header: secret.name.as_str().to_owned(),
                });
            }
            Ok(admitted)
        });
        Box::new(async move { send::send(admitted?, request, options).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Empty};

    pub(super) fn request(uri: &str) -> http::Request<WasiBody> {
        http::Request::builder()
            .uri(uri)
            .body(
                Empty::new()
                    .map_err(|never: std::convert::Infallible| match never {})
                    .boxed_unsync(),
            )
            .expect("request")
    }

    fn admission(hosts: &[&str]) -> Admission {
        let allowed = AllowedHosts::new(hosts.iter().map(|h| h.parse().expect("pattern")));
        Admission {
            policy: Some(Arc::new(HttpPolicy {
                max_requests: 2,
                ..HttpPolicy::new(allowed)
            })),
            sent: 0,
            deadline_at: Instant::now(),
            injected: Arc::default(),
        }
    }

    fn refused(result: Result<Admitted, Error>) -> Error {
        match result {
            Ok(admitted) => panic!("admitted {}", admitted.destination),
            Err(error) => error,
        }
    }

    #[test]
    fn only_granted_destinations_are_admitted_and_only_so_many() {
        let mut hooks = admission(&["api.example.com", "http://127.0.0.1:*"]);
        assert!(matches!(
            refused(hooks.admit(&request("https://other.example.com/x"))),
            Error::HttpRequestDenied
        ));
        assert!(matches!(
            refused(hooks.admit(&request("http://api.example.com/x"))),
            Error::HttpRequestDenied
        ));
        assert!(matches!(
            refused(hooks.admit(&request("http://localhost:8080/"))),
            Error::HttpRequestDenied
        ));
        let admitted = hooks
            .admit(&request("https://API.example.com/v1?q=1"))
            .expect("granted");
        assert_eq!(admitted.destination.port, 443);
        hooks
            .admit(&request("http://127.0.0.1:9/"))
            .expect("granted literal");
        // Refusals do not count; admitted requests do.
        assert!(matches!(
            refused(hooks.admit(&request("http://127.0.0.1:9/"))),
            Error::InternalError(Some(message)) if message.contains("already made 2 HTTP requests")
        ));
    }

    #[test]
    fn without_a_policy_everything_is_refused() {
        let mut hooks = OutboundHttp::new(None, Arc::default()).hooks;
        assert!(matches!(
            refused(hooks.admit(&request("https://api.example.com/"))),
            Error::HttpRequestDenied
        ));
    }
}
