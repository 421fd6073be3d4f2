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
use toolhost_cluster::{
    Cluster, ClusterAddress, ClusterSettings, ClusterStatus, Credential, LeasedRun, NodeName,
    TlsFiles,
};

use crate::table;

/// How to reach a cluster's NATS beyond its URL: a credential and TLS
/// (docs/cluster.md, "Securing a cluster"). Beyond loopback both are
/// required. Each file is read at start; a credential file must be
/// readable by its owner only.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterAccessArgs {
    /// A NATS `.creds` file (user JWT and nkey seed).
    #[arg(
        long,
        value_name = "FILE",
        group = "cluster_credential",
        requires = "cluster"
    )]
    pub cluster_creds: Option<PathBuf>,
    /// A file holding an nkey user seed (`SU…`).
    #[arg(
        long,
        value_name = "FILE",
        group = "cluster_credential",
        requires = "cluster"
    )]
    pub cluster_nkey: Option<PathBuf>,
    /// A file holding the server's authorization token.
    #[arg(
        long,
        value_name = "FILE",
        group = "cluster_credential",
        requires = "cluster"
    )]
    pub cluster_token_file: Option<PathBuf>,
    /// PEM certificates NATS's certificate must chain to (turns TLS on).
    #[arg(long, value_name = "FILE", requires = "cluster")]
    pub cluster_ca: Option<PathBuf>,
    /// A PEM client certificate, for a NATS that verifies clients (with
    /// --cluster-key).
    #[arg(long, value_name = "FILE", requires = "cluster_key")]
    pub cluster_cert: Option<PathBuf>,
    /// The PEM private key of --cluster-cert.
    #[arg(long, value_name = "FILE", requires = "cluster_cert")]
    pub cluster_key: Option<PathBuf>,
}

impl ClusterAccessArgs {
    /// `url` with these flags, checked: refused beyond loopback without a
    /// credential and TLS.
    pub fn address(&self, url: &str) -> Result<ClusterAddress> {
        let credential = if let Some(path) = &self.cluster_creds {
            Some(Credential::CredsFile(path.clone()))
        } else if let Some(path) = &self.cluster_nkey {
            Some(Credential::NkeySeedFile(path.clone()))
        } else {
            self.cluster_token_file.clone().map(Credential::TokenFile)
        };
        let tls = TlsFiles {
            ca: self.cluster_ca.clone(),
            client: self.cluster_cert.clone().zip(self.cluster_key.clone()),
        };
        Ok(ClusterAddress::new(url, credential, tls)?)
    }
}

/// `toolhost serve` as a node of a cluster (docs/cluster.md).
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Be a node of the cluster on this NATS JetStream server
    /// (`nats://HOST:PORT`, `tls://HOST:PORT`): new runs go to its queue,
    /// and this node takes runs from it while it has room.
    #[arg(long, value_name = "URL", env = "TOOLHOST_CLUSTER")]
    pub cluster: Option<String>,
    #[command(flatten)]
    pub access: ClusterAccessArgs,
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
        #[command(flatten)]
        access: ClusterAccessArgs,
        /// The status as JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: ClusterCommand) -> Result<ExitCode> {
    match command {
        ClusterCommand::Status {
            cluster,
            access,
            json,
        } => {
            let address = access.address(&cluster)?;
            let viewer = NodeName::new(format!("status-{}", std::process::id()))?;
            let connected = Cluster::attach(&address, viewer)
                .await
                .with_context(|| format!("reading the cluster at {address}"))?;
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
