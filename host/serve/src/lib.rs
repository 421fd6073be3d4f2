//! `toolhost serve`: one long-running host — one engine, one pool, one
//! compile cache — reachable over HTTP. A JSON API under `/v1`, described
//! by the OpenAPI document at `/v1/openapi.json` (generated from the
//! handlers' types with utoipa); every error is `{code, message}`.
//!
//! - `listen`: the connections, a deadline on every request's head;
//! - `guard`: the checks every request passes (Host, Origin, token), with
//!   failed tokens counted per client address (`attempts`); the foreign
//!   pages let in and their CORS answers (`cors`);
//! - `caps`: the operator's caps on what a tenant's runs may ask for;
//! - `health`: readiness (`/v1/health`) and the builtins' warm-up;
//! - `tools`: the catalog;
//! - `runs`: the runs API (start, list, follow, cancel, resume, calls,
//!   files) over the tenant's directories (`tenant`) with the operator's
//!   models (`models`), within the limits of `runs::registry`;
//! - `mcp_http`: `/mcp/{profile}`, the tenant's profiles as MCP servers
//!   over streamable HTTP (the handler, `mcp`, also serves stdio), its
//!   sessions and calls counted in the runs' limits (`mcp_limits`).

mod attempts;
mod body;
pub mod caps;
pub mod cors;
mod error;
pub mod fence;
mod guard;
pub mod health;
mod listen;
pub mod mcp;
mod mcp_http;
mod mcp_limits;
pub mod models;
pub mod node;
pub mod runs;
pub mod tenant;
pub mod tls;
pub mod tokens;
mod tools;
mod ui;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler as _;
use axum::http::StatusCode;
use axum::routing::{any, get, post};
use toolhost_journal::Durability;
use toolhost_runtime::ToolHost;
use utoipa::OpenApi;

pub use error::ApiError;
pub use guard::LOCAL_TENANT;
pub use models::{ModelTable, ModelsError};
pub use runs::registry::Limits;
pub use tenant::TenantDirs;
pub use tokens::{Tenant, Tokens, TokensError, token_digest};

/// The address `toolhost serve` listens on unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7700";
/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// The largest body `POST /v1/runs` takes: a prompt snapshot's 8 MiB of
/// message text and a chat app's chat file of up to
/// [`runs::MAX_CHAT_CONTENT_BYTES`], each up to twice as long once escaped
/// in JSON (every `"` and `\` doubled), and room for the rest.
pub const MAX_RUN_BODY_BYTES: usize = 2 * (8 + 24) * 1024 * 1024 + 1024 * 1024;
/// Start requests read at once: each may hold tens of MiB while it is
/// read and checked; more wait their turn before their body is read.
pub const CONCURRENT_STARTS: usize = 4;

/// Who may use the server.
#[derive(Debug, Clone)]
pub enum TenantAccess {
    /// No tokens file: one tenant, `local`; loopback only.
    Local,
    /// Each bearer token names its tenant.
    Tokens(Tokens),
}

/// How the server keeps and runs its tenants' runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where each tenant's directories are (`tenants/<tenant>/…`).
    pub data_dir: std::path::PathBuf,
    /// The models a run may name.
    pub models: ModelTable,
    pub limits: Limits,
    /// When a run's journal events and audit files reach the disk.
    pub durability: Durability,
    /// Serve HTTPS with this configuration ([`tls::server_config`]).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Names clients reach the server by (`Host`), besides its address and
    /// `localhost`: e.g. `toolhost.example.com`.
    pub host_names: Vec<String>,
    /// Pages of other sites let in (`--allow-origin`): exact origins such
    /// as `http://127.0.0.1:8000`, a chat app's page.
    pub allowed_origins: Vec<String>,
}

/// What the handlers share.
pub struct ServeState {
    /// The tools new runs are given; replaced whole when the catalog's
    /// sources change ([`ServeState::replace_host`]). A run keeps the one
    /// it started with.
    host: std::sync::RwLock<(u64, Arc<ToolHost>)>,
    pub data_dir: std::path::PathBuf,
    pub models: ModelTable,
    pub durability: Durability,
    /// The runs in their loop here, and the limits.
    pub runs: runs::registry::Registry,
    /// Set when the server stops: loops still going are left interrupted.
    stop: tokio::sync::watch::Sender<bool>,
    /// The MCP endpoints, and what ends their sessions when the server stops.
    mcp: mcp_http::Endpoints,
    mcp_stop: tokio_util::sync::CancellationToken,
    /// Replaced whole when the tokens file is read again
    /// ([`ServeState::reload_tokens`]); a request sees one version.
    access: std::sync::RwLock<Arc<TenantAccess>>,
    /// The `Host` values (and origins) this server answers to.
    pub hosts: Vec<String>,
    /// `https` with TLS, else `http`: the scheme of its own origins.
    pub scheme: &'static str,
    /// Other sites' pages let in (`--allow-origin`), answered with CORS.
    pub origins: cors::AllowedOrigins,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// This server as a node of a cluster (`serve --cluster`).
    pub node: Option<Arc<node::ClusterNode>>,
    /// Builtin loads going on in the background ([`ServeState::warm`]).
    warm_ups: health::WarmUps,
    /// Failed bearer tokens, by client address (the guard).
    token_attempts: attempts::TokenAttempts,
    /// Start requests being read and checked ([`CONCURRENT_STARTS`]).
    starts: tokio::sync::Semaphore,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "serve.not_loopback: {0} is not a loopback address; serving beyond this machine needs --tokens and --tls-cert/--tls-key"
    )]
    NotLoopback(SocketAddr),
    #[error("serve.host_name_invalid: `{0}` is not a host name")]
    HostName(String),
    #[error("serve.origin_invalid: `{origin}`: {reason}")]
    OriginInvalid { origin: String, reason: String },
}

