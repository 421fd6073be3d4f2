//! The SillyTavern extension (`clients/sillytavern`) in a real browser
//! against real `toolhost serve` processes with a tokens file: one lets
//! the harness page's origin in (`--allow-origin`), one does not.
//! `tests/sillytavern/extension.py` serves the harness page, drives
//! Debian's chromium through Selenium and checks each flow (see its
//! docstring). Skipped, loudly, only where the browser or Selenium is not
//! installed.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Stdio;

use serde_json::{Value, json};

mod common;

use common::browser::{Process, browser, run_browser_test};
use common::repo;
use common::serve::{free_port, script_call as call, serve_command};

const TOKEN: &str = "tavern-secret";
const REPLY_A: &str = "*Mirelle trims the wick.* There. It will burn till dawn.";
const REPLY_B: &str = "*Mirelle squints at the reeds.* A boat, running without lights.";
const REPLY_C: &str = "*Mirelle strikes the match.* Then we light it now.";

/// A script that writes `reply` and commits it, after rolling a die when
/// `roll` (a call the tenant's policy makes wait for approval).
fn script(prefix: &str, reply: &str, roll: bool) -> Value {
    let mut replies = Vec::new();
    if roll {
        replies.push(json!({"toolCalls": [
            call(&format!("{prefix}-roll"), "dice_roll", json!({"formula": "1d20"}))]}));
    }
    replies.push(json!({"toolCalls": [
        call(&format!("{prefix}-write"), "workspace_write_file",
             json!({"path": "output/main.md", "content": reply})),
        call(&format!("{prefix}-commit"), "workspace_commit", json!({}))]}));
    replies.push(json!({"toolCalls": [
        call(&format!("{prefix}-finish"), "workspace_finish", json!({"reason": "done"}))]}));
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": replies})
}

/// The built-in writer delegates a search to `researcher`, awaits it, then
/// writes and commits `REPLY_A`.
fn delegating() -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript",
        "replies": [
            {"toolCalls": [call("d-delegate", "agent_delegate", json!({"agentId": "researcher",
                "task": {"objective": "Find the boat.", "expectedOutput": "A fact."}}))]},
            {"toolCalls": [call("d-await", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 60000}))]},
            {"toolCalls": [
                call("d-write", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY_A})),
                call("d-commit", "workspace_commit", json!({}))]},
            {"toolCalls": [call("d-finish", "workspace_finish", json!({"reason": "done"}))]}
        ],
        "agents": {"researcher": [
            {"toolCalls": [call("d-search", "chat_search", json!({"query": "boat", "limit": 3}))]},
            {"toolCalls": [call("d-return", "task_return", json!({"summary": "A boat without lights.",
                "confidence": "medium"}))]}
        ]}
    })
}

/// Commits `REPLY_A`, rolls a die (waiting for approval), then commits
/// `REPLY_B` over it and finishes.
fn twice() -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"toolCalls": [
            call("t-write", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY_A})),
            call("t-commit", "workspace_commit", json!({}))]},
        {"toolCalls": [call("t-roll", "dice_roll", json!({"formula": "1d20"}))]},
        {"toolCalls": [
            call("t-write2", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY_B})),
            call("t-commit2", "workspace_commit", json!({}))]},
        {"toolCalls": [call("t-finish", "workspace_finish", json!({"reason": "done"}))]}
    ]})
}

/// Tenant `tavern`: a `writer` profile and the demo's `researcher`, a
/// policy asking approval for every die rolled, five scripted models and
/// the tokens file.
fn setup(dir: &Path) {
    let tenant = dir.join("data/tenants/tavern");
    std::fs::create_dir_all(tenant.join("profiles")).expect("dirs");
    std::fs::copy(
        repo("examples/demo/agents/researcher.json"),
        tenant.join("profiles/researcher.json"),
    )
    .expect("researcher");
    std::fs::write(
        tenant.join("profiles/writer.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
               "tools": {"allow": ["dice.roll", "workspace.write_file", "workspace.commit",
                                   "workspace.finish"], "maxRounds": 6}})
        .to_string(),
    )
    .expect("profile");
    std::fs::write(
        tenant.join("policy.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy", "requireApproval": ["dice.roll"]})
            .to_string(),
    )
    .expect("policy");
    let mut models = serde_json::Map::new();
    for (name, script) in [
        ("script", script("script", REPLY_A, false)),
        ("swiper", script("swiper", REPLY_B, false)),
        ("careful", script("careful", REPLY_C, true)),
        ("delegating", delegating()),
        ("twice", twice()),
    ] {
        std::fs::write(dir.join(format!("{name}.json")), script.to_string()).expect("script");
        models.insert(
            name.to_owned(),
            json!({"kind": "script", "path": format!("{name}.json")}),
        );
    }
    std::fs::write(
        dir.join("models.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.models", "models": models}).to_string(),
    )
    .expect("models");
    let tokens = dir.join("tokens.json");
    std::fs::write(
        &tokens,
        json!({"schemaVersion": 1, "kind": "toolhost.tokens", "tokens": [
            {"tenant": "tavern", "sha256": toolhost_serve::token_digest(TOKEN)}]})
        .to_string(),
    )
    .expect("tokens");
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).expect("chmod");
}

/// A server on `port` over `data`, letting `allow`'s pages in.
fn serve(dir: &Path, port: u16, data: &str, allow: Option<&str>) -> Process {
    let mut command = serve_command(
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("sillytavern-cache"),
        port,
    );
    command
        .current_dir(dir)
        .args(["--models", "models.json", "--tokens", "tokens.json"])
        .args(["--data-dir", data])
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("TOOLHOST_POLICY")
        .stdin(Stdio::null());
    if let Some(origin) = allow {
        command.args(["--allow-origin", origin]);
    }
    Process(command.spawn().expect("toolhost serve"))
}

#[test]
fn the_extension_replies_swipes_and_asks_for_approval_in_a_real_browser() {
    let Some(python) = browser() else {
        return;
    };
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    setup(dir);
    let (allowing, refusing, closed, page) = (free_port(), free_port(), free_port(), free_port());
    let origin = format!("http://127.0.0.1:{page}");
    let _allowing = serve(dir, allowing, "data", Some(&origin));
    let _refusing = serve(dir, refusing, "data-refusing", None);
    let (toolhost, refusing, closed) = (
        format!("http://127.0.0.1:{allowing}"),
        format!("http://127.0.0.1:{refusing}"),
        format!("http://127.0.0.1:{closed}"),
    );
    let repo_root = repo("");
    run_browser_test(
        &python,
        "tests/sillytavern/extension.py",
        &[
            "--repo",
            &repo_root.to_string_lossy(),
            "--page-port",
            &page.to_string(),
            "--toolhost",
            &toolhost,
            "--refusing",
            &refusing,
            "--closed",
            &closed,
            "--token",
            TOKEN,
        ],
        "sillytavern-screenshots",
        &[
            "sillytavern-origin-refused.png",
            "sillytavern-settings.png",
            "sillytavern-reply.png",
            "sillytavern-approval.png",
            "sillytavern-delegation.png",
        ],
    );
    // The chat the app sent came to the tenant's chats, as the app had it.
    let chats: Vec<_> = std::fs::read_dir(dir.join("data/tenants/tavern/chats"))
        .expect("chats")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".jsonl"))
        .collect();
    assert_eq!(chats.len(), 1, "one SillyTavern chat, one name: {chats:?}");
    assert!(
        chats[0].starts_with("st-Mirelle-2026-12-07-09h12m03s-"),
        "{chats:?}"
    );
}
