//! The runs API through a real HTTP client: runs started with the
//! operator's models and the tenant's own files, followed as Server-Sent
//! Events, read, called into, cancelled, interrupted and resumed; every
//! refusal with its status and code; one tenant never reaching another's
//! runs.

mod common;

use std::time::Duration;

use common::{script_call as call, *};
use serde_json::{Value, json};
use toolhost_journal::{
    ChatCommitCompleted, ContextAssembled, Event as _, ModelRequestCreated, RunCancelled,
    RunCompleted, RunResumed, RunStarted, ToolCallCompleted,
};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

const REPLY: &str = "*Mirelle folds the map.* Then we leave at dawn.";

/// A script that writes the reply, commits it and finishes.
fn finishing_script() -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"toolCalls": [
            call("c1", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY})),
            call("c2", "workspace_commit", json!({}))
        ]},
        {"toolCalls": [call("c3", "workspace_finish", json!({"reason": "done"}))]}
    ]})
}

fn writer_profile() -> Value {
    json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "writer",
        "tools": {
            "allow": ["chat.read_messages", "workspace.read_file", "workspace.write_file",
                      "workspace.commit", "workspace.finish", "dice.roll"],
            "maxRounds": 6
        }
    })
}

/// A model server that accepts requests and never answers: a run asking
/// it stays in its loop until cancelled or interrupted.
async fn silent_model() -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (address, task)
}

/// A data directory with, for both tenants, the fixture chat as `chat`,
/// `chat2`, `chat3` and the writer profile; and a models file offering
/// `demo` (the finishing script) to all, `silent` (a model that never
/// answers) to all, and `acme-only` to acme.
struct Setup {
    dir: tempfile::TempDir,
    /// The model server that never answers.
    silent: std::net::SocketAddr,
    _silent_task: tokio::task::JoinHandle<()>,
}

impl Setup {
    async fn start() -> Self {
        let (silent, task) = silent_model().await;
        Self::new(silent, task)
    }

    fn new(silent: std::net::SocketAddr, task: tokio::task::JoinHandle<()>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for tenant in ["acme", "globex"] {
            let dirs = TenantDirs::new(&dir.path().join("data"), tenant);
            dirs.ensure().expect("dirs");
            for chat in ["chat", "chat2", "chat3"] {
                seed_chat(&dirs, chat);
            }
            std::fs::write(
                dirs.profiles().join("writer.json"),
                writer_profile().to_string(),
            )
            .expect("profile");
        }
        std::fs::write(
            dir.path().join("script.json"),
            finishing_script().to_string(),
        )
        .expect("script");
        let setup = Self {
            dir,
            silent,
            _silent_task: task,
        };
        setup.write_models(false);
        setup
    }

    /// The models file; `silent_finishes` points `silent` at the script
    /// instead (an operator who changed it while the server was down).
    fn write_models(&self, silent_finishes: bool) {
        let silent = self.silent;
        let silent_entry = if silent_finishes {
            json!({"kind": "script", "path": "script.json"})
        } else {
            json!({"kind": "openai", "url": format!("http://{silent}/v1"), "model": "m", "timeoutSecs": 300})
        };
        let models = json!({"schemaVersion": 1, "kind": "toolhost.models", "models": {
            "demo": {"kind": "script", "path": "script.json"},
            "silent": silent_entry,
            "acme-only": {"kind": "script", "path": "script.json", "tenants": ["acme"]}
        }});
        std::fs::write(self.dir.path().join("models.json"), models.to_string()).expect("models");
    }

    fn models(&self) -> ModelTable {
        ModelTable::load(&self.dir.path().join("models.json")).expect("models")
    }

    fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    async fn serve(&self, limits: Limits) -> Server {
        start_with(
            tokens(self.dir.path()),
            options(&self.data(), self.models(), limits),
        )
        .await
    }
}

fn acme(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.bearer_auth("acme-secret")
}

fn globex(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.bearer_auth("globex-secret")
}

async fn start_run(server: &Server, body: Value) -> String {
    let response = acme(client().post(server.url("/v1/runs")))
        .json(&body)
        .send()
        .await
        .expect("post");
    let location = header(&response, "location");
    let (status, started) = json(response).await;
    assert_eq!(status, 201, "{started}");
    let id = started["id"].as_str().expect("id").to_owned();
    assert_eq!(location, Some(format!("/v1/runs/{id}")));
    id
}

/// The whole event stream of a run: `(id, event, data)` per event.
async fn stream(
    server: &Server,
    id: &str,
    last_event_id: Option<u64>,
) -> Vec<(u64, String, Value)> {
    let mut request = acme(client().get(server.url(&format!("/v1/runs/{id}/events"))));
    if let Some(last) = last_event_id {
        request = request.header("last-event-id", last.to_string());
    }
    let response = request.send().await.expect("events");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(
        header(&response, "content-type").as_deref(),
        Some("text/event-stream")
    );
    let text = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stream ends with the run")
        .expect("body");
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let field = |name: &str| {
            block
                .lines()
                .find_map(|line| line.strip_prefix(&format!("{name}: ")))
                .map(str::to_owned)
        };
        if let (Some(seq), Some(event), Some(data)) = (field("id"), field("event"), field("data")) {
            let seq: u64 = seq.parse().expect("seq");
            let data: Value = serde_json::from_str(&data).expect("data is the journal line");
            assert_eq!(data["seq"], seq);
            assert_eq!(data["type"], event.as_str());
            events.push((seq, event, data));
        }
    }
    events
}

