//! `/mcp/{profile}` as the official MCP clients meet it: a fresh server
//! serves the built-in default profile at `/mcp/default`, a tenant's own
//! `default` profile comes first, and closing a session with `DELETE`
//! answers `204` (the Python SDK logs "Session termination failed: 202"
//! for anything but 200/204).

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

async fn serve(dir: &std::path::Path) -> Server {
    serve_in(dir, ModelTable::empty(), Limits::default()).await
}

/// Tenant `acme`'s profile `name` offering `tools`.
fn write_profile(dir: &std::path::Path, name: &str, tools: Value) {
    let dirs = TenantDirs::new(&dir.join("data"), "acme");
    dirs.ensure().expect("dirs");
    let profile = json!({"schemaVersion": 1, "kind": "toolhost.agentProfile",
                         "id": format!("{name}-profile"), "tools": tools});
    std::fs::write(
        dirs.profiles().join(format!("{name}.json")),
        profile.to_string(),
    )
    .expect("profile");
}

/// A legacy session at `path` (initialize, initialized); its id, or the
/// refusal's status and body.
async fn open(server: &Server, path: &str) -> Result<String, (u16, String)> {
    match mcp_open(server, path, "acme-secret", "mcp-interop-test").await {
        Ok(session) => Ok(session),
        Err(refused) => {
            let status = refused.status().as_u16();
            Err((status, refused.text().await.unwrap_or_default()))
        }
    }
}

/// The tool names the session is offered.
async fn tool_names(server: &Server, path: &str, session: &str) -> Vec<String> {
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let response = mcp_post(server, path, "acme-secret", Some(session), list)
        .send()
        .await
        .expect("tools/list");
    assert_eq!(response.status().as_u16(), 200);
    let answer = mcp_message(response).await;
    answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool list: {answer}"))
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

async fn delete(server: &Server, path: &str, session: &str) -> (u16, String) {
    let response = mcp_delete(server, path, "acme-secret", session)
        .send()
        .await
        .expect("delete");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_server_serves_the_built_in_default_profile_at_mcp_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(dir.path()).await;
    let session = open(&server, "/mcp/default")
        .await
        .expect("a session on the built-in default profile");
    let names = tool_names(&server, "/mcp/default", &session).await;
    // The default writer reads the workspace; dice stay off (its profile).
    assert!(
        names.iter().any(|name| name.contains("read_file")),
        "{names:?}"
    );
    assert!(!names.iter().any(|name| name.contains("dice")), "{names:?}");
    // Any other missing name is still unknown.
    let refused = open(&server, "/mcp/writer")
        .await
        .expect_err("no such profile");
    assert_eq!(refused.0, 404, "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_profile_named_default_comes_before_the_built_in_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_profile(
        dir.path(),
        "default",
        json!({"allow": ["dice.roll"], "maxRounds": 4}),
    );
    let server = serve(dir.path()).await;
    let session = open(&server, "/mcp/default").await.expect("a session");
    let names = tool_names(&server, "/mcp/default", &session).await;
    assert_eq!(names, ["dice_roll"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_answers_204_and_ends_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_profile(
        dir.path(),
        "roller",
        json!({"allow": ["dice.roll"], "maxRounds": 4}),
    );
    let server = serve(dir.path()).await;
    let session = open(&server, "/mcp/roller").await.expect("a session");
    let (status, body) = delete(&server, "/mcp/roller", &session).await;
    assert_eq!((status, body.as_str()), (204, ""));
    // The session is gone: the transport's answer to a stale id is 404.
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let response = mcp_post(&server, "/mcp/roller", "acme-secret", Some(&session), list)
        .send()
        .await
        .expect("tools/list");
    assert_eq!(response.status().as_u16(), 404);
}

/// A call finds its tool by the alias `tools/list` gave it, wherever it
/// sits in the profile; any other name — the canonical one included — is
/// unknown and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_finds_its_tool_by_its_alias_and_no_other_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_profile(
        dir.path(),
        "wide",
        json!({"allow": ["workspace.list_files", "skill.list", "dice.roll"], "maxRounds": 4}),
    );
    let server = serve(dir.path()).await;
    let session = open(&server, "/mcp/wide").await.expect("a session");
    let names = tool_names(&server, "/mcp/wide", &session).await;
    assert_eq!(names, ["workspace_list_files", "skill_list", "dice_roll"]);
    let call = |id: u64, name: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": name, "arguments": {"formula": "2d6"}}})
    };
    let response = mcp_post(
        &server,
        "/mcp/wide",
        "acme-secret",
        Some(&session),
        call(3, "dice_roll"),
    )
    .send()
    .await
    .expect("tools/call");
    let answer = mcp_message(response).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    for (id, name) in [(4, "dice.roll"), (5, "builtin:dice.roll"), (6, "dice_rol")] {
        let response = mcp_post(
            &server,
            "/mcp/wide",
            "acme-secret",
            Some(&session),
            call(id, name),
        )
        .send()
        .await
        .expect("tools/call");
        let answer = mcp_message(response).await;
        let error = answer["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(error, format!("unknown tool: {name}"), "{answer}");
    }
}
