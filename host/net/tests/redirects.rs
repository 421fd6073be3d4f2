//! Redirects against real loopback servers: within the origin they are
//! followed; to another origin (here another port) nothing is sent there.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use toolhost_net::{ClientOptions, CrossOriginRedirect, client};

/// A one-route HTTP/1.1 server on 127.0.0.1: answers every request with
/// `respond(path)` and counts the connections it accepted. Stops with the
/// test's runtime.
async fn server(respond: fn(&str, u16) -> String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buffer = vec![0; 8192];
                let mut read = 0;
                while !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer[read..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read += n,
                    }
                }
                let head = String::from_utf8_lossy(&buffer[..read]).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let _ = stream.write_all(respond(&path, port).as_bytes()).await;
            });
        }
    });
    (port, seen)
}

fn redirect_to(location: &str) -> String {
    format!(
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

static OTHER_PORT: AtomicUsize = AtomicUsize::new(0);

#[tokio::test]
async fn a_redirect_to_another_origin_is_refused_before_anything_is_sent_there() {
    let (other, other_seen) = server(|_, _| ok("you should not be here")).await;
    OTHER_PORT.store(other as usize, Ordering::SeqCst);
    let (named, named_seen) = server(|_, _| {
        let other = OTHER_PORT.load(Ordering::SeqCst);
        redirect_to(&format!("http://127.0.0.1:{other}/steal"))
    })
    .await;
    let client = client(&ClientOptions::default()).unwrap();
    let error = client
        .post(format!("http://127.0.0.1:{named}/v1/messages"))
        .header("x-api-key", "secret-key")
        .send()
        .await
        .unwrap_err();
    let cause = std::error::Error::source(&error)
        .and_then(|source| source.downcast_ref::<CrossOriginRedirect>());
    assert!(cause.is_some(), "{error:?}");
    assert!(
        toolhost_net::error_chain(&error).contains("refusing to follow a redirect"),
        "{error}"
    );
    assert_eq!(named_seen.load(Ordering::SeqCst), 1);
    assert_eq!(
        other_seen.load(Ordering::SeqCst),
        0,
        "the other origin was reached"
    );
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed() {
    let (named, seen) = server(|path, port| {
        if path == "/final" {
            ok("here")
        } else {
            redirect_to(&format!("http://127.0.0.1:{port}/final"))
        }
    })
    .await;
    let client = client(&ClientOptions::default()).unwrap();
    let response = client
        .get(format!("http://127.0.0.1:{named}/start"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "here");
    assert_eq!(seen.load(Ordering::SeqCst), 2);
}

/// 301/302/303 would resend a POST as a GET without its body: refused,
/// even within the origin.
#[tokio::test]
async fn a_redirect_that_changes_the_method_is_refused() {
    let (named, seen) = server(|path, port| {
        if path == "/final" {
            ok("a GET answered")
        } else {
            format!(
                "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{port}/final\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        }
    })
    .await;
    let client = client(&ClientOptions::default()).unwrap();
    let error = client
        .post(format!("http://127.0.0.1:{named}/v1/messages"))
        .body("{}")
        .send()
        .await
        .unwrap_err();
    let text = toolhost_net::error_chain(&error);
    assert!(text.contains("only 307 and 308 are followed"), "{text}");
    assert_eq!(seen.load(Ordering::SeqCst), 1, "the GET was never sent");
}

#[test]
fn a_ca_file_that_is_not_pem_is_a_clear_error() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let path = dir.join("ca.pem");
    std::fs::write(&path, "not a certificate").unwrap();
    let options = ClientOptions {
        roots: toolhost_net::TrustRoots::CaFile(path.clone()),
        ..ClientOptions::default()
    };
    let error = client(&options).unwrap_err().to_string();
    assert!(error.contains("ca.pem"), "{error}");
    let missing = ClientOptions {
        roots: toolhost_net::TrustRoots::CaFile(dir.join("missing.pem")),
        ..ClientOptions::default()
    };
    assert!(
        client(&missing)
            .unwrap_err()
            .to_string()
            .contains("missing.pem")
    );
}
