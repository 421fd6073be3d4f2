//! The cluster's pieces against a real nats-server with JetStream on
//! loopback (`make setup` installs it into .venv): leases, fenced journal
//! appends, the run queue, create-only files, and appends across a NATS
//! restart.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::nats;
use toolhost_cluster::testing::{NatsServer, take_free_lease};
use toolhost_cluster::{
    Cluster, ClusterError, ClusterSettings, NodeName, RunKey, RunLog, RunTicket,
};

fn settings() -> ClusterSettings {
    ClusterSettings {
        lease: Duration::from_secs(2),
        queue_limit: 3,
        append_window: Duration::from_secs(15),
        request_timeout: Duration::from_secs(1),
        claim_wait: Duration::from_secs(5),
        ..ClusterSettings::default()
    }
}

async fn node(server: &NatsServer, name: &str) -> Cluster {
    Cluster::connect(
        &server.address(),
        NodeName::new(name).expect("node name"),
        settings(),
    )
    .await
    .expect("connect")
}

fn run(id: &str) -> RunKey {
    RunKey::new("tenant-a", id).expect("run key")
}

fn line(seq: u64, writer: &str) -> Bytes {
    Bytes::from(format!("{{\"seq\":{seq},\"writer\":\"{writer}\"}}\n"))
}