impl ServeState {
    /// The state of a server on `listen`, answering to its own address,
    /// `localhost` and `options.host_names` on that port. Beyond loopback
    /// it needs tokens and TLS.
    pub fn new(
        host: Arc<ToolHost>,
        access: TenantAccess,
        listen: SocketAddr,
        options: ServeOptions,
    ) -> Result<Self, ServeError> {
        let guarded = matches!(access, TenantAccess::Tokens(_)) && options.tls.is_some();
        if !listen.ip().is_loopback() && !guarded {
            return Err(ServeError::NotLoopback(listen));
        }
        let port = listen.port();
        let scheme = if options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let mut hosts = vec![listen.to_string(), format!("localhost:{port}")];
        for name in &options.host_names {
            let plain = !name.is_empty()
                && name.len() <= 253
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'));
            if !plain {
                return Err(ServeError::HostName(name.clone()));
            }
            hosts.push(format!("{name}:{port}"));
            // A client leaves the scheme's default port out of `Host`.
            if (scheme, port) == ("https", 443) || (scheme, port) == ("http", 80) {
                hosts.push(name.clone());
            }
        }
        let origins = cors::AllowedOrigins::parse(&options.allowed_origins)?;
        Ok(Self {
            host: std::sync::RwLock::new((0, host)),
            data_dir: options.data_dir,
            models: options.models,
            durability: options.durability,
            runs: runs::registry::Registry::new(options.limits),
            stop: tokio::sync::watch::Sender::new(false),
            mcp: mcp_http::Endpoints::default(),
            mcp_stop: tokio_util::sync::CancellationToken::new(),
            access: std::sync::RwLock::new(Arc::new(access)),
            hosts,
            scheme,
            origins,
            tls: options.tls,
            node: None,
            warm_ups: health::WarmUps::default(),
            token_attempts: attempts::TokenAttempts::new(
                options.limits.token_attempts,
                options.limits.token_attempt_window,
            ),
            starts: tokio::sync::Semaphore::new(CONCURRENT_STARTS),
        })
    }

    /// This server as a node of `node`'s cluster: new runs go to the
    /// cluster's queue, and its runs live in the node's own directory.
    pub fn with_node(mut self, node: Arc<node::ClusterNode>) -> Self {
        self.node = Some(node);
        self
    }

    /// The tools new runs and calls are given now.
    pub fn host(&self) -> Arc<ToolHost> {
        Arc::clone(&self.host_generation().1)
    }

    /// The tools now and their generation (1 more at each replacement).
    pub(crate) fn host_generation(&self) -> (u64, Arc<ToolHost>) {
        let current = self
            .host
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        (current.0, Arc::clone(&current.1))
    }

    /// New runs, calls and MCP sessions get `host` from now on (after `mcp
    /// refresh`, `ext grant`, …); running runs and open MCP sessions keep
    /// the one they have, and with it their snapshot's tools.
    pub fn replace_host(&self, host: Arc<ToolHost>) {
        let mut current = self
            .host
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *current = (current.0 + 1, host);
    }

    /// One tenant's directories.
    pub fn tenant_dirs(&self, tenant: &str) -> TenantDirs {
        match &self.node {
            Some(node) => TenantDirs::on_node(&self.data_dir, node.dir(), tenant),
            None => TenantDirs::new(&self.data_dir, tenant),
        }
    }

    /// Resolves to `true` once the server stops.
    pub(crate) fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Stop every loop here where it waits, leaving its run interrupted
    /// (no terminal event): it resumes when the server starts again.
    /// MCP sessions end too.
    pub fn interrupt_runs(&self) {
        self.stop.send_replace(true);
        self.mcp_stop.cancel();
    }

    /// The operator's caps on `tenant` (none without a tokens file).
    pub fn caps_of(&self, tenant: &str) -> caps::TenantCaps {
        match &*self.access() {
            TenantAccess::Tokens(tokens) => tokens.caps_of(tenant),
            TenantAccess::Local => caps::TenantCaps::default(),
        }
    }

