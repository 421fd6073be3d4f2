//! Three `toolhost serve --cluster` processes on one real nats-server
//! (installed into .venv by `make setup`): scripted runs submitted through
//! different nodes, one node SIGKILLed while it drives runs. Every run
//! completes exactly once: each journal in the cluster is whole (seq 1..n,
//! one terminal event, `run_completed`), each chat holds its run's reply
//! once, and the runs the dead node held were resumed elsewhere
//! (`run_resumed`).

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_cluster::testing::{NatsServer, nats_server_or_skip};
use toolhost_cluster::{Cluster, NodeName, RunKey, RunLog};

/// The node holding `id`'s lease now, if any.
async fn owner(cluster: &Cluster, id: &str) -> Option<String> {
    let key = RunKey::new("local", id).expect("key");
    let leases = cluster.leases().await.expect("leases");
    leases
        .holder(&key)
        .await
        .expect("holder")
        .map(|holder| holder.node)
}

/// Wait until `check` holds, or fail saying `what`.
async fn until<F, Fut>(what: &str, seconds: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !check().await {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const RUNS: usize = 30;
const REPLY: &str = "The lighthouse keeper counts the ships.";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The component cache every node shares.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-cache")
}

struct Node {
    name: String,
    base: String,
    child: Option<Child>,
}

impl Node {
    fn start(dir: &Path, nats: &str, name: &str) -> Self {
        Self::start_with(dir, nats, name, "3000")
    }

    fn start_with(dir: &Path, nats: &str, name: &str, lease_ms: &str) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .arg("--cache-dir")
            .arg(cache_dir())
            .args(["--mcp-dir", "mcp", "--ext-dir", "extensions"])
            .arg("serve")
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--models", "models.json", "--data-dir", "data"])
            .args(["--max-runs", "4"])
            .args(["--cluster", nats, "--node", name, "--lease-ms", lease_ms])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("toolhost serve");
        Self {
            name: name.to_owned(),
            base: format!("http://127.0.0.1:{port}"),
            child: Some(child),
        }
    }

    /// Send `signal` (`STOP`, `CONT`) to the process.
    fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

async fn ready(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        if let Ok(response) = client().get(format!("{base}/v1/tools")).send().await
            && response.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("toolhost serve did not answer at {base}");
}

/// The test's data directory: a chat per run, a `writer` profile, a
/// scripted model that takes a moment per reply.
fn setup(dir: &Path) {
    setup_with(dir, 700);
}

fn setup_with(dir: &Path, delay_ms: u64) {
    let tenant = dir.join("data/tenants/local");
    for sub in ["chats", "profiles"] {
        std::fs::create_dir_all(tenant.join(sub)).expect("dirs");
    }
    for n in 0..RUNS {
        std::fs::copy(
            repo("tests/fixtures/chats/long_character_chat.jsonl"),
            tenant.join(format!("chats/chat-{n:02}.jsonl")),
        )
        .expect("chat");
    }
    std::fs::write(
        tenant.join("profiles/writer.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
               "tools": {"allow": ["workspace.write_file", "workspace.commit", "workspace.finish"],
                         "maxRounds": 4}})
        .to_string(),
    )
    .expect("profile");
    let call = |id: &str, name: &str, arguments: Value| json!({"id": id, "name": name, "arguments": arguments});
    std::fs::write(
        dir.join("script.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
            {"delayMs": delay_ms, "toolCalls": [
                call("c1", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY})),
                call("c2", "workspace_commit", json!({}))]},
            {"delayMs": delay_ms, "toolCalls": [call("c3", "workspace_finish", json!({"reason": "done"}))]}
        ]})
        .to_string(),
    )
    .expect("script");
    std::fs::write(
        dir.join("models.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.models", "models": {
            "demo": {"kind": "script", "path": "script.json"}}})
        .to_string(),
    )
    .expect("models");
}

/// The events of a run's journal in the cluster.
async fn journal(cluster: &Cluster, id: &str) -> Vec<Value> {
    let key = RunKey::new("local", id).expect("key");
    RunLog::read(cluster, &key)
        .await
        .expect("read")
        .iter()
        .map(|line| serde_json::from_slice(line).expect("a journal line is JSON"))
        .collect()
}

/// Wait until every run of `ids` ended, then check each completed exactly
/// once: a whole journal (seq 1..n) with one terminal event,
/// `run_completed`, and its reply in its chat once. The runs resumed on the
/// way.
async fn all_completed_once(viewer: &Cluster, dir: &Path, ids: &[String]) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut pending: BTreeSet<String> = ids.iter().cloned().collect();
    while !pending.is_empty() {
        let mut still = BTreeSet::new();
        for id in &pending {
            let events = journal(viewer, id).await;
            let ended = events
                .iter()
                .any(|event| TERMINAL.contains(&event["type"].as_str().unwrap_or("")));
            if !ended {
                still.insert(id.clone());
            }
        }
        pending = still;
        assert!(Instant::now() < deadline, "runs never ended: {pending:?}");
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let mut resumed = BTreeSet::new();
    for (n, id) in ids.iter().enumerate() {
        let events = journal(viewer, id).await;
        for (index, event) in events.iter().enumerate() {
            assert_eq!(
                event["seq"],
                json!(index + 1),
                "run {id}: a gap or a duplicate"
            );
            assert_eq!(event["runId"], json!(id));
        }
        let terminal: Vec<&str> = events
            .iter()
            .filter_map(|event| event["type"].as_str())
            .filter(|kind| TERMINAL.contains(kind))
            .collect();
        assert_eq!(terminal, vec!["run_completed"], "run {id}");
        if events.iter().any(|event| event["type"] == "run_resumed") {
            resumed.insert(id.clone());
        }
        let chat = std::fs::read_to_string(
            dir.join(format!("data/tenants/local/chats/chat-{n:02}.jsonl")),
        )
        .expect("chat");
        assert_eq!(chat.matches(REPLY).count(), 1, "chat of run {id}");
    }
    resumed
}