/// Wait until `node` can take `key` (the other owner's lease ran out).
async fn take_when_expired(node: &Cluster, key: &RunKey) -> toolhost_cluster::Lease {
    let leases = node.leases().await.expect("leases");
    let deadline = Instant::now() + leases.length() + Duration::from_secs(10);
    loop {
        if let Some(lease) = leases.acquire(key).await.expect("acquire") {
            return lease;
        }
        assert!(Instant::now() < deadline, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_has_one_holder_and_expires_when_not_renewed() {
    let Some(server) = nats() else { return };
    let (a, b) = (node(&server, "node-a").await, node(&server, "node-b").await);
    let (leases_a, leases_b) = (a.leases().await.unwrap(), b.leases().await.unwrap());
    assert_eq!(leases_a.length(), Duration::from_secs(2));
    let key = run("lease-1");

    let mut lease = leases_a.acquire(&key).await.unwrap().expect("free");
    assert!(leases_b.acquire(&key).await.unwrap().is_none(), "held by a");
    // Renewed past two lease lengths, a keeps it.
    for _ in 0..6 {
        tokio::time::sleep(leases_a.renew_every()).await;
        leases_a.renew(&mut lease).await.expect("renew");
        assert!(leases_b.acquire(&key).await.unwrap().is_none());
    }
    let holder = leases_b.holder(&key).await.unwrap().expect("held");
    assert_eq!(
        (holder.node.as_str(), holder.token),
        ("node-a", lease.token())
    );

    // a stops renewing: b takes it once it ran out, with a larger token.
    let started = Instant::now();
    let taken = take_when_expired(&b, &key).await;
    let waited = started.elapsed();
    assert!(taken.token() > lease.token());
    assert!(
        waited <= leases_a.length() + Duration::from_secs(2),
        "expired after {waited:?}"
    );
    let err = leases_a.renew(&mut lease).await.expect_err("lost");
    assert!(matches!(err, ClusterError::LeaseLost { .. }), "{err}");
    assert_eq!(
        leases_a.holder(&key).await.unwrap().expect("held").node,
        "node-b"
    );

    // Released, it is free at once.
    leases_b.release(taken).await.unwrap();
    assert!(leases_a.acquire(&key).await.unwrap().is_some());
    let all = leases_a.all().await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0, key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_lease_cannot_append_to_the_journal() {
    let Some(server) = nats() else { return };
    let (a, b) = (node(&server, "node-a").await, node(&server, "node-b").await);
    let key = run("fenced-1");
    let lease_a = take_free_lease(&a, &key).await;
    let mut log_a = RunLog::open(&a, &lease_a).await.unwrap();
    log_a.append(1, line(1, "a")).await.unwrap();
    log_a.append(2, line(2, "a")).await.unwrap();

    // a "pauses" past its lease; b takes the run and writes its first line.
    let lease_b = take_when_expired(&b, &key).await;
    let mut log_b = RunLog::open(&b, &lease_b).await.unwrap();
    assert_eq!(log_b.last_sequence(), log_a.last_sequence());
    log_b.append(3, line(3, "b")).await.unwrap();

    // a wakes and tries to go on: refused, at once (no retrying).
    let started = Instant::now();
    let err = log_a.append(3, line(3, "a")).await.expect_err("fenced");
    assert!(matches!(err, ClusterError::Fenced { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(1));
    log_b.append(4, line(4, "b")).await.unwrap();
    let err = log_a
        .append(4, line(4, "a"))
        .await
        .expect_err("still fenced");
    assert_eq!(err.code(), "cluster.fenced");

    let lines = RunLog::read(&b, &key).await.unwrap();
    let expected: Vec<Bytes> = vec![line(1, "a"), line(2, "a"), line(3, "b"), line(4, "b")];
    assert_eq!(lines, expected);
    // Other runs' journals are other subjects.
    assert!(RunLog::read(&b, &run("other")).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_retried_after_a_lost_answer_is_stored_once() {
    let Some(server) = nats() else { return };
    let a = node(&server, "node-a").await;
    let key = run("retried-1");
    let lease = take_free_lease(&a, &key).await;
    let mut log = RunLog::open(&a, &lease).await.unwrap();
    // A second handle that, like a writer whose answer was lost, still
    // believes the line was not stored.
    let mut unanswered = RunLog::open(&a, &lease).await.unwrap();
    log.append(1, line(1, "a")).await.unwrap();
    unanswered
        .append(1, line(1, "a"))
        .await
        .expect("a duplicate, acknowledged");
    assert_eq!(unanswered.last_sequence(), log.last_sequence());
    unanswered.append(2, line(2, "a")).await.unwrap();
    assert_eq!(
        RunLog::read(&a, &key).await.unwrap(),
        vec![line(1, "a"), line(2, "a")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_queue_hands_each_run_to_one_node_and_refuses_past_its_limit() {
    let Some(server) = nats() else { return };
    let (a, b) = (node(&server, "node-a").await, node(&server, "node-b").await);
    let queue = a.queue();
    let ticket = |id: &str| RunTicket {
        tenant: "tenant-a".into(),
        run: id.into(),
        reason: "start".into(),
        request: None,
    };
    for id in ["q1", "q2", "q3"] {
        queue.submit(&ticket(id)).await.unwrap();
    }
    // The same run again is kept once, and does not count against the limit.
    queue.submit(&ticket("q1")).await.unwrap();
    assert_eq!(queue.waiting().await.unwrap(), 3);
    let err = queue.submit(&ticket("q4")).await.expect_err("full");
    assert!(matches!(err, ClusterError::QueueFull { limit: 3 }), "{err}");
    let bad = RunTicket {
        tenant: "a.b".into(),
        ..ticket("q5")
    };
    assert_eq!(
        queue.submit(&bad).await.unwrap_err().code(),
        "cluster.invalid_name"
    );

    let (pull_a, pull_b) = (
        a.queue().puller().await.unwrap(),
        b.queue().puller().await.unwrap(),
    );
    let wait = Duration::from_millis(500);
    let first = pull_a.next(wait).await.unwrap().expect("a run");
    let second = pull_b.next(wait).await.unwrap().expect("a run");
    assert_ne!(first.ticket, second.ticket);
    assert_eq!(first.ticket.run, "q1", "oldest first");
    first.done().await.unwrap();
    // Handed back, it is handed out again.
    let returned = second.ticket.clone();
    second.put_back().await.unwrap();
    let mut seen = Vec::new();
    while let Some(next) = pull_a.next(wait).await.unwrap() {
        seen.push(next.ticket.run.clone());
        next.dropped().await.unwrap();
    }
    seen.sort();
    let mut expected = vec![returned.run, "q2".to_owned(), "q3".to_owned()];
    expected.sort();
    expected.dedup();
    assert_eq!(seen, expected);
    assert_eq!(queue.waiting().await.unwrap(), 0);
    // Room again.
    queue.submit(&ticket("q4")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_are_create_only_in_a_store_that_would_overwrite() {
    let Some(server) = nats() else { return };
    let a = node(&server, "node-a").await;
    let files = a.files(&run("files-1"));
    let name = "tool-results/call_01.json";
    let bytes = Bytes::from_static(b"{\"ok\":true}");
    files.create(name, bytes.clone()).await.unwrap();
    assert_eq!(files.get(name).await.unwrap(), Some(bytes.clone()));
    let err = files
        .create(name, Bytes::from_static(b"{\"ok\":false}"))
        .await
        .expect_err("create-only");
    assert!(matches!(err, ClusterError::FileExists { .. }), "{err}");
    assert_eq!(
        files.get(name).await.unwrap(),
        Some(bytes.clone()),
        "not overwritten"
    );
    // The same bytes again: a retry, accepted — and not stored again: a
    // put replaces the object and purges the chunks a reader of it may be
    // in the middle of (a reader of the run's copy then waited forever).
    let stored = files.stored_copy(name).await.unwrap().expect("stored");
    files.create(name, bytes.clone()).await.unwrap();
    assert_eq!(
        files.stored_copy(name).await.unwrap(),
        Some(stored),
        "stored again"
    );
    assert_eq!(files.get("tool-results/call_02.json").await.unwrap(), None);
    // Another run's file of the same name is its own.
    let other = a.files(&run("files-2"));
    assert_eq!(other.get(name).await.unwrap(), None);
    other
        .create(name, Bytes::from_static(b"other"))
        .await
        .unwrap();
    assert_eq!(files.get(name).await.unwrap(), Some(bytes));
    for bad in ["../x", "/abs", "a//b", "a b"] {
        assert_eq!(
            files.create(bad, Bytes::new()).await.unwrap_err().code(),
            "cluster.invalid_name"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_wait_out_a_nats_restart_with_no_gap_or_duplicate() {
    let Some(mut server) = nats() else { return };
    let a = node(&server, "node-a").await;
    let key = run("outage-1");
    let lease = take_free_lease(&a, &key).await;
    let mut log = RunLog::open(&a, &lease).await.unwrap();
    log.append(1, line(1, "a")).await.unwrap();

    server.stop();
    let writer = tokio::spawn(async move {
        for seq in 2..=4 {
            log.append(seq, line(seq, "a")).await?;
        }
        Ok::<_, ClusterError>(log)
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!writer.is_finished(), "no journal, no progress");
    server.restart().expect("restart");
    writer
        .await
        .expect("joined")
        .expect("appended after the restart");

    let lines = RunLog::read(&a, &key).await.unwrap();
    let expected: Vec<Bytes> = (1..=4).map(|seq| line(seq, "a")).collect();
    assert_eq!(lines, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_gives_up_after_its_window_when_nats_stays_away() {
    let Some(mut server) = nats() else { return };
    let a = Cluster::connect(
        &server.address(),
        NodeName::new("node-a").unwrap(),
        ClusterSettings {
            append_window: Duration::from_secs(2),
            ..settings()
        },
    )
    .await
    .unwrap();
    let key = run("outage-2");
    let lease = take_free_lease(&a, &key).await;
    let mut log = RunLog::open(&a, &lease).await.unwrap();
    log.append(1, line(1, "a")).await.unwrap();
    server.stop();
    let started = Instant::now();
    let err = log.append(2, line(2, "a")).await.expect_err("no NATS");
    assert!(matches!(err, ClusterError::Unavailable { .. }), "{err}");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(5), "gave up after {waited:?}");
}
