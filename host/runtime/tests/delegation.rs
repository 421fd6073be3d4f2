//! Delegation and handoff end to end: scripted agents (one script each),
//! child tasks in the background, `agent.await`, results injected without
//! it, finish cancelling children, handoff chains and their limits, and
//! `persist/` promoted only when the run finishes.

mod support;

use std::future::pending;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use toolhost_core::{AgentModelRequest, Profile};
use toolhost_journal::{
    AgentDelegateStarted, AgentHandoffAccepted, AgentTaskEnded, ChildResultsInjected, Event as _,
    PersistentChangesCommitted, RunCancelled, RunResumed, TaskReturnCompleted,
    ToolCallApprovalDecided, ToolCallApprovalRequested, ToolCallCompleted,
};
use toolhost_model::{AgentModel, ModelFuture, ModelSource, ScriptBook, ScriptedModel};
use toolhost_runtime::{AgentDirectory, LoopConfig, LoopSummary, RunStatus};

fn writer(extra: Value) -> Profile {
    let mut value = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "writer",
        "displayName": "Writer",
        "tools": {
            "allow": [
                "workspace.read_file", "workspace.write_file", "workspace.commit",
                "workspace.finish", "agent.list", "agent.delegate", "agent.await", "agent.handoff"
            ],
            "maxRounds": 10
        },
        "delegation": {"canDelegate": true, "canHandoff": true, "maxHandoffDepth": 2}
    });
    merge(&mut value, extra);
    Profile::from_json(&value.to_string()).expect("writer profile")
}

fn researcher(extra: Value) -> Profile {
    let mut value = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "researcher",
        "description": "Looks things up in the workspace.",
        "tools": {"allow": ["workspace.read_file", "workspace.write_file"], "maxRounds": 5},
        "delegation": {"callable": true, "allowAsSubagent": true, "maxInvocationsPerRun": 2},
        "run": {"presentation": "background", "directRunnable": false}
    });
    merge(&mut value, extra);
    Profile::from_json(&value.to_string()).expect("researcher profile")
}

fn editor(extra: Value) -> Profile {
    let mut value = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "editor",
        "displayName": "Editor",
        "tools": {
            "allow": ["workspace.read_file", "workspace.write_file", "workspace.commit",
                      "workspace.finish", "agent.handoff"],
            "maxRounds": 5
        },
        "delegation": {"callable": true, "allowAsHandoffTarget": true, "canHandoff": true,
                       "maxHandoffDepth": 1}
    });
    merge(&mut value, extra);
    Profile::from_json(&value.to_string()).expect("editor profile")
}

fn merge(base: &mut Value, extra: Value) {
    if let (Value::Object(base), Value::Object(extra)) = (base, extra) {
        for (key, value) in extra {
            match base.get_mut(&key) {
                Some(slot @ Value::Object(_)) if value.is_object() => merge(slot, value),
                _ => {
                    base.insert(key, value);
                }
            }
        }
    }
}

fn delegate(id: &str, agent: &str) -> Value {
    call(
        id,
        "agent_delegate",
        json!({"agentId": agent, "task": {"objective": "Note where the lantern came from", "deadline": "dawn"}}),
    )
}

fn research_script(prefix: &str) -> Value {
    json!([
        {"toolCalls": [call(&format!("{prefix}_w"), "workspace_write_file",
            json!({"path": "scratch/lantern.md", "content": "From the Drowned Library."}))]},
        {"toolCalls": [call(&format!("{prefix}_r"), "task_return", json!({
            "summary": "The lantern came from the Drowned Library.",
            "confidence": "high",
            "artifacts": [{"path": "scratch/lantern.md", "kind": "markdown", "role": "notes"}]
        }))]}
    ])
}

fn finish_reply(prefix: &str) -> Value {
    json!({"toolCalls": [write(&format!("{prefix}_w"), REPLY), commit(&format!("{prefix}_c")),
                         finish(&format!("{prefix}_f"))]})
}

fn directory(profiles: Vec<Profile>) -> AgentDirectory {
    AgentDirectory::new(profiles).expect("directory")
}

