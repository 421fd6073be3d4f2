//! A chat app on its own origin (SillyTavern's page at
//! `http://127.0.0.1:8000`) driving the API from the browser: refused
//! unless the operator let that exact origin in (`--allow-origin`); then
//! its preflights are answered, its requests still need the token, and
//! every other foreign origin stays refused, preflights included.

mod common;

use common::*;
use toolhost_serve::{Limits, ModelTable};

const TAVERN: &str = "http://127.0.0.1:8000";

async fn serve_letting_in(origins: &[&str]) -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = toolhost_serve::ServeOptions {
        allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
        ..options(
            &dir.path().join("data"),
            ModelTable::empty(),
            Limits::default(),
        )
    };
    (start_with(tokens(dir.path()), options).await, dir)
}

/// A browser's preflight of a `POST` with a token and a JSON body.
fn preflight(server: &Server, path: &str, origin: &str) -> reqwest::RequestBuilder {
    client()
        .request(reqwest::Method::OPTIONS, server.url(path))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
}

#[tokio::test]
async fn without_the_flag_the_apps_pages_are_refused() {
    let (server, _dir) = serve_letting_in(&[]).await;
    let (status, body) = send(
        client()
            .get(server.url("/v1/tools"))
            .header("origin", TAVERN)
            .bearer_auth("acme-secret"),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("serve.origin_refused"))
    );
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("--allow-origin http://127.0.0.1:8000"),
        "the refusal says what lets the page in: {message}"
    );
    let response = preflight(&server, "/v1/runs", TAVERN)
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 403);
    assert!(header(&response, "access-control-allow-origin").is_none());
    // An OPTIONS request of no page is what it was: it needs a token.
    let response = client()
        .request(reqwest::Method::OPTIONS, server.url("/v1/runs"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 401);
}

#[tokio::test]
async fn the_origin_let_in_gets_cors_answers_and_still_needs_its_token() {
    let (server, _dir) = serve_letting_in(&[TAVERN, "http://localhost:8000/"]).await;

    // The preflight needs no token, and names the origin alone.
    let response = preflight(&server, "/v1/runs", TAVERN)
        .header("access-control-request-private-network", "true")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        header(&response, "access-control-allow-origin").as_deref(),
        Some(TAVERN)
    );
    let methods = header(&response, "access-control-allow-methods").unwrap_or_default();
    assert!(
        methods.contains("POST") && methods.contains("GET"),
        "{methods}"
    );
    let allowed = header(&response, "access-control-allow-headers").unwrap_or_default();
    assert!(
        allowed.contains("authorization") && allowed.contains("content-type"),
        "{allowed}"
    );
    assert!(
        header(&response, "access-control-allow-credentials").is_none(),
        "no cookies, no credentials"
    );
    assert_eq!(
        header(&response, "access-control-allow-private-network").as_deref(),
        Some("true")
    );
    assert!(header(&response, "vary").is_some_and(|vary| vary.contains("origin")));

    // A request with the token: answered, readable by the page.
    let response = client()
        .get(server.url("/v1/tools"))
        .header("origin", "http://localhost:8000")
        .bearer_auth("acme-secret")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        header(&response, "access-control-allow-origin").as_deref(),
        Some("http://localhost:8000")
    );
    // Without it, or with a wrong one: 401, and the page can read why.
    for token in [None, Some("wrong")] {
        let mut request = client()
            .get(server.url("/v1/tools"))
            .header("origin", TAVERN);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("answered");
        assert_eq!(
            header(&response, "access-control-allow-origin").as_deref(),
            Some(TAVERN)
        );
        assert_eq!(
            json(response).await.1["code"],
            "serve.unauthorized",
            "{token:?}"
        );
    }

    // A page of the origin let in that names another host (DNS rebinding):
    // refused, its preflight too, with no CORS answer.
    let port = server.address.port();
    let response = preflight(&server, "/v1/runs", TAVERN)
        .header("host", format!("evil.example:{port}"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 421);
    assert!(header(&response, "access-control-allow-origin").is_none());

    // Every other foreign origin: refused before anything, no CORS answer.
    for origin in [
        "http://127.0.0.1:8001",
        "https://127.0.0.1:8000",
        "https://evil.example",
    ] {
        let response = preflight(&server, "/v1/runs", origin)
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status().as_u16(), 403, "{origin}");
        assert!(header(&response, "access-control-allow-origin").is_none());
        assert_eq!(
            refusal(
                client()
                    .get(server.url("/v1/tools"))
                    .header("origin", origin)
                    .bearer_auth("acme-secret")
            )
            .await,
            (403, "serve.origin_refused".to_owned()),
            "{origin}"
        );
    }
}

#[test]
fn a_wildcard_origin_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = toolhost_serve::ServeOptions {
        allowed_origins: vec!["*".to_owned()],
        ..options(
            &dir.path().join("data"),
            ModelTable::empty(),
            Limits::default(),
        )
    };
    let address = "127.0.0.1:7700".parse().expect("address");
    let error = toolhost_serve::ServeState::new(host(), tokens(dir.path()), address, options)
        .err()
        .expect("refused");
    assert!(
        error.to_string().starts_with("serve.origin_invalid"),
        "{error}"
    );
}
