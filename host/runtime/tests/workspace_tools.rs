//! The five workspace tools as sandboxed components, against a real run
//! directory: the whole path (turn → gate → sandbox → host workspace →
//! audit → journal), compare-and-swap across invocations, and planted
//! symlinks that must end the run without touching anything outside.

mod support;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use support::agent::Agent;
use support::host;
use toolhost_core::{Classified, ErrorClass, Profile};
use toolhost_journal::{Durability, Event as _, ToolCallFailed, read_events};
use toolhost_runtime::Run;
use toolhost_sandbox::CallEntropy;

const TOOLS: [&str; 5] = [
    "workspace.list_files",
    "workspace.search_files",
    "workspace.read_file",
    "workspace.write_file",
    "workspace.apply_patch",
];

fn profile() -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "writer",
            "tools": {"allow": TOOLS, "maxCallsPerRun": 200}
        })
        .to_string(),
    )
    .expect("profile")
}

fn new_run(dir: &Path) -> Arc<Run> {
    Run::create(&dir.join("run"), &profile(), Durability::Batched).expect("run")
}

fn file(run: &Run, path: &str) -> String {
    std::fs::read_to_string(run.root().join(path)).expect("file")
}

#[tokio::test]
async fn write_read_patch_search_and_list_through_the_sandbox() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = new_run(dir.path());
    let mut agent = Agent::start(&run, &profile(), "inv_root");
    agent
        .ok(
            "workspace_write_file",
            json!({"path": "output/story.md", "content": "The dragon sleeps.\nThe knight waits.\nThe end.\n"}),
        )
        .await;
    assert_eq!(
        file(&run, "output/story.md"),
        "The dragon sleeps.\nThe knight waits.\nThe end.\n"
    );

    let read = agent
        .ok(
            "workspace_read_file",
            json!({"path": "output/story.md", "start_line": 2, "line_count": 1}),
        )
        .await;
    assert!(
        read.model_text().contains("2 | The knight waits."),
        "{}",
        read.model_text()
    );

    agent
        .ok(
            "workspace_apply_patch",
            json!({"path": "output/story.md", "old_string": "knight", "new_string": "squire"}),
        )
        .await;
    assert!(file(&run, "output/story.md").contains("The squire waits."));

    let found = agent
        .ok(
            "workspace_search_files",
            json!({"query": "squire", "path": "output", "context_lines": 0}),
        )
        .await;
    assert_eq!(
        found.result.structured["hits"][0]["ref"],
        "workspace:output/story.md#L2-L2"
    );
    let none = agent
        .ok("workspace_search_files", json!({"query": "unicorn"}))
        .await;
    assert!(
        none.model_text()
            .starts_with("No visible workspace files matched")
    );
    let literal = agent
        .ok("workspace_search_files", json!({"query": "..."}))
        .await;
    assert!(
        literal
            .model_text()
            .starts_with("No visible workspace files matched")
    );

    let listed = agent
        .ok("workspace_list_files", json!({"path": "output"}))
        .await;
    assert!(
        listed.model_text().contains("- output/story.md"),
        "{}",
        listed.model_text()
    );
    let root = agent.ok("workspace_list_files", json!({})).await;
    let text = root.model_text();
    assert!(text.contains("- tool-results/"), "{text}");
    for hidden in ["input", "tool-args", "events.jsonl", "run.json", ".tmp"] {
        assert!(!text.contains(hidden), "{hidden} is visible: {text}");
    }
}

#[tokio::test]
async fn compare_and_swap_rules_hold_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = new_run(dir.path());
    let lines: String = (1..=30).map(|n| format!("line {n}\n")).collect();
    std::fs::write(run.root().join("output/notes.md"), &lines).expect("seed");
    let mut agent = Agent::start(&run, &profile(), "inv_root");

    // Unread: neither replace nor patch.
    assert_eq!(
        agent
            .tool_error(
                "workspace_write_file",
                json!({"path": "output/notes.md", "content": "x"})
            )
            .await,
        "workspace.write_requires_read"
    );
    assert_eq!(
        agent
            .tool_error(
                "workspace_apply_patch",
                json!({"path": "output/notes.md", "old_string": "line 5", "new_string": "five"})
            )
            .await,
        "workspace.patch_requires_read"
    );
    // A partial read allows patching what was shown, nothing else, and
    // never replace_all.
    agent
        .ok(
            "workspace_read_file",
            json!({"path": "output/notes.md", "start_line": 1, "line_count": 5}),
        )
        .await;
    assert_eq!(
        agent
            .tool_error(
                "workspace_apply_patch",
                json!({"path": "output/notes.md", "old_string": "line 20\n", "new_string": "twenty\n"})
            )
            .await,
        "workspace.patch_requires_full_read"
    );
    // After that failure, even shown text needs a full read first.
    assert_eq!(
        agent
            .tool_error(
                "workspace_apply_patch",
                json!({"path": "output/notes.md", "old_string": "line 3\n", "new_string": "three\n"})
            )
            .await,
        "workspace.patch_requires_full_read"
    );
    agent
        .ok("workspace_read_file", json!({"path": "output/notes.md"}))
        .await;
    agent
        .ok(
            "workspace_apply_patch",
            json!({"path": "output/notes.md", "old_string": "line 3\n", "new_string": "three\n"}),
        )
        .await;
    // Append to a partially read file does not authorize a later replace.
    std::fs::write(run.root().join("plan/p.md"), "a\nb\nc\n").expect("seed");
    agent
        .ok(
            "workspace_read_file",
            json!({"path": "plan/p.md", "start_line": 2, "line_count": 1}),
        )
        .await;
    agent
        .ok(
            "workspace_write_file",
            json!({"path": "plan/p.md", "content": "d\n", "mode": "append"}),
        )
        .await;
    assert_eq!(
        agent
            .tool_error(
                "workspace_write_file",
                json!({"path": "plan/p.md", "content": "new"})
            )
            .await,
        "workspace.write_stale_file"
    );
    assert_eq!(file(&run, "plan/p.md"), "a\nb\nc\nd\n");
}