/// The writer as `writer(json!({}))` makes it, with `agents` to call,
/// run under the default config; the run must complete.
async fn run_writer_to_completion(
    fixture: &Fixture,
    models: Arc<dyn ModelSource>,
    agents: Vec<Profile>,
) -> LoopSummary {
    let summary = fixture
        .run_agents(&writer(json!({})), models, directory(agents), config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    summary
}

#[tokio::test]
async fn a_delegated_task_runs_returns_and_is_awaited() {
    let fixture = Fixture::new();
    let models = book(
        json!([
            {"toolCalls": [call("p0", "agent_list", json!({})), delegate("p1", "researcher")]},
            {"toolCalls": [call("p2", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 20000}))]},
            finish_reply("p3")
        ]),
        json!({"researcher": research_script("r")}),
    );
    let summary = run_writer_to_completion(&fixture, models, vec![researcher(json!({}))]).await;
    // agent.list showed who takes tasks from the writer, through agent-read.
    let listed = fixture.tool_result("p0");
    assert_eq!(listed["structured"]["agents"][0]["profileId"], "researcher");
    assert_eq!(
        listed["structured"]["agents"][0]["operations"],
        json!(["delegate"])
    );
    assert_eq!(listed["structured"]["agents"][0]["maxInvocationsPerRun"], 2);
    assert!(
        listed["content"]
            .as_str()
            .expect("content")
            .contains("Looks things up in the workspace.")
    );
    assert_eq!(summary.tasks.len(), 1);
    let task = &summary.tasks[0];
    assert_eq!(
        (task.agent_id.as_str(), task.status),
        ("researcher", "completed")
    );

    // The parent read the child's report through agent.await.
    let awaited = fixture.tool_result("p2");
    let content = awaited["content"].as_str().expect("content");
    assert!(
        content.contains("The lantern came from the Drowned Library."),
        "{content}"
    );
    assert!(
        content.contains("scratch/lantern.md (markdown, notes)"),
        "{content}"
    );
    assert_eq!(awaited["structured"]["tasks"][0]["status"], "completed");
    assert_eq!(awaited["structured"]["timedOut"], false);

    // The child's result files.
    let child = &task.child_invocation_id;
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.run_dir.join(format!("agent-results/{child}.json")))
            .expect("agent result"),
    )
    .expect("json");
    assert_eq!(result["kind"], "toolhost.agentTaskResult");
    assert_eq!(result["runtime"]["parentInvocationId"], "inv_root");
    assert_eq!(result["runtime"]["workspaceKey"], "researcher");
    let summary_md =
        std::fs::read_to_string(fixture.run_dir.join("summaries/researcher-result.md"))
            .expect("summary file");
    assert!(summary_md.contains("Drowned Library"));
    // The child's replies are stored under its own invocation.
    assert!(
        fixture
            .run_dir
            .join(format!("model-responses/{child}/round-001.json"))
            .exists()
    );
    // The brief reached the child, extra keys included.
    let started = &fixture.payloads(AgentDelegateStarted::TYPE)[0];
    assert_eq!(started["targetProfileId"], "researcher");
    let first_request: Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixture
                .run_dir
                .join(format!("model-responses/{child}/round-001.json")),
        )
        .expect("reply"),
    )
    .expect("json");
    assert_eq!(first_request["invocationId"], child.as_str());
    assert_eq!(fixture.payloads(TaskReturnCompleted::TYPE).len(), 1);
}

/// Records every request an agent sends; before answering round
/// `hold_round`, waits until `ready` exists.
struct Watching {
    inner: ScriptedModel,
    requests: Mutex<Vec<AgentModelRequest>>,
    hold_round: usize,
    ready: std::path::PathBuf,
}

impl AgentModel for Watching {
    fn describe(&self) -> String {
        "watching".into()
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let round = {
                let mut requests = self.requests.lock().expect("lock");
                requests.push(request.clone());
                requests.len()
            };
            if round == self.hold_round {
                while !self.ready.exists() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            self.inner.complete(request).await
        })
    }
}

/// The writer talks to `writer`; every other agent gets its model from
/// `others`.
struct WriterAnd {
    writer: Arc<dyn AgentModel>,
    others: Arc<dyn ModelSource>,
}

impl ModelSource for WriterAnd {
    fn model_for(&self, agent_id: &str) -> Arc<dyn AgentModel> {
        if agent_id == "writer" {
            Arc::clone(&self.writer)
        } else {
            self.others.model_for(agent_id)
        }
    }

    fn describe(&self) -> String {
        "writer and others".into()
    }
}

