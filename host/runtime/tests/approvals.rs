//! A person's approval of a call (docs/policy.md, "Approvals"): the
//! journal's order, the three decisions, a timeout, decision files, and a
//! decision that holds for the rest of the run.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::{Fixture, REPLY, commit, config, finish, parts, profile, script, write};
use toolhost_core::policy::{Policies, ToolPolicy};
use toolhost_journal::{
    ChatCommitCompleted, ChatCommitRequested, Event as _, ToolCallApprovalDecided,
    ToolCallApprovalRequested, ToolCallCompleted, ToolCallRequested, ToolCallStarted,
    ToolResultStored,
};
use toolhost_model::SameModel;
use toolhost_runtime::approval::{
    Answer, ApprovalDecision, ApprovalFuture, ApprovalRequest, Approver, DecisionFile,
    DecisionFiles, Verdict, write_decision,
};
use toolhost_runtime::{AgentDirectory, LoopSummary, Run, RunStatus, run_agent_loop};

/// The user's policy asks for approval of every commit.
fn commits_need_approval() -> Arc<Policies> {
    let policy = ToolPolicy::from_json(
        &json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
                "requireApproval": ["workspace.commit"]})
        .to_string(),
        "test",
    )
    .expect("policy");
    Arc::new(Policies {
        user: Some(policy),
        platform: None,
    })
}

async fn run(
    fixture: &Fixture,
    replies: Value,
    approver: Option<Arc<dyn Approver>>,
) -> LoopSummary {
    run_under(fixture, replies, approver, commits_need_approval()).await
}

async fn run_under(
    fixture: &Fixture,
    replies: Value,
    approver: Option<Arc<dyn Approver>>,
    policies: Arc<Policies>,
) -> LoopSummary {
    let run = fixture.create_run(&profile(6, "foreground"));
    if let Some(approver) = approver {
        run.set_approver(approver);
    }
    let mut parts = parts(
        &run,
        Arc::new(SameModel(Arc::new(script(replies)))),
        AgentDirectory::default(),
    );
    parts.policies = Some(policies);
    run_agent_loop(&run, parts, &config()).await
}

/// The events of one call, by type, in journal order.
fn call_events(fixture: &Fixture, call_id: &str) -> Vec<(String, Value)> {
    fixture
        .events()
        .into_iter()
        .filter(|event| event.payload["callId"] == call_id)
        .map(|event| (event.r#type, event.payload))
        .collect()
}

fn types(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(kind, _)| kind.as_str()).collect()
}

/// Counts the decisions it is asked for.
#[derive(Debug)]
struct Counting {
    verdict: Verdict,
    asked: AtomicUsize,
}

impl Approver for Counting {
    fn decide<'a>(
        &'a self,
        _: &'a std::path::Path,
        request: &'a ApprovalRequest,
    ) -> ApprovalFuture<'a> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        assert_eq!(request.tool_id.as_str(), "builtin:workspace.commit");
        assert!(
            request.reason.contains("user's policy asks"),
            "{}",
            request.reason
        );
        Box::pin(async move {
            ApprovalDecision {
                verdict: self.verdict,
                by: "test".into(),
                note: None,
            }
        })
    }
}

