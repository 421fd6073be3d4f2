//! A run's two round counts say what each counts: `GET /v1/runs/{id}`'s
//! `totalRounds` is every model turn of the run, delegated children's
//! included; its `summary.foregroundRounds` only the foreground agents'
//! (the root and handoff targets). Both were `rounds` once, and a run with
//! a delegated child showed 7 beside 4.

mod common;

use common::{script_call as call, *};
use serde_json::{Value, json};
use toolhost_serve::{Limits, TenantDirs};

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
    seed_chat(&dirs, "chat");
    std::fs::copy(
        repo.join("examples/demo/agents/researcher.json"),
        dirs.profiles().join("researcher.json"),
    )
    .expect("researcher");
    let models = script_models(dir.path(), &script());
    let server = serve_in(dir.path(), models, Limits::default()).await;

    let id = acme_starts_run(
        &server,
        &json!({"model": "demo", "chat": "chat", "agents": ["researcher"],
                 "task": "Answer."}),
    )
    .await;

    let run = acme_run_once_ended(&server, &id).await;
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
