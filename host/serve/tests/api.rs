//! `toolhost serve` through a real HTTP client: a server on 127.0.0.1 with
//! an ephemeral port, stopped when the test ends.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use common::*;
use serde_json::Value;
use toolhost_serve::{Limits, ModelTable, ServeState, TenantAccess, token_digest};

/// A server with one tenant `acme` (token `acme-secret`), or the local one.
async fn start(with_tokens: bool) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let access = if with_tokens {
        tokens(dir.path())
    } else {
        TenantAccess::Local
    };
    let options = options(
        &dir.path().join("data"),
        ModelTable::empty(),
        Limits::default(),
    );
    (start_with(access, options).await, dir)
}

#[tokio::test]
async fn the_catalog_and_the_openapi_document_are_served() {
    let (server, _dir) = start(false).await;
    let base = format!("http://{}", server.address);
    let (status, tools) = send(client().get(format!("{base}/v1/tools"))).await;
    assert_eq!(status, 200, "{tools}");
    let ids = tool_ids(&tools);
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
    for path in ["/v1/tools", "/v1/health"] {
        assert!(document["paths"][path]["get"].is_object(), "{document}");
    }
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

/// `/v1/health` needs no token, says `warming` (503, `Retry-After`) until
/// the first warm-up ended and `ready` after, with the builtins loaded; a
/// later warm-up (a catalog reloaded) leaves it `ready`; `stopping` once
/// the server stops. Host and Origin are checked as everywhere.
#[tokio::test]
async fn health_says_when_the_server_is_ready() {
    let (server, _dir) = start(true).await;
    let url = server.url("/v1/health");
    let held = server.state.begin_warming();
    let response = client().get(&url).send().await.expect("health");
    assert_eq!(
        response.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"1"[..])
    );
    let (status, health) = json(response).await;
    assert_eq!((status, health["status"].as_str()), (503, Some("warming")));
    let total = health["builtins"]["total"].as_u64().expect("total");
    assert_eq!(
        total as usize,
        server.state.host().builtin_ids().len(),
        "{health}"
    );

    // A real warm-up: ready only when the held one and it have ended.
    server.state.warm(&server.state.host());
    drop(held);
    let mut ready = Value::Null;
    for _ in 0..600 {
        let (status, health) = send(client().get(&url)).await;
        if status == 200 {
            ready = health;
            break;
        }
        assert_eq!(health["status"], "warming", "{health}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(ready["status"], "ready", "not ready after 60 s");
    assert_eq!(ready["builtins"]["loaded"].as_u64(), Some(total), "{ready}");
    assert_eq!(ready["builtins"]["failed"], 0, "{ready}");
    let reloading = server.state.begin_warming();
    let (status, health) = send(client().get(&url)).await;
    assert_eq!((status, health["status"].as_str()), (200, Some("ready")));
    drop(reloading);
    assert_eq!(
        refusal(client().get(&url).header("host", "evil.example"))
            .await
            .0,
        421
    );

    assert_eq!(
        refusal(client().get(&url).header("origin", "https://evil.example")).await,
        (403, "serve.origin_refused".to_owned())
    );
    server.state.interrupt_runs();
    let (status, health) = send(client().get(&url)).await;
    assert_eq!((status, health["status"].as_str()), (503, Some("stopping")));
}

#[tokio::test]
async fn a_token_names_the_tenant_and_nothing_else_gets_in() {
    let (server, _dir) = start(true).await;
    let url = format!("http://{}/v1/tools", server.address);
    for token in [None, Some("wrong"), Some("acme-secret2")] {
        let mut request = client().get(&url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("get");
        assert_eq!(
            header(&response, "www-authenticate").as_deref(),
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
    let (server, _dir) = start(false).await;
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

/// SIGHUP reads the tokens file again: a new token works at once, a removed
/// one stops; a file that does not load changes nothing.
#[tokio::test]
async fn reloading_the_tokens_file_takes_effect_at_the_next_request() {
    let (server, dir) = start(true).await;
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
    let path = dir.path().join("tokens.json");
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

fn ephemeral_options(dir: &std::path::Path) -> toolhost_serve::ServeOptions {
    options(&dir.join("data"), ModelTable::empty(), Limits::default())
}

/// A CA, and a certificate it issued for 127.0.0.1 and localhost, as PEM
/// files in `dir`: `(ca, cert, key)`.
fn test_pki(dir: &std::path::Path) -> (String, std::path::PathBuf, std::path::PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("ca");
    let key = KeyPair::generate().expect("server key");
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("params")
        .signed_by(&key, &ca)
        .expect("certificate");
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).expect("cert");
    std::fs::write(&key_path, key.serialize_pem()).expect("key");
    (ca.pem(), cert_path, key_path)
}

#[test]
fn beyond_loopback_only_with_tokens_and_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, cert, key) = test_pki(dir.path());
    let tls = toolhost_serve::tls::server_config(&cert, &key).expect("tls");
    let everywhere: std::net::SocketAddr = "0.0.0.0:7700".parse().expect("address");
    let with_tls = || toolhost_serve::ServeOptions {
        tls: Some(Arc::clone(&tls)),
        ..ephemeral_options(dir.path())
    };
    for (access, options) in [
        (TenantAccess::Local, with_tls()),
        (tokens(dir.path()), ephemeral_options(dir.path())),
    ] {
        let error = ServeState::new(host(), access, everywhere, options)
            .err()
            .expect("refused");
        assert!(
            error.to_string().starts_with("serve.not_loopback"),
            "{error}"
        );
    }
    let state =
        ServeState::new(host(), tokens(dir.path()), everywhere, with_tls()).expect("served");
    assert_eq!(state.scheme, "https");
    let bad_name = toolhost_serve::ServeOptions {
        host_names: vec!["evil.example/x".to_owned()],
        ..with_tls()
    };
    let error = ServeState::new(host(), tokens(dir.path()), everywhere, bad_name)
        .err()
        .expect("refused");
    assert!(
        error.to_string().starts_with("serve.host_name_invalid"),
        "{error}"
    );
    let missing = toolhost_serve::tls::server_config(&dir.path().join("none.pem"), &key)
        .expect_err("no file");
    assert!(
        missing.to_string().starts_with("serve.tls_invalid"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_the_given_certificate_and_its_own_origins_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = test_pki(dir.path());
    let options = toolhost_serve::ServeOptions {
        tls: Some(toolhost_serve::tls::server_config(&cert, &key).expect("tls")),
        host_names: vec!["toolhost.test".to_owned()],
        ..ephemeral_options(dir.path())
    };
    let server = start_with(tokens(dir.path()), options).await;
    toolhost_net::install_crypto_provider();
    let trusting = reqwest::Client::builder()
        .no_proxy()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).expect("ca")])
        .build()
        .expect("client");
    let url = format!("https://{}/v1/tools", server.address);
    let port = server.address.port();
    let get = |origin: Option<String>, host: Option<String>| {
        let mut request = trusting.get(&url).bearer_auth("acme-secret");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request
    };
    assert_eq!(send(get(None, None)).await.0, 200);
    assert_eq!(
        send(get(Some(format!("https://{}", server.address)), None))
            .await
            .0,
        200
    );
    assert_eq!(
        refusal(get(Some(format!("http://{}", server.address)), None)).await,
        (403, "serve.origin_refused".to_owned())
    );
    assert_eq!(
        send(get(None, Some(format!("toolhost.test:{port}"))))
            .await
            .0,
        200
    );
    assert_eq!(
        refusal(get(None, Some(format!("other.test:{port}")))).await,
        (421, "serve.host_refused".to_owned())
    );
    // Plain HTTP to the TLS port gets no answer.
    let plain = client()
        .get(format!("http://{}/v1/tools", server.address))
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await;
    assert!(plain.is_err(), "{plain:?}");
}

/// The web UI's files: served without a token (they hold no data) but only
/// to this server's own `Host` and `Origin`, each with a strict
/// Content-Security-Policy; the API behind them still wants the token.
#[tokio::test]
async fn the_web_ui_is_served_with_its_policy_and_without_a_token() {
    let (server, _dir) = start(true).await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let response = client()
            .get(format!("http://{}{path}", server.address))
            .send()
            .await
            .expect("get");
        assert_eq!(response.status().as_u16(), 200, "{path}");
        let header = |name: &str| header(&response, name).unwrap_or_default();
        assert!(header("content-type").starts_with(kind), "{path}");
        assert!(
            header("content-security-policy").starts_with("default-src 'self'"),
            "{path}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff");
        assert!(header("set-cookie").is_empty(), "no cookies");
        let body = response.text().await.expect("body");
        if path == "/" {
            // No inline script: the CSP would refuse it anyway.
            assert!(body.contains(r#"<script src="/ui/app.js" defer></script>"#));
            assert_eq!(body.matches("<script").count(), 1);
        }
        if path == "/ui/app.js" {
            // Data goes into the page as text only.
            assert!(!body.contains("innerHTML") && !body.contains("insertAdjacentHTML"));
        }
    }
    let page = format!("http://{}/", server.address);
    assert_eq!(
        refusal(client().get(&page).header("origin", "https://evil.example")).await,
        (403, "serve.origin_refused".to_owned())
    );
    let port = server.address.port();
    assert_eq!(
        refusal(
            client()
                .get(&page)
                .header("host", format!("evil.example:{port}"))
        )
        .await,
        (421, "serve.host_refused".to_owned())
    );
    let (status, _) = send(client().get(format!("http://{}/v1/runs", server.address))).await;
    assert_eq!(status, 401, "the API still wants the token");
}
