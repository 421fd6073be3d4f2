//! One owner per run: a key in the lease bucket, made with `create` (it
//! fails while another node's key lives) and renewed with `update` at the
//! revision this node last wrote (it fails once anyone else wrote). The
//! bucket's age limit is the lease length, measured by the NATS server's
//! clock, not the nodes': a key its owner stopped renewing is gone after
//! that long and any node may create it again.
//!
//! A lease alone cannot stop a node that paused between checking it and
//! writing; the journal's fenced appends do that (`run_log`). The lease's
//! token — the revision of its `create`, which only grows — names the owner
//! in every append's message id.

use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::{ClusterError, NodeName, RunKey};

/// What a lease key holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LeaseRecord {
    node: String,
    /// The revision of the `create` this lease began with.
    token: u64,
}

/// A run this node owns until it fails to renew.
#[derive(Debug, Clone)]
pub struct Lease {
    key: RunKey,
    node: NodeName,
    token: u64,
    revision: u64,
}

impl Lease {
    pub fn key(&self) -> &RunKey {
        &self.key
    }

    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// The fencing token: the revision this lease was created at. A later
    /// owner's token is larger.
    pub fn token(&self) -> u64 {
        self.token
    }
}

/// Who holds a run's lease now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    pub node: String,
    pub token: u64,
    /// When the holder last renewed, in Unix seconds (the server's clock).
    pub renewed_at: i64,
}

/// The lease bucket, as one node uses it.
#[derive(Clone)]
pub struct Leases {
    store: kv::Store,
    node: NodeName,
    length: Duration,
}

impl Leases {
    pub(crate) fn new(store: kv::Store, node: NodeName, length: Duration) -> Self {
        Self {
            store,
            node,
            length,
        }
    }

    /// How long a lease lives unrenewed (the bucket's age limit).
    pub fn length(&self) -> Duration {
        self.length
    }

    /// How often an owner renews: three chances before the lease runs out.
    pub fn renew_every(&self) -> Duration {
        self.length / 3
    }

    /// Take `key` for this node, or `None` while another node holds it.
    pub async fn acquire(&self, key: &RunKey) -> Result<Option<Lease>, ClusterError> {
        // The token is the revision of this very create, so the record
        // cannot name it; it is written by the first renewal, and until then
        // the key's revision is the token.
        let record = self.record(0)?;
        match self.store.create(key.path(), record).await {
            Ok(revision) => Ok(Some(Lease {
                key: key.clone(),
                node: self.node.clone(),
                token: revision,
                revision,
            })),
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(error) => Err(ClusterError::nats(
                format!("taking the lease on {key}"),
                error,
            )),
        }
    }

    /// Renew `lease` for another lease length. Fails with `LeaseLost` once
    /// the key expired or another node wrote it: this node must stop
    /// driving the run.
    pub async fn renew(&self, lease: &mut Lease) -> Result<(), ClusterError> {
        let record = self.record(lease.token)?;
        match self
            .store
            .update(lease.key.path(), record, lease.revision)
            .await
        {
            Ok(revision) => {
                lease.revision = revision;
                Ok(())
            }
            Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                Err(ClusterError::LeaseLost {
                    run: lease.key.to_string(),
                })
            }
            Err(error) => Err(ClusterError::nats(
                format!("renewing the lease on {}", lease.key),
                error,
            )),
        }
    }

    /// Give `lease` up (the run ended or the node stops): another node may
    /// take the run at once instead of after the lease length.
    pub async fn release(&self, lease: Lease) -> Result<(), ClusterError> {
        match self
            .store
            .delete_expect_revision(lease.key.path(), Some(lease.revision))
            .await
        {
            Ok(()) => Ok(()),
            // Lost already: nothing of ours to give up.
            Err(error) if error.kind() == kv::DeleteErrorKind::WrongLastRevision => Ok(()),
            Err(error) => Err(ClusterError::nats(
                format!("releasing the lease on {}", lease.key),
                error,
            )),
        }
    }

    /// Who holds `key`, if anyone.
    pub async fn holder(&self, key: &RunKey) -> Result<Option<LeaseHolder>, ClusterError> {
        let entry =
            self.store.entry(key.path()).await.map_err(|error| {
                ClusterError::nats(format!("reading the lease on {key}"), error)
            })?;
        let Some(entry) = entry else {
            return Ok(None);
        };
        if entry.operation != kv::Operation::Put {
            return Ok(None);
        }
        let record: LeaseRecord = serde_json::from_slice(&entry.value)
            .map_err(|error| ClusterError::nats(format!("the lease on {key}"), error))?;
        Ok(Some(LeaseHolder {
            node: record.node,
            token: if record.token == 0 {
                entry.revision
            } else {
                record.token
            },
            renewed_at: entry.created.unix_timestamp(),
        }))
    }

    /// Every run with a live lease and its holder (`toolhost cluster status`).
    pub async fn all(&self) -> Result<Vec<(RunKey, LeaseHolder)>, ClusterError> {
        use futures_util::TryStreamExt as _;
        let keys: Vec<String> = match self.store.keys().await {
            Ok(keys) => keys
                .try_collect()
                .await
                .map_err(|error| ClusterError::nats("listing leases", error))?,
            Err(error) => return Err(ClusterError::nats("listing leases", error)),
        };
        let mut held = Vec::with_capacity(keys.len());
        for key in keys {
            let Ok(run) = RunKey::from_path(&key) else {
                continue;
            };
            if let Some(holder) = self.holder(&run).await? {
                held.push((run, holder));
            }
        }
        Ok(held)
    }

    fn record(&self, token: u64) -> Result<Bytes, ClusterError> {
        serde_json::to_vec(&LeaseRecord {
            node: self.node.to_string(),
            token,
        })
        .map(Bytes::from)
        .map_err(|error| ClusterError::nats("encoding a lease", error))
    }
}
