//! A run's two tool-call counts agree: `GET /v1/runs/{id}`'s `toolCalls`
//! (read from the journal) and its `summary.toolCalls` (the loop's own
//! count) both count a call under a name the request did not offer. The
//! journal's count once left out `tool_call_unknown`, so the same run said
//! 3 beside 4.

mod common;

use common::{script_call as call, *};
use serde_json::{Value, json};
use toolhost_serve::{Limits, TenantDirs};

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
    seed_chat(&dirs, "chat");
    let models = script_models(dir.path(), &script());
    let server = serve_in(dir.path(), models, Limits::default()).await;

    let id = acme_starts_run(
        &server,
        &json!({"model": "demo", "chat": "chat", "task": "Answer."}),
    )
    .await;

    let run = acme_run_once_ended(&server, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    // The invented name, the write, the commit and the finish.
    assert_eq!(run["summary"]["toolCalls"], 4, "{run}");
    assert_eq!(run["toolCalls"], 4, "{run}");
}
