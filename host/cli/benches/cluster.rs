//! `make bench` (cluster): runs per minute with 1, 2 and 3 `toolhost serve
//! --cluster` nodes on one nats-server, for a model that answers at once
//! (the machine's CPU is the limit) and one whose replies take 250 ms (the
//! nodes' room is), in interleaved rounds; and the time from a node's
//! SIGKILL to its run's `run_resumed` on another node, against the lease;
//! and what the cluster's security costs: two nodes on a NATS with TLS,
//! client certificates and an nkey user (how every other row runs) against
//! the same on an open NATS, interleaved. Every run is checked to complete
//! exactly once. Output is Markdown, ready for docs/benchmarks.md.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use toolhost_cluster::testing::{NatsServer, Security, nats_server_binary};
use toolhost_journal::{Event as _, RunResumed};

#[path = "../tests/common/cluster.rs"]
mod harness;

use harness::{Node, all_completed_once, loop_started, ready, setup, start_nodes, submit};
use harness::{journal, owner, until, viewer};

const ROUNDS: usize = 3;
const RUNS: usize = 24;
/// Each node's room (`--max-runs`).
const ROOM: usize = 4;
/// The nodes' lease in the failover rounds (the harness's).
const LEASE_MS: u64 = 3000;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs per minute: `RUNS` runs through `count` nodes, from the first
/// submit to the last run's end.
async fn throughput(
    binary: &std::path::Path,
    count: usize,
    delay_ms: u64,
    security: Security,
) -> f64 {
    let nats = NatsServer::start_with(binary, security).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path(), RUNS, delay_ms);
    let nodes: Vec<Node> = (1..=count)
        .map(|n| Node::launch(temp.path(), &nats, &format!("node-{n}"), LEASE_MS, ROOM))
        .collect();
    for node in &nodes {
        ready(&node.base).await;
    }
    let viewer = viewer(&nats).await;
    let started = Instant::now();
    let ids = submit(&nodes, RUNS).await;
    all_completed_once(&viewer, temp.path(), &ids).await;
    RUNS as f64 / started.elapsed().as_secs_f64() * 60.0
}

/// Seconds from the SIGKILL of a run's owner to `run_resumed` on the other
/// node.
async fn failover(binary: &std::path::Path) -> f64 {
    let nats = NatsServer::start(binary).expect("nats-server");
    let temp = tempfile::tempdir().expect("tempdir");
    setup(temp.path(), 1, 1500);
    let mut nodes = start_nodes(
        temp.path(),
        &nats,
        &["node-1", "node-2"],
        LEASE_MS,
        ROOM,
        &[],
    )
    .await;
    let viewer = viewer(&nats).await;
    let ids = submit(&nodes, 1).await;
    let id = &ids[0];
    loop_started(&viewer, id).await;
    let holder = owner(&viewer, id).await.expect("an owner");
    let victim = nodes
        .iter()
        .position(|node| node.name == holder)
        .expect("a node");
    nodes[victim].kill();
    let killed = Instant::now();
    until("the run never resumed", 60, || async {
        journal(&viewer, id)
            .await
            .iter()
            .any(|event| event["type"] == RunResumed::TYPE)
    })
    .await;
    let elapsed = killed.elapsed().as_secs_f64();
    all_completed_once(&viewer, temp.path(), &ids).await;
    elapsed
}

fn main() {
    let Some(binary) = nats_server_binary() else {
        eprintln!("SKIPPED: nats-server is not installed (`make setup` installs it into .venv)");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        println!(
            "## Cluster: runs per minute ({RUNS} scripted runs of two replies, {ROOM} per node, medians of {ROUNDS} interleaved rounds)\n"
        );
        println!("| model reply | 1 node | 2 nodes | 3 nodes | 3 nodes / 1 node |");
        println!("|---|---|---|---|---|");
        for delay_ms in [0, 250] {
            let mut per_count: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
            for _ in 0..ROUNDS {
                for count in 1..=3 {
                    let rate =
                        throughput(&binary, count, delay_ms, Security::NkeyMutualTls).await;
                    eprintln!("  {count} node(s), {delay_ms} ms replies: {rate:.0} runs/min");
                    per_count.entry(count).or_default().push(rate);
                }
            }
            let medians: Vec<f64> = (1..=3)
                .map(|count| median(per_count.get_mut(&count).expect("measured")))
                .collect();
            println!(
                "| {delay_ms} ms | {:.0} | {:.0} | {:.0} | {:.2}× |",
                medians[0],
                medians[1],
                medians[2],
                medians[2] / medians[0]
            );
        }
        // What TLS, client certificates and an nkey cost, side by side.
        let mut secured = Vec::new();
        let mut open = Vec::new();
        for _ in 0..ROUNDS {
            for (security, rates) in [
                (Security::NkeyMutualTls, &mut secured),
                (Security::Open, &mut open),
            ] {
                let rate = throughput(&binary, 2, 0, security).await;
                eprintln!("  2 nodes, 0 ms replies, {security:?}: {rate:.0} runs/min");
                rates.push(rate);
            }
        }
        let (secured, open) = (median(&mut secured), median(&mut open));
        println!(
            "\n## Cluster: TLS with client certificates and an nkey user against an open NATS (2 nodes, 0 ms replies, medians of {ROUNDS} interleaved rounds)\n\n| NATS | runs/min |\n|---|---|\n| TLS + client certificate + nkey | {secured:.0} |\n| open (loopback only) | {open:.0} |\n| secured / open | {:.2}× |",
            secured / open
        );
        let mut times: Vec<f64> = Vec::new();
        for _ in 0..ROUNDS {
            let seconds = failover(&binary).await;
            eprintln!("  failover: {seconds:.2} s");
            times.push(seconds);
        }
        let lease = Duration::from_millis(LEASE_MS).as_secs_f64();
        println!(
            "\n## Cluster: from a node's SIGKILL to its run resumed elsewhere\n\n| lease | median | max | target (lease + 2 s) |\n|---|---|---|---|\n| {lease:.1} s | {:.2} s | {:.2} s | {:.1} s |",
            median(&mut times.clone()),
            times.iter().copied().fold(0.0, f64::max),
            lease + 2.0
        );
    });
}
