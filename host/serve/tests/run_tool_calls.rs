//! A run's two tool-call counts agree: `GET /v1/runs/{id}`'s `toolCalls`
//! (read from the journal) and its `summary.toolCalls` (the loop's own
//! count) both count a call under a name the request did not offer. The
//! journal's count once left out `tool_call_unknown`, so the same run said
//! 3 beside 4.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// Round 1 invents `web_search` beside a real write; then commit, finish.
fn script() -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript",
        "replies": [
            {"toolCalls": [
                call("u", "web_search", json!({"query": "lantern"})),
                call("w", "workspace_write_file", json!({"path": "output/main.md", "content": "Dawn."}))
            ]},
            {"toolCalls": [call("c", "workspace_commit", json!({}))]},
            {"toolCalls": [call("f", "workspace_finish", json!({"reason": "done"}))]}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_counts_an_invented_tool_name_as_its_summary_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dirs = TenantDirs::new(&dir.path().join("data"), "acme");
    dirs.ensure().expect("dirs");
    std::fs::copy(
        fixtures().join("chats/long_character_chat.jsonl"),
        dirs.chats().join("chat.jsonl"),
    )
    .expect("chat");
    std::fs::write(dir.path().join("script.json"), script().to_string()).expect("script");
    let models = json!({"schemaVersion": 1, "kind": "toolhost.models", "models": {
        "demo": {"kind": "script", "path": "script.json"}}});
    let models_path = dir.path().join("models.json");
    std::fs::write(&models_path, models.to_string()).expect("models");
    let server = start_with(
        tokens(dir.path()),
        options(
            &dir.path().join("data"),
            ModelTable::load(&models_path).expect("models"),
            Limits::default(),
        ),
    )
    .await;

    let (status, started) = send(
        client()
            .post(server.url("/v1/runs"))
            .bearer_auth("acme-secret")
            .json(&json!({"model": "demo", "chat": "chat", "task": "Answer."})),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().expect("id").to_owned();

    // Until the run has ended: a bounded wait, not a measure of speed.
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(run["status"], "completed", "{run}");
    // The invented name, the write, the commit and the finish.
    assert_eq!(run["summary"]["toolCalls"], 4, "{run}");
    assert_eq!(run["toolCalls"], 4, "{run}");
}