async fn status(server: &Server, id: &str) -> Value {
    let (code, run) = send(acme(client().get(server.url(&format!("/v1/runs/{id}"))))).await;
    assert_eq!(code, 200, "{run}");
    run
}

async fn wait_for_status(server: &Server, id: &str, wanted: &str) -> Value {
    for _ in 0..600 {
        let run = status(server, id).await;
        if run["status"] == wanted {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "run {id} never became {wanted}: {}",
        status(server, id).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_its_events_ends_with_its_summary_and_takes_calls_after() {
    let setup = Setup::start().await;
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "demo", "chat": "chat", "task": "Answer Mirelle."}),
    )
    .await;

    let events = stream(&server, &id, None).await;
    let types: Vec<&str> = events.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert_eq!(types.first(), Some(&RunStarted::TYPE), "{types:?}");
    assert_eq!(types.last(), Some(&RunCompleted::TYPE), "{types:?}");
    assert!(types.contains(&ChatCommitCompleted::TYPE), "{types:?}");
    let seqs: Vec<u64> = events.iter().map(|(seq, _, _)| *seq).collect();
    assert!(
        seqs.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "{seqs:?}"
    );
    // Reconnecting after an event gets only what follows it.
    let last = *seqs.last().expect("events");
    let tail = stream(&server, &id, Some(last - 2)).await;
    assert_eq!(
        tail.iter().map(|(seq, _, _)| *seq).collect::<Vec<_>>(),
        vec![last - 1, last]
    );
    assert_eq!(
        refusal(
            acme(client().get(server.url(&format!("/v1/runs/{id}/events"))))
                .header("last-event-id", "x")
        )
        .await,
        (400, "serve.invalid_request".to_owned())
    );

    let run = wait_for_status(&server, &id, "completed").await;
    assert_eq!(run["profile"], "writer");
    assert_eq!(run["commits"], 1);
    assert_eq!(run["lastSeq"], last);
    assert_eq!(run["summary"]["status"], "completed");
    assert_eq!(run["summary"]["toolCalls"], 3);
    assert!(
        run["summary"].get("runDir").is_none(),
        "no server paths: {run}"
    );
    let chat = std::fs::read_to_string(
        TenantDirs::new(&setup.data(), "acme")
            .chats()
            .join("chat.jsonl"),
    )
    .expect("chat");
    assert!(
        chat.contains("Then we leave at dawn."),
        "the reply reached the chat"
    );

    let (code, list) = send(acme(client().get(server.url("/v1/runs")))).await;
    assert_eq!(code, 200);
    assert_eq!(list["runs"][0]["id"], id.as_str());

    // Files: the fixed list only, opened beneath the run without links.
    let file = |path: &str| acme(client().get(server.url(&format!("/v1/runs/{id}/files/{path}"))));
    let response = file("output/main.md").send().await.expect("file");
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.text().await.expect("text"), REPLY);
    let journal = file("events.jsonl")
        .send()
        .await
        .expect("journal")
        .text()
        .await
        .expect("text");
    assert_eq!(journal.lines().count() as u64, last);
    let (code, listing) = send(file("tool-results")).await;
    assert_eq!(code, 200);
    assert_eq!(
        listing["entries"].as_array().map(Vec::len),
        Some(3),
        "{listing}"
    );
    for refused in [
        "run.json",
        "input/resolved_profile.json",
        "output/%2e%2e/run.json",
    ] {
        assert_eq!(
            refusal(file(refused)).await,
            (403, "serve.path_refused".to_owned()),
            "{refused}"
        );
    }
    assert_eq!(
        refusal(file("output/none.md")).await,
        (404, "serve.not_found".to_owned())
    );
    let run_dir = TenantDirs::new(&setup.data(), "acme").runs().join(&id);
    std::os::unix::fs::symlink("/etc/passwd", run_dir.join("output/link.md")).expect("symlink");
    assert_eq!(
        refusal(file("output/link.md")).await,
        (403, "workspace.symlink_found".to_owned())
    );

    // A call after the end goes through the run's snapshot and gate.
    let calls = server.url(&format!("/v1/runs/{id}/calls"));
    let (code, called) = send(
        acme(client().post(&calls))
            .json(&json!({"tool": "dice.roll", "arguments": {"formula": "2d6"}})),
    )
    .await;
    assert_eq!(code, 200, "{called}");
    assert_eq!(called["isError"], false, "{called}");
    let total = called["result"]["structured"]["total"]
        .as_i64()
        .expect("total");
    assert!((2..=12).contains(&total), "{called}");
    let stored = called["resultRef"].as_str().expect("resultRef");
    assert_eq!(send(file(stored)).await.0, 200);
    assert_eq!(
        refusal(acme(client().post(&calls)).json(&json!({"tool": "chat.search"}))).await,
        (403, "agent.tool_policy_denied".to_owned())
    );
    assert_eq!(
        refusal(acme(client().post(&calls)).json(&json!({"tool": "no.such_tool"}))).await,
        (400, "tool.not_found".to_owned())
    );
    // The run's stored snapshot offers dice.roll; once the tenant's policy
    // denies it, the snapshot grants more than today's rules and no call
    // goes through it.
    let policy = TenantDirs::new(&setup.data(), "acme").policy();
    std::fs::write(
        &policy,
        json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy", "deny": ["dice.roll"]})
            .to_string(),
    )
    .expect("policy");
    assert_eq!(
        refusal(
            acme(client().post(&calls))
                .json(&json!({"tool": "dice.roll", "arguments": {"formula": "1d6"}}))
        )
        .await,
        (409, "tool.snapshot_loosened".to_owned())
    );
    std::fs::remove_file(&policy).expect("policy gone");
    // The run's status stays what its loop ended with; its counts (kept
    // when the loop ended) follow the journal the call appended to.
    let after = status(&server, &id).await;
    assert_eq!(after["status"], "completed");
    let journal = std::fs::read_to_string(run_dir.join("events.jsonl")).expect("journal");
    assert_eq!(after["lastSeq"], journal.lines().count() as u64, "{after}");
    assert!(
        after["lastSeq"].as_u64() > run["lastSeq"].as_u64(),
        "{after}"
    );
    assert_eq!(
        after["toolCalls"].as_u64(),
        run["toolCalls"].as_u64().map(|n| n + 1),
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenant_can_neither_see_nor_touch_a_run() {
    let setup = Setup::start().await;
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "demo", "chat": "chat"}),
    )
    .await;
    let before = wait_for_status(&server, &id, "completed").await;
    let run = |path: &str| server.url(&format!("/v1/runs/{id}{path}"));
    let attempts = [
        globex(client().get(run(""))),
        globex(client().get(run("/events"))),
        globex(client().get(run("/files/output/main.md"))),
        globex(client().get(run("/files/events.jsonl"))),
        globex(client().post(run("/cancel"))),
        globex(client().post(run("/resume"))),
        globex(
            client()
                .post(run("/calls"))
                .json(&json!({"tool": "dice.roll", "arguments": {"formula": "1d6"}})),
        ),
    ];
    for attempt in attempts {
        assert_eq!(refusal(attempt).await, (404, "serve.not_found".to_owned()));
    }
    let (code, list) = send(globex(client().get(server.url("/v1/runs")))).await;
    assert_eq!(
        (code, list["runs"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    // The run is untouched: still acme's, still completed, no event added.
    let after = status(&server, &id).await;
    assert_eq!(after["status"], "completed");
    assert_eq!(after["lastSeq"], before["lastSeq"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_with_their_status_and_code() {
    let setup = Setup::start().await;
    let server = setup.serve(Limits::default()).await;
    let runs = server.url("/v1/runs");
    let post = |body: Value| acme(client().post(&runs)).json(&body);
    assert_eq!(
        refusal(acme(client().post(&runs)).body(r#"{"model":"demo","chat":"chat"}"#)).await,
        (415, "serve.unsupported_media_type".to_owned())
    );
    assert_eq!(
        refusal(
            acme(client().post(&runs))
                .header("content-type", "application/json")
                .body("{nope")
        )
        .await,
        (400, "serve.invalid_json".to_owned())
    );
    let cases = [
        // A client never names where a key goes.
        (
            json!({"model": "demo", "chat": "chat", "url": "http://evil.example/v1"}),
            400,
            "serve.invalid_request",
        ),
        (
            json!({"model": "openai:http://evil.example/v1", "chat": "chat"}),
            400,
            "serve.unknown_model",
        ),
        (json!({"chat": "chat"}), 400, "serve.invalid_request"),
        (
            json!({"model": "nope", "chat": "chat"}),
            400,
            "serve.unknown_model",
        ),
        (
            json!({"model": "demo", "chat": "chat", "promptSnapshot": {"messages": [
                {"role": "system", "content": "preset"},
                {"role": "tool", "content": "x"}
            ]}}),
            400,
            "agent.invalid_prompt_snapshot_file",
        ),
        (
            json!({"model": "demo", "chat": "chat", "promptSnapshot": {"messages": []},
                   "worldInfo": {"worldInfoActivation": {"entries": []}}}),
            400,
            "agent.invalid_prompt_snapshot_file",
        ),
        (
            json!({"model": "demo", "chat": "../globex/chats/chat"}),
            404,
            "serve.not_found",
        ),
        (
            json!({"model": "demo", "chat": "missing"}),
            404,
            "serve.not_found",
        ),
        (
            json!({"model": "demo", "chat": "chat", "profile": "missing"}),
            400,
            "serve.unknown_profile",
        ),
        (
            json!({"model": "demo", "chat": "chat", "profile": "../../acme/profiles/writer"}),
            400,
            "serve.unknown_profile",
        ),
        (
            json!({"model": "demo", "chat": "chat", "profile": {"schemaVersion": 1}}),
            400,
            "agent.profile_invalid",
        ),
        (
            json!({"model": "demo", "chat": "chat", "agents": ["missing"]}),
            400,
            "serve.unknown_profile",
        ),
        (
            json!({"model": "demo", "chat": "chat", "skills": {"global": "missing"}}),
            400,
            "serve.unknown_skills",
        ),
    ];
    for (body, status, code) in cases {
        let (got_status, got_code) = refusal(post(body.clone())).await;
        assert_eq!((got_status, got_code.as_str()), (status, code), "{body}");
    }
    // A model offered to one tenant is unknown to the others.
    assert_eq!(
        refusal(globex(client().post(&runs)).json(&json!({"model": "acme-only", "chat": "chat"})))
            .await,
        (400, "serve.unknown_model".to_owned())
    );
    // The bad role is named by its path.
    let (_, body) = send(acme(client().post(&runs)).json(&json!({
        "model": "demo", "chat": "chat",
        "promptSnapshot": {"messages": [{"role": "user", "content": 7}]}
    })))
    .await;
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|message| message.starts_with("promptSnapshot.messages[0].content:")),
        "{body}"
    );
    // A start request may carry a long chat's prompt; nothing may carry more.
    let huge = "x".repeat(toolhost_serve::MAX_RUN_BODY_BYTES + 1);
    assert_eq!(
        refusal(post(json!({"model": "demo", "chat": "chat", "task": huge}))).await,
        (413, "serve.body_too_large".to_owned())
    );
    let over_a_snapshot =
        "灯".repeat(toolhost_core::prompt_snapshot::MAX_SNAPSHOT_TEXT_BYTES / 3 + 1);
    assert_eq!(
        refusal(post(
            json!({"model": "demo", "chat": "chat", "promptSnapshot": {
                "messages": [{"role": "user", "content": over_a_snapshot}]
            }})
        ))
        .await,
        (400, "agent.invalid_prompt_snapshot_file".to_owned())
    );
    // Nothing was created by any of them.
    let (_, list) = send(acme(client().get(&runs))).await;
    assert_eq!(list["runs"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_answer_429_a_busy_chat_409_and_a_run_in_its_loop_takes_no_call() {
    let setup = Setup::start().await;
    let limits = Limits {
        runs_total: 2,
        runs_per_tenant: 2,
        calls_in_flight: 4,
        retry_after_secs: 7,
        ..Limits::default()
    };
    let server = setup.serve(limits).await;
    let body = |chat: &str| json!({"profile": "writer", "model": "silent", "chat": chat});
    let first = start_run(&server, body("chat")).await;
    let (code, error) =
        refusal(acme(client().post(server.url("/v1/runs"))).json(&body("chat"))).await;
    assert_eq!((code, error.as_str()), (409, "chat.busy"));
    let second = start_run(&server, body("chat2")).await;
    let response = acme(client().post(server.url("/v1/runs")))
        .json(&body("chat3"))
        .send()
        .await
        .expect("post");
    assert_eq!(header(&response, "retry-after").as_deref(), Some("7"));
    let (code, error) = json(response).await;
    assert_eq!(
        (code, error["code"].as_str()),
        (429, Some("serve.too_many_runs"))
    );

    assert_eq!(status(&server, &first).await["status"], "running");
    assert_eq!(
        refusal(
            acme(client().post(server.url(&format!("/v1/runs/{first}/calls"))))
                .json(&json!({"tool": "dice.roll"}))
        )
        .await,
        (409, "run.in_loop".to_owned())
    );
    assert_eq!(
        refusal(acme(
            client().post(server.url(&format!("/v1/runs/{first}/resume")))
        ))
        .await,
        (409, "run.running".to_owned())
    );

    // Cancel: the run stops at its next step; its stream ends with it.
    let (code, cancelled) = send(acme(
        client().post(server.url(&format!("/v1/runs/{first}/cancel"))),
    ))
    .await;
    assert_eq!(
        (code, cancelled["status"].as_str()),
        (202, Some("cancelling"))
    );
    let events = stream(&server, &first, None).await;
    assert_eq!(
        events.last().map(|(_, kind, _)| kind.as_str()),
        Some(RunCancelled::TYPE)
    );
    wait_for_status(&server, &first, "cancelled").await;
    assert_eq!(
        refusal(acme(
            client().post(server.url(&format!("/v1/runs/{first}/cancel")))
        ))
        .await,
        (409, "run.already_ended".to_owned())
    );
    // Its place and its chat are free again.
    let third = start_run(&server, body("chat")).await;
    for id in [&second, &third] {
        send(acme(
            client().post(server.url(&format!("/v1/runs/{id}/cancel"))),
        ))
        .await;
    }
}

/// A run of acme's on `chat` whose model never answers, interrupted (the
/// server told to stop its loops) once it asked the model; the server is
/// still up.
async fn interrupted_run(setup: &Setup) -> (Server, String) {
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "silent", "chat": "chat"}),
    )
    .await;
    // Wait until it asked the model.
    for _ in 0..200 {
        if status(&server, &id).await["lastSeq"].as_u64().unwrap_or(0) >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    server.state.interrupt_runs();
    (server, id)
}

/// A server that stops mid-run leaves the run interrupted (no terminal
/// event); the next server over the same data resumes it to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_interrupted_by_a_stop_resumes_on_the_next_server_and_completes() {
    let setup = Setup::start().await;
    let (server, id) = interrupted_run(&setup).await;
    let events = stream(&server, &id, None).await;
    assert!(
        events
            .iter()
            .all(|(_, kind, _)| !toolhost_runtime::TERMINAL_EVENTS.contains(&kind.as_str())),
        "no terminal event: {events:?}"
    );
    wait_for_status(&server, &id, "interrupted").await;
    assert_eq!(
        refusal(
            acme(client().post(server.url(&format!("/v1/runs/{id}/calls"))))
                .json(&json!({"tool": "dice.roll"}))
        )
        .await,
        (409, "run.interrupted".to_owned())
    );
    drop(server);

    // The operator points `silent` at a model that answers, and restarts.
    setup.write_models(true);
    let server = setup.serve(Limits::default()).await;
    assert_eq!(
        toolhost_serve::runs::interrupted(&server.state),
        vec![("acme".to_owned(), id.clone())]
    );
    let (code, resumed) = send(acme(
        client().post(server.url(&format!("/v1/runs/{id}/resume"))),
    ))
    .await;
    assert_eq!(code, 201, "{resumed}");
    let events = stream(&server, &id, None).await;
    let types: Vec<&str> = events.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert!(types.contains(&RunResumed::TYPE), "{types:?}");
    assert_eq!(types.last(), Some(&RunCompleted::TYPE), "{types:?}");
    let run = wait_for_status(&server, &id, "completed").await;
    assert_eq!(run["commits"], 1);
    assert!(toolhost_serve::runs::interrupted(&server.state).is_empty());
    assert_eq!(
        refusal(acme(
            client().post(server.url(&format!("/v1/runs/{id}/resume")))
        ))
        .await,
        (409, "run.already_ended".to_owned())
    );
}

/// A run's `run.json` names the chat it commits to as a path: one edited
/// (or, on a cluster node, rebuilt from NATS) to name another tenant's chat
/// is refused at the resume, before anything of it is opened, and that
/// chat is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_whose_record_names_another_tenants_chat_is_refused() {
    let setup = Setup::start().await;
    let (server, id) = interrupted_run(&setup).await;
    wait_for_status(&server, &id, "interrupted").await;
    drop(server);

    let record = setup
        .data()
        .join(format!("tenants/acme/runs/{id}/run.json"));
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(&record).expect("run.json")).expect("json");
    let theirs = TenantDirs::new(&setup.data(), "globex")
        .chats()
        .join("chat.jsonl");
    let theirs = std::path::absolute(&theirs).expect("absolute");
    manifest["inputs"]["chat"]["path"] = json!(theirs.display().to_string());
    std::fs::remove_file(&record).expect("remove");
    std::fs::write(&record, manifest.to_string()).expect("edit");
    let before = std::fs::read(&theirs).expect("globex's chat");

    setup.write_models(true);
    let server = setup.serve(Limits::default()).await;
    assert_eq!(
        refusal(acme(
            client().post(server.url(&format!("/v1/runs/{id}/resume")))
        ))
        .await,
        (409, "run.foreign_inputs".to_owned())
    );
    assert_eq!(std::fs::read(&theirs).expect("globex's chat"), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_describes_the_runs_api() {
    let setup = Setup::start().await;
    let server = setup.serve(Limits::default()).await;
    let (_, document) = send(acme(client().get(server.url("/v1/openapi.json")))).await;
    for (path, method) in [
        ("/v1/runs", "post"),
        ("/v1/runs", "get"),
        ("/v1/runs/{id}", "get"),
        ("/v1/runs/{id}/events", "get"),
        ("/v1/runs/{id}/cancel", "post"),
        ("/v1/runs/{id}/resume", "post"),
        ("/v1/runs/{id}/calls", "post"),
        ("/v1/runs/{id}/files/{path}", "get"),
        ("/v1/runs/{id}/approvals", "get"),
        ("/v1/runs/{id}/approvals/{callId}", "post"),
    ] {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path}"
        );
    }
    assert!(document["components"]["schemas"]["StartRun"]["properties"]["model"].is_object());
}

/// After `mcp refresh` or `ext grant` the server loads its tools again:
/// new runs get the new catalog; a running run keeps the tools it started
/// with, and its snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_tools_reach_new_runs_and_running_runs_keep_theirs() {
    let setup = Setup::start().await;
    let server = setup.serve(Limits::default()).await;
    let body = |chat: &str| json!({"profile": "writer", "model": "silent", "chat": chat});
    let before = start_run(&server, body("chat")).await;
    wait_for_snapshot(&setup, &before).await;

    let without_dice: Vec<_> = toolhost_builtins::components()
        .iter()
        .filter(|component| component.package != "dice-roll")
        .cloned()
        .collect();
    let host = toolhost_runtime::ToolHost::with_components(
        toolhost_runtime::ToolHostConfig::default(),
        &without_dice,
        &|_| {},
    )
    .await
    .expect("tools");
    server.state.replace_host(std::sync::Arc::new(host));

    let (_, tools) = send(acme(client().get(server.url("/v1/tools")))).await;
    let ids = tool_ids(&tools);
    assert!(!ids.contains(&"builtin:dice.roll"), "{ids:?}");
    let after = start_run(&server, body("chat2")).await;
    let offered = |snapshot: &Value| {
        snapshot["bindings"]
            .as_array()
            .expect("bindings")
            .iter()
            .any(|binding| binding["descriptor"]["id"] == "builtin:dice.roll")
    };
    assert!(offered(&wait_for_snapshot(&setup, &before).await));
    assert!(!offered(&wait_for_snapshot(&setup, &after).await));
    for id in [&before, &after] {
        send(acme(
            client().post(server.url(&format!("/v1/runs/{id}/cancel"))),
        ))
        .await;
    }
}

/// A run's root snapshot, once it is written.
async fn wait_for_snapshot(setup: &Setup, id: &str) -> Value {
    let path = TenantDirs::new(&setup.data(), "acme")
        .runs()
        .join(id)
        .join("input/invocations/inv_root/tool_snapshot.json");
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(snapshot) = serde_json::from_str(&text)
        {
            return snapshot;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no snapshot at {}", path.display());
}

/// A reader that opens a run's event stream and never reads it holds
/// nothing up: the run ends as if no one watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_event_reader_does_not_hold_up_the_run() {
    let setup = Setup::start().await;
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "demo", "chat": "chat"}),
    )
    .await;
    let stalled: Vec<reqwest::Response> = futures_stall(&server, &id, 8).await;
    let run = wait_for_status(&server, &id, "completed").await;
    assert_eq!(run["commits"], 1);
    drop(stalled);
}

