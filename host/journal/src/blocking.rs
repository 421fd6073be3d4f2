//! Work that may wait on the disk for milliseconds — a sync point's
//! `fsync`s, a chat commit — run where that does not hold up other runs.
//!
//! A served run's loop runs on one of a few runtime workers, shared by
//! every run of the server. Its ordinary file work (a journal line, an
//! audit file) takes microseconds and stays inline; a sync point on a
//! journaled file system can take tens of milliseconds, and on a worker
//! it would stall every run queued behind it. On a multi-threaded runtime
//! `block_in_place` first hands the worker's other tasks to another
//! thread. That hand-off costs a thread switch or two, more than a sync on
//! a memory file system (tmpfs), which returns at once: there the work
//! stays inline. On a current-thread runtime (a CLI command, `mcp serve`)
//! and outside any runtime there is no one else to hold up, and the work
//! just runs.

use std::path::Path;

use crate::sync_may_wait;
use tokio::runtime::{Handle, RuntimeFlavor};

/// Run `work`, which may block on syncing what is written at `path`,
/// without holding up the runtime's other tasks.
pub fn may_block<T>(path: &Path, work: impl FnOnce() -> T) -> T {
    hand_off_if(|| sync_may_wait(path), work)
}

/// `work` in `block_in_place` when the runtime is a multi-threaded one and
/// it `waits`, else inline. `waits` (a `statfs`) is asked only where a
/// hand-off is possible.
fn hand_off_if<T>(waits: impl FnOnce() -> bool, work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread && waits() => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// While one task blocks in a hand-off on a runtime with a single
    /// worker, another task of that runtime still runs.
    #[test]
    fn a_blocked_task_leaves_the_worker_to_the_others() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let (ran_tx, ran_rx) = std::sync::mpsc::channel::<()>();
            let blocked = tokio::spawn(async move {
                hand_off_if(
                    || true,
                    || {
                        // Returns only once the other task ran meanwhile.
                        ran_rx
                            .recv_timeout(std::time::Duration::from_secs(30))
                            .is_ok()
                    },
                )
            });
            // Give the blocking task the worker first.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            tokio::spawn(async move {
                let _ = ran_tx.send(());
            })
            .await
            .expect("other task");
            assert!(blocked.await.expect("blocked task"));
        });
    }

    #[test]
    fn on_a_current_thread_runtime_and_outside_one_it_just_runs() {
        assert_eq!(hand_off_if(|| true, || 7), 7);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        assert_eq!(runtime.block_on(async { hand_off_if(|| true, || 8) }), 8);
    }
}
