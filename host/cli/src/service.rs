//! `toolhost serve`: the long-running host over HTTP (`toolhost-serve`),
//! on 127.0.0.1:7700 unless told otherwise, until Ctrl-C or SIGTERM; SIGHUP
//! reads the tokens file and the tools again (a change to the MCP or
//! extension directories reloads the tools by itself: `catalog_watch`).
//!
//! Stopping: the server stops accepting connections, lets requests in
//! flight finish (at most [`DRAIN`]), and leaves every run still in its
//! loop interrupted — no terminal event — to be resumed at the next start
//! (unless `--no-resume`, which lists them).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use toolhost_runtime::ToolHost;
use toolhost_serve::{Limits, ModelTable, ServeOptions, ServeState, TenantAccess, Tokens};

use crate::flags::DurabilityArg;

/// How long requests in flight may take to finish once the server stops.
const DRAIN: Duration = Duration::from_secs(10);

/// `toolhost serve`'s flags, read here as clap parsed them. The fields'
/// order is `--help`'s order.
#[derive(clap::Args)]
pub struct ServiceArgs {
    /// The address to listen on.
    #[arg(long, default_value = toolhost_serve::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Tokens file (JSON, mode 0600: each token's sha256 and its
    /// tenant); without it the one tenant is `local`.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// The models runs may name (JSON; see docs/serve.md); without it no
    /// run can start.
    #[arg(long, value_name = "FILE")]
    pub models: Option<PathBuf>,
    /// Where each tenant's runs, chats, profiles and skills are
    /// [default: $TOOLHOST_DATA_DIR, else $XDG_DATA_HOME/toolhost/serve,
    /// else ~/.local/share/toolhost/serve].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// When journal events and audit files reach the disk.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Batched)]
    pub durability: DurabilityArg,
    /// At start, list interrupted runs instead of resuming them.
    #[arg(long)]
    pub no_resume: bool,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A name clients reach the server by (its `Host`), besides its
    /// address and localhost; repeatable.
    #[arg(long = "host-name", value_name = "NAME")]
    pub host_names: Vec<String>,
    /// Let the pages of this exact origin (scheme://host:port) use the
    /// API, answered with CORS — a chat app on its own port, e.g.
    /// http://127.0.0.1:8000 for SillyTavern; repeatable, no wildcard.
    /// Their requests still need a token when there is a tokens file.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// Runtime worker threads [default: 16 per core, 16 to 256; with
    /// the data directory on a memory file system (tmpfs) 2 per core,
    /// 4 to 64].
    #[arg(long)]
    pub worker_threads: Option<usize>,
    // Be a node of a cluster (`--cluster`).
    #[command(flatten)]
    pub cluster: crate::cluster::ClusterArgs,
}

impl ServiceArgs {
    /// The data directory: `--data-dir`, `$TOOLHOST_DATA_DIR`, or
    /// `toolhost/serve` in the user's data directory.
    pub fn data_dir(&self) -> Option<PathBuf> {
        crate::load::user_dir(
            self.data_dir.as_deref(),
            "TOOLHOST_DATA_DIR",
            ("XDG_DATA_HOME", ".local/share"),
            "toolhost/serve",
        )
    }
}

/// The server's limits: each flag's default is [`Limits`]'s own, and
/// `From` is the one place the flags become them.
#[derive(clap::Args, Clone, Copy)]
pub struct LimitArgs {
    /// Runs in their loop at once, in total.
    #[arg(long, default_value_t = Limits::default().runs_total)]
    pub max_runs: usize,
    /// Runs in their loop at once, per tenant.
    #[arg(long, default_value_t = Limits::default().runs_per_tenant)]
    pub max_runs_per_tenant: usize,
    /// Direct calls (POST /v1/runs/{id}/calls) in flight at once.
    #[arg(long, default_value_t = Limits::default().calls_in_flight)]
    pub max_calls: usize,
    /// Seconds a served run's call waits for a person's approval
    /// (POST /v1/runs/{id}/approvals/{callId}) before it is denied.
    #[arg(long, value_name = "SECONDS",
          default_value_t = Limits::default().approval_timeout.as_secs())]
    pub approval_timeout: u64,
    /// Seconds a run in host-commit mode waits for the chat app to answer
    /// a commit (POST /v1/runs/{id}/commits/{commitId}) before the model is
    /// told the reply was not saved.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..),
          default_value_t = Limits::default().host_commit_timeout.as_secs())]
    pub host_commit_timeout: u64,
    /// Seconds a connection has to send a whole request head, from its
    /// accept or its last answer: a slow or idle client is cut off.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..),
          default_value_t = Limits::default().request_head_timeout.as_secs())]
    pub request_head_timeout: u64,
    /// Seconds an MCP session may go without a request before it is
    /// closed and its place among the runs freed.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..),
          default_value_t = Limits::default().mcp_session_idle.as_secs())]
    pub mcp_session_idle: u64,
    /// Bad bearer tokens one client address may send within
    /// --token-attempt-window before its requests are answered 429
    /// (0: not counted).
    #[arg(long, value_name = "N", default_value_t = Limits::default().token_attempts)]
    pub token_attempts: u32,
    /// Seconds of the window --token-attempts counts in.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..),
          default_value_t = Limits::default().token_attempt_window.as_secs())]
    pub token_attempt_window: u64,
}

