//! The fence of a cluster run's chat commits (`toolhost_serve::fence`),
//! against a real nats-server: a commit goes through while this node holds
//! the run's lease with its token, and is refused — the chat host never
//! asked — once the lease is another node's, even for a commit the chat
//! does not hold yet (the commit ledger alone would let that one through).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolhost_cluster::RunKey;
use toolhost_cluster::testing::{NatsServer, nats_server_or_skip, node, take_free_lease};
use toolhost_core::CommitMode;
use toolhost_runtime::{ChatHost, ChatHostError, CommitFuture, CommitOutcome, CommitRequest};
use toolhost_serve::fence::{ChatFence, FencedChatHost};

/// A chat that records the commits it was asked for.
#[derive(Default)]
struct Recorded {
    commits: Mutex<Vec<String>>,
}

impl ChatHost for Recorded {
    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> CommitFuture<'a> {
        let mut commits = self.commits.lock().expect("lock");
        commits.push(request.commit_id.to_owned());
        let index = commits.len() as u32;
        Box::pin(std::future::ready(Ok(CommitOutcome::Committed(index))))
    }

    fn find_commit(&self, commit_id: &str) -> Result<Option<CommitOutcome>, ChatHostError> {
        let commits = self.commits.lock().expect("lock");
        Ok(commits
            .iter()
            .position(|id| id == commit_id)
            .map(|at| CommitOutcome::Committed(at as u32 + 1)))
    }

    fn describe(&self) -> String {
        "recorded".to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_is_refused_once_the_lease_is_another_nodes() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let server = NatsServer::start(&binary).expect("nats-server");
    let lease_length = Duration::from_secs(2);
    let (a, b) = (
        node(&server, "node-a", lease_length).await,
        node(&server, "node-b", lease_length).await,
    );
    let key = RunKey::new("local", "run_fenced").expect("key");
    let lease = take_free_lease(&a, &key).await;
    let locks = tempfile::tempdir().expect("temp dir");
    let chat = Arc::new(Recorded::default());
    let revoked = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fenced = FencedChatHost::new(
        Arc::clone(&chat) as Arc<dyn ChatHost>,
        Path::new("chats/chat-00.jsonl"),
        ChatFence {
            leases: a.leases().await.expect("leases"),
            key: key.clone(),
            token: lease.token(),
            locks: locks.path().to_owned(),
            runtime: tokio::runtime::Handle::current(),
            revoked: Arc::clone(&revoked),
        },
    );

    let first = || CommitRequest {
        commit_id: "run_fenced:commit_001",
        text: "first",
        mode: CommitMode::Append,
        run_message: None,
    };
    let index = fenced
        .commit(first())
        .await
        .expect("node-a holds the lease");
    assert_eq!(index, CommitOutcome::Committed(1));
    // Asked again (a resumed run's retry): answered from the chat.
    assert_eq!(
        fenced.commit(first()).await.expect("the ledger"),
        CommitOutcome::Committed(1)
    );
    assert!(locks.path().join("chat-chat-00.jsonl.lock").exists());

    // node-a stops renewing; node-b takes the run once the lease ran out.
    let takeover = tokio::time::Instant::now() + Duration::from_secs(30);
    let b_leases = b.leases().await.expect("leases");
    let taken = loop {
        if let Some(taken) = b_leases.acquire(&key).await.expect("acquire") {
            break taken;
        }
        assert!(
            tokio::time::Instant::now() < takeover,
            "the lease never ran out"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(taken.token(), lease.token());

    // A commit the chat does not hold yet: only the lease check stops it.
    let error = fenced
        .commit(CommitRequest {
            commit_id: "run_fenced:commit_002",
            text: "second",
            mode: CommitMode::Append,
            run_message: Some(1),
        })
        .await
        .expect_err("the lease is node-b's");
    assert_eq!(error.code, "cluster.lease_lost", "{}", error.message);
    assert!(error.message.contains("node-b"), "{}", error.message);
    assert_eq!(chat.commits.lock().expect("lock").len(), 1, "never asked");
    // And the run's journal takes no more lines: it stops, resumable.
    assert!(revoked.load(std::sync::atomic::Ordering::SeqCst));
}
