//! A run's real journal (`toolhost_journal::Journal`) with the cluster's
//! log as its replica, against a real nats-server: every line reaches the
//! cluster before the file, and once another node took the run the old
//! owner's journal refuses its next event — nothing of it in the cluster
//! and nothing in its file.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{leased, nats, two_nodes};
use toolhost_cluster::{JournalReplica, RunLog};
use toolhost_journal::{
    Durability, Event as _, EventScope, Journal, JournalError, Level, ModelCompleted, NewEvent,
    RunResumed, RunStarted, ToolCallCompleted, ToolCallStarted,
};

fn event(event_type: &str, n: u64) -> NewEvent {
    let mut payload = serde_json::Map::new();
    payload.insert("n".into(), n.into());
    NewEvent::new(Level::Info, event_type, EventScope::root()).with_payload(payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_file_is_a_prefix_of_the_cluster_journal_and_a_stale_owner_is_refused() {
    let Some(server) = nats() else { return };
    let (a, b) = two_nodes(&server, Duration::from_secs(2)).await;
    let (key, lease) = leased(&a, "run_replica_1").await;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let mut journal = Journal::create(&path, key.run(), Durability::Batched).unwrap();
    let replica = JournalReplica::new(RunLog::open(&a, &lease).await.unwrap()).unwrap();
    journal.set_replica(Some(Box::new(replica))).unwrap();
    for (n, kind) in [
        RunStarted::TYPE,
        ModelCompleted::TYPE,
        ToolCallStarted::TYPE,
    ]
    .into_iter()
    .enumerate()
    {
        journal.append(event(kind, n as u64)).unwrap();
    }
    let cluster: Vec<u8> = RunLog::read(&b, &key)
        .await
        .unwrap()
        .iter()
        .flat_map(|line| line.to_vec())
        .collect();
    assert_eq!(cluster, std::fs::read(&path).unwrap());

    // Node a stalls past its lease; b takes the run and appends (as its
    // resume would, with `run_resumed`).
    let leases_b = b.leases().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let lease_b = loop {
        if let Some(lease) = leases_b.acquire(&key).await.unwrap() {
            break lease;
        }
        assert!(Instant::now() < deadline, "lease never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut log_b = RunLog::open(&b, &lease_b).await.unwrap();
    log_b
        .append(
            4,
            Bytes::from_static(b"{\"seq\":4,\"type\":\"run_resumed\"}\n"),
        )
        .await
        .unwrap();

    // a wakes: its next event is refused, and poisons its journal.
    let err = journal
        .append(event(ToolCallCompleted::TYPE, 4))
        .unwrap_err();
    assert!(
        matches!(&err, JournalError::Replica { seq: 4, reason, .. } if reason.starts_with("cluster.fenced")),
        "{err}"
    );
    assert!(journal.is_poisoned());
    drop(journal);
    let file = std::fs::read_to_string(&path).unwrap();
    assert_eq!(file.lines().count(), 3, "nothing of the refused event here");
    let cluster = RunLog::read(&b, &key).await.unwrap();
    assert_eq!(cluster.len(), 4);
    assert!(String::from_utf8_lossy(&cluster[3]).contains(RunResumed::TYPE));
}
