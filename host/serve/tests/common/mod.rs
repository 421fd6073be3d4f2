//! A `toolhost serve` for one test: a real server on 127.0.0.1 with an
//! ephemeral port and a data directory of its own, stopped when dropped;
//! and a real HTTP client.

#![allow(dead_code)] // each test binary uses its own share

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use toolhost_journal::Durability;
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_serve::{
    Limits, ModelTable, ServeOptions, ServeState, TenantAccess, TenantDirs, Tokens, token_digest,
};

/// A server for one test; it stops when dropped.
pub struct Server {
    pub address: SocketAddr,
    pub state: Arc<ServeState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

/// The builtins, listed once per test binary; each component loads at its
/// first call, in whichever test's runtime makes it.
pub fn host() -> Arc<ToolHost> {
    static HOST: OnceLock<Arc<ToolHost>> = OnceLock::new();
    Arc::clone(HOST.get_or_init(|| {
        Arc::new(ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins listed"))
    }))
}

/// A tokens file in `dir` for `acme` (`acme-secret`) and `globex`
/// (`globex-secret`).
pub fn tokens(dir: &Path) -> TenantAccess {
    let path = dir.join("tokens.json");
    let text = format!(
        r#"{{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{{"tenant":"acme","sha256":"{}"}},{{"tenant":"globex","sha256":"{}"}}]}}"#,
        token_digest("acme-secret"),
        token_digest("globex-secret")
    );
    std::fs::write(&path, text).expect("tokens");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    TenantAccess::Tokens(Tokens::load(&path).expect("tokens load"))
}

pub fn options(data_dir: &Path, models: ModelTable, limits: Limits) -> ServeOptions {
    ServeOptions {
        data_dir: data_dir.to_owned(),
        models,
        limits,
        durability: Durability::Batched,
        tls: None,
        host_names: Vec::new(),
        allowed_origins: Vec::new(),
    }
}

/// Serve `options` with `access`.
pub async fn start_with(access: TenantAccess, options: ServeOptions) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let state = Arc::new(ServeState::new(host(), access, address, options).expect("state"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(toolhost_serve::serve(listener, Arc::clone(&state), async {
        let _ = stopped.await;
    }));
    Server {
        address,
        state,
        stop: Some(stop),
    }
}

/// Serve `dir/data` with `models` and `limits`, the tenants of
/// [`tokens`] in `dir`.
pub async fn serve_in(dir: &Path, models: ModelTable, limits: Limits) -> Server {
    start_with(tokens(dir), options(&dir.join("data"), models, limits)).await
}

pub fn client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

/// The value of `response`'s header `name`, if it is there and is text.
pub fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

pub async fn json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.expect("a JSON body");
    (status, body)
}

/// Send `request`; its status and JSON body.
pub async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    json(request.send().await.expect("the server answers")).await
}

/// Send `request`; its status and error code.
pub async fn refusal(request: reqwest::RequestBuilder) -> (u16, String) {
    let (status, body) = send(request).await;
    let code = body["code"].as_str().unwrap_or_default().to_owned();
    (status, code)
}

/// The tool ids of a catalog as `GET /v1/tools` answers it, in its order.
pub fn tool_ids(catalog: &Value) -> Vec<&str> {
    catalog["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["id"].as_str())
        .collect()
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The fixture chat copied into `dirs` as `{name}.jsonl`.
pub fn seed_chat(dirs: &TenantDirs, name: &str) {
    std::fs::copy(
        fixtures().join("chats/long_character_chat.jsonl"),
        dirs.chats().join(format!("{name}.jsonl")),
    )
    .expect("chat");
}

/// One tool call of a model script's reply.
pub fn script_call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// `script` written as `dir/script.json` and a models file offering it as
/// `demo` to every tenant; the table loaded from that file.
pub fn script_models(dir: &Path, script: &Value) -> ModelTable {
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let models = json!({"schemaVersion": 1, "kind": "toolhost.models", "models": {
        "demo": {"kind": "script", "path": "script.json"}}});
    let models_path = dir.join("models.json");
    std::fs::write(&models_path, models.to_string()).expect("models");
    ModelTable::load(&models_path).expect("models")
}

/// Start a run as acme with `body`: its id, once the server said 201.
pub async fn acme_starts_run(server: &Server, body: &Value) -> String {
    let (status, started) = send(
        client()
            .post(server.url("/v1/runs"))
            .bearer_auth("acme-secret")
            .json(body),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    started["id"].as_str().expect("id").to_owned()
}

/// A run as acme reads it once it has ended (its status is no longer
/// `running` and it has a summary): a bounded wait, not a measure of speed.
pub async fn acme_run_once_ended(server: &Server, id: &str) -> Value {
    let mut run = Value::Null;
    for _ in 0..1200 {
        let (status, view) = send(
            client()
                .get(server.url(&format!("/v1/runs/{id}")))
                .bearer_auth("acme-secret"),
        )
        .await;
        assert_eq!(status, 200, "{view}");
        run = view;
        if run["status"] != "running" && run.get("summary").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    run
}

/// The MCP protocol version the tests' clients speak.
pub const MCP_PROTOCOL: &str = "2025-06-18";

/// A JSON-RPC `body` POSTed to the MCP endpoint `path` with `token`, in
/// `session` if given, accepting JSON or SSE as the official clients do.
pub fn mcp_post(
    server: &Server,
    path: &str,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> reqwest::RequestBuilder {
    let mut request = client()
        .post(server.url(path))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MCP_PROTOCOL)
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

/// The request that closes MCP `session` at `path`.
pub fn mcp_delete(
    server: &Server,
    path: &str,
    token: &str,
    session: &str,
) -> reqwest::RequestBuilder {
    client()
        .delete(server.url(path))
        .bearer_auth(token)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", MCP_PROTOCOL)
}

/// An MCP `initialize` request from the client `client_name`.
pub fn mcp_initialize(client_name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": MCP_PROTOCOL, "capabilities": {},
        "clientInfo": {"name": client_name, "version": "0"}}})
}

/// The JSON-RPC message of an MCP answer, sent as JSON or as one SSE event.
pub async fn mcp_message(response: reqwest::Response) -> Value {
    let text = response.text().await.expect("a body");
    let data = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .find(|data| !data.is_empty())
        .unwrap_or(text.as_str());
    serde_json::from_str(data).unwrap_or_else(|_| panic!("a JSON-RPC message: {text}"))
}

/// A legacy MCP session at `path` opened with `token` as the official
/// clients open one (`initialize` from `client_name`, then
/// `notifications/initialized`): its id; or, when `initialize` is not
/// answered 200, that answer, for the test to read its refusal.
pub async fn mcp_open(
    server: &Server,
    path: &str,
    token: &str,
    client_name: &str,
) -> Result<String, reqwest::Response> {
    let response = mcp_post(server, path, token, None, mcp_initialize(client_name))
        .send()
        .await
        .expect("the server answers");
    if response.status().as_u16() != 200 {
        return Err(response);
    }
    let session = header(&response, "mcp-session-id").expect("a session id");
    let _ = mcp_message(response).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = mcp_post(server, path, token, Some(&session), initialized)
        .send()
        .await;
    assert_eq!(sent.expect("initialized").status().as_u16(), 202);
    Ok(session)
}
