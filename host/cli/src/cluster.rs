//! `toolhost cluster status`: a cluster's nodes, the runs each holds a
//! lease on, runs still leased to a node that stopped, and the queue
//! (docs/cluster.md). It reads the cluster and changes nothing: a NATS
//! server no node has set up yet is an error, not a new cluster.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use toolhost_cluster::{Cluster, ClusterStatus, LeasedRun, NodeName};

use crate::table;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// The nodes, the runs each holds a lease on, and the runs queued.
    Status {
        /// The cluster's NATS server, e.g. nats://127.0.0.1:4222.
        #[arg(long, value_name = "URL", env = "TOOLHOST_CLUSTER")]
        cluster: String,
        /// The status as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: ClusterCommand) -> Result<ExitCode> {
    match command {
        ClusterCommand::Status { cluster, json } => {
            let viewer = NodeName::new(format!("status-{}", std::process::id()))?;
            let connected = Cluster::attach(&cluster, viewer)
                .await
                .with_context(|| format!("reading the cluster at {cluster}"))?;
            let status = connected.status().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&status)?);
            } else {
                print(&status);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn print(status: &ClusterStatus) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64);
    let ago = |at: i64| format!("{}s ago", (now - at).max(0));
    let nodes: Vec<[String; 5]> = status
        .nodes
        .iter()
        .map(|node| {
            [
                node.node.clone(),
                node.listen.clone(),
                format!("{}/{}", node.running, node.capacity),
                ago(node.seen_at),
                node.runs.len().to_string(),
            ]
        })
        .collect();
    table::print(["NODE", "LISTEN", "RUNNING", "SEEN", "LEASES"], &nodes);
    let runs: Vec<[String; 4]> = status
        .nodes
        .iter()
        .flat_map(|node| &node.runs)
        .chain(&status.orphaned)
        .map(|run: &LeasedRun| {
            let stopped = status.orphaned.iter().any(|orphan| orphan.run == run.run);
            [
                format!("{}/{}", run.tenant, run.run),
                if stopped {
                    format!("{} (stopped)", run.node)
                } else {
                    run.node.clone()
                },
                run.token.to_string(),
                ago(run.renewed_at),
            ]
        })
        .collect();
    if !runs.is_empty() {
        println!();
        table::print(["RUN", "OWNER", "TOKEN", "RENEWED"], &runs);
    }
    println!(
        "\n{} queued; leases last {} ms",
        status.queued, status.lease_ms
    );
}
