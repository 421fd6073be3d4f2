//! What the cluster's test files share: a real nats-server for one test
//! (the test skipped, loudly, where none is installed) and two nodes on it.

#![allow(dead_code)] // each test binary uses its own share

use std::time::Duration;

use toolhost_cluster::testing::{NatsServer, nats_server_or_skip, take_free_lease};
use toolhost_cluster::{Cluster, Lease, RunKey};

/// A nats-server for one test, secured as [`NatsServer::start`] secures
/// it; `None` where none is installed, and the test returns.
pub fn nats() -> Option<NatsServer> {
    let binary = nats_server_or_skip()?;
    Some(NatsServer::start(&binary).expect("nats-server starts"))
}

/// Nodes `node-a` and `node-b` on `server`, each holding a lease for
/// `lease`.
pub async fn two_nodes(server: &NatsServer, lease: Duration) -> (Cluster, Cluster) {
    let node = |name| toolhost_cluster::testing::node(server, name, lease);
    (node("node-a").await, node("node-b").await)
}

/// Run `id` of tenant `local`, its lease taken by `node`.
pub async fn leased(node: &Cluster, id: &str) -> (RunKey, Lease) {
    let key = RunKey::new("local", id).expect("run key");
    let lease = take_free_lease(node, &key).await;
    (key, lease)
}
