//! MCP over HTTP within the server's limits: a session holds a place among
//! the runs while it lives (total and per tenant), and every `tools/call`
//! in flight holds one of `--max-calls`; past a limit the answer is `429`
//! with `Retry-After`, decided before rmcp sees the request. A place is
//! given back when the session is deleted or idles out.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

fn profile() -> Value {
    json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "roller",
        "tools": {"allow": ["dice.roll"], "maxRounds": 4}
    })
}

/// A server whose tenants `acme` and `globex` both have profile `roller`.
async fn serve(dir: &std::path::Path, limits: Limits) -> Server {
    let data = dir.join("data");
    for tenant in ["acme", "globex"] {
        let dirs = TenantDirs::new(&data, tenant);
        dirs.ensure().expect("dirs");
        std::fs::write(dirs.profiles().join("roller.json"), profile().to_string())
            .expect("profile");
    }
    start_with(tokens(dir), options(&data, ModelTable::empty(), limits)).await
}

fn roll(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "dice_roll", "arguments": {"formula": "2d6"}}})
}

/// A legacy session opened (initialize, initialized): its id; or the
/// refusal's status, `Retry-After` and error code.
async fn open(server: &Server, token: &str) -> Result<String, (u16, Option<String>, String)> {
    let response = match mcp_open(server, "/mcp/roller", token, "mcp-limits-test").await {
        Ok(session) => return Ok(session),
        Err(refused) => refused,
    };
    let status = response.status().as_u16();
    let retry = header(&response, "retry-after");
    let body: Value = response.json().await.expect("a JSON refusal");
    Err((
        status,
        retry,
        body["code"].as_str().unwrap_or_default().to_owned(),
    ))
}

async fn close(server: &Server, token: &str, session: &str) {
    let response = mcp_delete(server, "/mcp/roller", token, session)
        .send()
        .await
        .expect("delete");
    assert!(response.status().is_success(), "{}", response.status());
}

/// A session opened as soon as one may be: the handler of a closed session
/// is dropped by a task of rmcp's, a moment after the answer. Generous
/// bound; not a measure of speed.
async fn open_eventually(server: &Server, token: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match open(server, token).await {
            Ok(session) => return session,
            Err(refused) => {
                assert_eq!(refused.0, 429, "{refused:?}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the place was never freed"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// A tools/call in `session`: its status, `Retry-After` and body.
async fn call(
    server: &Server,
    token: &str,
    session: Option<&str>,
    id: u64,
) -> (u16, Option<String>, String) {
    let response = mcp_post(server, "/mcp/roller", token, session, roll(id))
        .send()
        .await
        .expect("call");
    let status = response.status().as_u16();
    let retry = header(&response, "retry-after");
    (status, retry, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_holds_a_run_place_until_it_is_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        runs_total: 1,
        retry_after_secs: 5,
        ..Limits::default()
    };
    let server = serve(dir.path(), limits).await;
    let first = open(&server, "acme-secret").await.expect("first session");
    // Any tenant: the total is full.
    for token in ["acme-secret", "globex-secret"] {
        let refused = open(&server, token).await.expect_err("a second session");
        assert_eq!(
            refused,
            (429, Some("5".to_owned()), "serve.too_many_runs".to_owned())
        );
    }
    // A call without a session would be a handler, and a run, of its own.
    let (status, retry, _) = call(&server, "acme-secret", None, 7).await;
    assert_eq!((status, retry.as_deref()), (429, Some("5")));
    // The session itself still calls.
    let (status, _, body) = call(&server, "acme-secret", Some(&first), 2).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"result\""), "{body}");
    close(&server, "acme-secret", &first).await;
    let second = open_eventually(&server, "globex-secret").await;
    close(&server, "globex-secret", &second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_tenant_limit_counts_sessions_and_an_idle_session_gives_its_place_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        runs_per_tenant: 1,
        mcp_session_idle: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = serve(dir.path(), limits).await;
    let _idle = open(&server, "acme-secret").await.expect("acme's session");
    let refused = open(&server, "acme-secret")
        .await
        .expect_err("acme's second");
    assert_eq!(
        (refused.0, refused.2.as_str()),
        (429, "serve.too_many_runs")
    );
    assert!(refused.1.is_some(), "Retry-After");
    let globex = open(&server, "globex-secret")
        .await
        .expect("another tenant");
    close(&server, "globex-secret", &globex).await;
    // Never deleted: rmcp closes it once idle, and the place comes back.
    let again = open_eventually(&server, "acme-secret").await;
    close(&server, "acme-secret", &again).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_max_calls_is_429_and_calls_one_after_another_all_pass() {
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        calls_in_flight: 1,
        retry_after_secs: 3,
        ..Limits::default()
    };
    let server = serve(dir.path(), limits).await;
    let session = open(&server, "acme-secret").await.expect("session");
    // One call in flight elsewhere (a direct call through the API, say).
    let elsewhere = server.state.runs.call_permit().expect("the one call");
    let (status, retry, body) = call(&server, "acme-secret", Some(&session), 2).await;
    assert_eq!((status, retry.as_deref()), (429, Some("3")), "{body}");
    let refused: Value = serde_json::from_str(&body).expect("a JSON refusal");
    assert_eq!(refused["code"], "serve.too_many_calls");
    drop(elsewhere);
    // Each call gives its place back when it is answered.
    for id in 3..8 {
        let (status, _, body) = call(&server, "acme-secret", Some(&session), id).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"result\""), "{body}");
    }
    // Calls sent together: each is answered or refused with 429, none
    // waits in a queue, and the count ends where it began.
    let answers = futures_util::future::join_all(
        (10..18).map(|id| call(&server, "acme-secret", Some(&session), id)),
    )
    .await;
    for (status, retry, body) in &answers {
        assert!(
            *status == 200 && body.contains("\"result\"") || *status == 429 && retry.is_some(),
            "{status} {body}"
        );
    }
    let after = server
        .state
        .runs
        .call_permit()
        .expect("every permit given back");
    drop(after);
    close(&server, "acme-secret", &session).await;
}