#[tokio::test]
async fn results_reach_the_parent_without_await() {
    let fixture = Fixture::new();
    let root = Arc::new(Watching {
        inner: script(json!([
            {"toolCalls": [delegate("p1", "researcher")]},
            {"toolCalls": [call("p2", "workspace_read_file", json!({"path": "scratch/lantern.md"}))]},
            finish_reply("p3")
        ])),
        requests: Mutex::new(Vec::new()),
        // Round 2 waits for the child's result, so it has ended by then.
        hold_round: 2,
        ready: fixture.run_dir.join("summaries/researcher-result.md"),
    });
    let models = Arc::new(WriterAnd {
        writer: root.clone(),
        others: book(json!([]), json!({"researcher": research_script("r")})),
    });
    run_writer_to_completion(&fixture, models, vec![researcher(json!({}))]).await;
    let requests = root.requests.lock().expect("lock");
    assert_eq!(requests.len(), 3);
    let notice = |request: &AgentModelRequest| {
        request.messages.iter().any(|message| {
            message
                .text()
                .contains("[system notice] Tasks you delegated have ended")
        })
    };
    assert!(!notice(&requests[1]), "not before the task ended");
    assert!(notice(&requests[2]), "the third request carries the result");
    let injected = &fixture.payloads(ChildResultsInjected::TYPE)[0];
    assert_eq!(injected["round"], 2);
}

/// Never answers: a child that is still working.
struct Stuck;

impl AgentModel for Stuck {
    fn describe(&self) -> String {
        "stuck".into()
    }

    fn complete<'a>(&'a self, _request: &'a AgentModelRequest) -> ModelFuture<'a> {
        Box::pin(pending())
    }
}

/// Every agent's model never answers.
struct AllStuck;

impl ModelSource for AllStuck {
    fn model_for(&self, _agent_id: &str) -> Arc<dyn AgentModel> {
        Arc::new(Stuck)
    }

    fn describe(&self) -> String {
        "stuck".into()
    }
}

/// The writer reads `replies`; the agents it calls never answer.
fn stuck_children(replies: Value) -> Arc<WriterAnd> {
    Arc::new(WriterAnd {
        writer: Arc::new(script(replies)),
        others: Arc::new(AllStuck),
    })
}

#[tokio::test]
async fn finish_cancels_unfinished_children_and_handoff_waits_for_them() {
    let fixture = Fixture::new();
    let models = stuck_children(json!([
            {"toolCalls": [delegate("p1", "researcher")]},
            // Refused: a handoff leaves no task behind.
            {"toolCalls": [call("p2", "agent_handoff", json!({"agentId": "editor", "handoff": {"objective": "Finish"}}))]},
            {"toolCalls": [call("p3", "agent_await", json!({"mode": "nextCompleted", "timeoutMs": 50}))]},
            finish_reply("p4")
    ]));
    let summary = run_writer_to_completion(
        &fixture,
        models,
        vec![researcher(json!({})), editor(json!({}))],
    )
    .await;
    assert_eq!(
        fixture.tool_result("p2")["errorCode"],
        "agent.handoff_pending_tasks"
    );
    let waited = fixture.tool_result("p3");
    assert_eq!(waited["structured"]["timedOut"], true);
    assert_eq!(waited["structured"]["tasks"][0]["status"], "running");
    assert_eq!(summary.tasks[0].status, "cancelled");
    let finished = fixture.tool_result("p4_f");
    assert_eq!(
        finished["structured"]["cancelledTasks"][0],
        summary.tasks[0].task_id.as_str()
    );
    let ended = &fixture.payloads(AgentTaskEnded::TYPE)[0];
    assert_eq!(ended["status"], "cancelled");
}

