//! What `toolhost cluster status` shows: the nodes, the runs each holds a
//! lease on, runs still leased to a node that stopped, and the queue.

use serde::Serialize;

use crate::{Cluster, ClusterError};

/// The cluster as its buckets and queue say it is now.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    pub nodes: Vec<NodeStatus>,
    /// Runs leased to a node that no longer announces itself: free once
    /// their lease runs out.
    pub orphaned: Vec<LeasedRun>,
    /// Runs waiting in the queue.
    pub queued: u64,
    /// The lease length, in milliseconds.
    pub lease_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatus {
    pub node: String,
    pub listen: String,
    pub capacity: u64,
    pub running: u64,
    /// When it last announced itself, in Unix seconds.
    pub seen_at: i64,
    pub runs: Vec<LeasedRun>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeasedRun {
    pub tenant: String,
    pub run: String,
    pub node: String,
    /// The lease's fencing token.
    pub token: u64,
    /// When the holder last renewed, in Unix seconds.
    pub renewed_at: i64,
}

impl Cluster {
    /// The nodes, their leases and the queue, read now.
    pub async fn status(&self) -> Result<ClusterStatus, ClusterError> {
        let leases = self.leases().await?;
        let lease_ms = u64::try_from(leases.length().as_millis()).unwrap_or(u64::MAX);
        let mut nodes: Vec<NodeStatus> = self
            .nodes()
            .all()
            .await?
            .into_iter()
            .map(|seen| NodeStatus {
                node: seen.record.node,
                listen: seen.record.listen,
                capacity: seen.record.capacity,
                running: seen.record.running,
                seen_at: seen.seen_at,
                runs: Vec::new(),
            })
            .collect();
        let mut orphaned = Vec::new();
        for (key, holder) in leases.all().await? {
            let run = LeasedRun {
                tenant: key.tenant().to_owned(),
                run: key.run().to_owned(),
                node: holder.node,
                token: holder.token,
                renewed_at: holder.renewed_at,
            };
            match nodes.iter_mut().find(|node| node.node == run.node) {
                Some(node) => node.runs.push(run),
                None => orphaned.push(run),
            }
        }
        let queued = self.queue().waiting().await?;
        Ok(ClusterStatus {
            nodes,
            orphaned,
            queued,
            lease_ms,
        })
    }
}
