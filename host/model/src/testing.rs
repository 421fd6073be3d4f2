//! A fake model provider for tests: an HTTP/1.1 server on 127.0.0.1 that
//! answers each request with the next canned response and keeps every
//! request it saw. Enabled by the `testing` feature; used by this crate's
//! loopback tests and by the runtime's and CLI's end-to-end runs.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl SeenRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

#[derive(Debug, Clone)]
pub struct Canned {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    /// A `Location` header (for a redirect).
    pub location: Option<String>,
}

impl Canned {
    pub fn json(body: String) -> Self {
        Self {
            status: 200,
            content_type: "application/json",
            body,
            location: None,
        }
    }
    pub fn sse(body: String) -> Self {
        Self {
            status: 200,
            content_type: "text/event-stream",
            body,
            location: None,
        }
    }
    /// `307 Temporary Redirect` to `location`.
    pub fn redirect(location: String) -> Self {
        Self {
            status: 307,
            content_type: "text/plain",
            body: String::new(),
            location: Some(location),
        }
    }
}

pub struct FakeProvider {
    pub base_url: String,
    pub seen: Arc<Mutex<Vec<SeenRequest>>>,
}

/// Serve `answers` in order, one per request, on a fresh loopback port.
pub async fn serve(answers: Vec<Canned>) -> FakeProvider {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let address = listener.local_addr().expect("address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        for answer in answers {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let request = read_request(&mut socket).await;
            record.lock().expect("lock").push(request);
            let reason = if answer.status == 200 { "OK" } else { "Error" };
            let location = answer
                .location
                .as_ref()
                .map_or(String::new(), |to| format!("location: {to}\r\n"));
            let head = format!(
                "HTTP/1.1 {} {reason}\r\ncontent-type: {}\r\ncontent-length: {}\r\n{location}connection: close\r\n\r\n",
                answer.status,
                answer.content_type,
                answer.body.len()
            );
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(answer.body.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    FakeProvider {
        base_url: format!("http://{address}/v1"),
        seen,
    }
}

async fn read_request(socket: &mut tokio::net::TcpStream) -> SeenRequest {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        let read = socket.read(&mut chunk).await.expect("read request");
        assert!(read > 0, "client closed before the headers ended");
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut start = lines.next().unwrap_or_default().split(' ');
    let method = start.next().unwrap_or_default().to_owned();
    let path = start.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(key, value)| (key.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(key, _)| key == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let read = socket.read(&mut chunk).await.expect("read body");
        assert!(read > 0, "client closed mid-body");
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = serde_json::from_slice(&buffer[head_end..head_end + length]).unwrap_or_default();
    SeenRequest {
        method,
        path,
        headers,
        body,
    }
}