#[tokio::test]
async fn a_handoff_chain_continues_the_run_until_its_depth_limit() {
    let fixture = Fixture::new();
    let models = book(
        json!([
            {"toolCalls": [write("w1", "Draft by the writer."), commit("w2"),
                call("w3", "agent_handoff", json!({
                    "agentId": "editor",
                    "handoff": {"objective": "Polish the reply", "mustPreserve": ["the lantern"]}
                }))]}
        ]),
        json!({"editor": [
            // The editor may not hand off again: depth 1 is used up.
            {"toolCalls": [call("e1", "agent_handoff", json!({"agentId": "writer", "handoff": {"objective": "Back to you"}}))]},
            // The writer's commit counts: the editor may finish at once.
            {"toolCalls": [finish("e2")]}
        ]}),
    );
    let summary = fixture
        .run_agents(
            &writer(json!({"delegation": {"callable": true, "allowAsHandoffTarget": true}})),
            models,
            directory(vec![editor(json!({}))]),
            config(),
        )
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(
        summary.agents,
        vec!["writer".to_owned(), "editor".to_owned()]
    );
    assert_eq!(
        fixture.tool_result("w3")["structured"]["status"],
        "accepted"
    );
    assert!(
        fixture.tool_result("w3")["content"]
            .as_str()
            .expect("content")
            .starts_with("Handoff accepted for Agent Editor.")
    );
    assert_eq!(
        fixture.tool_result("e1")["errorCode"],
        "agent.handoff_depth_exhausted"
    );
    let accepted = &fixture.payloads(AgentHandoffAccepted::TYPE)[0];
    assert_eq!(accepted["depth"], 1);
    // The editor's first request is the rendered brief.
    let next = accepted["newInvocationId"].as_str().expect("id");
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixture
                .run_dir
                .join(format!("model-responses/{next}/round-001.json")),
        )
        .expect("reply"),
    )
    .expect("json");
    assert_eq!(stored["invocationId"], next);
    assert_eq!(fixture.last_message(), "Draft by the writer.");
}

#[tokio::test]
async fn delegation_policy_and_budgets_are_recoverable_refusals() {
    let fixture = Fixture::new();
    let models = book(
        json!([
            {"toolCalls": [
                delegate("p1", "nobody"),
                delegate("p2", "editor"),
                delegate("p3", "researcher"),
                delegate("p4", "researcher")
            ]},
            finish_reply("p5")
        ]),
        json!({"researcher": [{"toolCalls": [call("r1", "task_return", json!({"summary": "ok"}))]}]}),
    );
    let summary = run_writer_to_completion(
        &fixture,
        models,
        vec![
            researcher(json!({"delegation": {"maxInvocationsPerRun": 1}})),
            editor(json!({})),
        ],
    )
    .await;
    fixture.assert_results(&[
        ("p1", Some("agent.target_profile_not_found")),
        ("p2", Some("agent.delegation_policy_denied")),
        ("p3", None),
        ("p4", Some("agent.delegation_budget_exhausted")),
    ]);
    assert_eq!(summary.tasks.len(), 1);
}

#[tokio::test]
async fn a_caller_the_target_does_not_accept_is_refused() {
    let fixture = Fixture::new();
    let models = book(
        json!([{"toolCalls": [delegate("p1", "researcher")]}, finish_reply("p2")]),
        json!({}),
    );
    run_writer_to_completion(
        &fixture,
        models,
        vec![researcher(
            json!({"delegation": {"allowedCallers": ["planner"]}}),
        )],
    )
    .await;
    let refused = fixture.tool_result("p1");
    assert_eq!(refused["errorCode"], "agent.delegation_policy_denied");
    assert!(
        refused["content"]
            .as_str()
            .expect("content")
            .contains("does not accept calls from writer")
    );
}

#[tokio::test]
async fn persist_is_promoted_only_when_the_run_finishes() {
    for (finishes, replies) in [
        (
            true,
            json!([{"toolCalls": [
                call("a", "workspace_write_file", json!({"path": "persist/notes.md", "content": "Mirelle owes Ren."})),
                write("b", REPLY), commit("c"), finish("d")
            ]}]),
        ),
        (
            false,
            json!([
                {"toolCalls": [call("a", "workspace_write_file", json!({"path": "persist/notes.md", "content": "Mirelle owes Ren."}))]},
                {"text": "done?"}
            ]),
        ),
    ] {
        let fixture = Fixture::new();
        let persist = fixture.run_dir.with_file_name("persist-dir");
        std::fs::create_dir_all(&persist).expect("persist dir");
        std::fs::write(persist.join("kept.md"), "from an earlier run").expect("seed");
        let config = LoopConfig {
            persist_dir: Some(persist.clone()),
            max_rounds: Some(2),
            ..config()
        };
        let summary = fixture
            .run_with(&writer(json!({})), Arc::new(script(replies)), config)
            .await;
        assert_eq!(
            summary.status == RunStatus::Completed,
            finishes,
            "{summary:?}"
        );
        // The earlier file was projected into the run either way.
        assert!(fixture.run_dir.join("persist/kept.md").exists());
        assert_eq!(persist.join("notes.md").exists(), finishes);
        assert_eq!(
            fixture.payloads(PersistentChangesCommitted::TYPE).len(),
            usize::from(finishes)
        );
    }
}

