//! A served run's `persist/`: the chat's persist directory,
//! `<data-dir>/tenants/<tenant>/persist/<chat>/`, is projected into the
//! run's `persist/` when its loop starts and what the run changed there is
//! copied back when it finishes — so the chat's next run reads it. A run
//! that fails or is cancelled never copies anything back; each chat and
//! each tenant has its own directory. Served runs once had no `persist/`
//! store at all: a note written by one run was gone for the next.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{script_call as call, *};
use serde_json::{Value, json};
use toolhost_journal::{Event as _, PersistentChangesCommitted};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

const NOTE: &str = "The lantern is blue; Mirelle keeps it lit.\n";

/// The scripts: `writes` (a note in `persist/`, a reply, commit, finish),
/// `reads` (reads the note, a reply, commit, finish) and `fails` (writes
/// over the note and adds another, then the script ends: the run fails).
fn scripts() -> [(&'static str, Value); 3] {
    let reply = |id: &str| {
        call(
            id,
            "workspace_write_file",
            json!({"path": "output/main.md", "content": "*She nods.*"}),
        )
    };
    let script = |replies: Value| {
        let mut script = json!({"schemaVersion": 1, "kind": "toolhost.modelScript"});
        script["replies"] = replies;
        script
    };
    let finish = json!({"toolCalls": [call("f", "workspace_finish", json!({"reason": "done"}))]});
    [
        (
            "writes",
            script(json!([
                {"toolCalls": [
                    call("n", "workspace_write_file", json!({"path": "persist/notes.md", "content": NOTE})),
                    reply("w"),
                    call("c", "workspace_commit", json!({}))
                ]},
                finish.clone()
            ])),
        ),
        (
            "reads",
            script(json!([
                {"toolCalls": [
                    call("r", "workspace_read_file", json!({"path": "persist/notes.md"})),
                    reply("w"),
                    call("c", "workspace_commit", json!({}))
                ]},
                finish
            ])),
        ),
        (
            "fails",
            script(json!([
                {"toolCalls": [
                    // A file is written over only once read.
                    call("r", "workspace_read_file", json!({"path": "persist/notes.md"})),
                    call("n", "workspace_write_file",
                        json!({"path": "persist/notes.md", "content": "overwritten\n"})),
                    call("o", "workspace_write_file",
                        json!({"path": "persist/other.md", "content": "more\n"}))
                ]}
            ])),
        ),
    ]
}

/// A data directory with the fixture chat as `chat` and `chat2` for acme
/// and globex; the scripts as models, and `held` at `held_model`.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(held_model: Option<std::net::SocketAddr>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for tenant in ["acme", "globex"] {
            let dirs = TenantDirs::new(&dir.path().join("data"), tenant);
            dirs.ensure().expect("dirs");
            seed_chat(&dirs, "chat");
            seed_chat(&dirs, "chat2");
        }
        let mut models = serde_json::Map::new();
        for (name, script) in scripts() {
            let file = format!("{name}.json");
            std::fs::write(dir.path().join(&file), script.to_string()).expect("script");
            models.insert(name.into(), json!({"kind": "script", "path": file}));
        }
        if let Some(address) = held_model {
            models.insert(
                "held".into(),
                json!({"kind": "openai", "url": format!("http://{address}/v1"), "model": "m",
                       "timeoutSecs": 300}),
            );
        }
        let models = json!({"schemaVersion": 1, "kind": "toolhost.models", "models": models});
        std::fs::write(dir.path().join("models.json"), models.to_string()).expect("models");
        Self { dir }
    }

    fn dirs(&self, tenant: &str) -> TenantDirs {
        TenantDirs::new(&self.dir.path().join("data"), tenant)
    }

    async fn serve(&self) -> Server {
        let models = ModelTable::load(&self.dir.path().join("models.json")).expect("models");
        serve_in(self.dir.path(), models, Limits::default()).await
    }
}

/// Start a run as `token`'s tenant; its id.
async fn start(server: &Server, token: &str, model: &str, chat: &str) -> String {
    let (status, started) = send(
        client()
            .post(server.url("/v1/runs"))
            .bearer_auth(token)
            .json(&json!({"model": model, "chat": chat, "task": "Answer."})),
    )
    .await;
    assert_eq!(status, 201, "{started}");
    started["id"].as_str().expect("id").to_owned()
}

/// The run as `token`'s tenant reads it once `done` says so: a bounded
/// wait, not a measure of speed.
async fn run_when(server: &Server, token: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let mut run = Value::Null;
    for _ in 0..1200 {
        let (status, view) = send(
            client()
                .get(server.url(&format!("/v1/runs/{id}")))
                .bearer_auth(token),
        )
        .await;
        assert_eq!(status, 200, "{view}");
        run = view;
        if done(&run) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run
}

async fn ended(server: &Server, token: &str, id: &str) -> Value {
    run_when(server, token, id, |run| {
        run["status"] != "running" && run.get("summary").is_some()
    })
    .await
}

/// Every file under `dir` (relative path → text), in order.
fn files(dir: &Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("under").display().to_string();
                found.push((relative, std::fs::read_to_string(&path).expect("text")));
            }
        }
    }
    found.sort();
    found
}

