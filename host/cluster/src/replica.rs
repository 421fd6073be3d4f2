//! The journal's replica in the cluster: each line the run's journal writes
//! is first appended to the run's log (`RunLog`), fenced by the lease, so
//! the run directory's `events.jsonl` is always a prefix of the cluster's
//! journal; with a mirror, the run directory is checkpointed before the
//! lines that follow a change (`RunMirror`), so every file a line names is
//! in the cluster before the line. The journal is synchronous and the log is not: an append blocks
//! the calling worker thread (like the file write beside it) while the NATS
//! client's tasks go on on the other workers, so it needs tokio's
//! multi-threaded runtime; on any other it refuses (which poisons the
//! journal) rather than deadlock.

use bytes::Bytes;
use tokio::runtime::{Handle, RuntimeFlavor};
use toolhost_journal::Replica;

use crate::{RunLog, RunMirror};

/// A run's log as its journal's replica.
pub struct JournalReplica {
    log: RunLog,
    mirror: Option<RunMirror>,
    handle: Handle,
}

impl JournalReplica {
    /// `log` as a replica, its appends driven on the current runtime.
    pub fn new(log: RunLog) -> Result<Self, String> {
        let handle = Handle::try_current()
            .map_err(|_| "the cluster's journal replica needs a tokio runtime".to_owned())?;
        if handle.runtime_flavor() != RuntimeFlavor::MultiThread {
            return Err(
                "the cluster's journal replica needs tokio's multi-threaded runtime".into(),
            );
        }
        Ok(Self {
            log,
            mirror: None,
            handle,
        })
    }

    /// Checkpoint the run directory with `mirror` before each write.
    pub fn with_mirror(mut self, mirror: RunMirror) -> Self {
        self.mirror = Some(mirror);
        self
    }
}

impl Replica for JournalReplica {
    fn replicate(&mut self, first_seq: u64, lines: &[u8]) -> Result<(), String> {
        let log = &mut self.log;
        let mirror = self.mirror.as_mut();
        let append = async move {
            if let Some(mirror) = mirror {
                mirror.push(first_seq).await?;
            }
            for (offset, line) in (0u64..).zip(lines.split_inclusive(|byte| *byte == b'\n')) {
                log.append(first_seq + offset, Bytes::copy_from_slice(line))
                    .await?;
            }
            Ok::<_, crate::ClusterError>(())
        };
        let handle = &self.handle;
        let appended = match Handle::try_current() {
            // On a worker of the runtime: give the worker's other tasks to
            // the other workers while this one waits.
            Ok(current) if current.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| handle.block_on(append))
            }
            Ok(_) => {
                return Err(
                    "the cluster's journal replica cannot wait on a current-thread runtime".into(),
                );
            }
            // A plain thread (the blocking pool): wait here.
            Err(_) => handle.block_on(append),
        };
        appended.map_err(|error| error.to_string())
    }
}