#[test]
fn a_script_gives_each_agent_its_own_replies() {
    let models = book(
        json!([{"text": "root"}]),
        json!({"researcher": [{"text": "child"}]}),
    );
    assert_eq!(models.agent("writer").remaining(), 1);
    assert_eq!(models.agent("researcher").remaining(), 1);
    assert!(
        models
            .agent("researcher")
            .describe()
            .ends_with("#researcher")
    );
    let error = ScriptBook::parse(
        r#"{"schemaVersion":1,"kind":"toolhost.modelScript","replies":[],"agents":{"x":[{"bad":1}]}}"#,
        "inline",
    )
    .expect_err("bad agent reply");
    assert!(error.to_string().contains("agents.x[0]"), "{error}");
    let _: &dyn ModelSource = models.as_ref();
    let _ = LoopConfig::default();
}

/// Answers from the script until it runs out, then never again.
struct ThenStuck(ScriptedModel);

impl AgentModel for ThenStuck {
    fn describe(&self) -> String {
        "then stuck".into()
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            if self.0.remaining() == 0 {
                pending::<()>().await;
            }
            self.0.complete(request).await
        })
    }
}

#[tokio::test]
async fn a_cancelled_run_stops_keeps_its_commits_and_cancels_its_tasks() {
    let fixture = Fixture::new();
    // The root commits and delegates, then waits on a model that never answers.
    let models = Arc::new(WriterAnd {
        writer: Arc::new(ThenStuck(script(json!([
            {"toolCalls": [write("p1", REPLY), commit("p2"), delegate("p3", "researcher")]}
        ])))),
        others: Arc::new(AllStuck),
    });
    let config = config();
    let cancel = config.cancel.clone();
    let journal = fixture.run_dir.join("events.jsonl");
    tokio::spawn(async move {
        // Once the root's three calls are done (the first call of a tool
        // may wait for its component to compile), and a moment for the
        // child to start waiting.
        while std::fs::read_to_string(&journal)
            .unwrap_or_default()
            .matches(&format!(r#""type":"{}""#, ToolCallCompleted::TYPE))
            .count()
            < 3
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        cancel.cancel();
    });
    let summary = tokio::time::timeout(
        Duration::from_secs(60),
        fixture.run_agents(
            &writer(json!({})),
            models,
            directory(vec![researcher(json!({}))]),
            config,
        ),
    )
    .await
    .expect("a cancelled run stops");
    assert_eq!(summary.status, RunStatus::Cancelled, "{summary:?}");
    assert_eq!(summary.code.as_deref(), Some("agent.cancelled"));
    assert_eq!(summary.commits.len(), 1, "the commit stays");
    assert_eq!(summary.tasks[0].status, "cancelled");
    let cancelled = &fixture.payloads(RunCancelled::TYPE)[0];
    assert_eq!(cancelled["preservedCommitCount"], 1);
    assert_eq!(
        cancelled["cancelledTasks"][0],
        summary.tasks[0].task_id.as_str()
    );
    assert_eq!(fixture.last_message(), REPLY);
}

#[tokio::test]
async fn a_delegated_agent_sees_only_what_its_profile_shows() {
    let fixture = Fixture::new();
    let models = book(
        json!([
            {"toolCalls": [write("p1", "Secret draft."), delegate("p2", "researcher")]},
            {"toolCalls": [call("p3", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 20000}))]},
            {"toolCalls": [commit("p4"), finish("p5")]}
        ]),
        json!({"researcher": [
            {"toolCalls": [
                call("r1", "workspace_read_file", json!({"path": "output/main.md"})),
                call("r2", "workspace_write_file", json!({"path": "summaries/x.md", "content": "x"})),
                call("r3", "workspace_write_file", json!({"path": "scratch/x.md", "content": "x"})),
                call("r4", "workspace_list_files", json!({}))
            ]},
            {"toolCalls": [call("r5", "task_return", json!({"summary": "looked"}))]}
        ]}),
    );
    let researcher = researcher(json!({
        "tools": {"allow": ["workspace.read_file", "workspace.write_file", "workspace.list_files"]},
        "workspace": {"visibleRoots": ["scratch", "summaries"], "writableRoots": ["scratch"]}
    }));
    let summary = run_writer_to_completion(&fixture, models, vec![researcher]).await;
    fixture.assert_results(&[
        ("r1", Some("workspace.path_not_visible")),
        ("r2", Some("workspace.path_not_writable")),
        ("r3", None),
    ]);
    let listing = fixture.tool_result("r4")["content"]
        .as_str()
        .expect("content")
        .to_owned();
    assert!(!listing.contains("output/"), "{listing}");
    // The runtime still writes the task's summary file for the parent.
    assert!(
        fixture
            .run_dir
            .join("summaries/researcher-result.md")
            .exists()
    );
    assert_eq!(summary.tasks[0].status, "completed");
}

