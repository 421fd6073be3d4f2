//! A served run in host-commit mode, with a small client playing the chat
//! app: the run waits (`awaiting_host_commit`), the app reads the commit,
//! saves it its own way and answers; toolhost never touches the chat file.
//! A failed answer goes back to the model, a second answer is refused, an
//! answer for another run's commit is not found, and a server restarted
//! mid-wait offers the same commit again, once.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use toolhost_journal::{ChatCommitCompleted, ChatCommitFailed, Event as _};
use toolhost_serve::{Limits, ModelTable, TenantDirs};

const REPLY: &str = "*Mirelle folds the map.* 灯台へ行こう。";

fn app(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.bearer_auth("acme-secret")
}

/// A tenant with a chat and a writer that commits twice, then finishes.
fn tenant(dir: &Path) -> TenantDirs {
    let dirs = TenantDirs::new(&dir.join("data"), "acme");
    dirs.ensure().expect("dirs");
    seed_chat(&dirs, "chat");
    std::fs::write(
        dirs.profiles().join("writer.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
               "tools": {"allow": ["workspace.write_file", "workspace.commit",
                                   "workspace.finish"], "maxRounds": 6}})
        .to_string(),
    )
    .expect("profile");
    dirs
}

fn script() -> Value {
    let write = |id: &str| {
        script_call(
            id,
            "workspace_write_file",
            json!({"path": "output/main.md", "content": REPLY}),
        )
    };
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"toolCalls": [write("w1"), script_call("c1", "workspace_commit", json!({}))]},
        {"toolCalls": [write("w2"), script_call("c2", "workspace_commit", json!({}))]},
        {"toolCalls": [script_call("f", "workspace_finish", json!({"reason": "done"}))]}
    ]})
}

