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
            .args(["--cluster", nats, "--node", name, "--lease-ms", "3000"])
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
            {"delayMs": 700, "toolCalls": [
                call("c1", "workspace_write_file", json!({"path": "output/main.md", "content": REPLY})),
                call("c2", "workspace_commit", json!({}))]},
            {"delayMs": 700, "toolCalls": [call("c3", "workspace_finish", json!({"reason": "done"}))]}
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
    let mut ids = Vec::new();
    for n in 0..RUNS {
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

    // Every run ends, once.
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut pending: BTreeSet<String> = ids.iter().cloned().collect();
    while !pending.is_empty() {
        let mut still = BTreeSet::new();
        for id in &pending {
            let events = journal(&viewer, id).await;
            let ended = events
                .iter()
                .any(|event| TERMINAL.contains(&event["type"].as_str().unwrap_or("")));
            if !ended {
                still.insert(id.clone());
            }
        }
        pending = still;
        assert!(
            Instant::now() < deadline,
            "runs never ended: {pending:?} (node-1 held {held:?})"
        );
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    let mut resumed = BTreeSet::new();
    for (n, id) in ids.iter().enumerate() {
        let events = journal(&viewer, id).await;
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
            temp.path()
                .join(format!("data/tenants/local/chats/chat-{n:02}.jsonl")),
        )
        .expect("chat");
        assert_eq!(chat.matches(REPLY).count(), 1, "chat of run {id}");
    }
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