/// The review found a handoff target whose profile hides a root could
/// still publish a file under it with `workspace_commit`: the commit read
/// through the run's workspace, not the invocation's.
#[tokio::test]
async fn a_handoff_target_commits_only_what_its_profile_shows() {
    let fixture = Fixture::new();
    let models = book(
        json!([
            {"toolCalls": [
                call("w1", "workspace_write_file",
                    json!({"path": "output/secret.md", "content": "The writer's private notes."})),
                call("w2", "agent_handoff", json!({"agentId": "editor", "handoff": {"objective": "Reply"}}))
            ]}
        ]),
        json!({"editor": [
            {"toolCalls": [call("e1", "workspace_commit", json!({"path": "output/secret.md"}))]},
            {"toolCalls": [
                call("e2", "workspace_write_file", json!({"path": "scratch/reply.md", "content": REPLY})),
                call("e3", "workspace_commit", json!({"path": "scratch/reply.md"})),
                finish("e4")
            ]}
        ]}),
    );
    let editor = editor(json!({
        "workspace": {"visibleRoots": ["scratch"], "writableRoots": ["scratch"]}
    }));
    run_writer_to_completion(&fixture, models, vec![editor]).await;
    fixture.assert_results(&[("e1", Some("workspace.path_not_visible")), ("e3", None)]);
    let texts: Vec<String> = fixture
        .chat()
        .messages()
        .iter()
        .map(|message| message.text().to_owned())
        .collect();
    assert!(
        !texts.iter().any(|text| text.contains("private notes")),
        "the hidden file reached the chat"
    );
    assert_eq!(texts.last().map(String::as_str), Some(REPLY));
}

/// Counts the model calls a run makes, through any agent's model.
struct Counting {
    book: Arc<ScriptBook>,
    asked: Arc<std::sync::atomic::AtomicU32>,
}

struct CountingModel {
    inner: Arc<dyn AgentModel>,
    asked: Arc<std::sync::atomic::AtomicU32>,
}

impl AgentModel for CountingModel {
    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn complete<'a>(&'a self, request: &'a AgentModelRequest) -> ModelFuture<'a> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.complete(request)
    }

    fn skip_reply(&self) {
        self.inner.skip_reply();
    }
}

impl ModelSource for Counting {
    fn model_for(&self, agent_id: &str) -> Arc<dyn AgentModel> {
        Arc::new(CountingModel {
            inner: self.book.model_for(agent_id),
            asked: Arc::clone(&self.asked),
        })
    }

    fn describe(&self) -> String {
        "counting".into()
    }
}

/// Cut the run's `run_completed`, resume it with `models` and the recorded
/// settings; the summary and the model calls the resume made.
async fn resume_after_the_end(
    fixture: &Fixture,
    models: Arc<ScriptBook>,
    agents: AgentDirectory,
) -> (LoopSummary, u32) {
    fixture.cut_the_end();
    let (run, record) = toolhost_runtime::Run::resume(&fixture.run_dir).expect("resume");
    let asked = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counting = Arc::new(Counting {
        book: models,
        asked: Arc::clone(&asked),
    });
    let mut config = record.config();
    config.retry = support::config().retry;
    let summary =
        toolhost_runtime::run_agent_loop(&run, parts(&run, counting, agents), &config).await;
    (summary, asked.load(std::sync::atomic::Ordering::SeqCst))
}

