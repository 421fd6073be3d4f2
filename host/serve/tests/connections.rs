//! The server's connections against slow and guessing clients: a request
//! head that never completes, or a keep-alive connection left idle, is cut
//! off after `request_head_timeout`; an address that presented too many bad
//! tokens is answered `429` with `Retry-After`, whatever token it sends,
//! until its window ends.

mod common;

use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toolhost_serve::{Limits, ModelTable};

/// Far beyond any timeout set here: the test only fails if the server
/// never closes the connection.
const GENEROUS: Duration = Duration::from_secs(30);

async fn serve(dir: &std::path::Path, limits: Limits) -> Server {
    serve_in(dir, ModelTable::empty(), limits).await
}

/// Read until the server closes the connection: what it sent.
async fn until_closed(stream: &mut tokio::net::TcpStream) -> String {
    let mut seen = Vec::new();
    let read = tokio::time::timeout(GENEROUS, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server kept the connection open");
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_that_never_completes_is_cut_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        request_head_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = serve(dir.path(), limits).await;
    let mut slow = tokio::net::TcpStream::connect(server.address)
        .await
        .expect("connect");
    slow.write_all(b"GET /v1/tools HT")
        .await
        .expect("half a line");
    until_closed(&mut slow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_cut_off_after_its_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        request_head_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = serve(dir.path(), limits).await;
    let mut idle = tokio::net::TcpStream::connect(server.address)
        .await
        .expect("connect");
    let request = format!(
        "GET /v1/tools HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer acme-secret\r\n\r\n",
        server.address
    );
    idle.write_all(request.as_bytes()).await.expect("a request");
    // The answer comes, then nothing more is asked: the connection closes.
    let seen = until_closed(&mut idle).await;
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_from_one_address_are_held_off_until_the_window_ends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        token_attempts: 3,
        token_attempt_window: Duration::from_secs(2),
        ..Limits::default()
    };
    let server = serve(dir.path(), limits).await;
    let tools = server.url("/v1/tools");
    let get = |token: &str| client().get(&tools).bearer_auth(token);
    // Good tokens count nothing.
    for _ in 0..5 {
        assert_eq!(refusal(get("acme-secret")).await.0, 200);
    }
    let unauthorized = (401, "serve.unauthorized".to_owned());
    for _ in 0..2 {
        assert_eq!(refusal(get("guess")).await, unauthorized);
    }
    // Without a token a request is no attempt.
    assert_eq!(refusal(client().get(&tools)).await, unauthorized);
    assert_eq!(refusal(get("guess")).await, unauthorized);
    let held = get("guess").send().await.expect("answer");
    assert_eq!(held.status().as_u16(), 429);
    let retry: u64 = held.headers()["retry-after"]
        .to_str()
        .expect("text")
        .parse()
        .expect("seconds");
    assert!((1..=2).contains(&retry), "{retry}");
    let (status, code) = refusal(get("acme-secret")).await;
    assert_eq!((status, code.as_str()), (429, "serve.too_many_attempts"));
    // The window over, the good token works again.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(refusal(get("acme-secret")).await.0, 200);
}
