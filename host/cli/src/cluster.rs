//! `toolhost cluster status`: a cluster's nodes, the runs each holds a
//! lease on, runs still leased to a node that stopped, and the queue
//! (docs/cluster.md). It reads the cluster and changes nothing: a NATS
//! server no node has set up yet is an error, not a new cluster. And the
//! flags of `toolhost serve --cluster`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Subcommand;
use toolhost_cluster::{Cluster, ClusterSettings, ClusterStatus, LeasedRun, NodeName};

use crate::table;

/// `toolhost serve` as a node of a cluster (docs/cluster.md).
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Be a node of the cluster on this NATS JetStream server: new runs go
    /// to its queue, and this node takes runs from it while it has room.
    #[arg(long, value_name = "URL", env = "TOOLHOST_CLUSTER")]
    pub cluster: Option<String>,
    /// This node's name in the cluster [default: node-<pid>].
    #[arg(long, value_name = "NAME", requires = "cluster")]
    pub node: Option<String>,
    /// Where this node keeps its copies of the runs it drives [default:
    /// <data-dir>/nodes/<name>].
    #[arg(long, value_name = "DIR", requires = "cluster")]
    pub node_dir: Option<PathBuf>,
    /// Lease length in milliseconds, when this node is the first (the
    /// cluster's own otherwise): a dead node's runs move after about this.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 10_000,
        requires = "cluster"
    )]
    pub lease_ms: u64,
    /// Runs not yet ended the cluster holds (queued and running), when this
    /// node is the first; past it a new run is refused with 429.
    #[arg(long, value_name = "N", default_value_t = 1000, requires = "cluster")]
    pub queue_limit: i64,
    /// Copies of every stream and bucket, when this node is the first: 1
    /// for one NATS server, 3 for a cluster of three.
    #[arg(long, value_name = "N", default_value_t = 1, requires = "cluster")]
    pub replicas: usize,
    /// How long a journal append waits for NATS before the run stops,
    /// interrupted (it resumes when NATS is back).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 30_000,
        requires = "cluster"
    )]
    pub append_window_ms: u64,
}

impl ClusterArgs {
    /// The node's name and the settings it would set the cluster up with.
    pub fn settings(&self) -> Result<(NodeName, ClusterSettings)> {
        let name = match &self.node {
            Some(name) => name.clone(),
            None => format!("node-{}", std::process::id()),
        };
        let lease = Duration::from_millis(self.lease_ms.max(1000));
        let settings = ClusterSettings {
            replicas: self.replicas.max(1),
            lease,
            queue_limit: self.queue_limit.max(1),
            claim_wait: lease,
            append_window: Duration::from_millis(self.append_window_ms.max(100)),
            ..ClusterSettings::default()
        };
        Ok((NodeName::new(name)?, settings))
    }
}

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
    let held = status
        .nodes
        .iter()
        .flat_map(|node| &node.runs)
        .map(|run| (run, false));
    let orphaned = status.orphaned.iter().map(|run| (run, true));
    let runs: Vec<[String; 4]> = held
        .chain(orphaned)
        .map(|(run, stopped): (&LeasedRun, bool)| {
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
