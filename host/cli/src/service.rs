//! `toolhost serve`: the long-running host over HTTP (`toolhost-serve`),
//! on 127.0.0.1:7700 unless told otherwise, until Ctrl-C or SIGTERM.

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
