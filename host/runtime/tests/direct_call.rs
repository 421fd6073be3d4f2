//! A direct call's per-call work does not grow with the snapshot: what it
//! journals for its turn is the same for a 1-tool profile and one that
//! allows every builtin (issue 38: before, each call's turn listed, cloned
//! and journalled every tool of the snapshot).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use toolhost_core::{
    ExitPolicy, Profile, SnapshotSources, ToolCatalog, ToolDescriptor, ToolId, builtin,
};
use toolhost_journal::{Durability, Event as _, ModelRequestCreated, read_events};
use toolhost_sandbox::CallEntropy;

use toolhost_runtime::{DirectCaller, Run};

#[path = "support/answering.rs"]
mod answering;
use answering::Answering;

fn dice() -> ToolId {
    ToolId::builtin("dice.roll").expect("id")
}

/// Every builtin, each with a schema of some size (what a turn used to
/// clone for every tool at every call).
fn catalog() -> ToolCatalog {
    ToolCatalog::from_descriptors(builtin::names().map(|name| ToolDescriptor {
        id: ToolId::builtin(name).expect("builtin"),
        title: None,
        description: Some(format!("The {name} tool.")),
        input_schema: json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "a path"},
            "limit": {"type": "integer", "minimum": 1}
        }}),
        output_schema: None,
        annotations: json!({}),
    }))
    .expect("catalog")
}

/// The `model_request_created` payload of `calls` direct calls of
/// `dice.roll` under a profile allowing `tools`, and how many tools the
/// snapshot bound.
async fn direct_turns(dir: &Path, tools: Vec<ToolId>, calls: usize) -> (usize, Vec<Value>) {
    let mut profile = Profile::for_tools("tester", tools);
    profile.tools.max_calls_per_run = 100;
    let root = dir.join(profile.tools.allow.len().to_string());
    let run = Run::create(&root, &profile, Durability::Batched).expect("run");
    let catalog = catalog();
    let names = BTreeMap::new();
    let sources = SnapshotSources::of(&catalog, &names);
    let mut session = run
        .start_invocation(&profile, sources, "inv_root", ExitPolicy::RunFinishAllowed)
        .expect("session");
    let caller = DirectCaller {
        requester: "test",
        call_id_prefix: "test",
    };
    for _ in 0..calls {
        let outcome = session
            .call_directly(
                &Answering,
                caller,
                &dice(),
                Some(json!({"formula": "2d6"})),
                CallEntropy::seeded(1),
            )
            .await
            .expect("call");
        assert!(!outcome.result.is_error, "{}", outcome.model_text());
    }
    run.complete().expect("complete");
    let bound = session.snapshot().bindings().len();
    let turns = read_events(root.join("events.jsonl"))
        .expect("journal")
        .into_iter()
        .filter(|event| event.r#type == ModelRequestCreated::TYPE)
        .map(|event| event.payload)
        .collect();
    (bound, turns)
}

#[tokio::test]
async fn a_direct_calls_turn_is_the_same_for_one_tool_and_every_builtin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let every: Vec<ToolId> = builtin::names()
        // The runtime adds it to return-mode children; no profile lists it.
        .filter(|name| *name != "task.return")
        .map(|name| ToolId::builtin(name).expect("builtin"))
        .collect();
    let (one_bound, one) = direct_turns(dir.path(), vec![dice()], 3).await;
    let (every_bound, wide) = direct_turns(dir.path(), every, 3).await;
    assert_eq!(one_bound, 1);
    assert!(every_bound > 10, "the wide snapshot binds {every_bound}");

    let expected: Vec<Value> = (1..=3)
        .map(|round| {
            json!({
                "round": round,
                "invocationId": "inv_root",
                "eventScope": {"invocationId": "inv_root"},
                "turnContract": {
                    "snapshotId": "inv_root",
                    "tools": ["builtin:dice.roll"],
                    "choice": {"specific": "builtin:dice.roll"}
                },
                "request": {"requester": "test", "toolCount": 1}
            })
        })
        .collect();
    assert_eq!(one, expected);
    assert_eq!(wide, expected);
}