fn journal(dirs: &TenantDirs, id: &str) -> String {
    std::fs::read_to_string(dirs.runs().join(id).join("events.jsonl")).expect("journal")
}

fn promoted(journal: &str) -> bool {
    journal.lines().any(|line| {
        serde_json::from_str::<Value>(line)
            .is_ok_and(|event| event["type"] == PersistentChangesCommitted::TYPE)
    })
}

/// Whether one of the run's stored tool results holds `text`.
fn a_result_says(dirs: &TenantDirs, id: &str, text: &str) -> bool {
    let needle = serde_json::to_string(text).expect("json");
    let needle = needle.trim_matches('"');
    files(&dirs.runs().join(id).join("tool-results"))
        .iter()
        .any(|(_, stored)| stored.contains(needle))
}

fn chat_persist(dirs: &TenantDirs, chat: &str) -> PathBuf {
    dirs.persist().join(chat)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_runs_persist_reaches_the_chats_next_run_and_only_that_chats() {
    let setup = Setup::new(None);
    let server = setup.serve().await;
    let acme = setup.dirs("acme");

    let first = start(&server, "acme-secret", "writes", "chat").await;
    let run = ended(&server, "acme-secret", &first).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(promoted(&journal(&acme, &first)));
    assert_eq!(
        files(&chat_persist(&acme, "chat")),
        vec![("notes.md".to_owned(), NOTE.to_owned())]
    );

    // The chat's next run finds the note in its `persist/` and reads it.
    let next = start(&server, "acme-secret", "reads", "chat").await;
    let run = ended(&server, "acme-secret", &next).await;
    assert_eq!(run["status"], "completed", "{run}");
    let projected = std::fs::read_to_string(acme.runs().join(&next).join("persist/notes.md"));
    assert_eq!(projected.expect("projected"), NOTE);
    assert!(a_result_says(&acme, &next, NOTE.trim_end()));

    // Another chat has its own directory: the note is not there.
    let other = start(&server, "acme-secret", "reads", "chat2").await;
    let run = ended(&server, "acme-secret", &other).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(!a_result_says(&acme, &other, NOTE.trim_end()));
    assert!(!acme.runs().join(&other).join("persist/notes.md").exists());
    assert_eq!(files(&chat_persist(&acme, "chat2")), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_leaves_the_chats_persist_directory_as_it_was() {
    let setup = Setup::new(None);
    let server = setup.serve().await;
    let acme = setup.dirs("acme");
    let first = start(&server, "acme-secret", "writes", "chat").await;
    assert_eq!(
        ended(&server, "acme-secret", &first).await["status"],
        "completed"
    );
    let before = files(&chat_persist(&acme, "chat"));

    let failed = start(&server, "acme-secret", "fails", "chat").await;
    let run = ended(&server, "acme-secret", &failed).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert_eq!(run["summary"]["code"], "model.script_exhausted", "{run}");
    // It did write its persist/, and none of it was copied back.
    let written = |path: &str| std::fs::read_to_string(acme.runs().join(&failed).join(path));
    assert_eq!(
        written("persist/notes.md").expect("written"),
        "overwritten\n"
    );
    assert_eq!(written("persist/other.md").expect("written"), "more\n");
    assert!(!promoted(&journal(&acme, &failed)));
    assert_eq!(files(&chat_persist(&acme, "chat")), before);
}

const DRAFT: &str = "A draft, not yet done.\n";

/// One OpenAI chat completion whose message calls `calls` (`(id, tool,
/// arguments)`).
fn completion(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": calls}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
}

/// An OpenAI-compatible model on 127.0.0.1 that answers by what the run
/// did so far, read from the request: first it writes a draft into
/// `persist/`; then it holds the request unanswered — the run waits in its
/// loop, to be cancelled or interrupted — until `true` is sent on the
/// returned channel; then it writes the reply and commits, and finishes.
async fn drafting_model() -> (std::net::SocketAddr, tokio::sync::watch::Sender<bool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let (release, released) = tokio::sync::watch::channel(false);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: String| {
            let mut released = released.clone();
            async move {
                let answer = if body.contains("call_commit") {
                    completion(&[("call_finish", "workspace_finish", json!({"reason": "done"}))])
                } else if body.contains("call_draft") {
                    if released.wait_for(|go| *go).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                    completion(&[
                        (
                            "call_reply",
                            "workspace_write_file",
                            json!({"path": "output/main.md", "content": "*She nods.*"}),
                        ),
                        ("call_commit", "workspace_commit", json!({})),
                    ])
                } else {
                    completion(&[(
                        "call_draft",
                        "workspace_write_file",
                        json!({"path": "persist/draft.md", "content": DRAFT}),
                    )])
                };
                axum::Json(answer)
            }
        }),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (address, release)
}

/// A run of acme's on `chat` with the drafting model, once its draft is
/// written and it waits for the model.
async fn drafted(server: &Server, acme: &TenantDirs) -> String {
    let id = start(server, "acme-secret", "held", "chat").await;
    let run = run_when(server, "acme-secret", &id, |run| run["toolCalls"] == 1).await;
    assert_eq!(run["status"], "running", "{run}");
    let written = std::fs::read_to_string(acme.runs().join(&id).join("persist/draft.md"));
    assert_eq!(written.expect("written in the run"), DRAFT);
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_leaves_the_chats_persist_directory_as_it_was() {
    let (model, _release) = drafting_model().await;
    let setup = Setup::new(Some(model));
    let server = setup.serve().await;
    let acme = setup.dirs("acme");
    let first = start(&server, "acme-secret", "writes", "chat").await;
    assert_eq!(
        ended(&server, "acme-secret", &first).await["status"],
        "completed"
    );
    let before = files(&chat_persist(&acme, "chat"));

    let held = drafted(&server, &acme).await;
    let (status, _) = send(
        client()
            .post(server.url(&format!("/v1/runs/{held}/cancel")))
            .bearer_auth("acme-secret"),
    )
    .await;
    assert_eq!(status, 202);
    let run = ended(&server, "acme-secret", &held).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert!(!promoted(&journal(&acme, &held)));
    assert_eq!(files(&chat_persist(&acme, "chat")), before);
}

/// An interrupted run resumes with the persist directory it recorded in
/// `input/loop.json` — only when that is its own chat's — and promotes to
/// it when it finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_resumes_with_its_chats_persist_directory_and_no_other() {
    let (model, release) = drafting_model().await;
    let setup = Setup::new(Some(model));
    let (acme, globex) = (setup.dirs("acme"), setup.dirs("globex"));
    let server = setup.serve().await;
    let first = start(&server, "acme-secret", "writes", "chat").await;
    assert_eq!(
        ended(&server, "acme-secret", &first).await["status"],
        "completed"
    );
    let held = drafted(&server, &acme).await;
    server.state.interrupt_runs();
    let run = run_when(&server, "acme-secret", &held, |run| {
        run["status"] == "interrupted"
    })
    .await;
    assert_eq!(run["status"], "interrupted", "{run}");
    drop(server);

    // A record naming another tenant's directory is not resumed.
    let record = acme.runs().join(&held).join("input/loop.json");
    let recorded = std::fs::read(&record).expect("loop.json");
    let mut tampered: Value = serde_json::from_slice(&recorded).expect("json");
    let own = std::path::absolute(chat_persist(&acme, "chat")).expect("absolute");
    assert_eq!(tampered["persistDir"], json!(own), "{tampered}");
    let theirs = std::path::absolute(chat_persist(&globex, "chat")).expect("absolute");
    tampered["persistDir"] = json!(theirs);
    std::fs::remove_file(&record).expect("remove");
    std::fs::write(&record, tampered.to_string()).expect("tamper");
    let server = setup.serve().await;
    let resume = || {
        client()
            .post(server.url(&format!("/v1/runs/{held}/resume")))
            .bearer_auth("acme-secret")
    };
    assert_eq!(
        refusal(resume()).await,
        (409, "run.foreign_inputs".to_owned())
    );

    // Its own record resumes, and the run's draft reaches its chat's
    // directory when it finishes.
    std::fs::remove_file(&record).expect("remove");
    std::fs::write(&record, &recorded).expect("restore");
    release.send(true).expect("the model listens");
    let (status, resumed) = send(resume()).await;
    assert_eq!(status, 201, "{resumed}");
    let run = ended(&server, "acme-secret", &held).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        files(&chat_persist(&acme, "chat")),
        vec![
            ("draft.md".to_owned(), DRAFT.to_owned()),
            ("notes.md".to_owned(), NOTE.to_owned())
        ]
    );
    assert_eq!(files(&theirs), Vec::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_never_reaches_another_tenants_persist_directory() {
    let setup = Setup::new(None);
    let server = setup.serve().await;
    let (acme, globex) = (setup.dirs("acme"), setup.dirs("globex"));
    let first = start(&server, "acme-secret", "writes", "chat").await;
    assert_eq!(
        ended(&server, "acme-secret", &first).await["status"],
        "completed"
    );

    // globex's chat of the same name has its own directory.
    let theirs = start(&server, "globex-secret", "reads", "chat").await;
    let run = ended(&server, "globex-secret", &theirs).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert!(!a_result_says(&globex, &theirs, NOTE.trim_end()));
    assert_eq!(files(&chat_persist(&globex, "chat")), Vec::new());

    // A link planted in place of globex's chat directory, to acme's, is
    // refused before anything is made, never followed.
    let chat2 = chat_persist(&globex, "chat2");
    std::os::unix::fs::symlink(chat_persist(&acme, "chat"), &chat2).expect("link");
    let (status, refused) = send(
        client()
            .post(server.url("/v1/runs"))
            .bearer_auth("globex-secret")
            .json(&json!({"model": "reads", "chat": "chat2"})),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("workspace.symlink_found")),
        "{refused}"
    );
    assert_eq!(
        files(&chat_persist(&acme, "chat")),
        vec![("notes.md".to_owned(), NOTE.to_owned())]
    );
}