impl From<LimitArgs> for Limits {
    fn from(flags: LimitArgs) -> Self {
        Limits {
            runs_total: flags.max_runs,
            runs_per_tenant: flags.max_runs_per_tenant,
            calls_in_flight: flags.max_calls,
            approval_timeout: Duration::from_secs(flags.approval_timeout),
            host_commit_timeout: Duration::from_secs(flags.host_commit_timeout),
            request_head_timeout: Duration::from_secs(flags.request_head_timeout),
            mcp_session_idle: Duration::from_secs(flags.mcp_session_idle),
            token_attempts: flags.token_attempts,
            token_attempt_window: Duration::from_secs(flags.token_attempt_window),
            // No flag: the library's.
            ..Limits::default()
        }
    }
}

/// Where the served tools came from, watched while the server runs.
pub struct Watched {
    pub sources: crate::catalog_watch::Sources,
    /// `sources.fingerprint()` taken just before the tools were loaded.
    pub loaded_fingerprint: String,
}

pub async fn serve(host: ToolHost, args: ServiceArgs, watched: Watched) -> Result<ExitCode> {
    let data_dir = args
        .data_dir()
        .context("no data directory: give --data-dir (or set HOME)")?;
    // Absolute: a run's record names its chat by an absolute path, and a
    // chat's reservation must be the same key however the run was started.
    let data_dir = std::path::absolute(&data_dir)
        .with_context(|| format!("the data directory {}", data_dir.display()))?;
    let access = match &args.tokens {
        None => TenantAccess::Local,
        Some(path) => TenantAccess::Tokens(Tokens::load(path)?),
    };
    let models = match &args.models {
        Some(path) => ModelTable::load(path)?,
        None => ModelTable::empty(),
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("creating {}", data_dir.display()))?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(toolhost_serve::tls::server_config(cert, key)?),
        _ => None,
    };
    let options = ServeOptions {
        data_dir: data_dir.clone(),
        models,
        limits: args.limits.into(),
        durability: args.durability.into(),
        tls,
        host_names: args.host_names.clone(),
        allowed_origins: args.allowed_origins.clone(),
    };
    let host = Arc::new(host);
    let mut state = ServeState::new(Arc::clone(&host), access, args.listen, options)?;
    state.warm(&host);
    if let Some(url) = &args.cluster.cluster {
        let address = args.cluster.access.address(url)?;
        let (name, settings) = args.cluster.settings()?;
        let node_dir = match &args.cluster.node_dir {
            Some(dir) => dir.clone(),
            None => data_dir.join("nodes").join(name.as_str()),
        };
        std::fs::create_dir_all(&node_dir)
            .with_context(|| format!("creating {}", node_dir.display()))?;
        let cluster = toolhost_cluster::Cluster::connect(&address, name.clone(), settings).await?;
        let node =
            toolhost_serve::node::ClusterNode::join(cluster, node_dir, args.listen.to_string())
                .await?;
        // The address holds no secret: a URL with one was refused.
        eprintln!("toolhost serve: node {name} of the cluster at {address}");
        state = state.with_node(Arc::new(node));
    }
    let state = Arc::new(state);
    tokio::spawn(reload_on_hangup(
        Arc::clone(&state),
        watched.sources.clone(),
    ));
    tokio::spawn(crate::catalog_watch::watch(
        Arc::clone(&state),
        watched.sources,
        watched.loaded_fingerprint,
    ));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    eprintln!(
        "toolhost serve: {}://{} (data in {}, {} model(s)); Ctrl-C stops",
        state.scheme,
        args.listen,
        data_dir.display(),
        state.models.len()
    );
    if !state.origins.is_empty() {
        eprintln!(
            "toolhost serve: the pages of {} may use the API",
            state.origins.as_slice().join(", ")
        );
    }
    if state.node.is_some() {
        // The cluster holds the runs: interrupted ones come back through
        // its queue, to this node or another.
        tokio::spawn(toolhost_serve::node::work(Arc::clone(&state)));
    } else {
        pick_up_interrupted(&state, !args.no_resume).await;
    }
    let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(toolhost_serve::serve(listener, Arc::clone(&state), async {
        let _ = stopped_rx.await;
    }));
    stopped().await;
    eprintln!("toolhost serve: stopping; runs still going are left interrupted");
    state.interrupt_runs();
    let _ = stopped_tx.send(());
    match tokio::time::timeout(DRAIN, server).await {
        Ok(Ok(served)) => served?,
        Ok(Err(joined)) => return Err(joined.into()),
        Err(_) => {
            eprintln!("toolhost serve: requests still in flight after {DRAIN:?} were dropped")
        }
    }
    // The loops drop where they wait; give their tasks a moment to let go
    // of their run directories (and, on a cluster node, to hand the runs
    // back to the queue for another node).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let keeping = |state: &ServeState| state.node.as_ref().map_or(0, |node| node.keeping());
    while (!state.runs.all_live().is_empty() || keeping(&state) > 0)
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs a previous server left interrupted: resumed, or listed.
async fn pick_up_interrupted(state: &Arc<ServeState>, resume: bool) {
    let found = {
        let state = Arc::clone(state);
        tokio::task::spawn_blocking(move || toolhost_serve::runs::interrupted(&state))
            .await
            .unwrap_or_default()
    };
    for (tenant, id) in found {
        if !resume {
            eprintln!("toolhost serve: interrupted: {tenant}/{id} (POST /v1/runs/{id}/resume)");
            continue;
        }
        match toolhost_serve::runs::resume_run(state, &tenant, &id).await {
            Ok(()) => eprintln!("toolhost serve: resumed {tenant}/{id}"),
            Err(error) => eprintln!(
                "toolhost serve: {tenant}/{id} stays interrupted: {}: {}",
                error.code, error.message
            ),
        }
    }
}

