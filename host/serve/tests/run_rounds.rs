//! A run's two round counts say what each counts: `GET /v1/runs/{id}`'s
//! `totalRounds` is every model turn of the run, delegated children's
//! included; its `summary.foregroundRounds` only the foreground agents'
//! (the root and handoff targets). Both were `rounds` once, and a run with
//! a delegated child showed 7 beside 4.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

/// The root delegates, awaits, commits and finishes (4 rounds); the
/// researcher searches, writes notes and returns (3 rounds).
fn script() -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript",
        "replies": [
            {"toolCalls": [call("d", "agent_delegate", json!({"agentId": "researcher",
                "task": {"objective": "Find the lantern.", "expectedOutput": "A fact."}}))]},
            {"toolCalls": [call("a", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 60000}))]},
            {"toolCalls": [
                call("w", "workspace_write_file", json!({"path": "output/main.md", "content": "Dawn."})),
                call("c", "workspace_commit", json!({}))
            ]},
            {"toolCalls": [call("f", "workspace_finish", json!({"reason": "done"}))]}
        ],
        "agents": {"researcher": [
            {"toolCalls": [call("s", "chat_search", json!({"query": "lantern", "limit": 3}))]},
            {"toolCalls": [call("n", "workspace_write_file",
                json!({"path": "scratch/notes.md", "content": "- a lantern\n"}))]},
            {"toolCalls": [call("r", "task_return", json!({"summary": "A lantern.",
                "confidence": "medium"}))]}
        ]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_names_its_total_and_its_foreground_rounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dirs = TenantDirs::new(&dir.path().join("data"), "acme");
    dirs.ensure().expect("dirs");
    std::fs::copy(
        fixtures().join("chats/long_character_chat.jsonl"),
        dirs.chats().join("chat.jsonl"),
    )
    .expect("chat");
    std::fs::copy(
        repo.join("examples/demo/agents/researcher.json"),
        dirs.profiles().join("researcher.json"),
    )
    .expect("researcher");
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
            .json(
                &json!({"model": "demo", "chat": "chat", "agents": ["researcher"],
                          "task": "Answer."}),
            ),
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
    assert_eq!(run["totalRounds"], 7, "{run}");
    assert_eq!(run["summary"]["foregroundRounds"], 4, "{run}");
    // No figure is left named only `rounds`.
    assert!(run.get("rounds").is_none(), "{run}");
    assert!(run["summary"].get("rounds").is_none(), "{run}");

    // The OpenAPI document says the same.
    let (status, document) = send(
        client()
            .get(server.url("/v1/openapi.json"))
            .bearer_auth("acme-secret"),
    )
    .await;
    assert_eq!(status, 200);
    let fields = &document["components"]["schemas"]["RunView"]["properties"];
    assert!(fields.get("totalRounds").is_some(), "{fields}");
    assert!(fields.get("rounds").is_none(), "{fields}");
}
