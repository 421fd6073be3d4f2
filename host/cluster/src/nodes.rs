//! The nodes of a cluster: each node puts its record under its name in the
//! nodes bucket when it starts and at every renewal; the bucket's age limit
//! is the lease length, so a node that stopped drops out of the list as its
//! leases run out.

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures_util::TryStreamExt as _;
use serde::{Deserialize, Serialize};

use crate::{ClusterError, NodeName};

/// What a node says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeRecord {
    pub node: String,
    /// Where its HTTP API listens.
    pub listen: String,
    /// Runs it drives at once, at most.
    pub capacity: u64,
    /// Runs it drives now.
    pub running: u64,
}

/// A node's record and when it was last put, in Unix seconds (the server's
/// clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenNode {
    pub record: NodeRecord,
    pub seen_at: i64,
}

/// The nodes bucket.
#[derive(Clone)]
pub struct Nodes {
    store: kv::Store,
}

/// Most nodes listed.
const MAX_NODES: usize = 10_000;

impl Nodes {
    pub(crate) fn new(store: kv::Store) -> Self {
        Self { store }
    }

    /// Put this node's record (at start and at every renewal).
    pub async fn announce(&self, record: &NodeRecord) -> Result<(), ClusterError> {
        let name = NodeName::new(&record.node)?;
        let value = serde_json::to_vec(record)
            .map_err(|error| ClusterError::nats("encoding a node record", error))?;
        self.store
            .put(name.as_str(), Bytes::from(value))
            .await
            .map_err(|error| ClusterError::nats(format!("announcing node {name}"), error))?;
        Ok(())
    }

    /// This node stops: drop its record now rather than after the lease.
    pub async fn leave(&self, node: &NodeName) -> Result<(), ClusterError> {
        self.store
            .delete(node.as_str())
            .await
            .map_err(|error| ClusterError::nats(format!("removing node {node}"), error))
    }

    /// Every node seen within the lease length, by name.
    pub async fn all(&self) -> Result<Vec<SeenNode>, ClusterError> {
        let listing = |error| ClusterError::nats("listing nodes", error);
        let keys: Vec<String> = self
            .store
            .keys()
            .await
            .map_err(|error| listing(error.to_string()))?
            .try_collect()
            .await
            .map_err(|error| listing(error.to_string()))?;
        let mut nodes = Vec::new();
        for key in keys.into_iter().take(MAX_NODES) {
            let entry = self
                .store
                .entry(key.as_str())
                .await
                .map_err(|error| listing(error.to_string()))?;
            let Some(entry) = entry.filter(|entry| entry.operation == kv::Operation::Put) else {
                continue;
            };
            match serde_json::from_slice::<NodeRecord>(&entry.value) {
                Ok(record) => nodes.push(SeenNode {
                    record,
                    seen_at: entry.created.unix_timestamp(),
                }),
                Err(error) => {
                    tracing::warn!(node = %key, %error, "a node record does not parse; left out")
                }
            }
        }
        nodes.sort_by(|a, b| a.record.node.cmp(&b.record.node));
        Ok(nodes)
    }
}
