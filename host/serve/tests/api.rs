//! `toolhost serve` through a real HTTP client: a server on 127.0.0.1 with
//! an ephemeral port, stopped when the test ends.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use serde_json::Value;
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_serve::{ServeState, TenantAccess, Tokens, token_digest};

/// A server for one test; it stops when dropped.
struct Server {
    address: SocketAddr,
    state: Arc<ServeState>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    // Kept alive while the server may read it.
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

async fn host() -> Arc<ToolHost> {
    Arc::new(
        ToolHost::with_builtins(ToolHostConfig::default(), &|_| {})
            .await
            .expect("builtins load"),
    )
}

async fn start(with_tokens: bool) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let access = if with_tokens {
        let path = dir.path().join("tokens.json");
        let text = format!(
            r#"{{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{{"tenant":"acme","sha256":"{}"}}]}}"#,
            token_digest("acme-secret")
        );
        std::fs::write(&path, text).expect("tokens");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        TenantAccess::Tokens(Tokens::load(&path).expect("tokens load"))
    } else {
        TenantAccess::Local
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let state = Arc::new(ServeState::new(host().await, access, address).expect("state"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(toolhost_serve::serve(listener, Arc::clone(&state), async {
        let _ = stopped.await;
    }));
    Server {
        address,
        state,
        stop: Some(stop),
        _dir: dir,
    }
}

fn client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

async fn json(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.expect("a JSON body");
    (status, body)
}

/// Send `request`; its status and JSON body.
async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    json(request.send().await.expect("the server answers")).await
}

/// Send `request`; its status and error code.
async fn refusal(request: reqwest::RequestBuilder) -> (u16, String) {
    let (status, body) = send(request).await;
    let code = body["code"].as_str().unwrap_or_default().to_owned();
    (status, code)
}

#[tokio::test]
async fn the_catalog_and_the_openapi_document_are_served() {
    let server = start(false).await;
    let base = format!("http://{}", server.address);
    let (status, tools) = send(client().get(format!("{base}/v1/tools"))).await;
    assert_eq!(status, 200, "{tools}");
    let ids: Vec<&str> = tools["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["id"].as_str())
        .collect();
    assert!(ids.contains(&"builtin:dice.roll"), "{ids:?}");
    assert!(ids.contains(&"builtin:chat.search"), "{ids:?}");
    // A catalog carries no alias and no permission: those are a snapshot's.
    assert!(tools["tools"][0].get("modelAlias").is_none(), "{tools}");
    assert_eq!(tools["omitted"], Value::Array(Vec::new()));

    let (status, document) = send(client().get(format!("{base}/v1/openapi.json"))).await;
    assert_eq!(status, 200);
    assert!(
        document["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.")),
        "{document}"
    );
    assert!(
        document["paths"]["/v1/tools"]["get"].is_object(),
        "{document}"
    );
    assert!(
        document["components"]["schemas"]["ApiError"].is_object(),
        "{document}"
    );

    assert_eq!(
        refusal(client().get(format!("{base}/v1/nothing"))).await,
        (404, "serve.not_found".to_owned())
    );
    assert_eq!(
        refusal(client().delete(format!("{base}/v1/tools"))).await,
        (405, "serve.method_not_allowed".to_owned())
    );
}

#[tokio::test]
async fn a_token_names_the_tenant_and_nothing_else_gets_in() {
    let server = start(true).await;
    let url = format!("http://{}/v1/tools", server.address);
    for token in [None, Some("wrong"), Some("acme-secret2")] {
        let mut request = client().get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("get");
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
        let (status, error) = json(response).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (401, Some("serve.unauthorized")),
            "{token:?}"
        );
    }
    let response = client()
        .get(&url)
        .bearer_auth("acme-secret")
        .send()
        .await
        .expect("get");
    assert_eq!(response.status().as_u16(), 200);
}

/// A page on another site must not drive the server through the user's
/// browser: not by an `Origin` of its own, not by rebinding its DNS name
/// onto 127.0.0.1 (its `Host` then names it).
#[tokio::test]
async fn host_and_origin_must_be_this_servers_own() {
    let server = start(false).await;
    let url = format!("http://{}/v1/tools", server.address);
    let port = server.address.port();
    assert_eq!(
        refusal(
            client()
                .get(&url)
                .header("host", format!("evil.example:{port}"))
        )
        .await,
        (421, "serve.host_refused".to_owned())
    );
    assert_eq!(
        refusal(client().get(&url).header("origin", "https://evil.example")).await,
        (403, "serve.origin_refused".to_owned())
    );
    for (host, origin) in [
        (
            server.address.to_string(),
            format!("http://{}", server.address),
        ),
        (
            format!("localhost:{port}"),
            format!("http://localhost:{port}"),
        ),
    ] {
        let response = client()
            .get(&url)
            .header("host", &host)
            .header("origin", &origin)
            .send()
            .await
            .expect("get");
        assert_eq!(response.status().as_u16(), 200, "{host} {origin}");
        assert!(
            response
                .headers()
                .get("access-control-allow-origin")
                .is_none(),
            "no CORS headers"
        );
    }
}

#[test]
fn only_loopback_is_served_for_now() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let host = runtime.block_on(host());
    let error = ServeState::new(
        host,
        TenantAccess::Local,
        "0.0.0.0:7700".parse().expect("address"),
    )
    .err()
    .expect("refused");
    assert!(
        error.to_string().starts_with("serve.not_loopback"),
        "{error}"
    );
}

/// SIGHUP reads the tokens file again: a new token works at once, a removed
/// one stops; a file that does not load changes nothing.
#[tokio::test]
async fn reloading_the_tokens_file_takes_effect_at_the_next_request() {
    let server = start(true).await;
    let url = format!("http://{}/v1/tools", server.address);
    let status = |token: &'static str| {
        let url = url.clone();
        async move {
            client()
                .get(&url)
                .bearer_auth(token)
                .send()
                .await
                .expect("get")
                .status()
                .as_u16()
        }
    };
    let path = server._dir.path().join("tokens.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{{"tenant":"acme","sha256":"{}"}}]}}"#,
            token_digest("acme-rotated")
        ),
    )
    .expect("rotate");
    assert_eq!(status("acme-rotated").await, 401, "not before the reload");
    assert_eq!(server.state.reload_tokens().expect("reloads"), Some(1));
    assert_eq!(status("acme-rotated").await, 200);
    assert_eq!(status("acme-secret").await, 401);

    std::fs::write(&path, "{not json").expect("break");
    assert!(server.state.reload_tokens().is_err());
    assert_eq!(status("acme-rotated").await, 200, "the old tokens stay");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(server.state.reload_tokens().is_err());
    assert_eq!(status("acme-rotated").await, 200, "the old tokens stay");
}