    /// Who may use the server now.
    pub fn access(&self) -> Arc<TenantAccess> {
        // A panic while the lock was held cannot leave a half-written
        // value: it is replaced whole.
        Arc::clone(
            &self
                .access
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    /// Read the tokens file again (on SIGHUP): a token added works at the
    /// next request, a token removed stops working. A file that does not
    /// load leaves the tokens as they were. Without a tokens file there is
    /// nothing to read: `Ok(None)`.
    pub fn reload_tokens(&self) -> Result<Option<usize>, TokensError> {
        let TenantAccess::Tokens(current) = &*self.access() else {
            return Ok(None);
        };
        let tokens = Tokens::load(current.path())?;
        let count = tokens.len();
        *self
            .access
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Arc::new(TenantAccess::Tokens(tokens));
        Ok(Some(count))
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "toolhost", description = "A WebAssembly-sandboxed tool host for LLM agents."),
    paths(
        health::get,
        tools::list,
        openapi_json,
        runs::start,
        runs::list,
        runs::get,
        runs::events,
        runs::cancel,
        runs::resume,
        runs::call,
        runs::file,
        runs::approvals,
        runs::decide,
        runs::commits,
        runs::answer,
    ),
    components(schemas(
        ApiError,
        health::Health,
        health::BuiltinsLoaded,
        tools::ToolsResponse,
        tools::OmittedTool,
        runs::StartRun,
        runs::ProfileChoice,
        runs::Started,
        runs::RunView,
        runs::RunList,
        runs::Cancelled,
        runs::CallRequest,
        runs::CallResponse,
        runs::PendingCalls,
        runs::PendingCall,
        runs::ArgumentsShown,
        runs::ShownArgument,
        runs::DecisionRequest,
        runs::DecisionChoice,
        runs::Decided,
        runs::CommitChoice,
        runs::PendingCommits,
        runs::PendingCommit,
        runs::CommitAnswer,
        runs::Answered,
    )),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// This API's OpenAPI document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json"))
)]
async fn openapi_json() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(ApiDoc::openapi())
}

/// The API: every route behind the site guard (`Host`, `Origin`), then
/// the CORS answers for the origins let in, then — but for the web UI's
/// three files and `/v1/health` — the token guard; unknown routes answered
/// as JSON.
pub fn router(state: Arc<ServeState>) -> Router {
    let site = Router::new()
        .route("/", get(ui::index))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::style))
        .route("/v1/health", get(health::get));
    let api = Router::new()
        .route("/v1/tools", get(tools::list))
        .route("/v1/openapi.json", get(openapi_json))
        // A chat app's prompt snapshot and its chat ride in a start
        // request: several MiB each for a long chat.
        .route(
            "/v1/runs",
            post(runs::start.layer(axum::middleware::from_fn_with_state(
                Arc::clone(&state),
                one_of_the_starts,
            )))
            .get(runs::list)
            .layer(DefaultBodyLimit::max(MAX_RUN_BODY_BYTES)),
        )
        .route("/v1/runs/{id}", get(runs::get))
        .route("/v1/runs/{id}/events", get(runs::events))
        .route("/v1/runs/{id}/cancel", post(runs::cancel))
        .route("/v1/runs/{id}/resume", post(runs::resume))
        .route("/v1/runs/{id}/calls", post(runs::call))
        .route("/v1/runs/{id}/approvals", get(runs::approvals))
        .route("/v1/runs/{id}/approvals/{call_id}", post(runs::decide))
        .route("/v1/runs/{id}/commits", get(runs::commits))
        .route("/v1/runs/{id}/commits/{commit_id}", post(runs::answer))
        .route("/v1/runs/{id}/files/{*path}", get(runs::file))
        .route("/mcp/{profile}", any(mcp_http::endpoint))
        .fallback(|| async { ApiError::not_found("such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "serve.method_not_allowed",
                "this route does not take that method",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard::guard,
        ));
    let mut routes = site.merge(api);
    // Inside the site guard: a preflight from a page not let in is refused
    // there, never answered.
    if let Some(cors) = state.origins.layer() {
        routes = routes.layer(cors);
    }
    routes
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            guard::site_guard,
        ))
        .with_state(state)
}

/// A start request waits for one of [`CONCURRENT_STARTS`] places before
/// its body is read.
async fn one_of_the_starts(
    axum::extract::State(state): axum::extract::State<Arc<ServeState>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    // The semaphore is never closed.
    let _place = state.starts.acquire().await;
    next.run(request).await
}

/// Serve `router` on `listener` (over TLS when configured) until
/// `shutdown` resolves; request heads are bounded in time (`listen`).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ServeState>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let head_timeout = state.runs.limits.request_head_timeout;
    match state.tls.clone() {
        Some(config) => {
            let listener = tls::TlsListener::new(listener, config)?;
            listen::serve_on(listener, router(state), head_timeout, shutdown).await;
        }
        None => listen::serve_on(listener, router(state), head_timeout, shutdown).await,
    }
    Ok(())
}
