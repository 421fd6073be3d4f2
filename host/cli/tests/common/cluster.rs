//! The cluster's multi-process harness, shared by the tests
//! (`tests/cluster_runs.rs`) and the benchmark (`benches/cluster.rs`):
//! `toolhost serve --cluster` nodes as processes on one nats-server, a data
//! directory with a chat per run and a scripted model with latency, runs
//! submitted over HTTP, journals read from the cluster.

#![allow(dead_code)] // each user takes what it needs

// By path: this file is itself included by path, from `tests/` and `benches/`.
#[path = "serve.rs"]
mod serve;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_cluster::testing::NatsServer;
use toolhost_cluster::{Cluster, NodeName, RunKey, RunLog};
use toolhost_journal::{Event as _, ModelRequestCreated, RunCompleted, RunResumed};

/// The node holding `id`'s lease now, if any.
pub async fn owner(cluster: &Cluster, id: &str) -> Option<String> {
    let key = RunKey::new("local", id).expect("key");
    let leases = cluster.leases().await.expect("leases");
    leases
        .holder(&key)
        .await
        .expect("holder")
        .map(|holder| holder.node)
}

/// Wait until `check` holds, or fail saying `what`.
pub async fn until<F, Fut>(what: &str, seconds: u64, mut check: F)
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

pub const REPLY: &str = "The lighthouse keeper counts the ships.";

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The component cache every node shares.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-cache")
}

pub struct Node {
    pub name: String,
    pub base: String,
    /// Where the node's stderr goes: printed when a test fails.
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// A node with a 3 s lease and room for 4 runs.
    pub fn start(dir: &Path, nats: &NatsServer, name: &str) -> Self {
        Self::launch(dir, nats, name, 3000, 4)
    }

    pub fn launch(
        dir: &Path,
        nats: &NatsServer,
        name: &str,
        lease_ms: u64,
        max_runs: usize,
    ) -> Self {
        Self::launch_with(dir, nats, name, lease_ms, max_runs, &[])
    }

    /// [`Node::launch`] with more `serve` flags.
    pub fn launch_with(
        dir: &Path,
        nats: &NatsServer,
        name: &str,
        lease_ms: u64,
        max_runs: usize,
        flags: &[&str],
    ) -> Self {
        Self::spawn(dir, nats, name, [lease_ms, max_runs as u64], flags, &[])
    }

    /// [`Node::launch`] with variables in its environment (a crash point).
    pub fn launch_env(
        dir: &Path,
        nats: &NatsServer,
        name: &str,
        lease_ms: u64,
        envs: &[(&str, &str)],
    ) -> Self {
        Self::spawn(dir, nats, name, [lease_ms, 4], &[], envs)
    }

    /// Whether the process is stopped (`T` in `/proc/PID/stat`).
    pub fn is_stopped(&self) -> bool {
        let Some(child) = self.child.as_ref() else {
            return false;
        };
        std::fs::read_to_string(format!("/proc/{}/stat", child.id()))
            .ok()
            .and_then(|stat| {
                let after = stat.rsplit_once(')')?.1;
                after.split_whitespace().next().map(|state| state == "T")
            })
            .unwrap_or(false)
    }