#[tokio::test]
async fn an_approved_call_runs_after_its_approval_in_journal_order() {
    let fixture = Fixture::new();
    let approver = Arc::new(Counting {
        verdict: Verdict::Approved,
        asked: AtomicUsize::new(0),
    });
    let summary = run(
        &fixture,
        json!([{"toolCalls": [write("w", REPLY), commit("c")]}, {"toolCalls": [finish("f")]}]),
        Some(approver.clone()),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    let events = call_events(&fixture, "c");
    assert_eq!(
        types(&events),
        [
            ToolCallRequested::TYPE,
            ToolCallApprovalRequested::TYPE,
            ToolCallApprovalDecided::TYPE,
            ToolCallStarted::TYPE,
            ChatCommitRequested::TYPE,
            ChatCommitCompleted::TYPE,
            ToolResultStored::TYPE,
            ToolCallCompleted::TYPE
        ]
    );
    let requested = &events[1].1;
    assert_eq!(requested["toolId"], "builtin:workspace.commit");
    assert_eq!(requested["source"], "builtin");
    assert_eq!(requested["argumentsSummary"], "(no arguments)");
    assert_eq!(
        requested["argumentsShown"],
        json!({"fields": [], "omitted": 0})
    );
    assert!(
        requested["reason"]
            .as_str()
            .is_some_and(|r| r.contains("user's policy"))
    );
    assert_eq!(events[2].1["decision"], "approved");
    assert_eq!(events[2].1["by"], "test");
    // A call that needs no approval is not asked about.
    assert!(!types(&call_events(&fixture, "w")).contains(&ToolCallApprovalRequested::TYPE));
    assert_eq!(fixture.last_message(), REPLY);
}

#[tokio::test]
async fn a_denied_call_never_starts_and_the_model_reads_the_note() {
    let fixture = Fixture::new();
    let denying: Arc<dyn Approver> = Arc::new(Answer {
        verdict: Verdict::Denied,
        by: "the tester".into(),
        note: Some("not this text".into()),
    });
    let summary = run(
        &fixture,
        json!([{"toolCalls": [write("w", REPLY), commit("c")]}, {"toolCalls": [finish("f")]}]),
        Some(denying),
    )
    .await;
    // Nothing reached the chat: not the denied commit, and not the
    // auto-publish of the written reply either (a commit needs approval).
    assert!(summary.commits.is_empty(), "{summary:?}");
    let events = call_events(&fixture, "c");
    assert!(
        !types(&events).contains(&ToolCallStarted::TYPE),
        "{events:?}"
    );
    assert_eq!(events[2].1["decision"], "denied");
    let completed = &events.last().expect("completed").1;
    assert_eq!(completed["errorCode"], "agent.tool_denied_by_user");
    let result = fixture.tool_result("c");
    assert_eq!(result["isError"], true);
    let text = result["content"].as_str().expect("content");
    assert!(
        text.contains("workspace_commit") && text.contains("not this text"),
        "{text}"
    );
    assert_eq!(fixture.chat().messages().len(), fixture_messages(&fixture));
}

fn fixture_messages(fixture: &Fixture) -> usize {
    toolhost_capabilities::chat::ChatFile::parse("fixture", fixture.original.clone())
        .expect("fixture")
        .messages()
        .len()
}

/// With no approver set, no one is asked and the call is denied.
#[tokio::test]
async fn without_an_approver_a_call_needing_approval_is_denied() {
    let fixture = Fixture::new();
    run(
        &fixture,
        json!([{"toolCalls": [write("w", REPLY), commit("c")]}]),
        None,
    )
    .await;
    let events = call_events(&fixture, "c");
    assert_eq!(events[2].1["decision"], "denied");
    assert_eq!(events[2].1["by"], "no approver");
    assert!(!types(&events).contains(&ToolCallStarted::TYPE));
}

#[tokio::test]
async fn approved_for_the_run_is_asked_once() {
    let fixture = Fixture::new();
    let approver = Arc::new(Counting {
        verdict: Verdict::ApprovedForRun,
        asked: AtomicUsize::new(0),
    });
    let summary = run(
        &fixture,
        json!([
            {"toolCalls": [write("w", REPLY), commit("c1")]},
            {"toolCalls": [commit("c2")]},
            {"toolCalls": [finish("f")]}
        ]),
        Some(approver.clone()),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(summary.commits.len(), 2);
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1, "asked once");
    let second = call_events(&fixture, "c2");
    assert_eq!(second[2].1["decision"], "approved");
    assert_eq!(second[2].1["by"], "approved for the rest of the run");
    assert!(types(&second).contains(&ToolCallStarted::TYPE));
}

#[tokio::test]
async fn no_decision_in_time_denies_the_call() {
    let fixture = Fixture::new();
    let waiting: Arc<dyn Approver> = Arc::new(DecisionFiles {
        poll: Duration::from_millis(10),
        timeout: Duration::from_millis(150),
    });
    run(
        &fixture,
        json!([{"toolCalls": [write("w", REPLY), commit("c")]}]),
        Some(waiting),
    )
    .await;
    let events = call_events(&fixture, "c");
    assert_eq!(events[2].1["decision"], "timed_out");
    assert_eq!(
        events.last().expect("completed").1["errorCode"],
        "agent.tool_denied_by_user"
    );
    assert!(!types(&events).contains(&ToolCallStarted::TYPE));
}

/// A person decides by a file in the run directory (what `toolhost
/// approvals approve` and the HTTP API write): the waiting call goes on;
/// a second decision on the same call is refused.
#[tokio::test]
async fn a_decision_file_lets_a_waiting_call_go_on() {
    let fixture = Fixture::new();
    let run_dir = fixture.run_dir.clone();
    let decider = tokio::spawn(async move {
        let journal = run_dir.join("events.jsonl");
        while !std::fs::read_to_string(&journal)
            .unwrap_or_default()
            .contains(ToolCallApprovalRequested::TYPE)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let file = DecisionFile::new("c", Verdict::Approved, "a person", Some("fine"));
        write_decision(&run_dir, &file).expect("decided");
        let again = write_decision(&run_dir, &file).expect_err("decided once");
        assert!(
            again.to_string().contains("approval.already_decided"),
            "{again}"
        );
    });
    let summary = run(
        &fixture,
        json!([{"toolCalls": [write("w", REPLY), commit("c")]}, {"toolCalls": [finish("f")]}]),
        Some(Arc::new(DecisionFiles {
            poll: Duration::from_millis(10),
            timeout: Duration::from_secs(30),
        })),
    )
    .await;
    decider.await.expect("decider");
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let events = call_events(&fixture, "c");
    assert_eq!(events[2].1["decision"], "approved");
    assert_eq!(events[2].1["by"], "a person");
    assert_eq!(events[2].1["note"], "fine");
}

/// Run `fixture` (a write, then a commit that needs approval) until its
/// commit waits for a decision file, and drop it there: interrupted.
async fn interrupted_while_waiting(fixture: &Fixture) {
    let journal = fixture.run_dir.join("events.jsonl");
    tokio::select! {
        summary = run(
            fixture,
            json!([{"toolCalls": [write("w", REPLY), commit("c")]}]),
            Some(waiting()),
        ) => panic!("the run ended while its call waited: {summary:?}"),
        () = async {
            while !std::fs::read_to_string(&journal)
                .unwrap_or_default()
                .contains(ToolCallApprovalRequested::TYPE)
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        } => {}
    }
}

/// Decisions from files in the run directory, waited for up to a minute.
fn waiting() -> Arc<dyn Approver> {
    Arc::new(DecisionFiles {
        poll: Duration::from_millis(10),
        timeout: Duration::from_secs(60),
    })
}

/// Resume `fixture`'s interrupted run and drive it to its end.
async fn resume_to_the_end(fixture: &Fixture) -> LoopSummary {
    let (run, record) = Run::resume(&fixture.run_dir).expect("resume");
    run.set_approver(waiting());
    let mut parts = parts(
        &run,
        // Replies go by round: the first was stored before the
        // interruption and is not asked for again.
        Arc::new(SameModel(Arc::new(script(
            json!([{"toolCalls": [write("w", REPLY), commit("c")]}, {"toolCalls": [finish("f")]}]),
        )))),
        record.agents().expect("agents"),
    );
    parts.policies = Some(commits_need_approval());
    run_agent_loop(&run, parts, &record.config()).await
}

/// A run interrupted while a call waits for its approval asks again when
/// it resumes: the request is journalled once, the decision made after the
/// resume lets the call go on.
#[tokio::test]
async fn a_pending_approval_is_pending_again_after_an_interruption() {
    let fixture = Fixture::new();
    interrupted_while_waiting(&fixture).await;
    write_decision(
        &fixture.run_dir,
        &DecisionFile::new("c", Verdict::Approved, "a person", None),
    )
    .expect("decided");
    let summary = resume_to_the_end(&fixture).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let events = call_events(&fixture, "c");
    let count = |kind: &str| types(&events).iter().filter(|k| **k == kind).count();
    assert_eq!(count(ToolCallApprovalRequested::TYPE), 1, "{events:?}");
    assert_eq!(count(ToolCallApprovalDecided::TYPE), 1);
    assert_eq!(count(ToolCallStarted::TYPE), 1);
    assert_eq!(fixture.last_message(), REPLY);
}

/// A run's stored snapshot is a file an edit can reach (on a cluster node,
/// one rebuilt from NATS): one edited to drop the approval the policy
/// requires — its binding and its decision alike, so it still loads — is
/// refused when the run resumes, and the call never runs.
#[tokio::test]
async fn a_stored_snapshot_edited_to_drop_an_approval_is_refused_on_resume() {
    let fixture = Fixture::new();
    let messages = fixture.chat().messages().len();
    interrupted_while_waiting(&fixture).await;

    let stored = fixture
        .run_dir
        .join("input/invocations/inv_root/tool_snapshot.json");
    let mut snapshot: Value =
        serde_json::from_slice(&std::fs::read(&stored).expect("stored")).expect("json");
    let mut dropped = 0;
    for binding in snapshot["bindings"].as_array_mut().expect("bindings") {
        if binding["descriptor"]["id"] == "builtin:workspace.commit" {
            dropped += usize::from(
                binding
                    .as_object_mut()
                    .expect("object")
                    .remove("approval")
                    .is_some(),
            );
        }
    }
    for decision in snapshot["decisions"].as_array_mut().expect("decisions") {
        if decision["toolId"] == "builtin:workspace.commit" {
            decision["approvalRequired"] = json!(false);
        }
    }
    assert_eq!(dropped, 1, "the commit's binding had its approval");
    // The stored file is read-only, as the run left it: replaced whole.
    std::fs::remove_file(&stored).expect("remove");
    std::fs::write(&stored, snapshot.to_string()).expect("edit");

    let summary = resume_to_the_end(&fixture).await;
    assert_eq!(summary.status, RunStatus::Failed, "{summary:?}");
    assert_eq!(
        summary.code.as_deref(),
        Some("tool.snapshot_loosened"),
        "{summary:?}"
    );
    assert_eq!(
        fixture.chat().messages().len(),
        messages,
        "nothing committed"
    );
}

/// A call's budget is reserved when it is requested, before anyone is
/// asked: a denied call still counts, and the next one is over budget
/// without asking again.
#[tokio::test]
async fn a_denied_call_still_counts_against_its_budget() {
    let fixture = Fixture::new();
    let profile = toolhost_core::Profile::from_json(
        &json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
                "tools": {"allow": ["workspace.write_file", "workspace.commit", "workspace.finish"],
                          "maxRounds": 4, "maxCallsPerTool": {"workspace.commit": 1}}})
        .to_string(),
    )
    .expect("profile");
    let run = fixture.create_run(&profile);
    let mut parts = parts(
        &run,
        Arc::new(SameModel(Arc::new(script(json!([
            {"toolCalls": [write("w", REPLY), commit("c1")]},
            {"toolCalls": [commit("c2")]}
        ]))))),
        AgentDirectory::default(),
    );
    parts.policies = Some(commits_need_approval());
    run_agent_loop(&run, parts, &config()).await;
    assert_eq!(call_events(&fixture, "c1")[2].1["decision"], "denied");
    let second = call_events(&fixture, "c2");
    assert!(
        !types(&second).contains(&ToolCallApprovalRequested::TYPE),
        "{second:?}"
    );
    assert_eq!(
        fixture.tool_result("c2")["errorCode"],
        "agent.tool_budget_exhausted"
    );
}

/// A policy that denies `workspace.commit` keeps the reply out of the
/// chat: the written reply is not auto-published either.
#[tokio::test]
async fn a_denied_commit_is_not_worked_around_by_auto_publish() {
    let fixture = Fixture::new();
    let policy = ToolPolicy::from_json(
        r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","deny":["workspace.commit"]}"#,
        "test",
    )
    .expect("policy");
    let summary = run_under(
        &fixture,
        json!([{"toolCalls": [write("w", REPLY)]}, {"toolCalls": [finish("f")]}]),
        None,
        Arc::new(Policies {
            user: None,
            platform: Some(policy),
        }),
    )
    .await;
    assert!(summary.commits.is_empty(), "{summary:?}");
    assert_eq!(fixture.chat().messages().len(), fixture_messages(&fixture));
}