/// On every SIGHUP, the tokens file and the tools read again; what does
/// not load stays as it was.
async fn reload_on_hangup(state: Arc<ServeState>, sources: crate::catalog_watch::Sources) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hangups) = signal(SignalKind::hangup()) else {
        tracing::warn!("SIGHUP cannot be watched: the tokens file is read only at start");
        return;
    };
    while hangups.recv().await.is_some() {
        match state.reload_tokens() {
            Ok(Some(count)) => {
                eprintln!("toolhost serve: tokens file read again: {count} token(s)")
            }
            Ok(None) => eprintln!("toolhost serve: SIGHUP ignored: no tokens file"),
            Err(error) => eprintln!("toolhost serve: the tokens stay as they were: {error}"),
        }
        crate::catalog_watch::reload(&state, &sources).await;
    }
}

/// Ctrl-C or SIGTERM.
async fn stopped() {
    let interrupt = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = interrupt => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = interrupt.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn parsed(flags: &[&str]) -> ServiceArgs {
        let cli = crate::Cli::try_parse_from([&["toolhost", "serve"], flags].concat())
            .expect("serve's flags parse");
        match cli.command {
            crate::Command::Serve(args) => args,
            _ => panic!("not serve"),
        }
    }

    #[test]
    fn no_limit_flag_gives_the_librarys_limits() {
        assert_eq!(Limits::from(parsed(&[]).limits), Limits::default());
    }

    #[test]
    fn each_limit_flag_lands_in_its_own_limit() {
        let args = parsed(&[
            "--max-runs=3",
            "--max-runs-per-tenant=5",
            "--max-calls=7",
            "--approval-timeout=11",
            "--host-commit-timeout=29",
            "--request-head-timeout=13",
            "--mcp-session-idle=17",
            "--token-attempts=19",
            "--token-attempt-window=23",
        ]);
        let expected = Limits {
            runs_total: 3,
            runs_per_tenant: 5,
            calls_in_flight: 7,
            approval_timeout: Duration::from_secs(11),
            host_commit_timeout: Duration::from_secs(29),
            request_head_timeout: Duration::from_secs(13),
            mcp_session_idle: Duration::from_secs(17),
            token_attempts: 19,
            token_attempt_window: Duration::from_secs(23),
            ..Limits::default()
        };
        assert_eq!(Limits::from(args.limits), expected);
    }
}
