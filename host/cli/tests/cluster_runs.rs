//! `toolhost serve --cluster` processes on one real nats-server (installed
//! into .venv by `make setup`): scripted runs submitted through different
//! nodes, a node SIGKILLed while it drives runs (`make cluster-test`: more
//! runs and repeated kills), a node paused past its lease, and a NATS
//! restart. Every run completes exactly once: each journal in the cluster
//! is whole (seq 1..n, one terminal event, `run_completed`), each chat
//! holds its run's reply once, and the runs a dead node held were resumed
//! elsewhere (`run_resumed`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_cluster::testing::{NatsServer, nats_server_or_skip};
use toolhost_cluster::{RunKey, RunLog};
use toolhost_journal::{
    ChatCommitRequested, Event as _, RunCompleted, RunResumed, ToolCallApprovalDecided,
};

#[path = "common/cluster.rs"]
mod harness;

use harness::{
    Node, REPLY, TERMINAL, all_completed_once, client, journal, loop_started, owner,
    post_to_driver, ready, replies_in, setup, start_nodes, stream_client, submit, until, viewer,
    waiting,
};

/// Runs in the test (`make cluster-test` sets more).
const RUNS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_spread_over_three_nodes_and_survive_one_being_killed() {
    let runs = sized("TOOLHOST_CLUSTER_RUNS", RUNS);
    let kills = sized("TOOLHOST_CLUSTER_KILLS", 1);
    let names = ["node-1", "node-2", "node-3"];
    let Some(Started {
        nats,
        temp,
        mut nodes,
    }) = start(runs, 700, &names, 3000, &[]).await
    else {
        return;
    };

    // Each run through another node.
    let ids = submit(&nodes, runs).await;

    // Kill a node while it drives runs (node-1, then node-2, …); each one
    // killed comes back before the next kill.
    let viewer = viewer(&nats).await;
    let mut held = BTreeSet::new();
    for kill in 0..kills {
        let victim = kill % names.len();
        let deadline = Instant::now() + Duration::from_secs(120);
        let driving: BTreeSet<String> = loop {
            let status = viewer.status().await.expect("status");
            let driving: BTreeSet<String> = status
                .nodes
                .iter()
                .filter(|node| node.node == names[victim])
                .flat_map(|node| node.runs.iter().map(|run| run.run.clone()))
                .collect();
            if !driving.is_empty() {
                break driving;
            }
            assert!(
                Instant::now() < deadline,
                "{} never took a run",
                names[victim]
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        nodes[victim].kill();
        held.extend(driving);
        if kill + 1 < kills {
            nodes[victim] = Node::start(temp.path(), &nats, names[victim]);
            ready(&nodes[victim].base).await;
        }
    }

    let resumed = all_completed_once(&viewer, temp.path(), &ids).await;
    // What the killed nodes were driving went on elsewhere.
    let moved: Vec<&String> = held.intersection(&resumed).collect();
    assert!(
        !moved.is_empty(),
        "none of the killed nodes' runs {held:?} was resumed (resumed: {resumed:?})"
    );
    eprintln!(
        "{} runs, {kills} kill(s): {} resumed; the killed nodes held {}",
        ids.len(),
        resumed.len(),
        held.len()
    );
}

/// A size from the environment (`make cluster-test`), else `default`.
/// What a test starts with: a nats-server, a data directory with `runs`
/// chats whose model replies take `delay_ms`, and the nodes `names` serving
/// it (lease `lease_ms`, room for 4 runs each, extra `flags`). Fields drop
/// nodes first, then the directory, then the server.
struct Started {
    nodes: Vec<Node>,
    temp: tempfile::TempDir,
    nats: NatsServer,
}

/// [`Started`], or `None` where there is no nats-server (the test is
/// skipped; `nats_server_or_skip` says when that is allowed).
async fn start(
    runs: usize,
    delay_ms: u64,
    names: &[&str],
    lease_ms: u64,
    flags: &[&str],
) -> Option<Started> {
    let binary = nats_server_or_skip()?;
    let nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path(), runs, delay_ms);
    let nodes = start_nodes(temp.path(), &nats, names, lease_ms, 4, flags).await;
    Some(Started { nodes, temp, nats })
}

fn sized(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_past_its_lease_cannot_append_or_commit_when_it_wakes() {
    // Each reply takes 2.5 s: the owner is paused before its first one.
    let Some(Started { nats, temp, nodes }) =
        start(1, 2500, &["node-1", "node-2"], 2000, &[]).await
    else {
        return;
    };
    let response = client()
        .post(format!("{}/v1/runs", nodes[0].base))
        .json(&json!({"model": "demo", "profile": "writer", "chat": "chat-00"}))
        .send()
        .await
        .expect("post");
    assert_eq!(response.status().as_u16(), 201);
    let id = response.json::<Value>().await.expect("json")["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let viewer = viewer(&nats).await;

    // Pause whichever node took it once its loop asked the model, before
    // the model answers.
    loop_started(&viewer, &id).await;
    let first = owner(&viewer, &id).await.expect("owner");
    let (stale, other) = if first == "node-1" {
        (&nodes[0], &nodes[1])
    } else {
        (&nodes[1], &nodes[0])
    };
    stale.signal("STOP");
    let key = RunKey::new("local", &id).expect("key");
    let old_token = viewer
        .leases()
        .await
        .unwrap()
        .holder(&key)
        .await
        .unwrap()
        .map(|holder| holder.token);

    // The other node takes it once the lease ran out, and finishes it.
    until("the other node never took the run", 60, || async {
        owner(&viewer, &id).await.as_deref() == Some(other.name.as_str())
    })
    .await;
    until("the run never ended on the other node", 60, || async {
        journal(&viewer, &id)
            .await
            .iter()
            .any(|event| event["type"] == RunCompleted::TYPE)
    })
    .await;
    let finished = journal(&viewer, &id).await.len();

    // The paused node wakes and goes on where it was: refused.
    stale.signal("CONT");
    let stale_journal = temp
        .path()
        .join("data/nodes")
        .join(&stale.name)
        .join(format!("tenants/local/runs/{id}/events.jsonl"));
    // Its model's answer comes 2.5 s after it was paused; give it that and
    // its attempt to write.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let entries = RunLog::read_entries(&viewer, &key).await.expect("entries");
    assert_eq!(
        entries.len(),
        finished,
        "nothing appended after the run ended"
    );
    let tokens: Vec<u64> = entries.iter().map(|entry| entry.token).collect();
    let takeover = tokens
        .iter()
        .position(|token| Some(*token) != old_token)
        .expect("the other node wrote");
    assert!(
        tokens[takeover..]
            .iter()
            .all(|token| Some(*token) != old_token),
        "the old owner wrote after the takeover: {tokens:?}"
    );
    let resumed: Value = serde_json::from_slice(&entries[takeover].line).expect("json");
    assert_eq!(
        resumed["type"],
        RunResumed::TYPE,
        "the new owner's first line fences"
    );
    let events = journal(&viewer, &id).await;
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], json!(index + 1));
    }
    // Its own copy never got ahead of the cluster's journal.
    let local = std::fs::read_to_string(&stale_journal).expect("the stale node's journal");
    let cluster: Vec<u8> = entries
        .iter()
        .flat_map(|entry| entry.line.to_vec())
        .collect();
    assert!(
        String::from_utf8_lossy(&cluster).starts_with(&local),
        "the stale node's journal is not a prefix of the cluster's"
    );
    // It did try, and was told why not.
    let summary = temp
        .path()
        .join("data/nodes")
        .join(&stale.name)
        .join(format!("tenants/local/summaries/{id}.json"));
    let summary = std::fs::read_to_string(&summary).expect("the stale node's summary");
    assert!(summary.contains("cluster.fenced"), "{summary}");
    let chat = std::fs::read_to_string(temp.path().join("data/tenants/local/chats/chat-00.jsonl"))
        .expect("chat");
    assert_eq!(replies_in(&chat), 1, "committed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_pause_while_nats_restarts_and_finish_with_no_gap_or_duplicate() {
    let Some(Started {
        mut nats,
        temp,
        nodes,
    }) = start(6, 1000, &["node-1", "node-2"], 3000, &[]).await
    else {
        return;
    };
    let ids = submit(&nodes, 6).await;
    {
        let viewer = viewer(&nats).await;
        loop_started(&viewer, &ids[0]).await;
    }
    // NATS goes away for two seconds, in the middle of the runs.
    nats.stop();
    tokio::time::sleep(Duration::from_secs(2)).await;
    nats.restart().expect("nats-server again");
    let viewer = viewer(&nats).await;
    let resumed = all_completed_once(&viewer, temp.path(), &ids).await;
    eprintln!(
        "{} runs after a NATS restart, {} resumed",
        ids.len(),
        resumed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_node_answers_reads_of_a_run_another_node_drives() {
    let Some(Started {
        nats,
        temp: _temp,
        nodes,
    }) = start(1, 1500, &["node-1", "node-2"], 3000, &[]).await
    else {
        return;
    };
    let ids = submit(&nodes, 1).await;
    let id = &ids[0];
    let viewer = viewer(&nats).await;
    loop_started(&viewer, id).await;
    let driver = owner(&viewer, id).await.expect("a driver");
    let reader = nodes
        .iter()
        .find(|node| node.name != driver)
        .expect("the other node");
    let get = |base: String, path: String| async move {
        let response = client()
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("get");
        let status = response.status().as_u16();
        (status, response.text().await.unwrap_or_default())
    };

    // While another node drives it, this one answers from the cluster.
    let (status, body) = get(reader.base.clone(), format!("/v1/runs/{id}")).await;
    assert_eq!(status, 200, "{body}");
    let run: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(run["status"], "running", "{run}");
    assert_eq!(run["profile"], "writer");
    let (status, _) = get(
        reader.base.clone(),
        "/v1/runs/run_20990101T000000Z_00000000".into(),
    )
    .await;
    assert_eq!(status, 404);
    // A start request too large for one NATS message is refused, typed,
    // before it is queued.
    let long = "潮".repeat(700_000);
    let too_large = client()
        .post(format!("{}/v1/runs", reader.base))
        .json(
            &json!({"model": "demo", "profile": "writer", "chat": "chat-00",
                      "promptSnapshot": {"messages": [{"role": "user", "content": long}]}}),
        )
        .send()
        .await
        .expect("post");
    assert_eq!(too_large.status().as_u16(), 413);
    let too_large: Value = too_large.json().await.expect("json");
    assert_eq!(too_large["code"], "serve.body_too_large");
    assert!(
        too_large["message"]
            .as_str()
            .unwrap_or("")
            .contains("max_payload"),
        "{too_large}"
    );
    // Changes go to the driving node.
    let refused = client()
        .post(format!("{}/v1/runs/{id}/cancel", reader.base))
        .send()
        .await
        .expect("post");
    assert_eq!(refused.status().as_u16(), 409);
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(refused["code"], "cluster.elsewhere");
    assert!(
        refused["message"].as_str().unwrap_or("").contains(&driver),
        "{refused}"
    );

    // Its events, followed live from this node until the run ends: a
    // stream, so no total timeout cuts it (the 90 s below bounds it).
    let (status, stream) = tokio::time::timeout(Duration::from_secs(90), async {
        let response = stream_client()
            .get(format!("{}/v1/runs/{id}/events", reader.base))
            .send()
            .await
            .expect("get the events");
        let status = response.status().as_u16();
        (
            status,
            response.text().await.expect("the whole event stream"),
        )
    })
    .await
    .expect("the event stream ends with the run");
    assert_eq!(status, 200);
    let seqs: Vec<u64> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("id: ")?.trim().parse().ok())
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{stream}"
    );
    let kinds: Vec<&str> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .collect();
    assert_eq!(kinds.last(), Some(&RunCompleted::TYPE), "{stream}");

    // Ended, both nodes say the same, and serve its files.
    for node in &nodes {
        let (status, body) = get(node.base.clone(), format!("/v1/runs/{id}")).await;
        assert_eq!(status, 200);
        let run: Value = serde_json::from_str(&body).expect("json");
        assert_eq!(run["status"], "completed", "{} says {run}", node.name);
        assert_eq!(
            run["summary"]["status"], "completed",
            "{} says {run}",
            node.name
        );
        assert_eq!(run["lastSeq"], json!(seqs.len()), "{}", node.name);
        let (status, file) = get(
            node.base.clone(),
            format!("/v1/runs/{id}/files/output/main.md"),
        )
        .await;
        assert_eq!((status, file.as_str()), (200, REPLY), "{}", node.name);
        let (_, list) = get(node.base.clone(), "/v1/runs".into()).await;
        assert!(list.contains(id.as_str()), "{} lists {list}", node.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_moves_with_its_run() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path(), 1, 0);
    // The tenant's policy asks a person before every commit.
    std::fs::write(
        temp.path().join("data/tenants/local/policy.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
               "requireApproval": ["workspace.commit"]})
        .to_string(),
    )
    .expect("policy");
    let mut nodes = start_nodes(temp.path(), &nats, &["node-1", "node-2"], 3000, 4, &[]).await;
    let ids = submit(&nodes, 1).await;
    let id = &ids[0];
    let viewer = viewer(&nats).await;
    let path = format!("/v1/runs/{id}/approvals");
    let pending = |base: String| {
        let path = path.clone();
        async move { waiting(&base, &path, "approvals", "callId", "decided").await }
    };
    // The commit waits for a person; every node shows it.
    until("the commit never asked for approval", 60, || async {
        pending(nodes[0].base.clone()).await == vec!["c2".to_owned()]
    })
    .await;
    assert_eq!(pending(nodes[1].base.clone()).await, vec!["c2".to_owned()]);
    let first = owner(&viewer, id).await.expect("a driver");
    let victim = nodes
        .iter()
        .position(|node| node.name == first)
        .expect("node");
    let survivor = 1 - victim;
    nodes[victim].kill();

    // The other node takes the run; the call waits there again.
    until("the run never moved", 60, || async {
        owner(&viewer, id).await.as_deref() == Some(nodes[survivor].name.as_str())
    })
    .await;
    until("the approval is not pending after the move", 60, || async {
        pending(nodes[survivor].base.clone()).await == vec!["c2".to_owned()]
    })
    .await;
    // Decided on the node that drives it now (once it has taken it over).
    let (status, body) = post_to_driver(
        &format!("{}/v1/runs/{id}/approvals/c2", nodes[survivor].base),
        &json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let resumed = all_completed_once(&viewer, temp.path(), &ids).await;
    assert!(
        resumed.contains(id),
        "the run was resumed on the other node"
    );
    let events = journal(&viewer, id).await;
    let decisions: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == ToolCallApprovalDecided::TYPE)
        .collect();
    assert_eq!(decisions.len(), 1, "decided once");
    assert_eq!(
        decisions[0]["payload"]["decision"], "approved",
        "{}",
        decisions[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_stopped_by_a_long_nats_outage_resume_when_it_is_back() {
    // Appends give up after 1 s without NATS; the queue holds 3 runs.
    let flags = ["--append-window-ms", "1000", "--queue-limit", "3"];
    let Some(Started {
        mut nats,
        temp,
        nodes,
    }) = start(3, 1000, &["node-1", "node-2"], 3000, &flags).await
    else {
        return;
    };
    let ids = submit(&nodes, 3).await;
    // A fourth run while three are not yet ended: the queue is full.
    let refused = client()
        .post(format!("{}/v1/runs", nodes[0].base))
        .json(&json!({"model": "demo", "profile": "writer", "chat": "chat-00"}))
        .send()
        .await
        .expect("post");
    assert_eq!(refused.status().as_u16(), 429);
    assert!(refused.headers().contains_key("retry-after"));
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(refused["code"], "cluster.queue_full");
    {
        let viewer = viewer(&nats).await;
        loop_started(&viewer, &ids[0]).await;
    }
    // Away for longer than the append window: the runs stop, interrupted.
    nats.stop();
    tokio::time::sleep(Duration::from_secs(4)).await;
    nats.restart().expect("nats-server again");
    let viewer = viewer(&nats).await;
    let resumed = all_completed_once(&viewer, temp.path(), &ids).await;
    assert!(!resumed.is_empty(), "no run was stopped and resumed");
    eprintln!(
        "{} runs after a long NATS outage, {} resumed",
        ids.len(),
        resumed.len()
    );
}

/// A node stalled between journalling a commit and writing the chat (it
/// stops itself there: the crash point `stop:chat_commit`) wakes after
/// another node took the run over and committed the reply: its write is
/// fenced — under the chat's lock the lease is not its own — and the reply
/// is in the chat once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stalled_at_its_chat_write_cannot_write_after_a_takeover() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path(), 1, 0);
    let stale = Node::launch_env(
        temp.path(),
        &nats,
        "node-1",
        2000,
        &[("TOOLHOST_CRASH_AT", "stop:chat_commit")],
    );
    ready(&stale.base).await;
    let id = submit(std::slice::from_ref(&stale), 1).await.remove(0);
    let viewer = viewer(&nats).await;
    until("node-1 never stopped at its chat write", 90, || async {
        stale.is_stopped()
    })
    .await;
    assert!(
        journal(&viewer, &id)
            .await
            .iter()
            .any(|event| event["type"] == ChatCommitRequested::TYPE),
        "stopped before its commit was journalled"
    );
    let chat_path = temp.path().join("data/tenants/local/chats/chat-00.jsonl");
    let chat = || std::fs::read_to_string(&chat_path).expect("chat");
    assert_eq!(replies_in(&chat()), 0, "not written yet");

    let other = Node::launch(temp.path(), &nats, "node-2", 2000, 4);
    ready(&other.base).await;
    until("the run never ended on node-2", 120, || async {
        journal(&viewer, &id)
            .await
            .iter()
            .any(|event| TERMINAL.contains(&event["type"].as_str().unwrap_or_default()))
    })
    .await;
    assert_eq!(replies_in(&chat()), 1, "node-2 committed it");

    // node-1 wakes where it stopped and asks for its write at once (no
    // NATS round trip stands between the stop and an unfenced write).
    stale.signal("CONT");
    ready(&stale.base).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    // When its loop ended rather than being dropped for the lost lease,
    // its summary says why it stopped.
    let summary = temp.path().join(format!(
        "data/nodes/node-1/tenants/local/summaries/{id}.json"
    ));
    if let Ok(summary) = std::fs::read_to_string(&summary) {
        assert!(
            summary.contains("cluster.lease_lost") || summary.contains("cluster.fenced"),
            "{summary}"
        );
    }
    assert_eq!(replies_in(&chat()), 1, "committed once");
}

/// A host commit the chat app has not answered moves with its run: the
/// node that takes the run over offers the same commit again, once, and
/// the app's answer there lets the run finish; the chat file is never
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_host_commit_moves_with_its_run() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path(), 1, 0);
    let chat_path = temp.path().join("data/tenants/local/chats/chat-00.jsonl");
    let before = std::fs::read(&chat_path).expect("chat");
    let mut nodes = start_nodes(temp.path(), &nats, &["node-1", "node-2"], 3000, 4, &[]).await;
    // A chat app's own copy of the chat is refused by a cluster: its nodes
    // write chats only under the cluster's chat lock, and its tickets carry
    // no chat.
    let refused = client()
        .post(format!("{}/v1/runs", nodes[0].base))
        .json(
            &json!({"model": "demo", "profile": "writer", "chat": "chat-00", "commit": "host",
                      "chatContent": String::from_utf8_lossy(&before)}),
        )
        .send()
        .await
        .expect("post");
    assert_eq!(refused.status().as_u16(), 400);
    let refused: Value = refused.json().await.expect("json");
    assert_eq!(refused["code"], "cluster.chat_content_refused", "{refused}");
    let started = client()
        .post(format!("{}/v1/runs", nodes[0].base))
        .json(&json!({"model": "demo", "profile": "writer", "chat": "chat-00", "commit": "host"}))
        .send()
        .await
        .expect("post");
    assert_eq!(started.status().as_u16(), 201);
    let started: Value = started.json().await.expect("json");
    let id = started["id"].as_str().expect("id").to_owned();
    let viewer = viewer(&nats).await;
    let path = format!("/v1/runs/{id}/commits");
    let pending = |base: String| {
        let path = path.clone();
        async move { waiting(&base, &path, "commits", "commitId", "answered").await }
    };
    let wanted = vec![format!("{id}:commit_001")];
    until("the commit was never offered", 60, || async {
        pending(nodes[0].base.clone()).await == wanted
    })
    .await;
    let first = owner(&viewer, &id).await.expect("a driver");
    let victim = nodes
        .iter()
        .position(|node| node.name == first)
        .expect("node");
    let survivor = 1 - victim;
    nodes[victim].kill();
    until("the run never moved", 60, || async {
        owner(&viewer, &id).await.as_deref() == Some(nodes[survivor].name.as_str())
    })
    .await;
    until("the commit is not offered after the move", 60, || async {
        pending(nodes[survivor].base.clone()).await == wanted
    })
    .await;
    let (status, body) = post_to_driver(
        &format!(
            "{}/v1/runs/{id}/commits/{}",
            nodes[survivor].base, wanted[0]
        ),
        &json!({"outcome": "committed", "messageIndex": 65}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    until("the run never ended", 120, || async {
        journal(&viewer, &id)
            .await
            .iter()
            .any(|event| TERMINAL.contains(&event["type"].as_str().unwrap_or_default()))
    })
    .await;
    let events = journal(&viewer, &id).await;
    let ends: Vec<&str> = events
        .iter()
        .filter_map(|event| event["type"].as_str())
        .filter(|kind| TERMINAL.contains(kind))
        .collect();
    assert_eq!(ends, vec![RunCompleted::TYPE]);
    let requested = events
        .iter()
        .filter(|event| event["type"] == ChatCommitRequested::TYPE)
        .count();
    assert_eq!(requested, 1, "offered once, in the journal");
    assert_eq!(
        std::fs::read(&chat_path).expect("chat"),
        before,
        "the chat is the app's"
    );
}
