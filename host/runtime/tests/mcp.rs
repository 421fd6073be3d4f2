//! MCP tools through the whole control plane: a real third-party server
//! (`@modelcontextprotocol/server-everything`, installed by `make setup`)
//! registered and refreshed, its tools in the catalog and the snapshot
//! under `mcp__<server>__<tool>` aliases, called by a scripted agent
//! through the gate and the journal. Skipped, loudly, only without node.

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use toolhost_core::Profile;
use toolhost_journal::{
    ContextAssembled, Durability, Event as _, ToolCallApprovalDecided, ToolCallApprovalRequested,
    ToolCallCompleted,
};
use toolhost_mcp::{McpRegistry, State, Transport};
use toolhost_model::SameModel;
use toolhost_runtime::{
    AgentDirectory, LoopSummary, Run, RunStatus, ToolHost, ToolHostConfig, run_agent_loop,
};

fn server_script() -> Option<PathBuf> {
    let ok = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !ok {
        eprintln!("SKIPPED: node is not installed, so the MCP tests cannot run");
        return None;
    }
    let script = fixtures()
        .join("../peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        script.exists(),
        "run `make setup` to install server-everything"
    );
    Some(script)
}

/// A registry in `dir` with server-everything registered and refreshed.
async fn registry(dir: &std::path::Path, script: &std::path::Path) -> McpRegistry {
    let mut registry = McpRegistry::load(dir).expect("registry");
    registry
        .add_allowing_all(
            "everything",
            Transport::Stdio {
                command: "node".into(),
                args: vec![script.display().to_string(), "stdio".into()],
                env: Default::default(),
            },
        )
        .expect("add");
    let registration = registry.find("everything").expect("found").clone();
    toolhost_mcp::refresh(&registry, &registration, Duration::from_secs(30))
        .await
        .expect("refresh");
    registry
}

fn mcp_profile(id: uuid::Uuid) -> Profile {
    mcp_profile_limited(id, 50_000)
}

fn mcp_profile_limited(id: uuid::Uuid, inline_limit: u32) -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "writer",
            "tools": {
                "allow": [
                    format!("mcp/{id}:echo"),
                    format!("mcp/{id}:get-sum"),
                    format!("mcp/{id}:trigger-long-running-operation"),
                    "workspace.read_file", "workspace.write_file", "workspace.commit",
                    "workspace.finish"
                ],
                "maxRounds": 5,
                "mcpResultInlineCharLimit": inline_limit
            }
        })
        .to_string(),
    )
    .expect("profile")
}

async fn run_mcp(
    fixture: &Fixture,
    registry: &McpRegistry,
    timeout: Duration,
    replies: Value,
) -> LoopSummary {
    run_mcp_with(fixture, registry, timeout, 50_000, replies).await
}

async fn run_mcp_with(
    fixture: &Fixture,
    registry: &McpRegistry,
    timeout: Duration,
    inline_limit: u32,
    replies: Value,
) -> LoopSummary {
    let host_config = ToolHostConfig {
        mcp_call_timeout: Some(timeout),
        ..ToolHostConfig::default()
    };
    let host = ToolHost::with_builtins(host_config)
        .expect("builtins")
        .with_mcp(registry)
        .expect("mcp tools");
    let id = registry.registrations()[0].id;
    let run = fixture.create_run(&mcp_profile_limited(id, inline_limit));
    let parts = parts_on(
        Arc::new(host),
        &run,
        Arc::new(SameModel(Arc::new(script(replies)))),
        AgentDirectory::default(),
    );
    run_agent_loop(&run, parts, &config()).await
}