    fn spawn(
        dir: &Path,
        nats: &NatsServer,
        name: &str,
        [lease_ms, max_runs]: [u64; 2],
        flags: &[&str],
        envs: &[(&str, &str)],
    ) -> Self {
        let port = serve::free_port();
        let log = dir.join(format!("{name}.log"));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("node log");
        let child = serve::serve_command(&cache_dir(), port)
            .args(["--models", "models.json", "--data-dir", "data"])
            .args(["--max-runs", &max_runs.to_string()])
            .args(nats.flags())
            .args(["--node", name])
            .args(["--lease-ms", &lease_ms.to_string()])
            .args(flags)
            // `TOOLHOST_NODE_LOG=debug,…` for a closer look at a failure.
            .env(
                "TOOLHOST_LOG",
                std::env::var("TOOLHOST_NODE_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .envs(envs.iter().copied())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("toolhost serve");
        Self {
            name: name.to_owned(),
            base: format!("http://127.0.0.1:{port}"),
            log,
            child: Some(child),
        }
    }

    /// Send `signal` (`STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let child = self.child.as_ref().expect("running");
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
        // A failing test shows what each node said: the only way to see why
        // a run did not end on a machine we cannot log into.
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(80).collect();
            eprintln!("--- the last lines of {} ---", self.name);
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// A client whose every request ends within 30 s: a request a node never
/// answers fails the test (or is retried by `until`) instead of hanging it.
pub fn client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// A client for an event stream, which lasts as long as its run: no
/// request of it is cut after a total time, only after 30 s of silence
/// (the server sends keep-alives).
pub fn stream_client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

pub async fn ready(base: &str) {
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

/// A data directory: `runs` chats, a `writer` profile, and a scripted
/// model whose two replies take `delay_ms` each.
pub fn setup(dir: &Path, runs: usize, delay_ms: u64) {
    let tenant = serve::tenant_with_chats(dir, "local", (0..runs).map(|n| format!("chat-{n:02}")));
    std::fs::write(
        tenant.join("profiles/writer.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
               "tools": {"allow": ["workspace.write_file", "workspace.commit", "workspace.finish"],
                         "maxRounds": 4}})
        .to_string(),
    )
    .expect("profile");
    let call = serve::script_call;
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

/// The cluster at `nats` as an outside reader sees it (attaches only:
/// makes nothing).
pub async fn viewer(nats: &NatsServer) -> Cluster {
    Cluster::attach(
        &nats.address(),
        NodeName::new("viewer").expect("a valid name"),
    )
    .await
    .expect("attach")
}

/// The events of a run's journal in the cluster.
pub async fn journal(cluster: &Cluster, id: &str) -> Vec<Value> {
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
pub async fn all_completed_once(viewer: &Cluster, dir: &Path, ids: &[String]) -> BTreeSet<String> {
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
        assert_eq!(terminal, vec![RunCompleted::TYPE], "run {id}");
        if events.iter().any(|event| event["type"] == RunResumed::TYPE) {
            resumed.insert(id.clone());
        }
        let chat = std::fs::read_to_string(
            dir.join(format!("data/tenants/local/chats/chat-{n:02}.jsonl")),
        )
        .expect("chat");
        assert_eq!(replies_in(&chat), 1, "chat of run {id}");
    }
    resumed
}

/// Start `count` runs through `nodes` in turn; their ids.
pub async fn submit(nodes: &[Node], count: usize) -> Vec<String> {
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

pub use toolhost_journal::TERMINAL_EVENTS as TERMINAL;

/// The ids a node lists at `GET {base}{path}` under `list` whose `done`
/// is still false (waiting approvals, waiting commits); none when the node
/// does not answer, so an `until` asks again.
pub async fn waiting(base: &str, path: &str, list: &str, id_key: &str, done: &str) -> Vec<String> {
    let Ok(response) = client().get(format!("{base}{path}")).send().await else {
        return Vec::new();
    };
    let body: Value = response.json().await.unwrap_or(Value::Null);
    body[list]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|item| item[done] == false)
                .filter_map(|item| item[id_key].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `POST {url}` with `body` to the node now driving a run, sent again while
/// it is still taking the run over (`cluster.taking_over`, up to 30 s).
pub async fn post_to_driver(url: &str, body: &Value) -> (u16, Value) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let response = client().post(url).json(body).send().await.expect("post");
        let status = response.status().as_u16();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if status == 409
            && answer["code"] == "cluster.taking_over"
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        }
        return (status, answer);
    }
}

/// The messages of a chat file holding the scripted reply (its line also
/// holds it in `swipes`, as SillyTavern writes a reply).
pub fn replies_in(chat: &str) -> usize {
    chat.lines().filter(|line| line.contains(REPLY)).count()
}

/// Wait until `id`'s loop asked its model: the run is under way.
pub async fn loop_started(viewer: &Cluster, id: &str) {
    until("the run's loop never started", 60, || async {
        journal(viewer, id)
            .await
            .iter()
            .any(|event| event["type"] == ModelRequestCreated::TYPE)
    })
    .await;
}

/// A node per name in `names` (each with `lease_ms`, room for `max_runs`
/// and `flags`), once each answers.
pub async fn start_nodes(
    dir: &Path,
    nats: &NatsServer,
    names: &[&str],
    lease_ms: u64,
    max_runs: usize,
    flags: &[&str],
) -> Vec<Node> {
    let nodes: Vec<Node> = names
        .iter()
        .map(|name| Node::launch_with(dir, nats, name, lease_ms, max_runs, flags))
        .collect();
    for node in &nodes {
        ready(&node.base).await;
    }
    nodes
}
