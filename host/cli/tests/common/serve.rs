//! `toolhost serve` as a process, for the tests that start one (through
//! `common`) and the cluster harness (`cluster.rs`, by path, which the
//! cluster bench shares): a free loopback port, the command line every
//! such server starts with, and a tenant's data directory seeded with the
//! fixture chat.

#![allow(dead_code)] // each user takes what it needs

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A loopback port nothing listens on now, for a server to take.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port()
}

/// `toolhost serve` on 127.0.0.1:`port`, its components cached in
/// `cache_dir`, its MCP servers and extensions in `mcp` and `extensions`
/// of its working directory; the caller adds the rest.
pub fn serve_command(cache_dir: &Path, port: u16) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command
        .arg("--cache-dir")
        .arg(cache_dir)
        .args(["--mcp-dir", "mcp", "--ext-dir", "extensions"])
        .arg("serve")
        .args(["--listen", &format!("127.0.0.1:{port}")]);
    command
}

/// Tenant `tenant`'s folder under `dir/data`, with its `chats` and
/// `profiles` folders and the fixture chat copied in as each of `chats`
/// (`chats/{name}.jsonl`).
pub fn tenant_with_chats<S: AsRef<str>>(
    dir: &Path,
    tenant: &str,
    chats: impl IntoIterator<Item = S>,
) -> PathBuf {
    let root = dir.join("data/tenants").join(tenant);
    for sub in ["chats", "profiles"] {
        std::fs::create_dir_all(root.join(sub)).expect("dirs");
    }
    for chat in chats {
        copy_fixture_chat(&root.join(format!("chats/{}.jsonl", chat.as_ref())));
    }
    root
}

/// The fixture chat (a long SillyTavern character chat) copied to `to`.
pub fn copy_fixture_chat(to: &Path) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/chats/long_character_chat.jsonl");
    std::fs::copy(&fixture, to).expect("copy the fixture chat");
}

/// One tool call of a model script's reply.
pub fn script_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// `models.json` in `dir`, naming one model, `script`, that plays
/// `script.json` beside it.
pub fn script_models(dir: &Path) {
    std::fs::write(
        dir.join("models.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.models",
               "models": {"script": {"kind": "script", "path": "script.json"}}})
        .to_string(),
    )
    .expect("models");
}
