//! Against a real third-party MCP server: `@modelcontextprotocol/server-everything`
//! from npm (installed by `make setup` into tests/peers/node), started over
//! stdio. Skipped, loudly, only when node is not installed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolhost_mcp::{
    CallOutcome, McpRegistry, Permission, Registration, State, Transport, call_tool, offered_tools,
    project, refresh,
};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The server's entry point, installing it when npm is there but it is not.
fn server_script() -> Option<PathBuf> {
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

fn everything(script: &Path) -> Transport {
    Transport::Stdio {
        command: "node".into(),
        args: vec![script.display().to_string(), "stdio".into()],
        env: Default::default(),
    }
}

/// server-everything registered in a fresh directory (kept alive by the
/// returned guard).
fn registered(script: &Path) -> (tempfile::TempDir, Registration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    registry.add("everything", everything(script)).expect("add");
    let registration = registry.find("everything").expect("found").clone();
    (dir, registration)
}

fn arguments(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("object")
}

#[tokio::test]
async fn refresh_caches_the_tools_and_runs_are_offered_only_what_may_be_used() {
    let Some(script) = server_script() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("empty registry");
    let id = registry
        .add("everything", everything(&script))
        .expect("add");

    // Not refreshed yet: nothing offered, and the reason says what to do.
    let (offered, omitted) = offered_tools(&registry);
    assert!(offered.is_empty());
    assert_eq!(omitted[0].code, "mcp.no_tool_cache");

    let registration = registry.find("everything").expect("by name").clone();
    let cache = refresh(&registry, &registration, TIMEOUT)
        .await
        .expect("refresh");
    let names: Vec<&str> = cache.tools.iter().map(|tool| tool.name.as_str()).collect();
    for expected in [
        "echo",
        "get-sum",
        "get-structured-content",
        "get-tiny-image",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    assert!(dir.path().join(format!("cache/{id}.json")).exists());

    let (offered, _) = offered_tools(&registry);
    assert_eq!(offered.len(), cache.tools.len());
    let echo = offered
        .iter()
        .find(|tool| tool.tool.name == "echo")
        .expect("echo offered");
    assert_eq!(echo.descriptor.id.as_str(), format!("mcp/{id}:echo"));

    // Deny one tool, then pause the server: omitted with diagnostics.
    registry
        .grant("everything", "get-env", Permission::Deny)
        .expect("deny");
    let (offered, omitted) = offered_tools(&registry);
    assert!(!offered.iter().any(|tool| tool.tool.name == "get-env"));
    assert!(
        omitted
            .iter()
            .any(|o| o.code == "mcp.tool_denied" && o.tool.as_deref() == Some("get-env"))
    );
    registry
        .set_state(&id.to_string(), State::Paused)
        .expect("pause");
    let (offered, omitted) = offered_tools(&McpRegistry::load(dir.path()).expect("reload"));
    assert!(offered.is_empty());
    assert_eq!(omitted[0].code, "mcp.server_paused");
}

#[tokio::test]
async fn calls_project_text_structured_content_images_and_errors() {
    let Some(script) = server_script() else {
        return;
    };
    let (_dir, registration) = registered(&script);

    let CallOutcome::Completed(echo) = call_tool(
        &registration,
        "echo",
        arguments(json!({"message": "hi"})),
        TIMEOUT,
    )
    .await
    else {
        panic!("echo did not complete");
    };
    assert_eq!(project(&echo).content, "Echo: hi");

    let CallOutcome::Completed(structured) = call_tool(
        &registration,
        "get-structured-content",
        arguments(json!({"location": "New York"})),
        TIMEOUT,
    )
    .await
    else {
        panic!("get-structured-content did not complete");
    };
    let projected = project(&structured);
    assert!(
        projected.content.contains("## Details"),
        "{}",
        projected.content
    );

    let CallOutcome::Completed(image) =
        call_tool(&registration, "get-tiny-image", Map::new(), TIMEOUT).await
    else {
        panic!("get-tiny-image did not complete");
    };
    let projected = project(&image);
    assert!(
        projected.content.contains("## Notes\n- image (image/png"),
        "{}",
        projected.content
    );

    // An unknown tool: this server answers with an isError result.
    match call_tool(&registration, "no-such-tool", Map::new(), TIMEOUT).await {
        CallOutcome::Completed(result) => assert!(project(&result).is_error),
        CallOutcome::Failed(info) => assert_eq!(info.code, "mcp.request_failed"),
        CallOutcome::Unknown(info) => panic!("unexpected unknown outcome: {info:?}"),
    }
}

#[tokio::test]
async fn a_call_that_outlives_its_timeout_has_an_unknown_outcome() {
    let Some(script) = server_script() else {
        return;
    };
    let (_dir, registration) = registered(&script);
    let outcome = call_tool(
        &registration,
        "trigger-long-running-operation",
        arguments(json!({"duration": 10, "steps": 5})),
        Duration::from_secs(3),
    )
    .await;
    match outcome {
        CallOutcome::Unknown(info) => assert_eq!(info.code, "mcp.timeout"),
        other => panic!("expected an unknown outcome, got {other:?}"),
    }
}

#[test]
fn the_registry_round_trips_and_refuses_a_broken_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("empty");
    let transport = Transport::Stdio {
        command: "node".into(),
        args: vec!["server.js".into()],
        env: [("TOKEN".to_owned(), "x".to_owned())].into(),
    };
    let id = registry.add("notes", transport.clone()).expect("add");
    assert_eq!(
        registry
            .add("notes", transport.clone())
            .expect_err("twice")
            .code(),
        "mcp.invalid_registration"
    );
    registry
        .grant("notes", "delete", Permission::Ask)
        .expect("grant");
    let reloaded = McpRegistry::load(dir.path()).expect("reload");
    let notes = reloaded.find(&id.to_string()).expect("by id");
    assert_eq!(notes.transport, transport);
    assert_eq!(notes.permission("delete"), Permission::Ask);
    assert_eq!(notes.permission("read"), Permission::Allow);
    assert_eq!(
        reloaded.find("nope").expect_err("missing").code(),
        "mcp.not_registered"
    );

    let mut registry = reloaded;
    registry.remove("notes").expect("remove");
    assert!(
        McpRegistry::load(dir.path())
            .expect("reload")
            .registrations()
            .is_empty()
    );

    std::fs::write(
        dir.path().join("registrations.json"),
        "{\"schemaVersion\":1}",
    )
    .expect("break");
    assert_eq!(
        McpRegistry::load(dir.path()).expect_err("broken").code(),
        "mcp.registry_invalid"
    );
}

#[tokio::test]
async fn streamable_http_reaches_a_loopback_server_and_nothing_else() {
    let Some(script) = server_script() else {
        return;
    };
    // A free port, then the server's streamable-HTTP mode on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut child = tokio::process::Command::new("node")
        .arg(&script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the HTTP server");
    // Wait until it listens.
    let mut ready = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "server-everything did not listen on {port}");

    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    registry
        .add(
            "everything-http",
            Transport::Http {
                url: format!("http://127.0.0.1:{port}/mcp"),
            },
        )
        .expect("add");
    let registration = registry.find("everything-http").expect("found").clone();
    let cache = refresh(&registry, &registration, TIMEOUT)
        .await
        .expect("refresh over HTTP");
    assert!(cache.tools.iter().any(|tool| tool.name == "echo"));
    let CallOutcome::Completed(echo) = call_tool(
        &registration,
        "echo",
        arguments(json!({"message": "over http"})),
        TIMEOUT,
    )
    .await
    else {
        panic!("echo over HTTP did not complete");
    };
    assert_eq!(project(&echo).content, "Echo: over http");
    child.kill().await.ok();

    registry
        .add(
            "remote",
            Transport::Http {
                url: "http://example.com/mcp".into(),
            },
        )
        .expect("add");
    let remote = registry.find("remote").expect("found").clone();
    match call_tool(&remote, "echo", Map::new(), TIMEOUT).await {
        CallOutcome::Failed(info) => assert_eq!(info.code, "mcp.transport_unsupported"),
        other => panic!("a remote URL must not be reached: {other:?}"),
    }
    assert!(toolhost_mcp::client::is_loopback("http://[::1]:8080/mcp"));
    assert!(toolhost_mcp::client::is_loopback("http://localhost/mcp"));
    assert!(!toolhost_mcp::client::is_loopback(
        "http://127.0.0.1.evil.com/mcp"
    ));
    assert!(!toolhost_mcp::client::is_loopback("https://127.0.0.1/mcp"));
}

#[tokio::test]
async fn a_stdio_server_gets_its_registered_env_but_none_of_toolhosts_secrets() {
    let Some(script) = server_script() else {
        return;
    };
    assert!(
        std::env::var_os("CARGO_MANIFEST_DIR").is_some(),
        "cargo sets it for tests"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    registry
        .add(
            "everything",
            Transport::Stdio {
                command: "node".into(),
                args: vec![script.display().to_string(), "stdio".into()],
                env: [("GRANTED_TOKEN".to_owned(), "granted-value".to_owned())].into(),
            },
        )
        .expect("add");
    let registration = registry.find("everything").expect("found").clone();
    let CallOutcome::Completed(env) =
        call_tool(&registration, "get-env", Map::new(), TIMEOUT).await
    else {
        panic!("get-env did not complete");
    };
    let text = project(&env).content;
    assert!(text.contains("granted-value"), "{text}");
    // toolhost's own environment (here: cargo's variables) stays home.
    assert!(!text.contains("CARGO_MANIFEST_DIR"), "{text}");
}
