//! A cluster run's chat commits, fenced at the write itself. The journal
//! append is fenced by the lease (docs/cluster.md), but the chat is a file
//! on the shared data directory: a node stalled between journalling a
//! commit and writing the chat — stopped, swapped out, paused by a VM —
//! wakes after another node took the run over and committed the same
//! reply, and its write would land a second time. So every commit of a
//! cluster run happens under the chat's lock (an exclusive `flock` on a
//! lock file in the tenant's `locks/`, which every node shares), and under
//! it, right before the write: the lease must still be this node's (the
//! same token), and a commit the chat already holds (its `commitId`, the
//! commit ledger) is answered with its message, never written again.
//!
//! Why both under one lock: a node stalled before the check finds the
//! lease gone when it wakes; a node stalled after the check holds the lock,
//! so the new owner's commit waits for it and then finds its commit in the
//! chat.
//!
//! A refused commit also stops the run's journal ([`RevocableReplica`]):
//! like an append the lease fenced out, the run ends here with no terminal
//! event — interrupted, not failed — and whichever node holds the lease
//! next resumes it (this one, when its lease had only lapsed under load).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use toolhost_cluster::{Leases, RunKey};
use toolhost_journal::Replica;
use toolhost_runtime::{ChatHost, ChatHostError, CommitFuture, CommitOutcome, CommitRequest};

/// Longest wait for the chat's lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// What a commit of one cluster run checks before it writes.
#[derive(Clone)]
pub struct ChatFence {
    pub leases: Leases,
    pub key: RunKey,
    /// The lease token this node drives the run with.
    pub token: u64,
    /// The tenant's lock directory (shared by every node).
    pub locks: PathBuf,
    /// The runtime the lease is read on.
    pub runtime: tokio::runtime::Handle,
    /// Set when a commit is refused: the run's journal takes no more lines.
    pub revoked: Arc<AtomicBool>,
}

/// A run's journal replica that takes no more lines once its fence refused
/// a commit: the refusal poisons the journal, so the run stops without a
/// terminal event, as when an append is fenced out.
pub struct RevocableReplica {
    inner: Box<dyn Replica>,
    revoked: Arc<AtomicBool>,
}

impl RevocableReplica {
    pub fn new(inner: Box<dyn Replica>, revoked: Arc<AtomicBool>) -> Self {
        Self { inner, revoked }
    }
}

impl Replica for RevocableReplica {
    fn replicate(&mut self, first_seq: u64, lines: &[u8]) -> Result<(), String> {
        if self.revoked.load(Ordering::SeqCst) {
            return Err(
                "cluster.lease_lost: a chat commit found this node no longer drives the run"
                    .to_owned(),
            );
        }
        self.inner.replicate(first_seq, lines)
    }
}

/// A chat host whose commits are fenced by a [`ChatFence`].
pub struct FencedChatHost {
    inner: Arc<dyn ChatHost>,
    chat: PathBuf,
    fence: ChatFence,
}

impl FencedChatHost {
    pub fn new(inner: Arc<dyn ChatHost>, chat: &Path, fence: ChatFence) -> Self {
        Self {
            inner,
            chat: chat.to_owned(),
            fence,
        }
    }

    /// The lock file of this chat: one per chat file name (a tenant's chats
    /// are plain names in one directory).
    fn lock_path(&self) -> PathBuf {
        let name = self
            .chat
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.fence.locks.join(format!("chat-{name}.lock"))
    }

    fn locked(&self) -> Result<std::fs::File, ChatHostError> {
        let failed = |error: std::io::Error| ChatHostError {
            code: "chat.lock_failed".to_owned(),
            message: format!("the chat's lock {}: {error}", self.lock_path().display()),
        };
        std::fs::create_dir_all(&self.fence.locks).map_err(failed)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.lock_path())
            .map_err(failed)?;
        // Bounded: a node that stalls (or dies on a network file system)
        // holding the lock must not hold every commit to this chat forever.
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(file),
                Err(errno) if errno == rustix::io::Errno::WOULDBLOCK => {
                    if std::time::Instant::now() >= deadline {
                        return Err(ChatHostError {
                            code: "chat.lock_busy".to_owned(),
                            message: format!(
                                "another node held the chat's lock for {} s; the chat was not written",
                                LOCK_WAIT.as_secs()
                            ),
                        });
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(errno) => return Err(failed(errno.into())),
            }
        }
    }

    /// The lease is this node's, with the token it drives the run with.
    fn check_lease(&self) -> Result<(), ChatHostError> {
        let holder = self
            .fence
            .runtime
            .block_on(self.fence.leases.holder(&self.fence.key))
            .map_err(|error| ChatHostError {
                code: error.code().to_owned(),
                message: format!("the lease of {} could not be read: {error}", self.fence.key),
            })?;
        match holder {
            Some(holder) if holder.token == self.fence.token => Ok(()),
            other => Err(ChatHostError {
                code: "cluster.lease_lost".to_owned(),
                message: format!(
                    "this node no longer drives {} (its lease is {}); the chat was not written",
                    self.fence.key,
                    match other {
                        Some(holder) => format!("{}'s, token {}", holder.node, holder.token),
                        None => "free".to_owned(),
                    }
                ),
            }),
        }
    }

    fn fenced(&self, request: CommitRequest<'_>) -> Result<CommitOutcome, ChatHostError> {
        let checked = self.locked().and_then(|lock| {
            self.check_lease()?;
            Ok(lock)
        });
        let _lock = match checked {
            Ok(lock) => lock,
            Err(refused) => {
                // Not this node's to write now: stop the run here,
                // resumable, rather than end it.
                self.fence.revoked.store(true, Ordering::SeqCst);
                return Err(refused);
            }
        };
        if let Some(found) = self.inner.find_commit(request.commit_id)? {
            return Ok(found);
        }
        self.fence.runtime.block_on(self.inner.commit(request))
        // The lock is let go here, once the chat is written and synced.
    }
}

impl ChatHost for FencedChatHost {
    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> CommitFuture<'a> {
        // A lock another node may hold and a read of NATS: never on a
        // runtime worker's own time. On a single-threaded runtime the read
        // could never be answered (its one thread would be waiting here).
        let outcome =
            if self.fence.runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
                Err(ChatHostError {
                    code: "cluster.fence_unavailable".to_owned(),
                    message: "a cluster run's commit needs a multi-threaded runtime".to_owned(),
                })
            } else {
                tokio::task::block_in_place(|| self.fenced(request))
            };
        Box::pin(std::future::ready(outcome))
    }

    fn find_commit(&self, commit_id: &str) -> Result<Option<CommitOutcome>, ChatHostError> {
        self.inner.find_commit(commit_id)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
