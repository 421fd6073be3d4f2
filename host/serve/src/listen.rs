//! Serving the accepted connections (plain TCP or TLS streams) over
//! HTTP/1.1 with hyper, each in a task of its own.
//!
//! `axum::serve` gives no hold on hyper's settings, so a client could keep
//! a connection forever by sending its request a byte at a time, or by
//! sending nothing on a keep-alive connection. Here hyper's header-read
//! timer bounds both: it runs whenever a connection waits for a request's
//! headers — from its accept, and again after each response — and cuts the
//! connection when the headers are not all in by
//! `Limits::request_head_timeout`. A request in flight is not timed (a tool
//! call or an event stream may rightly take long).
//!
//! Each request carries its client's address (`ConnectInfo<SocketAddr>`):
//! the guard counts failed tokens by it.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::serve::Listener;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;
use tower_service::Service as _;

/// Serve `app` on `listener` until `shutdown` resolves; then stop
/// accepting, let every connection finish its request in flight, and
/// return once all are closed.
pub(crate) async fn serve_on<L>(
    mut listener: L,
    app: Router,
    head_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    L: Listener<Addr = SocketAddr>,
{
    let (stop, stopping) = watch::channel(false);
    // Every connection task holds a receiver; the sender closes when the
    // last one is dropped.
    let (open, _) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request| {
            request.extensions_mut().insert(ConnectInfo(peer));
            // A router is always ready; a clone per request is cheap.
            let mut app = app.clone();
            async move { app.call(request).await }
        });
        let mut stopping = stopping.clone();
        let held = open.subscribe();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(head_timeout);
            let connection = builder
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            let mut connection = std::pin::pin!(connection);
            let mut told = false;
            loop {
                tokio::select! {
                    served = connection.as_mut() => {
                        if let Err(error) = served {
                            tracing::debug!(%peer, "connection ended: {error}");
                        }
                        break;
                    }
                    _ = stopping.changed(), if !told => {
                        // Stopping (or the server gone): finish the
                        // request in flight, take no other.
                        told = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(held);
        });
    }
    drop(listener);
    let _ = stop.send(true);
    open.closed().await;
}
