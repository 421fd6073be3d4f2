//! A run directory checkpointed into the cluster and rebuilt on another
//! node, and what `toolhost cluster status` reads, against a real
//! nats-server.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use common::{leased, nats, two_nodes};
use toolhost_cluster::testing::{NatsServer, take_free_lease};
use toolhost_cluster::{Cluster, NodeName, NodeRecord, RunKey, RunLog, RunMirror, RunTicket};

async fn node(server: &NatsServer, name: &str) -> Cluster {
    toolhost_cluster::testing::node(server, name, Duration::from_secs(3)).await
}

/// Every regular file beneath `dir`, by relative path.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                let name = entry
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                found.insert(name, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    found
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn line(seq: u64) -> Bytes {
    Bytes::from(format!("{{\"seq\":{seq}}}\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_directory_is_rebuilt_on_another_node_from_checkpoints_and_the_journal() {
    let Some(server) = nats() else { return };
    let (a, b) = two_nodes(&server, Duration::from_secs(3)).await;
    let (key, lease) = leased(&a, "run_mirror_1").await;
    let mut log = RunLog::open(&a, &lease).await.unwrap();

    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("run");
    write(&dir, "run.json", "{\"runId\":\"run_mirror_1\"}");
    write(&dir, "input/resolved_profile.json", "{}");
    write(&dir, "tool-results/call_01.json", "{\"ok\":true}");
    write(&dir, "output/notes of mine.md", "first draft\n");
    write(&dir, ".tmp/half-written", "junk");
    write(&dir, "events.jsonl", "not the journal: the log is\n");
    std::os::unix::fs::symlink("/etc/passwd", dir.join("output/link")).unwrap();

    let mut mirror = RunMirror::new(a.files(&key), &dir, lease.token());
    assert!(mirror.push(1).await.unwrap(), "first checkpoint");
    log.append(1, line(1)).await.unwrap();
    assert!(!mirror.push(2).await.unwrap(), "nothing changed");
    log.append(2, line(2)).await.unwrap();
    // A workspace file changes in place; a new audit file appears.
    write(&dir, "output/notes of mine.md", "second draft\n");
    write(&dir, "tool-results/call_02.json", "{\"ok\":false}");
    assert!(mirror.push(3).await.unwrap());
    log.append(3, line(3)).await.unwrap();
    let expected = tree(&dir);

    // A stale owner's checkpoint whose line never made it is ignored.
    write(&dir, "output/stale.md", "never journaled\n");
    let mut stale = RunMirror::new(a.files(&key), &dir, lease.token() + 1000);
    assert!(stale.push(4).await.unwrap());

    let rebuilt = temp.path().join("rebuilt");
    let checkpoint = RunMirror::rebuild(&b, &key, &rebuilt)
        .await
        .unwrap()
        .expect("a journal");
    assert_eq!(checkpoint.seq, 3);
    let mut got = tree(&rebuilt);
    let journal = got.remove("events.jsonl").expect("journal");
    assert_eq!(journal, b"{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3}\n");
    let mut want = expected;
    want.remove("events.jsonl");
    want.remove(".tmp/half-written");
    assert_eq!(got, want);
    assert!(!rebuilt.join("output/link").exists(), "no symlink");

    // A rebuild never writes over a directory that exists.
    assert!(RunMirror::rebuild(&b, &key, &rebuilt).await.is_err());
    // No journal, nothing to rebuild.
    let none = RunKey::new("local", "never_ran").unwrap();
    assert!(
        RunMirror::rebuild(&b, &none, &temp.path().join("none"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_lists_nodes_their_leases_orphaned_runs_and_the_queue() {
    let Some(server) = nats() else { return };
    // Nothing set up yet: a look makes nothing.
    let err = Cluster::attach(&server.address(), NodeName::new("viewer").unwrap())
        .await
        .expect_err("no cluster yet");
    assert_eq!(err.code(), "cluster.not_found");

    let a = node(&server, "node-a").await;
    let gone = node(&server, "node-gone").await;
    a.nodes()
        .announce(&NodeRecord {
            node: "node-a".into(),
            listen: "127.0.0.1:7701".into(),
            capacity: 8,
            running: 1,
        })
        .await
        .unwrap();
    let held = RunKey::new("local", "run_held").unwrap();
    let orphan = RunKey::new("other", "run_orphan").unwrap();
    let lease = take_free_lease(&a, &held).await;
    take_free_lease(&gone, &orphan).await;
    a.queue()
        .submit(&RunTicket {
            tenant: "local".into(),
            run: "run_waiting".into(),
            reason: "start".into(),
            request: None,
        })
        .await
        .unwrap();

    let viewer = Cluster::attach(&server.address(), NodeName::new("viewer").unwrap())
        .await
        .unwrap();
    let status = viewer.status().await.unwrap();
    assert_eq!(status.nodes.len(), 1);
    let node_a = &status.nodes[0];
    assert_eq!(
        (node_a.node.as_str(), node_a.capacity, node_a.running),
        ("node-a", 8, 1)
    );
    assert_eq!(node_a.runs.len(), 1);
    assert_eq!(
        (node_a.runs[0].run.as_str(), node_a.runs[0].token),
        ("run_held", lease.token())
    );
    assert_eq!(status.orphaned.len(), 1);
    assert_eq!(
        (
            status.orphaned[0].tenant.as_str(),
            status.orphaned[0].node.as_str()
        ),
        ("other", "node-gone")
    );
    assert_eq!(status.queued, 1);
    assert_eq!(status.lease_ms, 3000);

    // A node that leaves drops out at once.
    a.nodes()
        .leave(&NodeName::new("node-a").unwrap())
        .await
        .unwrap();
    let status = viewer.status().await.unwrap();
    assert!(status.nodes.is_empty());
    assert_eq!(status.orphaned.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_copy_follows_the_run_its_journal_only_growing() {
    let Some(server) = nats() else { return };
    let (a, b) = two_nodes(&server, Duration::from_secs(3)).await;
    let (key, lease) = leased(&a, "run_copy_1").await;
    let mut log = RunLog::open(&a, &lease).await.unwrap();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("run");
    write(&dir, "run.json", "{}");
    write(&dir, "output/draft.md", "one\n");
    write(&dir, "output/gone.md", "soon gone\n");
    let mut mirror = RunMirror::new(a.files(&key), &dir, lease.token());
    mirror.push(1).await.unwrap();
    log.append(1, line(1)).await.unwrap();

    let copy_dir = temp.path().join("copy");
    std::fs::create_dir_all(copy_dir.join("stale")).unwrap();
    let mut copy = toolhost_cluster::ReadCopy::default();
    assert!(
        RunMirror::sync_into(&b, &key, &copy_dir, &mut copy)
            .await
            .unwrap()
    );
    assert!(!copy_dir.join("stale").exists(), "an old copy is cleared");
    assert_eq!(
        std::fs::read_to_string(copy_dir.join("output/gone.md")).unwrap(),
        "soon gone\n"
    );
    assert_eq!(
        std::fs::read(copy_dir.join("events.jsonl")).unwrap(),
        line(1)
    );

    write(&dir, "output/draft.md", "two\n");
    std::fs::remove_file(dir.join("output/gone.md")).unwrap();
    mirror.push(2).await.unwrap();
    log.append(2, line(2)).await.unwrap();
    assert!(
        RunMirror::sync_into(&b, &key, &copy_dir, &mut copy)
            .await
            .unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(copy_dir.join("output/draft.md")).unwrap(),
        "two\n"
    );
    assert!(!copy_dir.join("output/gone.md").exists());
    assert_eq!(
        std::fs::read_to_string(copy_dir.join("events.jsonl")).unwrap(),
        "{\"seq\":1}\n{\"seq\":2}\n"
    );
    // Nothing new: nothing changes.
    assert!(
        RunMirror::sync_into(&b, &key, &copy_dir, &mut copy)
            .await
            .unwrap()
    );
    assert_eq!(tree(&copy_dir).len(), 3);
    // No such run: nothing.
    let none = RunKey::new("local", "never_ran").unwrap();
    let mut empty = toolhost_cluster::ReadCopy::default();
    assert!(
        !RunMirror::sync_into(&b, &none, &temp.path().join("none"), &mut empty)
            .await
            .unwrap()
    );
}

/// What a rebuild reads back from NATS is untrusted: a checkpoint that
/// points outside the run, names the journal, or says another line, and a
/// blob whose bytes are not its name's digest (its claim agreeing, since
/// whoever forged one could forge the other) are refused, and nothing is
/// written outside the run's directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_checkpoint_or_blob_is_refused_by_a_rebuild() {
    let Some(server) = nats() else { return };
    let (a, b) = two_nodes(&server, Duration::from_secs(3)).await;
    let temp = tempfile::tempdir().unwrap();
    let sha = |bytes: &[u8]| toolhost_journal::sha256_hex(bytes);
    let forged = [
        (
            "outside",
            serde_json::json!({"../../escaped.md": sha(b"x")}),
        ),
        ("journal", serde_json::json!({"events.jsonl": sha(b"x")})),
        ("digest", serde_json::json!({"output/a.md": "not-a-digest"})),
        (
            "blob",
            serde_json::json!({"output/a.md": sha(b"what the checkpoint says")}),
        ),
        ("seq", serde_json::json!({"output/a.md": sha(b"x")})),
    ];
    for (index, (what, files)) in forged.into_iter().enumerate() {
        let key = RunKey::new("local", format!("run_forged_{index}")).unwrap();
        let lease = take_free_lease(&a, &key).await;
        let mut log = RunLog::open(&a, &lease).await.unwrap();
        let store = a.files(&key);
        // Every digest named has a blob: the right bytes, except for the
        // forged blob, stored under another digest's name.
        store
            .create(&format!("blobs/{}", sha(b"x")), Bytes::from_static(b"x"))
            .await
            .unwrap();
        store
            .create(
                &format!("blobs/{}", sha(b"what the checkpoint says")),
                Bytes::from_static(b"something else"),
            )
            .await
            .unwrap();
        let said_seq = if what == "seq" { 7 } else { 1 };
        let body = serde_json::json!({"seq": said_seq, "files": files}).to_string();
        store
            .create(
                &format!("checkpoints.{:012}.{}", 1, lease.token()),
                Bytes::from(body),
            )
            .await
            .unwrap();
        log.append(1, line(1)).await.unwrap();
        let dir = temp.path().join(format!("rebuilt-{index}"));
        let error = RunMirror::rebuild(&b, &key, &dir).await.expect_err(what);
        let text = error.to_string();
        assert!(
            text.contains("checkpoint") || text.contains("blob"),
            "{what}: {text}"
        );
    }
    assert!(!temp.path().join("escaped.md").exists());
    assert!(!temp.path().parent().unwrap().join("escaped.md").exists());
}