#[tokio::test]
async fn a_resumed_handoff_chain_is_accepted_again_without_asking_anyone() {
    let fixture = Fixture::new();
    let script = || {
        book(
            json!([
                {"toolCalls": [write("w1", "Draft by the writer."), commit("w2"),
                    call("w3", "agent_handoff", json!({"agentId": "editor", "handoff": {"objective": "Polish"}}))]}
            ]),
            json!({"editor": [
                {"toolCalls": [call("e1", "agent_handoff", json!({"agentId": "writer", "handoff": {"objective": "Back"}}))]},
                {"toolCalls": [finish("e2")]}
            ]}),
        )
    };
    let writer = writer(json!({"delegation": {"callable": true, "allowAsHandoffTarget": true}}));
    let agents = directory(vec![editor(json!({}))]);
    let mut settings = config();
    settings.seed = Some(3);
    let summary = fixture
        .run_agents(&writer, script(), agents.clone(), settings)
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let before = fixture.type_counts();
    let chat = std::fs::read(&fixture.chat).expect("chat");

    let (resumed, asked) = resume_after_the_end(&fixture, script(), agents).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{resumed:?}");
    assert_eq!(asked, 0, "no model was asked again");
    assert_eq!(resumed.agents, summary.agents);
    assert_eq!(std::fs::read(&fixture.chat).expect("chat"), chat);
    let mut after = fixture.type_counts();
    assert_eq!(after.remove(RunResumed::TYPE), Some(1));
    assert_eq!(after, before, "every step journalled once");
}

#[tokio::test]
async fn a_child_that_failed_is_not_run_again_when_the_run_resumes() {
    let fixture = Fixture::new();
    // The researcher's script is empty: its first request fails the task.
    let script = || {
        book(
            json!([
                {"toolCalls": [delegate("p1", "researcher")]},
                {"toolCalls": [call("p2", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 20000}))]},
                finish_reply("p3")
            ]),
            json!({"researcher": []}),
        )
    };
    let agents = directory(vec![researcher(json!({}))]);
    let summary = fixture
        .run_agents(&writer(json!({})), script(), agents.clone(), config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(summary.tasks[0].status, "failed");
    let before = fixture.type_counts();

    // Resumed with a researcher that would now answer: it is not asked.
    let answering = book(
        json!([
            {"toolCalls": [delegate("p1", "researcher")]},
            {"toolCalls": [call("p2", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 20000}))]},
            finish_reply("p3")
        ]),
        json!({"researcher": research_script("r")}),
    );
    let (resumed, asked) = resume_after_the_end(&fixture, answering, agents).await;
    assert_eq!(resumed.status, RunStatus::Completed, "{resumed:?}");
    assert_eq!(asked, 0, "the failed child was run again");
    assert_eq!(resumed.tasks[0].status, "failed");
    let mut after = fixture.type_counts();
    assert_eq!(after.remove(RunResumed::TYPE), Some(1));
    assert_eq!(after, before, "every step journalled once");
}

/// An embedder that drops the loop (a server shutting down) interrupts the
/// run: its delegated children stop too, nothing ends the run, and it can
/// be resumed at once — no task is left holding its directory.
#[tokio::test]
async fn a_dropped_loop_stops_its_children_and_leaves_the_run_resumable() {
    let fixture = Fixture::new();
    let models = stuck_children(json!([
        {"toolCalls": [delegate("p1", "researcher")]},
        {"toolCalls": [call("p2", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 300000}))]},
        finish_reply("p3")
    ]));
    let profile = writer(json!({}));
    let running = fixture.run_agents(
        &profile,
        models,
        directory(vec![researcher(json!({}))]),
        config(),
    );
    let dropped = tokio::time::timeout(Duration::from_millis(500), running).await;
    assert!(dropped.is_err(), "the loop was still waiting for its child");
    // Aborted tasks let go of the run when the runtime next polls them.
    let mut resumed = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if let Ok(run) = toolhost_runtime::Run::resume(&fixture.run_dir) {
            resumed = Some(run);
            break;
        }
    }
    assert!(resumed.is_some(), "a task still holds the run");
    drop(resumed);
    let types = fixture.types();
    assert!(
        types.iter().any(|kind| kind == AgentDelegateStarted::TYPE),
        "{types:?}"
    );
    for end in toolhost_runtime::TERMINAL_EVENTS {
        assert!(!types.iter().any(|kind| kind == end), "{types:?}");
    }
}