/// Start `count` runs through `nodes` in turn; their ids.
async fn submit(nodes: &[Node], count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..count {
        let node = &nodes[n % nodes.len()];
        let response = client()
            .post(format!("{}/v1/runs", node.base))
            .json(&json!({"model": "demo", "profile": "writer", "chat": format!("chat-{n:02}")}))
            .send()
            .await
            .expect("post");
        assert_eq!(response.status().as_u16(), 201, "run {n} via {}", node.name);
        let body: Value = response.json().await.expect("json");
        ids.push(body["id"].as_str().expect("id").to_owned());
    }
    ids
}

const TERMINAL: [&str; 4] = [
    "run_completed",
    "run_failed",
    "run_partial_success",
    "run_cancelled",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_spread_over_three_nodes_and_survive_one_being_killed() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path());
    let mut nodes: Vec<Node> = ["node-1", "node-2", "node-3"]
        .iter()
        .map(|name| Node::start(temp.path(), &nats.url(), name))
        .collect();
    for node in &nodes {
        ready(&node.base).await;
    }

    // Each run through another node.
    let ids = submit(&nodes, RUNS).await;

    // Kill node-1 once it drives runs.
    let viewer = Cluster::attach(&nats.url(), NodeName::new("viewer").unwrap())
        .await
        .expect("attach");
    let deadline = Instant::now() + Duration::from_secs(120);
    let held: BTreeSet<String> = loop {
        let status = viewer.status().await.expect("status");
        let runs: BTreeSet<String> = status
            .nodes
            .iter()
            .filter(|node| node.node == "node-1")
            .flat_map(|node| node.runs.iter().map(|run| run.run.clone()))
            .collect();
        if !runs.is_empty() {
            break runs;
        }
        assert!(Instant::now() < deadline, "node-1 never took a run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    nodes[0].kill();

    let resumed = all_completed_once(&viewer, temp.path(), &ids).await;
    // What node-1 was driving when it died went on elsewhere.
    let moved: Vec<&String> = held.intersection(&resumed).collect();
    assert!(
        !moved.is_empty(),
        "none of node-1's runs {held:?} was resumed (resumed: {resumed:?})"
    );
    eprintln!(
        "{} runs, {} resumed after node-1 was killed holding {}",
        ids.len(),
        resumed.len(),
        held.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_paused_past_its_lease_cannot_append_or_commit_when_it_wakes() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    // Each reply takes 2.5 s: the owner is paused before its first one.
    setup_with(temp.path(), 2500);
    let nodes: Vec<Node> = ["node-1", "node-2"]
        .iter()
        .map(|name| Node::start_with(temp.path(), &nats.url(), name, "2000"))
        .collect();
    for node in &nodes {
        ready(&node.base).await;
    }
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
    let viewer = Cluster::attach(&nats.url(), NodeName::new("viewer").unwrap())
        .await
        .expect("attach");

    // Pause whichever node took it once its loop asked the model, before
    // the model answers.
    until("the run's loop never started", 60, || async {
        journal(&viewer, &id)
            .await
            .iter()
            .any(|event| event["type"] == "model_request_created")
    })
    .await;
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
            .any(|event| event["type"] == "run_completed")
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
        resumed["type"], "run_resumed",
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
    assert_eq!(chat.matches(REPLY).count(), 1, "committed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_pause_while_nats_restarts_and_finish_with_no_gap_or_duplicate() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let mut nats = NatsServer::start(&binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup_with(temp.path(), 1000);
    let nodes: Vec<Node> = ["node-1", "node-2"]
        .iter()
        .map(|name| Node::start(temp.path(), &nats.url(), name))
        .collect();
    for node in &nodes {
        ready(&node.base).await;
    }
    let ids = submit(&nodes, 6).await;
    {
        let viewer = Cluster::attach(&nats.url(), NodeName::new("viewer").unwrap())
            .await
            .expect("attach");
        until("no run's loop started", 60, || async {
            journal(&viewer, &ids[0])
                .await
                .iter()
                .any(|event| event["type"] == "model_request_created")
        })
        .await;
    }
    // NATS goes away for two seconds, in the middle of the runs.
    nats.stop();
    tokio::time::sleep(Duration::from_secs(2)).await;
    nats.restart().expect("nats-server again");
    let viewer = Cluster::attach(&nats.url(), NodeName::new("viewer").unwrap())
        .await
        .expect("attach");
    let resumed = all_completed_once(&viewer, temp.path(), &ids).await;
    eprintln!(
        "{} runs after a NATS restart, {} resumed",
        ids.len(),
        resumed.len()
    );
}
