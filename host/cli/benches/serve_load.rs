//! `make bench` (the service's load figure): 100 concurrent scripted runs
//! of 20 rounds through `toolhost serve`'s HTTP API, beside the same 100
//! runs as `toolhost run` processes (at most 40 at once), in interleaved
//! rounds of one bench run.
//!
//! Each run makes 20 sandboxed tool calls (17 `dice.roll`, then write,
//! commit, finish), each round one model request to a scripted model.
//! Reported: aggregate tool calls per second (median over rounds) both
//! ways and their ratio; p50 / p99 of a tool call's control-plane path
//! under that load (`elapsedUs` of `tool_call_completed`: arguments
//! stored to result stored); and memory per in-flight run, (peak RSS of
//! a fresh server during the load − its RSS idle, once `/v1/health` says
//! it is ready) / runs. Measured twice:
//! with the runs on disk (a fresh directory under the target directory,
//! placed away from recent deletions: bench/fresh_disk.rs) and on tmpfs. Output is
//! Markdown, ready for docs/benchmarks.md.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_journal::{Event as _, ToolCallCompleted};

#[path = "../../../bench/fresh_disk.rs"]
mod fresh_disk;
#[path = "../tests/common/serve.rs"]
mod serve_common;

const RUNS: usize = 100;
const ROUNDS: usize = 20;
const PROCESSES_AT_ONCE: usize = 40;
const BENCH_ROUNDS: usize = 3;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn toolhost() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command
        .arg("--cache-dir")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-cache"))
        .args(["--mcp-dir", "none", "--ext-dir", "none"]);
    command
}

fn script() -> Value {
    let call = |id: String, name: &str, arguments: Value| json!({"id": id, "name": name, "arguments": arguments});
    let mut replies: Vec<Value> = (1..=ROUNDS - 3)
        .map(|round| json!({"toolCalls": [call(format!("roll_{round}"), "dice_roll", json!({"formula": "3d6+4"}))]}))
        .collect();
    replies.push(json!({"toolCalls": [call("write".into(), "workspace_write_file", json!({"path": "output/main.md", "content": "Twenty rounds later.\n"}))]}));
    replies.push(json!({"toolCalls": [call("commit".into(), "workspace_commit", json!({}))]}));
    replies.push(json!({"toolCalls": [call("finish".into(), "workspace_finish", json!({"reason": "done"}))]}));
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": replies})
}

fn profile() -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "loader",
           "tools": {"allow": ["dice.roll", "workspace.write_file", "workspace.commit", "workspace.finish"],
                     "maxRounds": ROUNDS + 5, "maxCallsPerRun": ROUNDS + 5}})
}

/// A bench directory: the script, the profile, the models file, and a
/// data directory whose `local` tenant has the profile and `RUNS` chats.
fn prepare(dir: &Path) {
    std::fs::write(dir.join("script.json"), script().to_string()).expect("script");
    std::fs::write(dir.join("profile.json"), profile().to_string()).expect("profile");
    serve_common::script_models(dir);
    let tenant = dir.join("data/tenants/local");
    std::fs::create_dir_all(tenant.join("profiles")).expect("profiles");
    std::fs::create_dir_all(tenant.join("chats")).expect("chats");
    std::fs::write(tenant.join("profiles/loader.json"), profile().to_string()).expect("profile");
    std::fs::create_dir_all(dir.join("chats")).expect("chats");
    fresh_chats(dir);
}

