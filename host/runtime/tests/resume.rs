//! Resuming through the API (`Run::resume` + `run_agent_loop`): a run cut
//! off before its end goes on from its record without asking the model or
//! the chat again, even where its journal holds steps a replay does not make
//! in the same way (a model call that was retried).

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use support::*;
use toolhost_core::Classified as _;
use toolhost_journal::{Event as _, ModelCallAttemptFailed, RunResumed};
use toolhost_model::SameModel;
use toolhost_runtime::{AgentDirectory, Run, RunStatus, run_agent_loop};

fn replies() -> serde_json::Value {
    json!([
        {"toolCalls": [call("c1", "chat_read_messages", json!({"messages": [{"index": 3}]}))]},
        {"toolCalls": [write("c2", "First part."), commit("c3")]},
        {"toolCalls": [call("c4", "workspace_write_file",
            json!({"path": "output/more.md", "content": " And the second."}))]},
        {"toolCalls": [call("c5", "workspace_commit", json!({"path": "output/more.md", "mode": "append"}))]},
        {"toolCalls": [finish("c6")]}
    ])
}

#[tokio::test]
async fn a_resumed_run_after_a_retried_model_call_commits_nothing_twice() {
    let fixture = Fixture::new();
    let model = Flaky::new(1, script(replies()));
    let summary = fixture
        .run_with(&profile(10, "foreground"), model, config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(summary.commits.len(), 2);
    let before = fixture.type_counts();
    assert_eq!(before[ModelCallAttemptFailed::TYPE], 1);
    let chat = std::fs::read(&fixture.chat).unwrap();
    fixture.cut_the_end();

    // A model that would fail again and has no reply left: none is asked for.
    let model = Flaky::new(1, script(replies()));
    let summary = fixture
        .resume_with(Arc::new(SameModel(model.clone())))
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(model.seen.load(Ordering::SeqCst), 0, "the model was asked");
    // The chat is byte for byte what the first run left: no second message,
    // no second append.
    assert_eq!(std::fs::read(&fixture.chat).unwrap(), chat);
    assert_eq!(summary.commits.len(), 2);
    // Every step journalled once; the resume adds its own two events.
    let mut after = fixture.type_counts();
    assert_eq!(after.remove(RunResumed::TYPE), Some(1));
    assert_eq!(after, before);
}

#[tokio::test]
async fn a_resume_with_other_settings_is_refused_and_stays_resumable() {
    let fixture = Fixture::new();
    let summary = fixture.run(10, replies()).await;
    assert_eq!(summary.status, RunStatus::Completed);
    fixture.cut_the_end();
    let journal = std::fs::read(fixture.run_dir.join("events.jsonl")).unwrap();

    let (run, record) = Run::resume(&fixture.run_dir).expect("resume");
    let mut config = record.config();
    config.task = "Something else.".into();
    let models = Arc::new(SameModel(Arc::new(script(replies()))));
    let summary = run_agent_loop(
        &run,
        parts(&run, models.clone(), AgentDirectory::default()),
        &config,
    )
    .await;
    assert_eq!(summary.status, RunStatus::Failed);
    assert_eq!(summary.code.as_deref(), Some("run.not_resumable"));
    assert!(summary.message.unwrap().contains("task"));
    let now = std::fs::read(fixture.run_dir.join("events.jsonl")).unwrap();
    assert!(now.starts_with(&journal));
    assert!(String::from_utf8_lossy(&now[journal.len()..]).contains("\"run_resumed\""));
    drop(run);

    // Resumed with what it recorded, it ends; ended, it is never resumed.
    let (run, record) = Run::resume(&fixture.run_dir).expect("resume");
    let summary = run_agent_loop(
        &run,
        parts(&run, models, AgentDirectory::default()),
        &record.config(),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    drop(run);
    let error = Run::resume(&fixture.run_dir).expect_err("ended");
    assert!(
        error.to_string().starts_with("run.already_ended"),
        "{error}"
    );
}

/// `run.json` records which workspace roots the run shows and may write,
/// and the reopened run's workspace is opened from it: one edited to open
/// a root its profile keeps closed (`persist/` writable, say) is refused
/// when the run is reopened.
#[tokio::test]
async fn a_record_that_opens_a_root_its_profile_keeps_closed_is_refused() {
    let fixture = Fixture::new();
    let mut narrow = profile(10, "foreground");
    narrow.workspace.writable_roots = vec!["output".to_owned()];
    let summary = fixture
        .run_with(&narrow, Arc::new(script(replies())), config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    fixture.cut_the_end();
    let record = fixture.run_dir.join("run.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let mut opened = 0;
    for root in manifest["roots"].as_array_mut().unwrap() {
        if root["writable"] == json!(false) && root["path"] != json!("tool-results") {
            root["visible"] = json!(true);
            root["writable"] = json!(true);
            opened += 1;
        }
    }
    assert!(opened > 0, "the profile keeps some root closed");
    std::fs::remove_file(&record).unwrap();
    std::fs::write(&record, manifest.to_string()).unwrap();
    let refused = match Run::resume(&fixture.run_dir) {
        Ok(_) => panic!("a run whose record opens a closed root was resumed"),
        Err(error) => error,
    };
    assert_eq!(refused.code(), "run.state_invalid", "{refused}");
    assert!(refused.to_string().contains("workspace roots"), "{refused}");
}

/// A stored reply with a name the model invented is taken up again as it
/// was: answered from the record, charged again by the replayed gate, its
/// `tool_call_unknown` not journalled twice.
#[tokio::test]
async fn a_resumed_run_answers_an_invented_name_once() {
    let fixture = Fixture::new();
    let replies = json!([
        {"toolCalls": [call("x1", "summon_dragon", json!({})), write("c1", "Hi.")]},
        {"toolCalls": [commit("c2"), finish("c3")]}
    ]);
    let summary = fixture.run(5, replies.clone()).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let before = fixture.type_counts();
    assert_eq!(before[toolhost_journal::ToolCallUnknown::TYPE], 1);
    fixture.cut_the_end();

    let model = Flaky::new(1, script(replies));
    let summary = fixture
        .resume_with(Arc::new(SameModel(model.clone())))
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(model.seen.load(Ordering::SeqCst), 0, "the model was asked");
    let mut after = fixture.type_counts();
    assert_eq!(after.remove(RunResumed::TYPE), Some(1));
    assert_eq!(after, before);
}
