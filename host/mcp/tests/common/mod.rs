//! server-everything, the real third-party MCP server the tests talk to.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The server's entry point, installing it when npm is there but it is not.
pub fn server_script() -> Option<PathBuf> {
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/peers/node");
    let script = peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let have = |program: &str| {
        std::process::Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success())
    };
    if !have("node") {
        eprintln!(
            "SKIPPED: node is not installed, so the MCP tests against server-everything cannot run"
        );
        return None;
    }
    if !script.exists() {
        assert!(
            have("npm"),
            "node is installed but npm is not; run `make setup`"
        );
        let status = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&peers)
            .status()
            .expect("npm ci");
        assert!(status.success(), "npm ci in tests/peers/node failed");
    }
    Some(script)
}

/// server-everything in its streamable-HTTP mode on a free 127.0.0.1 port,
/// listening when this returns; killed when the child is dropped.
pub async fn serve_http(script: &Path) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let child = tokio::process::Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the HTTP server");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (child, port);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("server-everything did not listen on {port}");
}