/// The run's waiting commits, once it waits for one (a bounded wait).
async fn waiting(server: &Server, id: &str) -> Vec<Value> {
    for _ in 0..600 {
        let (code, run) = send(app(client().get(server.url(&format!("/v1/runs/{id}"))))).await;
        assert_eq!(code, 200, "{run}");
        if run["status"] == "awaiting_host_commit" {
            let (code, body) = send(app(
                client().get(server.url(&format!("/v1/runs/{id}/commits")))
            ))
            .await;
            assert_eq!(code, 200, "{body}");
            // Not yet the ones answered and waiting for the run to read.
            let commits: Vec<Value> = body["commits"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|commit| commit["answered"] == false)
                .cloned()
                .collect();
            if !commits.is_empty() {
                return commits;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {id} never waited for a commit");
}

async fn answer(server: &Server, id: &str, commit: &str, body: Value) -> (u16, Value) {
    send(app(client().post(server.url(&format!("/v1/runs/{id}/commits/{commit}")))).json(&body))
        .await
}

/// The server stopped mid-run (the run left interrupted) and a new one
/// over the same data that resumed it.
async fn restart(server: Server, dir: &Path, models: ModelTable, id: &str) -> Server {
    server.state.interrupt_runs();
    // Its loop let go of the run: it is interrupted, resumable.
    for _ in 0..600 {
        let (_, run) = send(app(client().get(server.url(&format!("/v1/runs/{id}"))))).await;
        if run["status"] == "interrupted" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(server);
    let server = serve_in(dir, models, Limits::default()).await;
    let (code, resumed) = send(app(
        client().post(server.url(&format!("/v1/runs/{id}/resume")))
    ))
    .await;
    assert_eq!(code, 201, "{resumed}");
    server
}

fn journal(root: &Path) -> Vec<Value> {
    std::fs::read_to_string(root.join("events.jsonl"))
        .expect("journal")
        .lines()
        .map(|line| serde_json::from_str(line).expect("event"))
        .collect()
}

/// A tenant (`tenant`), its scripted model, a server, and a host-commit run
/// of the fixture chat started on it.
struct Started {
    temp: tempfile::TempDir,
    dirs: TenantDirs,
    models: ModelTable,
    server: Server,
    id: String,
}

async fn host_commit_run() -> Started {
    let temp = tempfile::tempdir().expect("tempdir");
    let dirs = tenant(temp.path());
    let models = script_models(temp.path(), &script());
    let server = serve_in(temp.path(), models.clone(), Limits::default()).await;
    let id = acme_starts_run(
        &server,
        &json!({"profile": "writer", "model": "demo", "chat": "chat", "commit": "host"}),
    )
    .await;
    Started {
        temp,
        dirs,
        models,
        server,
        id,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_app_commits_the_reply_and_toolhost_never_writes_the_chat() {
    // The temporary directory stays bound: dropped, it would take the
    // server's data with it.
    let Started {
        temp: _temp,
        dirs,
        server,
        id,
        ..
    } = host_commit_run().await;
    let chat = dirs.chats().join("chat.jsonl");
    // The chat as seeded: the fixture, not the file as the run left it.
    let before = std::fs::read(fixtures().join("chats/long_character_chat.jsonl")).expect("chat");

    // The first commit: the app is given the text, and says it failed.
    let first = waiting(&server, &id).await;
    assert_eq!(first.len(), 1, "{first:?}");
    let commit = first[0]["commitId"].as_str().expect("id").to_owned();
    assert_eq!(first[0]["text"], REPLY);
    assert_eq!(first[0]["runMessage"], Value::Null);
    assert_eq!(
        answer(
            &server,
            &id,
            "run_other:commit_001",
            json!({"outcome": "committed", "messageIndex": 1})
        )
        .await
        .0,
        404,
        "another run's commit"
    );
    let (code, body) = answer(
        &server,
        &id,
        &commit,
        json!({"outcome": "failed", "message": "the tab was closed"}),
    )
    .await;
    assert_eq!(code, 200, "{body}");

    // The model read it and committed again; this time the app saves it.
    let second = waiting(&server, &id).await;
    let again = second[0]["commitId"].as_str().expect("id").to_owned();
    assert_ne!(again, commit, "a new commit, not the refused one");
    let (code, body) = answer(
        &server,
        &id,
        &again,
        json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = answer(
        &server,
        &id,
        &again,
        json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert!(code == 409 || code == 404, "answered twice: {code} {body}");

    let run = acme_run_once_ended(&server, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        std::fs::read(&chat).expect("chat"),
        before,
        "the chat is the app's"
    );
    let events = journal(&dirs.runs().join(&id));
    let failed: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == ChatCommitFailed::TYPE)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["payload"]["code"], "chat.host_commit_failed");
    let completed: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == ChatCommitCompleted::TYPE)
        .collect();
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0]["payload"]["messageIndex"], 65);
    // The model read why the first commit did not land.
    let result: Value = serde_json::from_str(
        &std::fs::read_to_string(
            dirs.runs()
                .join(&id)
                .join("tool-results")
                .join(format!("{}.json", toolhost_journal::audit_stem("c1"))),
        )
        .expect("result"),
    )
    .expect("json");
    assert!(
        result["result"]["content"]
            .as_str()
            .is_some_and(|text| text.contains("the tab was closed")),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_offers_the_same_commit_again_once() {
    let Started {
        temp,
        dirs,
        models,
        server,
        id,
    } = host_commit_run().await;
    let offered = waiting(&server, &id).await;
    let commit = offered[0]["commitId"].as_str().expect("id").to_owned();
    let server = restart(server, temp.path(), models, &id).await;
    let again = waiting(&server, &id).await;
    assert_eq!(again.len(), 1, "offered once: {again:?}");
    assert_eq!(again[0]["commitId"], commit.as_str(), "the same commit");
    let (code, body) = answer(
        &server,
        &id,
        &commit,
        json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // Its second commit rewrites the message the first one made.
    let second = waiting(&server, &id).await;
    assert_eq!(second[0]["runMessage"], 65, "{second:?}");
    let (code, _) = answer(
        &server,
        &id,
        second[0]["commitId"].as_str().expect("id"),
        json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert_eq!(code, 200);
    let run = acme_run_once_ended(&server, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let events = journal(&dirs.runs().join(&id));
    let completed = events
        .iter()
        .filter(|event| event["type"] == ChatCommitCompleted::TYPE)
        .count();
    assert_eq!(completed, 2, "each commit completed once");
}

/// The chat as it was without its last line: it then ends with the
/// character's reply, which a swipe can answer.
fn end_with_the_characters_reply(dirs: &TenantDirs) -> Vec<u8> {
    let path = dirs.chats().join("chat.jsonl");
    let text = std::fs::read_to_string(&path).expect("chat");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop();
    let cut = lines.join("\n") + "\n";
    std::fs::write(&path, &cut).expect("cut");
    cut.into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swipe_is_offered_as_a_swipe_of_the_last_reply_and_an_unfit_one_is_refused() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dirs = tenant(temp.path());
    let models = script_models(temp.path(), &script());
    let server = serve_in(temp.path(), models, Limits::default()).await;
    // The fixture chat ends with the user's message: nothing to swipe.
    let (code, body) = send(app(client().post(server.url("/v1/runs"))).json(&json!({
        "profile": "writer", "model": "demo", "chat": "chat", "commit": "host",
        "generationType": "swipe"
    })))
    .await;
    assert_eq!(
        (code, body["code"].as_str()),
        (400, Some("chat.generation_type_unfit")),
        "{body}"
    );
    let before = end_with_the_characters_reply(&dirs);
    let messages = String::from_utf8(before.clone())
        .expect("utf-8")
        .lines()
        .count()
        - 1;
    let id = acme_starts_run(
        &server,
        &json!({"profile": "writer", "model": "demo", "chat": "chat", "commit": "host",
                "generationType": "swipe"}),
    )
    .await;
    let offered = waiting(&server, &id).await;
    assert_eq!(offered[0]["generationType"], "swipe", "{offered:?}");
    assert_eq!(offered[0]["targetIndex"], messages - 1, "{offered:?}");
    let (code, _) = answer(
        &server,
        &id,
        offered[0]["commitId"].as_str().expect("id"),
        json!({"outcome": "committed", "messageIndex": messages - 1}),
    )
    .await;
    assert_eq!(code, 200);
    let second = waiting(&server, &id).await;
    assert_eq!(second[0]["runMessage"], messages - 1);
    let (code, _) = answer(
        &server,
        &id,
        second[0]["commitId"].as_str().expect("id"),
        json!({"outcome": "committed", "messageIndex": messages - 1}),
    )
    .await;
    assert_eq!(code, 200);
    let run = acme_run_once_ended(&server, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        std::fs::read(dirs.chats().join("chat.jsonl")).expect("chat"),
        before
    );
}

/// A cancelled run stops waiting at once, and offers nothing any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_ends_the_wait_and_the_commit_is_no_longer_offered() {
    let Started {
        temp: _temp,
        server,
        id,
        ..
    } = host_commit_run().await;
    let offered = waiting(&server, &id).await;
    let (code, _) = send(app(
        client().post(server.url(&format!("/v1/runs/{id}/cancel")))
    ))
    .await;
    assert!(code == 202 || code == 200, "{code}");
    let run = acme_run_once_ended(&server, &id).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    assert_eq!(run["pendingCommits"], 0, "{run}");
    let (_, listed) = send(app(
        client().get(server.url(&format!("/v1/runs/{id}/commits")))
    ))
    .await;
    assert_eq!(listed["commits"], json!([]), "{listed}");
    let (code, _) = answer(
        &server,
        &id,
        offered[0]["commitId"].as_str().expect("id"),
        json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert_eq!(code, 404, "an ended run takes no answer");
}

/// A run resumed after the app refused one commit and while it waits for
/// the next offers only that one, once, and journals nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_after_a_refused_commit_offers_only_the_next_one() {
    let Started {
        temp,
        dirs,
        models,
        server,
        id,
    } = host_commit_run().await;
    let first = waiting(&server, &id).await;
    let (code, _) = answer(
        &server,
        &id,
        first[0]["commitId"].as_str().expect("id"),
        json!({"outcome": "failed", "message": "not now"}),
    )
    .await;
    assert_eq!(code, 200);
    let second = waiting(&server, &id).await;
    let next = second[0]["commitId"].as_str().expect("id").to_owned();
    assert_ne!(next, first[0]["commitId"].as_str().expect("id"));
    let server = restart(server, temp.path(), models, &id).await;
    let again = waiting(&server, &id).await;
    let ids: Vec<&str> = again
        .iter()
        .filter_map(|c| c["commitId"].as_str())
        .collect();
    assert_eq!(ids, vec![next.as_str()], "only the next commit, once");
    let (code, _) = answer(
        &server,
        &id,
        &next,
        json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert_eq!(code, 200);
    let run = acme_run_once_ended(&server, &id).await;
    assert_eq!(run["status"], "completed", "{run}");
    let events = journal(&dirs.runs().join(&id));
    let count = |kind: &str| events.iter().filter(|event| event["type"] == kind).count();
    assert_eq!(
        count(toolhost_journal::ChatCommitRequested::TYPE),
        2,
        "each asked once"
    );
    assert_eq!(count(ChatCommitFailed::TYPE), 1);
    assert_eq!(count(ChatCommitCompleted::TYPE), 1);
}

/// A chat app sends its chat with the start request (`chatContent`): it
/// becomes the tenant's copy, byte for byte, before the run freezes its
/// prefix, so a swipe is offered against the app's last reply. A copy
/// that is not a chat, one sent without host commit, and one too large
/// are refused before anything is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_apps_own_chat_comes_with_the_start_request() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dirs = tenant(temp.path());
    let models = script_models(temp.path(), &script());
    let server = serve_in(temp.path(), models, Limits::default()).await;
    let tavern = concat!(
        r#"{"user_name":"You","character_name":"Seraphina","create_date":"2024-10-11@12h34m56s","chat_metadata":{"note_prompt":""}}"#,
        "\n",
        r#"{"name":"Seraphina","is_user":false,"send_date":"October 11, 2024 12:34pm","mes":"*Seraphina smiles.* Welcome.","extra":{},"swipe_id":0,"swipes":["*Seraphina smiles.* Welcome."]}"#,
        "\n",
        r#"{"name":"You","is_user":true,"send_date":"October 11, 2024 12:35pm","mes":"Where am I?","extra":{}}"#,
        "\n",
        r#"{"name":"Seraphina","is_user":false,"send_date":"October 11, 2024 12:36pm","mes":"In the glade.","extra":{"api":"openai"},"swipe_id":0,"swipes":["In the glade."]}"#,
    );
    let path = dirs.chats().join("tavern.jsonl");
    let start = |body: Value| send(app(client().post(server.url("/v1/runs"))).json(&body));

    let (code, body) = start(
        json!({"profile": "writer", "model": "demo", "chat": "tavern",
        "commit": "host", "chatContent": format!("{tavern}\n{{\"mes\": 3")}),
    )
    .await;
    assert_eq!(
        (code, body["code"].as_str()),
        (400, Some("chat.malformed")),
        "{body}"
    );
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("chatContent line 5")),
        "{body}"
    );
    let (code, body) = start(
        json!({"profile": "writer", "model": "demo", "chat": "tavern",
        "chatContent": tavern}),
    )
    .await;
    assert_eq!(
        (code, body["code"].as_str()),
        (400, Some("serve.chat_content_needs_host_commit")),
        "{body}"
    );
    let huge = format!(
        "{tavern}\n{}",
        " ".repeat(toolhost_serve::runs::MAX_CHAT_CONTENT_BYTES)
    );
    let (code, body) = start(
        json!({"profile": "writer", "model": "demo", "chat": "tavern",
        "commit": "host", "chatContent": huge}),
    )
    .await;
    assert_eq!(
        (code, body["code"].as_str()),
        (413, Some("serve.chat_too_large")),
        "{body}"
    );
    assert!(!path.exists(), "nothing refused was written");

    // A chat whose last message is the user's has no reply to swipe:
    // refused before anything is written.
    let (code, body) = start(
        json!({"profile": "writer", "model": "demo", "chat": "tavern",
        "commit": "host", "generationType": "swipe",
        "chatContent": &tavern[..tavern.rfind('\n').expect("lines")]}),
    )
    .await;
    assert_eq!(
        (code, body["code"].as_str()),
        (400, Some("chat.generation_type_unfit")),
        "{body}"
    );
    assert!(!path.exists(), "nothing refused was written");

    // A run refused after the copy was written puts the old file back: here
    // the snapshot's world info, which only the run's binding reads.
    let older = &tavern[..tavern.rfind('\n').expect("lines")];
    std::fs::write(&path, older).expect("older copy");
    let (code, body) = start(
        json!({"profile": "writer", "model": "demo", "chat": "tavern",
        "commit": "host", "chatContent": tavern,
        "promptSnapshot": {"schemaVersion": 1, "messages": [],
                           "worldInfoActivation": {"entries": "not a list"}}}),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        std::fs::read_to_string(&path).expect("copy"),
        older,
        "the old file is back"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dirs.chats())
        .expect("chats")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name())
        .filter(|name| name.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "no copy kept aside: {leftovers:?}");

    // An older copy is replaced by the app's.
    let id = acme_starts_run(
        &server,
        &json!({"profile": "writer", "model": "demo", "chat": "tavern", "commit": "host",
                "generationType": "swipe", "chatContent": tavern}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&path).expect("copy"), tavern);
    let offered = waiting(&server, &id).await;
    assert_eq!(offered[0]["generationType"], "swipe", "{offered:?}");
    assert_eq!(
        offered[0]["targetIndex"], 2,
        "the app's last reply: {offered:?}"
    );
    let (code, _) = send(app(
        client().post(server.url(&format!("/v1/runs/{id}/cancel")))
    ))
    .await;
    assert!(code == 202 || code == 200, "{code}");
    acme_run_once_ended(&server, &id).await;
}