/// `count` event streams of run `id`, opened and never read.
async fn futures_stall(server: &Server, id: &str, count: usize) -> Vec<reqwest::Response> {
    let mut streams = Vec::new();
    for _ in 0..count {
        let response = acme(client().get(server.url(&format!("/v1/runs/{id}/events"))))
            .send()
            .await
            .expect("events");
        assert_eq!(response.status().as_u16(), 200);
        streams.push(response);
    }
    streams
}

/// World info inline and skills from the tenant's own directories are
/// bound to the run like `toolhost run --worldinfo --skills`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn world_info_and_skills_are_bound_from_the_request_and_the_tenants_files() {
    let setup = Setup::start().await;
    let skills = TenantDirs::new(&setup.data(), "acme")
        .skills()
        .join("shared");
    copy_tree(&fixtures().join("skills/global"), &skills);
    let world_info: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("worldinfo/prompt_snapshot.json"))
            .expect("snapshot"),
    )
    .expect("json");
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "demo", "chat": "chat",
               "worldInfo": world_info, "skills": {"global": "shared"}}),
    )
    .await;
    wait_for_status(&server, &id, "completed").await;
    let root = TenantDirs::new(&setup.data(), "acme").runs().join(&id);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(manifest["inputs"]["promptSnapshot"], true, "{manifest}");
    // World info alone: the model's prompt is built from the chat.
    assert_eq!(manifest["inputs"]["prompt"], "chat", "{manifest}");
    assert_eq!(
        manifest["inputs"]["skills"][0]["scope"], "global",
        "{manifest}"
    );
    assert!(
        manifest["inputs"]["skills"][0]["dir"]
            .as_str()
            .is_some_and(|dir| dir.ends_with("skills/shared")),
        "{manifest}"
    );
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("input/prompt_snapshot.json")).expect("stored"),
    )
    .expect("json");
    // Only the activation is the run's: the file's messages were not read.
    assert_eq!(
        stored,
        json!({"worldInfoActivation": world_info["worldInfoActivation"]})
    );
    // The staged copy is gone.
    let tmp = TenantDirs::new(&setup.data(), "acme").tmp();
    assert_eq!(std::fs::read_dir(tmp).expect("tmp").count(), 0);
}

