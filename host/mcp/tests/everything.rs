//! Against a real third-party MCP server: `@modelcontextprotocol/server-everything`
//! from npm (installed by `make setup` into tests/peers/node), started over
//! stdio. Skipped, loudly, only when node is not installed.

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolhost_mcp::{
    CallOutcome, McpRegistry, Permission, Registration, State, Transport, call_tool, offered_tools,
    project, refresh,
};

mod common;

use common::{TIMEOUT, server_script};

/// A streamable-HTTP transport to `url`, no secret, the system's roots.
fn http(url: impl Into<String>) -> Transport {
    Transport::Http {
        url: url.into(),
        auth_env: None,
        ca_file: None,
    }
}

/// Register `transport` as `name` and return the registration.
fn add(registry: &mut McpRegistry, name: &str, transport: Transport) -> Registration {
    registry.add_allowing_all(name, transport).expect("add");
    registry.find(name).expect("found").clone()
}

fn everything(script: &Path) -> Transport {
    everything_with_env(script, &[])
}

/// server-everything over stdio with the extra variables `env`.
fn everything_with_env(script: &Path, env: &[(&str, &str)]) -> Transport {
    Transport::Stdio {
        command: "node".into(),
        args: vec![script.display().to_string(), "stdio".into()],
        env: env
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
    }
}

/// server-everything registered in a fresh directory (kept alive by the
/// returned guard).
fn registered(script: &Path) -> (tempfile::TempDir, Registration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    registry
        .add_allowing_all("everything", everything(script))
        .expect("add");
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
        .add_allowing_all("everything", everything(&script))
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
    // The SDK sends the same JSON as text and as structuredContent: the
    // model reads it once, the audit keeps both.
    let projected = project(&structured);
    assert!(
        !projected.content.contains("## Details"),
        "{}",
        projected.content
    );
    let shown: Value = serde_json::from_str(&projected.content).expect("the text, as sent");
    assert_eq!(shown, structured["structuredContent"]);
    assert_eq!(projected.content.matches("Cloudy").count(), 1);

    let CallOutcome::Completed(image) =
        call_tool(&registration, "get-tiny-image", Map::new(), TIMEOUT).await
    else {
        panic!("get-tiny-image did not complete");
    };
    let projected = project(&image);
    assert!(
        projected
            .content
            .contains("## Notes\n- image (image/png, not shown)"),
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
    let id = registry
        .add_allowing_all("notes", transport.clone())
        .expect("add");
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
    let (mut child, port) = common::serve_http(&script).await;

    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    let registration = add(
        &mut registry,
        "everything-http",
        http(format!("http://127.0.0.1:{port}/mcp")),
    );
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

    // Plain http:// to another machine, or a URL whose "loopback" part is
    // really a user name (`http://127.0.0.1:1@OTHER-HOST/`), is refused
    // when registered…
    for url in [
        "http://example.com/mcp".to_owned(),
        "http://127.0.0.1:1@example.com/mcp".to_owned(),
        format!("http://127.0.0.1:1@127.0.0.1:{port}/mcp"),
    ] {
        let error = registry.add("remote", http(url.clone())).expect_err(&url);
        assert!(
            matches!(
                error.code(),
                "mcp.transport_unsupported" | "mcp.invalid_registration"
            ),
            "{url}: {error}"
        );
    }
}

/// A registrations file edited by hand to hold a URL with userinfo is
/// refused at call time too, and nothing listening where it points is
/// reached.
#[tokio::test]
async fn a_hand_edited_userinfo_url_reaches_nothing() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    add(
        &mut registry,
        "local",
        http(format!("http://127.0.0.1:{port}/mcp")),
    );
    let path = dir.path().join("registrations.json");
    let text = std::fs::read_to_string(&path).expect("registry");
    let edited = text.replace(
        &format!("http://127.0.0.1:{port}/mcp"),
        &format!("http://127.0.0.1:1@127.0.0.1:{port}/mcp"),
    );
    std::fs::write(&path, edited).expect("edit");
    let registry = McpRegistry::load(dir.path()).expect("reload");
    let registration = registry.find("local").expect("found").clone();
    match call_tool(&registration, "echo", Map::new(), TIMEOUT).await {
        CallOutcome::Failed(info) => {
            assert_eq!(info.code, "mcp.invalid_registration", "{}", info.message)
        }
        other => panic!("a userinfo URL must not be reached: {other:?}"),
    }
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the listener was reached");
}

/// Two processes changing the registry at once (here eight threads with
/// their own loaded copies) never lose a change.
#[test]
fn concurrent_grants_are_all_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    McpRegistry::load(dir.path())
        .expect("empty")
        .add_allowing_all(
            "notes",
            Transport::Stdio {
                command: "node".into(),
                args: vec![],
                env: Default::default(),
            },
        )
        .expect("add");
    std::thread::scope(|scope| {
        for thread in 0..8 {
            let dir = dir.path();
            scope.spawn(move || {
                let mut registry = McpRegistry::load(dir).expect("load");
                for tool in 0..5 {
                    registry
                        .grant("notes", &format!("tool-{thread}-{tool}"), Permission::Deny)
                        .expect("grant");
                }
            });
        }
    });
    let registry = McpRegistry::load(dir.path()).expect("reload");
    assert_eq!(registry.find("notes").expect("notes").permissions.len(), 40);
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
        .add_allowing_all(
            "everything",
            everything_with_env(&script, &[("GRANTED_TOKEN", "granted-value")]),
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

/// A streamable-HTTP server that answers with a redirect to another origin
/// never gets the request (or its Authorization secret) sent there.
#[tokio::test]
async fn a_redirect_to_another_origin_is_not_followed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let elsewhere_port = elsewhere.local_addr().expect("addr").port();
    let named = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let named_port = named.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = named.accept().await {
            let mut buffer = vec![0; 16 * 1024];
            let _ = stream.read(&mut buffer).await;
            let answer = format!(
                "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{elsewhere_port}/mcp\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    let registration = add(
        &mut registry,
        "redirecting",
        Transport::Http {
            url: format!("http://127.0.0.1:{named_port}/mcp"),
            // Cargo sets it for every test process: a secret that must not
            // follow the redirect.
            auth_env: Some("CARGO_PKG_NAME".into()),
            ca_file: None,
        },
    );
    let error = refresh(&registry, &registration, TIMEOUT)
        .await
        .expect_err("a cross-origin redirect");
    assert_eq!(error.code(), "mcp.connect_failed", "{error}");
    assert!(
        error.to_string().contains("refusing to follow a redirect"),
        "{error}"
    );
    let reached = tokio::time::timeout(Duration::from_millis(200), elsewhere.accept()).await;
    assert!(reached.is_err(), "the other origin was reached");
}