/// Made in the run directory when the child's call asks for approval.
const CHILD_ASKED: &str = "child-asked";

/// Waits, like a person would, until the root has finished its call `p2`,
/// then approves: only possible if the root goes on while the child waits.
#[derive(Debug)]
struct ApprovesOnceTheRootMovedOn;

impl toolhost_runtime::approval::Approver for ApprovesOnceTheRootMovedOn {
    fn decide<'a>(
        &'a self,
        run_dir: &'a std::path::Path,
        request: &'a toolhost_runtime::approval::ApprovalRequest,
    ) -> toolhost_runtime::approval::ApprovalFuture<'a> {
        Box::pin(async move {
            assert_ne!(request.invocation_id, "inv_root", "only the child asks");
            std::fs::write(run_dir.join(CHILD_ASKED), b"").expect("mark the ask");
            let journal = run_dir.join("events.jsonl");
            loop {
                let text = std::fs::read_to_string(&journal).unwrap_or_default();
                if text.lines().any(|line| {
                    line.contains(&format!(r#""type":"{}""#, ToolCallCompleted::TYPE))
                        && line.contains(r#""callId":"p2""#)
                }) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            toolhost_runtime::approval::ApprovalDecision {
                verdict: toolhost_runtime::approval::Verdict::Approved,
                by: "the test, after the root moved on".into(),
                note: None,
            }
        })
    }
}

/// A delegated child waiting for a person's approval holds up only itself:
/// the root goes on with its own calls meanwhile, and awaits the child once
/// the approval let it finish.
#[tokio::test]
async fn a_child_waiting_for_approval_does_not_hold_up_the_root() {
    let fixture = Fixture::new();
    // The root's second round waits until the child has asked (on one
    // thread the child runs only when the root waits for something; a
    // builtin another test already loaded gives it nothing to wait for).
    let root = Arc::new(Watching {
        inner: script(json!([
            {"toolCalls": [delegate("p1", "researcher")]},
            {"toolCalls": [call("p2", "workspace_write_file",
                json!({"path": "scratch/meanwhile.md", "content": "The root went on."}))]},
            {"toolCalls": [call("p3", "agent_await", json!({"mode": "allCompleted", "timeoutMs": 30000}))]},
            finish_reply("p4")
        ])),
        requests: Mutex::new(Vec::new()),
        hold_round: 2,
        ready: fixture.run_dir.join(CHILD_ASKED),
    });
    let models = Arc::new(WriterAnd {
        writer: root,
        others: book(
            json!([]),
            json!({"researcher": [
                {"toolCalls": [call("r_read", "workspace_read_file", json!({"path": "scratch/meanwhile.md"}))]},
                {"toolCalls": [call("r_return", "task_return", json!({"summary": "Read it.", "confidence": "high"}))]}
            ]}),
        ),
    });
    let policy = toolhost_core::policy::ToolPolicy::from_json(
        r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","requireApproval":["workspace.read_file"]}"#,
        "test",
    )
    .expect("policy");
    let run = fixture.create_run(&writer(json!({})));
    run.set_approver(Arc::new(ApprovesOnceTheRootMovedOn));
    let mut parts = parts(&run, models, directory(vec![researcher(json!({}))]));
    parts.policies = Some(Arc::new(toolhost_core::policy::Policies {
        user: Some(policy),
        platform: None,
    }));
    let summary = tokio::time::timeout(
        Duration::from_secs(60),
        toolhost_runtime::run_agent_loop(&run, parts, &config()),
    )
    .await
    .expect("neither waits for the other forever");
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(summary.tasks[0].status, "completed");
    let events = fixture.events();
    let seq = |kind: &str, call: &str| {
        events
            .iter()
            .find(|event| event.r#type == kind && event.payload["callId"] == call)
            .map(|event| event.seq)
            .unwrap_or_else(|| panic!("no {kind} of {call}"))
    };
    // The child asked before the root's call, and was answered after it.
    assert!(seq(ToolCallApprovalRequested::TYPE, "r_read") < seq(ToolCallCompleted::TYPE, "p2"));
    assert!(seq(ToolCallApprovalDecided::TYPE, "r_read") > seq(ToolCallCompleted::TYPE, "p2"));
    let read = fixture.tool_result("r_read");
    assert!(
        read["content"]
            .as_str()
            .is_some_and(|text| text.contains("The root went on.")),
        "{read}"
    );
}