/// A chat app's prompt snapshot inline: stored as given, recorded as the
/// prompt's source, and summed up in `context_assembled`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_snapshot_is_stored_as_given_and_read_first() {
    let setup = Setup::start().await;
    let snapshot = json!({
        "schemaVersion": 1,
        "characterName": "Mirelle",
        "userName": "Tomas",
        "messages": [
            {"role": "system", "content": "Write Mirelle's next reply. 米蕾尔是领航员。"},
            {"role": "assistant", "content": "The lamp is lit.", "source": "chatHistory"},
            {"role": "user", "content": "灯台へ行こう。", "source": "chatHistory"}
        ]
    });
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "demo", "chat": "chat", "promptSnapshot": snapshot}),
    )
    .await;
    let events = stream(&server, &id, None).await;
    let assembled = events
        .iter()
        .find(|(_, kind, _)| kind == ContextAssembled::TYPE)
        .map(|(_, _, data)| data["payload"].clone())
        .expect("the invocation's context");
    assert_eq!(assembled["prompt"]["source"], "snapshot", "{assembled}");
    assert_eq!(assembled["prompt"]["historyKept"], 2, "{assembled}");
    assert_eq!(assembled["prompt"]["messages"], 4, "{assembled}");
    wait_for_status(&server, &id, "completed").await;
    let root = TenantDirs::new(&setup.data(), "acme").runs().join(&id);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("run.json")).expect("run.json"))
            .expect("json");
    assert_eq!(manifest["inputs"]["prompt"], "snapshot", "{manifest}");
    let stored = std::fs::read(root.join("input/prompt_snapshot.json")).expect("stored");
    assert_eq!(
        serde_json::from_slice::<Value>(&stored).expect("json"),
        snapshot
    );
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A tenant's own `policy.json` is the user's policy of its runs: what it
/// denies is left out of their snapshots with its reason, what it asks
/// approval for is marked, and another tenant's runs are untouched. A
/// policy that does not read refuses the run rather than run without it.
#[tokio::test]
async fn a_tenants_policy_decides_its_runs_snapshots_and_no_one_elses() {
    let setup = Setup::start().await;
    let acme_dirs = TenantDirs::new(&setup.data(), "acme");
    let policy = json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
                        "deny": ["dice.roll"], "requireApproval": ["workspace.commit"]});
    std::fs::write(acme_dirs.policy(), policy.to_string()).expect("policy");
    let server = setup.serve(Limits::default()).await;
    let body = json!({"profile": "writer", "model": "silent", "chat": "chat"});

    let acme_run = start_run(&server, body.clone()).await;
    let snapshot = wait_for_snapshot(&setup, &acme_run).await;
    let decision = |snapshot: &Value, tool: &str| -> Value {
        snapshot["decisions"]
            .as_array()
            .and_then(|all| all.iter().find(|d| d["toolId"] == tool))
            .cloned()
            .unwrap_or_else(|| panic!("no decision for {tool}: {snapshot}"))
    };
    let dice = decision(&snapshot, "builtin:dice.roll");
    assert_eq!(dice["visible"], false);
    assert!(
        dice["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("user's policy")),
        "{dice}"
    );
    assert_eq!(
        decision(&snapshot, "builtin:workspace.commit")["approvalRequired"],
        true
    );

    let (status, started) = send(globex(client().post(server.url("/v1/runs"))).json(&body)).await;
    assert_eq!(status, 201, "{started}");
    let globex_run = started["id"].as_str().expect("id").to_owned();
    let globex_snapshot = TenantDirs::new(&setup.data(), "globex")
        .runs()
        .join(&globex_run)
        .join("input/invocations/inv_root/tool_snapshot.json");
    let mut globex_snapshot_value = Value::Null;
    for _ in 0..400 {
        if let Ok(text) = std::fs::read_to_string(&globex_snapshot)
            && let Ok(value) = serde_json::from_str::<Value>(&text)
        {
            globex_snapshot_value = value;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        decision(&globex_snapshot_value, "builtin:dice.roll")["visible"],
        true
    );
    assert_eq!(
        decision(&globex_snapshot_value, "builtin:workspace.commit")["approvalRequired"],
        false
    );

    std::fs::write(acme_dirs.policy(), r#"{"schemaVersion":1,"kind":"nope"}"#).expect("policy");
    let (status, refused) = send(
        acme(client().post(server.url("/v1/runs")))
            .json(&json!({"profile": "writer", "model": "silent", "chat": "chat2"})),
    )
    .await;
    assert_eq!(status, 500, "{refused}");
    assert_eq!(refused["code"], "serve.internal");

    send(acme(
        client().post(server.url(&format!("/v1/runs/{acme_run}/cancel"))),
    ))
    .await;
    send(globex(
        client().post(server.url(&format!("/v1/runs/{globex_run}/cancel"))),
    ))
    .await;
}

/// A run of acme's whose first call of `tool` waits for approval (acme's
/// policy asks for it): the server, the run and the waiting call as listed.
async fn waiting_for_approval(setup: &Setup, tool: &str) -> (Server, String, Value) {
    let policy = json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
                        "requireApproval": [tool]});
    std::fs::write(
        TenantDirs::new(&setup.data(), "acme").policy(),
        policy.to_string(),
    )
    .expect("policy");
    let server = setup.serve(Limits::default()).await;
    let id = start_run(
        &server,
        json!({"profile": "writer", "model": "demo", "chat": "chat"}),
    )
    .await;
    let approvals = server.url(&format!("/v1/runs/{id}/approvals"));
    for _ in 0..400 {
        let (status, listed) = send(acme(client().get(&approvals))).await;
        assert_eq!(status, 200, "{listed}");
        if let Some(first) = listed["approvals"].as_array().and_then(|all| all.first()) {
            let waiting = first.clone();
            return (server, id, waiting);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no call of {tool} waited for approval");
}

/// A run's call that needs approval waits for a person's decision through
/// the API: it is listed to its tenant only, decided once, and the run
/// goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waits_for_approval_through_the_api() {
    let setup = Setup::start().await;
    let (server, id, waiting) = waiting_for_approval(&setup, "workspace.commit").await;
    let approvals = server.url(&format!("/v1/runs/{id}/approvals"));
    assert_eq!(waiting["callId"], "c2", "{waiting}");
    assert_eq!(waiting["toolId"], "builtin:workspace.commit");
    assert_eq!(waiting["decided"], false);
    // The waiting run's status is counted live, as the journal says.
    let running = status(&server, &id).await;
    assert_eq!(running["status"], "running");
    let journal_path = TenantDirs::new(&setup.data(), "acme")
        .runs()
        .join(&id)
        .join("events.jsonl");
    let written = std::fs::read_to_string(&journal_path).expect("journal");
    let events: Vec<Value> = written
        .lines()
        .map(|line| serde_json::from_str(line).expect("event"))
        .collect();
    let counted = |kind: &str| events.iter().filter(|event| event["type"] == kind).count();
    assert_eq!(
        running["lastSeq"],
        events.last().expect("events")["seq"],
        "{running}"
    );
    assert_eq!(running["pendingApprovals"], 1, "{running}");
    assert_eq!(
        running["totalRounds"],
        counted(ModelRequestCreated::TYPE),
        "{running}"
    );
    assert_eq!(running["totalRounds"], 1, "{running}");
    assert_eq!(
        running["toolCalls"],
        counted(ToolCallCompleted::TYPE),
        "{running}"
    );
    assert_eq!(running["toolCalls"], 1, "{running}");
    // Counted, not read: with the journal's name moved aside (its writer
    // keeps its descriptor) the status is the same.
    let aside = journal_path.with_extension("aside");
    std::fs::rename(&journal_path, &aside).expect("move aside");
    let without_the_file = status(&server, &id).await;
    std::fs::rename(&aside, &journal_path).expect("move back");
    assert_eq!(without_the_file, running);

    // Another tenant sees no such run.
    let (status_code, _) = send(globex(client().get(&approvals))).await;
    assert_eq!(status_code, 404);
    let decide = |call: &str| server.url(&format!("/v1/runs/{id}/approvals/{call}"));
    let (status_code, _) =
        send(globex(client().post(decide("c2"))).json(&json!({"decision": "approve"}))).await;
    assert_eq!(status_code, 404);
    let (status_code, refused) =
        send(acme(client().post(decide("c2"))).json(&json!({"decision": "approve", "by": "me"})))
            .await;
    assert_eq!(status_code, 400, "{refused}");
    let (status_code, _) =
        send(acme(client().post(decide("nope"))).json(&json!({"decision": "approve"}))).await;
    assert_eq!(status_code, 404);

    let (status_code, decided) =
        send(acme(client().post(decide("c2"))).json(&json!({"decision": "approve", "note": "go"})))
            .await;
    assert_eq!(status_code, 200, "{decided}");
    assert_eq!(decided["decision"], "approve");
    let ended = wait_for_status(&server, &id, "completed").await;
    assert_eq!(
        ended["summary"]["commits"].as_array().map(Vec::len),
        Some(1)
    );
    let (status_code, _) =
        send(acme(client().post(decide("c2"))).json(&json!({"decision": "deny"}))).await;
    assert_eq!(status_code, 404, "decided and read: nothing waits");
    let journal = std::fs::read_to_string(
        TenantDirs::new(&setup.data(), "acme")
            .runs()
            .join(&id)
            .join("events.jsonl"),
    )
    .expect("journal");
    assert!(journal.contains(r#""by":"tenant acme""#), "{journal}");
}

/// A waiting call's arguments are listed as the run built them: the
/// field that decides the effect (`path`) before the content, although
/// `content` sorts first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_write_lists_its_path_first() {
    let setup = Setup::start().await;
    let (server, id, waiting) = waiting_for_approval(&setup, "workspace.write_file").await;
    assert_eq!(waiting["callId"], "c1", "{waiting}");
    assert_eq!(
        waiting["argumentsShown"],
        json!({"fields": [
            {"name": "path", "value": "\"output/main.md\"", "deciding": true},
            {"name": "content", "value": serde_json::to_string(REPLY).expect("json"),
             "deciding": false}
        ], "omitted": 0}),
        "{waiting}"
    );
    assert_eq!(
        waiting["argumentsSummary"],
        format!(
            "path: \"output/main.md\", content: {}",
            serde_json::to_string(REPLY).expect("json")
        )
    );
    let (_, document) = send(acme(client().get(server.url("/v1/openapi.json")))).await;
    let schemas = &document["components"]["schemas"];
    assert!(schemas["PendingCall"]["properties"]["argumentsShown"].is_object());
    assert!(schemas["ShownArgument"]["properties"]["deciding"].is_object());
    let decide = server.url(&format!("/v1/runs/{id}/approvals/c1"));
    let (status_code, decided) =
        send(acme(client().post(decide)).json(&json!({"decision": "approve"}))).await;
    assert_eq!(status_code, 200, "{decided}");
    wait_for_status(&server, &id, "completed").await;
}

/// An OpenAI-compatible model on 127.0.0.1 that answers every request
/// with a `workspace_finish` call; it counts the connections it accepted
/// and the requests it answered. It stops with the test's runtime.
async fn counting_model() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use axum::serve::ListenerExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::clone(&connections);
    let listener = listener.tap_io(move |_| {
        accepted.fetch_add(1, Ordering::SeqCst);
    });
    let answered = Arc::clone(&requests);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            answered.fetch_add(1, Ordering::SeqCst);
            async {
                axum::Json(json!({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                        "role": "assistant", "content": null,
                        "tool_calls": [{"id": "call_finish", "type": "function", "function": {
                            "name": "workspace_finish", "arguments": "{\"reason\":\"done\"}"}}]}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                }))
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (address, connections, requests)
}

/// Runs of one HTTP model share its client: the second run's requests go
/// over the connection the first one opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_an_http_model_share_its_connections() {
    use std::sync::atomic::Ordering;
    let setup = Setup::start().await;
    let (model, connections, requests) = counting_model().await;
    let models = json!({"schemaVersion": 1, "kind": "toolhost.models", "models": {
        "counted": {"kind": "openai", "url": format!("http://{model}/v1"), "model": "m"}
    }});
    std::fs::write(setup.dir.path().join("models.json"), models.to_string()).expect("models");
    let server = setup.serve(Limits::default()).await;
    for (round, chat) in ["chat", "chat2"].into_iter().enumerate() {
        let id = start_run(
            &server,
            json!({"profile": "writer", "model": "counted", "chat": chat}),
        )
        .await;
        let mut ended = Value::Null;
        for _ in 0..600 {
            let run = status(&server, &id).await;
            if run["status"] != "running" {
                ended = run;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            ended["totalRounds"].as_u64() >= Some(1),
            "run {round}: {ended}"
        );
    }
    assert!(requests.load(Ordering::SeqCst) >= 2);
    assert_eq!(connections.load(Ordering::SeqCst), 1);
}