#[tokio::test]
async fn an_agent_calls_mcp_tools_through_the_gate_and_the_journal() {
    let Some(server) = server_script() else {
        return;
    };
    let fixture = Fixture::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = registry(dir.path(), &server).await;
    let summary = run_mcp(
        &fixture,
        &registry,
        Duration::from_secs(30),
        json!([
            {"toolCalls": [
                call("m1", "mcp__everything__echo", json!({"message": "over the gate"})),
                call("m2", "mcp__everything__get-sum", json!({"a": 2, "b": 3})),
                call("m3", "mcp__everything__echo", json!({"message": 7}))
            ]},
            {"toolCalls": [write("w", REPLY), commit("c"), finish("f")]}
        ]),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let echo = fixture.tool_result("m1");
    assert_eq!(echo["content"], "Echo: over the gate");
    // The full CallToolResult is the audit fact.
    assert_eq!(echo["structured"]["content"][0]["type"], "text");
    assert!(
        fixture.tool_result("m2")["content"]
            .as_str()
            .expect("text")
            .contains('5')
    );
    // The server's own validation error is a recoverable result.
    let bad = fixture.tool_result("m3");
    assert_eq!(bad["errorCode"], "mcp.tool_error");
    let started: Vec<Value> = fixture.payloads(ToolCallCompleted::TYPE);
    assert!(
        started
            .iter()
            .any(|p| p["toolId"].as_str().is_some_and(|id| id.ends_with(":echo")))
    );
}

#[tokio::test]
async fn a_paused_server_is_refused_at_call_time_and_a_silent_one_fails_the_run() {
    let Some(server) = server_script() else {
        return;
    };
    let fixture = Fixture::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = registry(dir.path(), &server).await;
    // Paused after the host was built: the recheck before sending refuses.
    let paused_fixture = Fixture::new();
    let host = ToolHost::with_builtins(ToolHostConfig::default())
        .expect("builtins")
        .with_mcp(&registry)
        .expect("mcp tools");
    registry
        .set_state("everything", State::Paused)
        .expect("pause");
    let id = registry.registrations()[0].id;
    let paused_run = paused_fixture.create_run(&mcp_profile(id));
    let parts = parts_on(
        Arc::new(host),
        &paused_run,
        Arc::new(SameModel(Arc::new(script(json!([
            {"toolCalls": [call("p1", "mcp__everything__echo", json!({"message": "hi"}))]},
            {"toolCalls": [write("w", REPLY), commit("c"), finish("f")]}
        ]))))),
        AgentDirectory::default(),
    );
    let summary = run_agent_loop(&paused_run, parts, &config()).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(
        paused_fixture.tool_result("p1")["errorCode"],
        "mcp.server_unavailable"
    );

    // Sent and never answered in time: the outcome is unknown, the run fails.
    registry
        .set_state("everything", State::Active)
        .expect("resume");
    let summary = run_mcp(
        &fixture,
        &registry,
        Duration::from_secs(2),
        json!([{"toolCalls": [call("u1", "mcp__everything__trigger-long-running-operation",
            json!({"duration": 10, "steps": 5}))]}]),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Failed, "{summary:?}");
    assert_eq!(summary.code.as_deref(), Some("mcp.outcome_unknown"));
}

#[tokio::test]
async fn a_result_over_the_inline_limit_is_read_from_a_view_file() {
    let Some(server) = server_script() else {
        return;
    };
    let fixture = Fixture::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = registry(dir.path(), &server).await;
    let long = "lantern ".repeat(500);
    let summary = run_mcp_with(
        &fixture,
        &registry,
        Duration::from_secs(30),
        1_000,
        json!([
            {"toolCalls": [call("big", "mcp__everything__echo", json!({"message": long}))]},
            {"toolCalls": [call("read", "workspace_read_file",
                json!({"path": format!("tool-results/{}.view.txt", toolhost_journal::audit_stem("big"))}))]},
            {"toolCalls": [write("w", REPLY), commit("c"), finish("f")]}
        ]),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let big = fixture.tool_result("big");
    let content = big["content"].as_str().expect("content");
    assert!(
        content.starts_with("The result has 4005 characters, more than the 1000 shown inline"),
        "{content}"
    );
    assert!(content.contains("workspace_read_file"), "{content}");
    let preview = content
        .split("## Prefix preview\n")
        .nth(1)
        .expect("preview");
    // Never more than the inline limit.
    assert_eq!(preview.chars().count(), 1_000);
    assert_eq!(big["structured"]["externalized"], true);
    assert_eq!(big["structured"]["charCount"], 4005);
    // The whole answer is in the view, and the agent read it back.
    let view = std::fs::read_to_string(
        fixture
            .run_dir
            .join(big["structured"]["path"].as_str().expect("path")),
    )
    .expect("view file");
    // (The projection trims the text's trailing space.) The one long line
    // is hard-wrapped in the view, every part within a read's reach.
    assert_eq!(view.replace('\n', ""), format!("Echo: {}", long.trim_end()));
    assert_eq!(view.lines().count(), 2, "4005 characters at 3,000 a line");
    assert_eq!(fixture.tool_result("read")["isError"], false);
}

#[tokio::test]
async fn an_allowed_tool_of_a_paused_server_is_left_out_saying_why() {
    let Some(server) = server_script() else {
        return;
    };
    let fixture = Fixture::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = registry(dir.path(), &server).await;
    registry
        .set_state("everything", State::Paused)
        .expect("pause");
    let host = ToolHost::with_builtins(ToolHostConfig::default())
        .expect("builtins")
        .with_mcp(&registry)
        .expect("mcp");
    assert_eq!(host.mcp_omitted()[0].code, "mcp.server_paused");
    let id = registry.registrations()[0].id;
    let profile = mcp_profile(id);
    let run = Run::create(&fixture.run_dir, &profile, Durability::Batched).expect("run");
    let session = run
        .start_invocation(
            &profile,
            host.snapshot_sources(),
            "inv_root",
            toolhost_core::ExitPolicy::RunFinishAllowed,
        )
        .expect("session");
    let echo = session
        .diagnostics()
        .iter()
        .find(|d| d.tool_id.as_str().ends_with(":echo"))
        .expect("echo left out");
    assert_eq!(echo.message, "mcp.server_paused: the server is paused");
    // The journal's context_assembled carries the same reason.
    let assembled = fixture
        .events()
        .into_iter()
        .find(|event| event.r#type == ContextAssembled::TYPE)
        .expect(ContextAssembled::TYPE);
    assert!(
        assembled.payload["diagnostics"]
            .to_string()
            .contains("mcp.server_paused")
    );
}

#[tokio::test]
async fn a_cache_listing_a_tool_twice_leaves_that_tool_out_not_the_host() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    let id = registry
        .add_allowing_all(
            "twice",
            Transport::Stdio {
                command: "true".into(),
                args: vec![],
                env: Default::default(),
            },
        )
        .expect("add");
    let tool = json!({"name": "echo", "inputSchema": {"type": "object"}});
    let cache = json!({
        "schemaVersion": 1, "kind": "toolhost.mcpToolCache", "registrationId": id,
        "refreshedAt": "2026-12-03T00:00:00Z", "server": null,
        "tools": [tool, tool, {"name": "other", "inputSchema": {"type": "object"}}]
    });
    std::fs::create_dir_all(dir.path().join("cache")).expect("cache dir");
    std::fs::write(
        dir.path().join(format!("cache/{id}.json")),
        cache.to_string(),
    )
    .expect("cache");
    let host = ToolHost::with_builtins(ToolHostConfig::default())
        .expect("builtins")
        .with_mcp(&registry)
        .expect("a bad cache does not stop the host");
    let other: toolhost_core::ToolId = format!("mcp/{id}:other").parse().expect("id");
    assert!(host.catalog().get(&other).is_some());
    assert!(
        host.mcp_omitted()
            .iter()
            .any(|o| o.code == "mcp.catalog_conflict")
    );
}

/// An MCP tool whose registration says `ask` needs a person's approval:
/// frozen into the snapshot when it said so then, and required at the call
/// when it was switched to `ask` afterwards (the call-time recheck only
/// tightens). With no approver the call is denied and never sent.
#[tokio::test]
async fn an_ask_tool_waits_for_approval_even_when_switched_after_the_snapshot() {
    let Some(server) = server_script() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = registry(dir.path(), &server).await;
    let id = registry.registrations()[0].id;
    let replies = json!([
        {"toolCalls": [call("m1", "mcp__everything__echo", json!({"message": "may I"}))]},
        {"toolCalls": [write("w", REPLY), commit("c"), finish("f")]}
    ]);
    let run_under = |host: ToolHost, fixture: &Fixture| {
        let run = fixture.create_run(&mcp_profile(id));
        let parts = parts_on(
            Arc::new(host),
            &run,
            Arc::new(SameModel(Arc::new(script(replies.clone())))),
            AgentDirectory::default(),
        );
        async move { run_agent_loop(&run, parts, &config()).await }
    };
    let decided = |fixture: &Fixture| -> Value {
        fixture
            .events()
            .into_iter()
            .find(|event| {
                event.r#type == ToolCallApprovalDecided::TYPE && event.payload["callId"] == "m1"
            })
            .map(|event| event.payload)
            .expect("a decision on m1")
    };

    // Allowed when the snapshot was compiled, `ask` by the time of the call.
    let switched = Fixture::new();
    let host = ToolHost::with_builtins(ToolHostConfig::default())
        .expect("builtins")
        .with_mcp(&registry)
        .expect("mcp tools");
    McpRegistry::load(dir.path())
        .expect("registry")
        .grant("everything", "echo", toolhost_mcp::Permission::Ask)
        .expect("ask");
    run_under(host, &switched).await;
    let requested = switched
        .events()
        .into_iter()
        .find(|event| event.r#type == ToolCallApprovalRequested::TYPE)
        .expect("asked")
        .payload;
    assert!(
        requested["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("asks now")),
        "{requested}"
    );
    assert_eq!(decided(&switched)["decision"], "denied");
    assert_eq!(
        switched.tool_result("m1")["errorCode"],
        "agent.tool_denied_by_user"
    );

    // `ask` already when the snapshot was compiled: frozen into it.
    let frozen = Fixture::new();
    let registry = McpRegistry::load(dir.path()).expect("registry");
    let host = ToolHost::with_builtins(ToolHostConfig::default())
        .expect("builtins")
        .with_mcp(&registry)
        .expect("mcp tools");
    run_under(host, &frozen).await;
    let snapshot: Value = serde_json::from_str(
        &std::fs::read_to_string(
            frozen
                .run_dir
                .join("input/invocations/inv_root/tool_snapshot.json"),
        )
        .expect("snapshot"),
    )
    .expect("json");
    let echo = snapshot["decisions"]
        .as_array()
        .and_then(|all| {
            all.iter()
                .find(|d| d["toolId"].as_str().is_some_and(|id| id.ends_with(":echo")))
        })
        .cloned()
        .expect("echo decided");
    assert_eq!(echo["approvalRequired"], true, "{echo}");
    assert!(
        echo["reason"]
            .as_str()
            .is_some_and(|r| r.contains("permission Ask"))
    );
    assert_eq!(decided(&frozen)["decision"], "denied");
}
