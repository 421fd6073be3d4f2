//! `toolhost serve` as a process: driven by a host application in another
//! language (Python: httpx for the JSON API, the official MCP client over
//! streamable HTTP), stopped with SIGTERM in the middle of a run and
//! started again, which resumes the run to its end.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_journal::{Event as _, RunCompleted, RunStarted, TERMINAL_EVENTS};

mod common;

use common::repo;
use common::serve::{free_port, script_call, serve_command, tenant_with_chats};

/// The component cache every server of this file shares.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-cache")
}

fn sha256_hex(text: &str) -> String {
    let output = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8_lossy(&output.stdout)[..64].to_owned()
}

const REPLY: &str = "*Mirelle folds the map.* Then we leave at dawn.";

/// A data directory for tenants `acme` and `globex` (the fixture chat as
/// `chat`, a `writer` profile), a tokens file and a models file.
struct Setup {
    dir: tempfile::TempDir,
    /// A model server that never answers, for a run that stays in its loop.
    silent: TcpListener,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for tenant in ["acme", "globex"] {
            let root = tenant_with_chats(dir.path(), tenant, ["chat"]);
            std::fs::write(
                root.join("profiles/writer.json"),
                json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
                       "tools": {"allow": ["workspace.write_file", "workspace.read_file",
                                           "workspace.commit", "workspace.finish", "dice.roll"],
                                 "maxRounds": 6}})
                .to_string(),
            )
            .expect("profile");
        }
        let call = script_call;
        std::fs::write(
            dir.path().join("script.json"),
            json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
                {"toolCalls": [
                    call("c1", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY})),
                    call("c2", "workspace_commit", json!({}))]},
                {"toolCalls": [call("c3", "workspace_finish", json!({"reason": "done"}))]}
            ]})
            .to_string(),
        )
        .expect("script");
        let tokens = dir.path().join("tokens.json");
        std::fs::write(
            &tokens,
            json!({"schemaVersion": 1, "kind": "toolhost.tokens", "tokens": [
                {"tenant": "acme", "sha256": sha256_hex("acme-secret")},
                {"tenant": "globex", "sha256": sha256_hex("globex-secret")}]})
            .to_string(),
        )
        .expect("tokens");
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
        let setup = Self { dir, silent };
        setup.write_models(false);
        setup
    }

    /// `silent` is the model that never answers, or (`answers`) the script.
    fn write_models(&self, answers: bool) {
        let silent = if answers {
            json!({"kind": "script", "path": "script.json"})
        } else {
            let address = self.silent.local_addr().expect("address");
            json!({"kind": "openai", "url": format!("http://{address}/v1"), "model": "m"})
        };
        std::fs::write(
            self.dir.path().join("models.json"),
            json!({"schemaVersion": 1, "kind": "toolhost.models", "models": {
                "demo": {"kind": "script", "path": "script.json"},
                "silent": silent}})
            .to_string(),
        )
        .expect("models");
    }

    /// `toolhost serve` on a free loopback port; its base URL.
    fn serve(&self) -> (Server, String) {
        let port = free_port();
        let path = |name: &str| self.dir.path().join(name);
        let child = serve_command(&cache_dir(), port)
            .arg("--tokens")
            .arg(path("tokens.json"))
            .arg("--models")
            .arg(path("models.json"))
            .arg("--data-dir")
            .arg(path("data"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .spawn()
            .expect("toolhost serve");
        (Server(Some(child)), format!("http://127.0.0.1:{port}"))
    }
}

/// The server process; killed if a test ends without stopping it.
struct Server(Option<Child>);

impl Server {
    /// SIGTERM, then its exit status.
    fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    get_json(base, "acme-secret", path).await
}

/// `GET path` as the tenant whose token is `token`.
async fn get_json(base: &str, token: &str, path: &str) -> (u16, Value) {
    let response = client()
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Wait until the server answers (it loads and compiles its tools first).
async fn ready(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        if let Ok(response) = client()
            .get(format!("{base}/v1/tools"))
            .bearer_auth("acme-secret")
            .send()
            .await
            && response.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("toolhost serve did not answer at {base}");
}

async fn wait_for(base: &str, id: &str, what: impl Fn(&Value) -> bool) -> Value {
    wait_for_as(base, "acme-secret", id, what).await
}

/// [`wait_for`] a run of the tenant whose token is `token`.
async fn wait_for_as(base: &str, token: &str, id: &str, what: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, run) = get_json(base, token, &format!("/v1/runs/{id}")).await;
        if what(&run) {
            return run;
        }
        assert!(Instant::now() < deadline, "run {id}: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_host_drives_runs_over_http_and_tools_over_mcp() {
    let Some(python) = common::python(&["mcp", "httpx"]) else {
        return;
    };
    let setup = Setup::new();
    let (_server, base) = setup.serve();
    ready(&base).await;
    let url = base.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(repo("tests/peers/python/serve_client.py"))
            .args([url.as_str(), "acme-secret"])
            .output()
            .expect("run the python client")
    })
    .await
    .expect("client");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The SDK ends its legacy session with `DELETE` and logs (to stderr,
    // Python's last-resort handler) anything but 200/204.
    let logged = String::from_utf8_lossy(&output.stderr);
    assert!(!logged.contains("Session termination failed"), "{logged}");
    let answer: Value = serde_json::from_slice(&output.stdout).expect("client json");
    let api = &answer["api"];
    assert!(api["toolCount"].as_u64().unwrap_or(0) >= 19, "{api}");
    assert_eq!(api["startStatus"], 201);
    let types: Vec<&str> = api["eventTypes"]
        .as_array()
        .expect("types")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(types.first(), Some(&RunStarted::TYPE), "{types:?}");
    assert_eq!(types.last(), Some(&RunCompleted::TYPE), "{types:?}");
    assert_eq!(api["run"]["status"], "completed");
    assert_eq!(api["run"]["commits"], 1);
    assert_eq!(api["reply"], REPLY);
    assert_eq!(api["unknownModel"], json!([400, "serve.unknown_model"]));
    assert_eq!(api["otherTenant"], json!([404, "serve.not_found"]));
    for era in ["mcpLegacy", "mcpModern"] {
        let mcp = &answer[era];
        // Control tools need an agent loop: not served.
        assert_eq!(
            mcp["tools"],
            json!(["workspace_write_file", "workspace_read_file", "dice_roll"]),
            "{era}: {mcp}"
        );
        assert_eq!(mcp["roll"]["isError"], false, "{era}: {mcp}");
        assert!(
            mcp["roll"]["text"][0]
                .as_str()
                .is_some_and(|text| text.starts_with("Rolled 2d6: ")),
            "{era}: {mcp}"
        );
        assert_eq!(mcp["badRoll"]["isError"], true, "{era}: {mcp}");
    }
    // Each MCP session is a run of its own in the tenant's runs directory.
    let (_, runs) = get(&base, "/v1/runs").await;
    let profiles: Vec<&str> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|run| run["profile"].as_str())
        .collect();
    assert!(profiles.len() >= 3, "{runs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_run_leaves_it_interrupted_and_the_next_start_completes_it() {
    let setup = Setup::new();
    let (mut server, base) = setup.serve();
    ready(&base).await;
    let response = client()
        .post(format!("{base}/v1/runs"))
        .bearer_auth("acme-secret")
        .json(&json!({"profile": "writer", "model": "silent", "chat": "chat"}))
        .send()
        .await
        .expect("start");
    assert_eq!(response.status().as_u16(), 201);
    let started: Value = response.json().await.expect("json");
    let id = started["id"].as_str().expect("id").to_owned();
    // In its loop, waiting for the model.
    wait_for(&base, &id, |run| run["lastSeq"].as_u64().unwrap_or(0) >= 3).await;
    let status = server.terminate();
    assert!(status.success(), "{status:?}");

    let journal = std::fs::read_to_string(
        setup
            .dir
            .path()
            .join(format!("data/tenants/acme/runs/{id}/events.jsonl")),
    )
    .expect("journal");
    for end in TERMINAL_EVENTS {
        assert!(
            !journal.contains(&format!("\"type\":\"{end}\"")),
            "{journal}"
        );
    }

    // The operator points `silent` at a model that answers and starts the
    // server again: it resumes the run by itself.
    setup.write_models(true);
    let (_server, base) = setup.serve();
    ready(&base).await;
    let run = wait_for(&base, &id, |run| run["status"] == "completed").await;
    assert_eq!(run["commits"], 1, "{run}");
    let chat = std::fs::read_to_string(setup.dir.path().join("data/tenants/acme/chats/chat.jsonl"))
        .expect("chat");
    assert!(chat.contains("Then we leave at dawn."));
}

/// `mcp add` and `mcp refresh` while the server runs: new runs see the
/// server's tools without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_added_while_serving_reaches_the_catalog() {
    let script =
        repo("tests/peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !common::installed("node") {
        eprintln!("SKIPPED: node is not installed");
        return;
    }
    assert!(
        script.exists(),
        "run `make setup` to install server-everything"
    );
    let setup = Setup::new();
    let (_server, base) = setup.serve();
    ready(&base).await;
    let mcp_tools = |tools: &Value| {
        tools["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter(|tool| tool["id"].as_str().is_some_and(|id| id.starts_with("mcp/")))
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(mcp_tools(&get(&base, "/v1/tools").await.1), 0);
    let mcp = |args: &[&str]| {
        let status = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .current_dir(setup.dir.path())
            .args(["mcp", "--mcp-dir", "mcp"])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("toolhost mcp");
        assert!(status.success(), "mcp {args:?}");
    };
    mcp(&[
        "add",
        "everything",
        "--allow-all",
        "--",
        "node",
        script.to_str().expect("utf-8"),
        "stdio",
    ]);
    mcp(&["refresh"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let count = mcp_tools(&get(&base, "/v1/tools").await.1);
        if count > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server never saw the MCP tools"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `POST /v1/runs` with `profile` and the script model, waited to its end,
/// then one direct call of the extension's tool: `(status, body)`.
async fn repeat_in_a_run_of(base: &str, profile: Value) -> (u16, Value) {
    repeat_in_a_run_as(base, "acme-secret", profile).await
}

/// A run of `profile` with the script model, started as the tenant whose
/// token is `token` and waited to its completion: its id.
async fn completed_run_as(base: &str, token: &str, profile: &Value) -> String {
    let started: Value = client()
        .post(format!("{base}/v1/runs"))
        .bearer_auth(token)
        .json(&json!({"profile": profile, "model": "demo", "chat": "chat"}))
        .send()
        .await
        .expect("start")
        .json()
        .await
        .expect("json");
    let id = started["id"].as_str().expect("run id").to_owned();
    let run = wait_for_as(base, token, &id, |run| run["status"] != "running").await;
    assert_eq!(run["status"], "completed", "{run}");
    id
}

/// [`repeat_in_a_run_of`] for the tenant whose token is `token`.
async fn repeat_in_a_run_as(base: &str, token: &str, profile: Value) -> (u16, Value) {
    let id = completed_run_as(base, token, &profile).await;
    let response = client()
        .post(format!("{base}/v1/runs/{id}/calls"))
        .bearer_auth(token)
        .json(&json!({"tool": "ext/acme-repeat:text.repeat", "arguments": {"text": "ab", "times": 3}}))
        .send()
        .await
        .expect("call");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inline_profile_gets_only_extension_grants_for_every_profile_or_its_own_digest() {
    let setup = Setup::new();
    let dir = setup.dir.path();
    let toolhost = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .current_dir(dir)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(["--mcp-dir", "mcp", "--ext-dir", "extensions"])
            .args(args)
            .output()
            .expect("toolhost");
        assert!(
            output.status.success(),
            "toolhost {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // The operator's extension, granted to the tenant `acme`'s `repeater`
    // profile as its file is now.
    toolhost(&common::NEW_ACME_REPEAT);
    common::build_template_extension(&dir.join("acme-repeat"), "acme-repeat");
    toolhost(&["ext", "seal", "acme-repeat"]);
    toolhost(&["ext", "install", "--no-build", "acme-repeat"]);
    let repeater = json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "repeater",
        "tools": {"allow": ["workspace.write_file", "workspace.commit", "workspace.finish",
                            "ext/acme-repeat:text.repeat"],
                  "maxRounds": 6}});
    let file = dir.join("data/tenants/acme/profiles/repeater.json");
    std::fs::write(&file, repeater.to_string()).expect("profile");
    toolhost(&[
        "ext",
        "grant",
        "acme-repeat",
        "--profile",
        file.to_str().expect("utf-8"),
        "--tenant",
        "acme",
    ]);
    let (_server, base) = setup.serve();
    ready(&base).await;

    // The profile granted, by name or inline with the same content (its
    // digest), offers the tool.
    for profile in [json!("repeater"), repeater.clone()] {
        let (status, body) = repeat_in_a_run_of(&base, profile.clone()).await;
        assert_eq!(status, 200, "{profile}: {body}");
        assert_eq!(body["text"], "ababab", "{body}");
    }
    // An inline profile under the granted id but with other content, and
    // one under another id, do not get the grant.
    let mut changed = repeater.clone();
    changed["tools"]["maxRounds"] = json!(5);
    let mut renamed = repeater.clone();
    renamed["id"] = json!("repeater-too");
    for profile in [&changed, &renamed] {
        let (status, body) = repeat_in_a_run_of(&base, profile.clone()).await;
        assert_eq!(status, 403, "{profile}: {body}");
        assert_eq!(body["code"], "agent.tool_policy_denied", "{body}");
    }
    // Another tenant sending the very same profile (same id, same digest)
    // is not the tenant it was granted for, and is not told its name.
    let (status, body) = repeat_in_a_run_as(&base, "globex-secret", repeater.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["code"], "agent.tool_policy_denied", "{body}");
    let (_, tools) = get_json(&base, "globex-secret", "/v1/tools").await;
    assert!(
        !tools["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|tool| tool["id"] == "ext/acme-repeat:text.repeat"),
        "{tools}"
    );
    // A grant for every profile reaches the running server (its catalog
    // watcher reloads), and then any profile that allows the tool gets it.
    toolhost(&["ext", "grant", "acme-repeat"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = repeat_in_a_run_of(&base, changed.clone()).await;
        if status == 200 {
            assert_eq!(body["text"], "ababab", "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "never granted: {status} {body}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Issue 42's secrets under `toolhost serve`: one extension granted with one
/// bound secret name, and each tenant's calls carry the value that tenant
/// stored — never the local use's, never another tenant's; a tenant with
/// none stored is told so and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_tenants_extension_calls_carry_its_own_secret() {
    if !common::js_toolchain() {
        return;
    }
    let setup = Setup::new();
    let dir = setup.dir.path();
    let api = common::loopback::Loopback::start();
    let toolhost = |args: &[&str], stdin: Option<&str>| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .current_dir(dir)
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(["--mcp-dir", "mcp", "--ext-dir", "extensions"])
            .args(args)
            .env("TOOLHOST_WIT", common::repo("wit"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toolhost");
        if let Some(value) = stdin {
            use std::io::Write;
            writeln!(child.stdin.take().expect("stdin"), "{value}").expect("value");
        }
        drop(child.stdin.take());
        let output = child.wait_with_output().expect("toolhost");
        assert!(
            output.status.success(),
            "toolhost {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    common::loopback::copy_fetch_js(dir);
    toolhost(&["ext", "install", "fetch-js"], None);
    let granted = format!("http://127.0.0.1:{}", api.port);
    toolhost(
        &[
            "ext",
            "grant",
            "fetch-js",
            "--allow-host",
            &granted,
            "--secret",
            "TOKEN=api-token",
            "--for",
            &granted,
        ],
        None,
    );
    toolhost(&["secret", "set", "api-token"], Some("local-value"));
    toolhost(
        &["secret", "set", "api-token", "--tenant", "acme"],
        Some("acme-value"),
    );
    let (_server, base) = setup.serve();
    ready(&base).await;

    let profile = json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "fetcher",
        "tools": {"allow": ["workspace.write_file", "workspace.commit", "workspace.finish",
                            "ext/fetch-js:web.fetch_text"],
                  "maxRounds": 6}});
    let mut answers = Vec::new();
    for token in ["acme-secret", "globex-secret"] {
        let id = completed_run_as(&base, token, &profile).await;
        let body: Value = client()
            .post(format!("{base}/v1/runs/{id}/calls"))
            .bearer_auth(token)
            .json(&json!({"tool": "ext/fetch-js:web.fetch_text",
                          "arguments": {"url": format!("{granted}/hello")}}))
            .send()
            .await
            .expect("call")
            .json()
            .await
            .expect("json");
        answers.push(body);
    }
    assert_eq!(answers[0]["isError"], false, "{}", answers[0]);
    assert!(
        answers[0]["text"]
            .as_str()
            .expect("text")
            .contains("hello from loopback")
    );
    assert_eq!(answers[1]["isError"], true, "{}", answers[1]);
    let refused = answers[1]["text"].as_str().expect("text");
    assert!(
        refused.contains("secret.not_set") && refused.contains("--tenant globex"),
        "{refused}"
    );
    assert_eq!(
        api.authorizations(),
        [Some("Bearer acme-value".to_owned())],
        "acme's own value, once; nothing sent for globex"
    );
}
