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
use toolhost_journal::Durability;
use toolhost_runtime::ToolHost;
use toolhost_serve::{Limits, ModelTable, ServeOptions, ServeState, TenantAccess, Tokens};

/// How long requests in flight may take to finish once the server stops.
const DRAIN: Duration = Duration::from_secs(10);

pub struct ServiceArgs {
    pub listen: SocketAddr,
    pub tokens: Option<PathBuf>,
    pub models: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub limits: Limits,
    pub durability: Durability,
    /// Resume interrupted runs at start.
    pub resume: bool,
    /// PEM certificate chain and key: serve HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    pub host_names: Vec<String>,
    /// Where the tools come from: watched, and loaded again on a change.
    pub sources: crate::catalog_watch::Sources,
    /// `sources.fingerprint()` taken just before the tools were loaded.
    pub loaded_fingerprint: String,
    /// Be a node of a cluster (`--cluster`).
    pub cluster: crate::cluster::ClusterArgs,
}

pub async fn serve(host: ToolHost, args: ServiceArgs) -> Result<ExitCode> {
    let access = match &args.tokens {
        None => TenantAccess::Local,
        Some(path) => TenantAccess::Tokens(Tokens::load(path)?),
    };
    let models = match &args.models {
        Some(path) => ModelTable::load(path)?,
        None => ModelTable::empty(),
    };
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let tls = match &args.tls {
        Some((cert, key)) => Some(toolhost_serve::tls::server_config(cert, key)?),
        None => None,
    };
    let options = ServeOptions {
        data_dir: args.data_dir.clone(),
        models,
        limits: args.limits,
        durability: args.durability,
        tls,
        host_names: args.host_names.clone(),
    };
    let host = Arc::new(host);
    let mut state = ServeState::new(Arc::clone(&host), access, args.listen, options)?;
    state.warm(&host);
    if let Some(url) = &args.cluster.cluster {
        let address = args.cluster.access.address(url)?;
        let (name, settings) = args.cluster.settings()?;
        let node_dir = match &args.cluster.node_dir {
            Some(dir) => dir.clone(),
            None => args.data_dir.join("nodes").join(name.as_str()),
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
    tokio::spawn(reload_on_hangup(Arc::clone(&state), args.sources.clone()));
    tokio::spawn(crate::catalog_watch::watch(
        Arc::clone(&state),
        args.sources.clone(),
        args.loaded_fingerprint.clone(),
    ));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    eprintln!(
        "toolhost serve: {}://{} (data in {}, {} model(s)); Ctrl-C stops",
        state.scheme,
        args.listen,
        args.data_dir.display(),
        state.models.len()
    );
    if state.node.is_some() {
        // The cluster holds the runs: interrupted ones come back through
        // its queue, to this node or another.
        tokio::spawn(toolhost_serve::node::work(Arc::clone(&state)));
    } else {
        pick_up_interrupted(&state, args.resume).await;
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
