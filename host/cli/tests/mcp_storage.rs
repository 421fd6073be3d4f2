//! A profile that allows no MCP tool never reads the MCP directory: with
//! its `registrations.json` corrupt and its `cache` not a directory, a run,
//! a call and a snapshot of such a profile go on and say nothing of MCP.
//! A profile that allows one still reads it (and is told every MCP tool is
//! left out).

use std::path::Path;
use std::process::Output;

use serde_json::json;

mod common;

use common::stderr;

fn toolhost(dir: &Path, args: &[&str]) -> Output {
    common::toolhost_in(dir)
        .arg("--mcp-dir")
        .arg(dir.join("mcp"))
        .args(args)
        .output()
        .expect("run toolhost")
}

fn call(id: &str, name: &str, arguments: serde_json::Value) -> serde_json::Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// A temp dir with broken MCP storage, a profile without MCP tools
/// (`plain.json`), one with an MCP tool (`mcp.json`), a chat and a script.
fn setup() -> tempfile::TempDir {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let mcp = dir.join("mcp");
    std::fs::create_dir(&mcp).expect("mcp dir");
    std::fs::write(mcp.join("registrations.json"), "{ not json").expect("corrupt");
    std::fs::write(mcp.join("cache"), "not a directory").expect("cache");
    let profile = |id: &str, allow: serde_json::Value| {
        json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": id,
               "tools": {"allow": allow, "maxRounds": 4}})
        .to_string()
    };
    let plain = json!([
        "dice.roll",
        "workspace.write_file",
        "workspace.commit",
        "workspace.finish"
    ]);
    std::fs::write(dir.join("plain.json"), profile("plain", plain)).expect("plain");
    let with_mcp = json!(["dice.roll", "mcp/6f1c2e4a-0b7d-4c1e-9a53-2d8e0f4b7a61:echo"]);
    std::fs::write(dir.join("mcp.json"), profile("with-mcp", with_mcp)).expect("mcp profile");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/chats/long_character_chat.jsonl"),
        dir.join("chat.jsonl"),
    )
    .expect("chat");
    let script = json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"toolCalls": [
            call("w", "workspace_write_file", json!({"path": "output/main.md", "content": "Dawn."})),
            call("c", "workspace_commit", json!({}))
        ]},
        {"toolCalls": [call("f", "workspace_finish", json!({"reason": "done"}))]}
    ]});
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    temp
}

const READ_MCP: &str = "every MCP tool is left out";

#[test]
fn a_profile_without_mcp_tools_runs_whatever_state_mcp_storage_is_in() {
    let temp = setup();
    let dir = temp.path();
    let run = toolhost(
        dir,
        &[
            "run",
            "--profile",
            "plain.json",
            "--model",
            "script:script.json",
            "--chat",
            "chat.jsonl",
            "--run-dir",
            "plain-run",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert!(!stderr(&run).contains(READ_MCP), "{}", stderr(&run));
    assert!(!stderr(&run).contains("mcp."), "{}", stderr(&run));

    let called = toolhost(
        dir,
        &[
            "call",
            "dice.roll",
            r#"{"formula":"1d6"}"#,
            "--profile",
            "plain.json",
        ],
    );
    assert_eq!(called.status.code(), Some(0), "{}", stderr(&called));
    assert!(!stderr(&called).contains(READ_MCP), "{}", stderr(&called));

    let snapshot = toolhost(dir, &["snapshot", "--profile", "plain.json"]);
    assert_eq!(snapshot.status.code(), Some(0), "{}", stderr(&snapshot));
    assert!(
        !stderr(&snapshot).contains(READ_MCP),
        "{}",
        stderr(&snapshot)
    );
}

#[test]
fn a_profile_with_an_mcp_tool_still_reads_mcp_storage() {
    let temp = setup();
    let snapshot = toolhost(temp.path(), &["snapshot", "--profile", "mcp.json"]);
    assert!(
        stderr(&snapshot).contains(READ_MCP),
        "{}",
        stderr(&snapshot)
    );
}