/// Every run writes its own chat: a fresh copy of the fixture each round.
fn fresh_chats(dir: &Path) {
    let fixture = repo("tests/fixtures/chats/long_character_chat.jsonl");
    for index in 0..RUNS {
        let name = format!("chat-{index:03}.jsonl");
        std::fs::copy(&fixture, dir.join("data/tenants/local/chats").join(&name)).expect("chat");
        std::fs::copy(&fixture, dir.join("chats").join(&name)).expect("chat");
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path) -> Server {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("port")
        .port();
    let child = toolhost()
        .arg("serve")
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--models")
        .arg(dir.join("models.json"))
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(["--max-runs", "512", "--max-runs-per-tenant", "512"])
        // Extra server flags for an experiment, e.g. "--worker-threads 64".
        .args(
            std::env::var("SERVE_LOAD_SERVER_FLAGS")
                .unwrap_or_default()
                .split_whitespace(),
        )
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("toolhost serve");
    Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

fn client() -> reqwest::Client {
    toolhost_net::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client")
}

/// Waits for `/v1/health` to say `ready`: the server answers at once, but
/// loads its builtins in the background first; a round started before
/// that would measure the loads' CPU as the runs' and their memory as
/// the runs' memory.
async fn ready(base: &str) {
    for _ in 0..3000 {
        if let Ok(response) = client().get(format!("{base}/v1/health")).send().await
            && response.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("toolhost serve did not start");
}

struct LoadRound {
    calls_per_second: f64,
    latencies_us: Vec<u64>,
    kib_per_run: f64,
}

/// `RUNS` runs through the API at once; waits for all to end.
async fn serve_round(server: &Server, dir: &Path) -> LoadRound {
    let client = client();
    let idle = rss_kib(server.child.id());
    let peak = Arc::new(AtomicU64::new(idle));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done, pid) = (Arc::clone(&peak), Arc::clone(&done), server.child.id());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let started = Instant::now();
    let mut submissions = Vec::new();
    for index in 0..RUNS {
        let client = client.clone();
        let url = format!("{}/v1/runs", server.base);
        submissions.push(tokio::spawn(async move {
            let response = client
                .post(url)
                .json(&json!({"profile": "loader", "model": "script", "chat": format!("chat-{index:03}")}))
                .send()
                .await
                .expect("start");
            assert_eq!(response.status().as_u16(), 201);
            let started: Value = response.json().await.expect("json");
            started["id"].as_str().expect("id").to_owned()
        }));
    }
    let mut ids = Vec::new();
    for submission in submissions {
        ids.push(submission.await.expect("submit"));
    }
    let mut calls = 0;
    for id in &ids {
        loop {
            let run: Value = client
                .get(format!("{}/v1/runs/{id}", server.base))
                .send()
                .await
                .expect("get")
                .json()
                .await
                .expect("json");
            if run["status"] != "running" {
                assert_eq!(run["status"], "completed", "{run}");
                calls += run["summary"]["toolCalls"].as_u64().unwrap_or(0);
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let elapsed = started.elapsed();
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let mut latencies_us = Vec::new();
    for id in &ids {
        let journal = std::fs::read_to_string(
            dir.join("data/tenants/local/runs")
                .join(id)
                .join("events.jsonl"),
        )
        .expect("journal");
        for line in journal.lines() {
            let event: Value = serde_json::from_str(line).expect("event");
            if event["type"] == ToolCallCompleted::TYPE
                && let Some(micros) = event["payload"]["elapsedUs"].as_u64()
            {
                latencies_us.push(micros);
            }
        }
    }
    LoadRound {
        calls_per_second: calls as f64 / elapsed.as_secs_f64(),
        latencies_us,
        kib_per_run: peak.load(Ordering::Relaxed).saturating_sub(idle) as f64 / RUNS as f64,
    }
}

/// The same runs as `toolhost run` processes, at most `PROCESSES_AT_ONCE`.
fn process_round(dir: &Path, round: usize) -> f64 {
    let runs_dir = dir.join(format!("process-runs-{round}"));
    let started = Instant::now();
    let mut pending: Vec<usize> = (0..RUNS).collect();
    let mut running: Vec<Child> = Vec::new();
    let mut finished = 0;
    while finished < RUNS {
        while running.len() < PROCESSES_AT_ONCE
            && let Some(index) = pending.pop()
        {
            let child = toolhost()
                .arg("run")
                .arg("--profile")
                .arg(dir.join("profile.json"))
                .arg("--model")
                .arg(format!("script:{}", dir.join("script.json").display()))
                .arg("--chat")
                .arg(dir.join("chats").join(format!("chat-{index:03}.jsonl")))
                .arg("--runs-dir")
                .arg(&runs_dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("toolhost run");
            running.push(child);
        }
        let mut still = Vec::new();
        for mut child in running {
            match child.try_wait().expect("wait") {
                Some(status) => {
                    assert!(status.success(), "a toolhost run failed: {status:?}");
                    finished += 1;
                }
                None => still.push(child),
            }
        }
        running = still;
        std::thread::sleep(Duration::from_millis(2));
    }
    (RUNS * ROUNDS) as f64 / started.elapsed().as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Fill the compile cache once, outside every measurement.
    let warm = toolhost()
        .args(["tools", "list"])
        .stdout(Stdio::null())
        .status()
        .expect("warm");
    assert!(warm.success());
    // Where the runs are written matters as much as anything here: both
    // forms make the same durable writes, and on this VM's disk the
    // server's round waits on them (syncs, device flushes; docs/
    // benchmarks.md, stop 34). tmpfs shows the rest.
    let disk =
        fresh_disk::fresh_disk_dir(&fresh_disk::base(Path::new(env!("CARGO_TARGET_TMPDIR"))));
    println!(
        "{RUNS} runs × {ROUNDS} rounds, 20 sandboxed tool calls each; median of {BENCH_ROUNDS} interleaved rounds."
    );
    println!();
    println!(
        "| runs written to | `toolhost serve` calls/s | `toolhost run` ×{PROCESSES_AT_ONCE} calls/s | ratio | call p50 | call p99 | MiB per in-flight run |"
    );
    println!("|---|---|---|---|---|---|---|");
    // The disk's directory is kept (bench/fresh_disk.rs); tmpfs's goes.
    println!("{}", measure(&disk.dir, "disk").await);
    if Path::new("/dev/shm").is_dir() {
        let temp = tempfile::tempdir_in("/dev/shm").expect("tempdir");
        println!("{}", measure(temp.path(), "tmpfs").await);
    }
    println!();
    println!("{}", disk.describe("disk"));
}

/// Interleaved rounds in `dir`: one Markdown row.
async fn measure(dir: &Path, label: &str) -> String {
    prepare(dir);
    eprintln!(
        "serve_load ({label}): {RUNS} runs × {ROUNDS} rounds, {BENCH_ROUNDS} interleaved rounds"
    );
    let mut served = Vec::new();
    let mut processes = Vec::new();
    let mut latencies = Vec::new();
    let mut memory = Vec::new();
    for round in 0..BENCH_ROUNDS {
        fresh_chats(dir);
        // A fresh server each round, so its idle RSS is a fresh server's.
        let server = serve(dir);
        ready(&server.base).await;
        let load = serve_round(&server, dir).await;
        drop(server);
        eprintln!(
            "  round {round}: served {:.0} calls/s, {:.0} KiB per run",
            load.calls_per_second, load.kib_per_run
        );
        served.push(load.calls_per_second);
        memory.push(load.kib_per_run);
        latencies.extend(load.latencies_us);
        let per_process = tokio::task::block_in_place(|| process_round(dir, round));
        eprintln!("  round {round}: process per run {per_process:.0} calls/s");
        processes.push(per_process);
    }
    latencies.sort_unstable();
    let served = median(&mut served);
    let processes = median(&mut processes);
    let memory = median(&mut memory);
    format!(
        "| {label} | {served:.0} | {processes:.0} | {:.1}× | {} µs | {} µs | {:.2} |",
        served / processes,
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        memory / 1024.0
    )
}
