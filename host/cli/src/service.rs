//! `toolhost serve`: the long-running host over HTTP (`toolhost-serve`),
//! on 127.0.0.1:7700 unless told otherwise, until Ctrl-C or SIGTERM; SIGHUP
//! reads the tokens file again.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use toolhost_runtime::ToolHost;
use toolhost_serve::{ServeState, TenantAccess, Tokens};

pub struct ServiceArgs {
    pub listen: SocketAddr,
    pub tokens: Option<PathBuf>,
}

pub async fn serve(host: ToolHost, args: ServiceArgs) -> Result<ExitCode> {
    let access = match &args.tokens {
        None => TenantAccess::Local,
        Some(path) => TenantAccess::Tokens(Tokens::load(path)?),
    };
    let state = Arc::new(ServeState::new(Arc::new(host), access, args.listen)?);
    tokio::spawn(reload_on_hangup(Arc::clone(&state)));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listen on {}", args.listen))?;
    eprintln!(
        "toolhost serve: http://{} (GET /v1/tools, /v1/openapi.json); Ctrl-C stops",
        args.listen
    );
    toolhost_serve::serve(listener, state, stopped()).await?;
    Ok(ExitCode::SUCCESS)
}

/// On every SIGHUP, the tokens file read again; one that does not load
/// leaves the tokens as they were.
async fn reload_on_hangup(state: Arc<ServeState>) {
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