#[tokio::test]
async fn two_invocations_of_one_run_never_lose_a_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = new_run(dir.path());
    std::fs::write(run.root().join("output/shared.md"), "v1\n").expect("seed");
    let mut first = Agent::start(&run, &profile(), "inv_a");
    let mut second = Agent::start(&run, &profile(), "inv_b");
    first
        .ok("workspace_read_file", json!({"path": "output/shared.md"}))
        .await;
    second
        .ok("workspace_read_file", json!({"path": "output/shared.md"}))
        .await;
    first
        .ok(
            "workspace_write_file",
            json!({"path": "output/shared.md", "content": "from a\n"}),
        )
        .await;
    assert_eq!(
        second
            .tool_error(
                "workspace_write_file",
                json!({"path": "output/shared.md", "content": "from b\n"})
            )
            .await,
        "workspace.write_stale_file"
    );
    assert_eq!(
        file(&run, "output/shared.md"),
        "from a\n",
        "a's write is intact"
    );
    // A fresh read lets the second one write, on top of the first.
    second
        .ok("workspace_read_file", json!({"path": "output/shared.md"}))
        .await;
    second
        .ok(
            "workspace_write_file",
            json!({"path": "output/shared.md", "content": "from b\n"}),
        )
        .await;
    assert_eq!(file(&run, "output/shared.md"), "from b\n");
}

#[tokio::test]
async fn a_planted_symlink_ends_the_run_and_nothing_outside_is_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).expect("outside dir");
    std::fs::write(outside.join("secret.txt"), "host secret").expect("secret");
    let run = new_run(dir.path());
    std::os::unix::fs::symlink(
        outside.join("secret.txt"),
        run.root().join("output/link.md"),
    )
    .expect("symlink to a file");
    std::os::unix::fs::symlink(&outside, run.root().join("plan/escape")).expect("symlink to a dir");

    for (alias, arguments) in [
        ("workspace_read_file", json!({"path": "output/link.md"})),
        (
            "workspace_write_file",
            json!({"path": "plan/escape/new.md", "content": "x", "mode": "append"}),
        ),
        ("workspace_list_files", json!({"path": "plan"})),
        ("workspace_search_files", json!({"query": "secret"})),
    ] {
        let mut agent = Agent::start(
            &run,
            &profile(),
            &format!("inv_{}", alias.len() + arguments.to_string().len()),
        );
        let failure = agent
            .call(alias, arguments.clone())
            .await
            .expect_err("a planted symlink is a system failure");
        assert_eq!(
            failure.code(),
            "workspace.symlink_found",
            "{alias} {arguments}: {failure}"
        );
        assert_eq!(failure.class(), ErrorClass::SystemFailure);
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).expect("secret"),
        "host secret"
    );
    assert_eq!(
        std::fs::read_dir(&outside).expect("outside").count(),
        1,
        "nothing created outside"
    );
    let events = read_events(run.root().join("events.jsonl")).expect("journal");
    let failed: Vec<&str> = events
        .iter()
        .filter(|event| event.r#type == ToolCallFailed::TYPE)
        .filter_map(|event| event.payload["code"].as_str())
        .collect();
    assert_eq!(failed, ["workspace.symlink_found"; 4]);
}

#[tokio::test]
async fn a_reopened_run_remembers_what_its_invocation_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("run");
    {
        let run = Run::create(&root, &profile(), Durability::Batched).expect("run");
        std::fs::write(root.join("output/a.md"), "alpha\nbeta\n").expect("seed");
        let mut agent = Agent::start(&run, &profile(), "inv_root");
        agent
            .ok("workspace_read_file", json!({"path": "output/a.md"}))
            .await;
    }
    let (run, _) = Run::open(&root).expect("reopen");
    let session = run
        .resume_invocation("inv_root", None)
        .expect("resume")
        .expect("root");
    let mut agent = Agent::resumed(session, 100);
    agent
        .ok(
            "workspace_apply_patch",
            json!({"path": "output/a.md", "old_string": "beta", "new_string": "gamma"}),
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(root.join("output/a.md")).expect("file"),
        "alpha\ngamma\n"
    );
    // Changed behind the run's back: the remembered read is stale.
    std::fs::write(root.join("output/a.md"), "changed\n").expect("outside edit");
    assert_eq!(
        agent
            .tool_error(
                "workspace_write_file",
                json!({"path": "output/a.md", "content": "x"})
            )
            .await,
        "workspace.write_stale_file"
    );
}

#[tokio::test]
async fn a_workspace_tool_without_a_workspace_is_stopped() {
    let invocation = toolhost_core::ToolCall {
        call_id: "call_1".into(),
        tool_id: toolhost_core::ToolId::builtin("workspace.read_file").expect("id"),
        arguments: json!({"path": "output/a.md"}),
        provider_metadata: Value::Null,
    };
    let error = host()
        .call(&invocation, CallEntropy::seeded(1))
        .await
        .expect_err("no workspace bound");
    assert!(
        error.to_string().contains("workspace.unavailable"),
        "{error}"
    );
}
