//! The runs this server is driving now, and the limits on them: runs in
//! total and per tenant (an MCP session over HTTP counts as a run while it
//! lives), chats being written, direct and MCP calls in flight. A limit
//! reached is `429` with `Retry-After` (or `409 chat.busy`), never a queue
//! that grows.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use toolhost_runtime::RunCancel;

use super::journal::JournalCounts;

use crate::error::ApiError;

/// The documented limits (docs/serve.md); `toolhost serve` flags set them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Runs in their agent loop, and MCP sessions, at once, over all
    /// tenants.
    pub runs_total: usize,
    /// Runs in their agent loop, and MCP sessions, at once, per tenant.
    pub runs_per_tenant: usize,
    /// `POST /v1/runs/{id}/calls` and MCP `tools/call` in flight at once.
    /// (Calls inside runs wait for one of the sandbox's own call slots.)
    pub calls_in_flight: usize,
    /// What `Retry-After` says, in seconds.
    pub retry_after_secs: u64,
    /// How long a served run's call waits for a person's approval before
    /// it is denied.
    pub approval_timeout: std::time::Duration,
    /// How long a run in host-commit mode waits for the chat app to answer
    /// a commit before the model is told it was not saved.
    pub host_commit_timeout: std::time::Duration,
    /// A legacy MCP session with no request for this long is closed: its
    /// run completes and its place among the runs is freed (a client that
    /// went away without `DELETE` holds a place no longer than this).
    pub mcp_session_idle: std::time::Duration,
    /// How long a connection may wait for, and take to send, a request's
    /// headers: from its accept or its last response until the next
    /// request's headers are in. A client sending a byte at a time, or
    /// holding a keep-alive connection idle, is cut off after it.
    pub request_head_timeout: std::time::Duration,
    /// Failed bearer tokens one client address may present within
    /// `token_attempt_window`; past them its requests are `429` until the
    /// window ends, whatever token they carry.
    pub token_attempts: u32,
    pub token_attempt_window: std::time::Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            runs_total: 256,
            runs_per_tenant: 128,
            calls_in_flight: 64,
            retry_after_secs: 2,
            approval_timeout: toolhost_runtime::approval::DEFAULT_TIMEOUT,
            host_commit_timeout: toolhost_runtime::host_commit::DEFAULT_HOST_COMMIT_TIMEOUT,
            mcp_session_idle: std::time::Duration::from_secs(300),
            request_head_timeout: std::time::Duration::from_secs(30),
            token_attempts: 10,
            token_attempt_window: std::time::Duration::from_secs(60),
        }
    }
}

/// Where a live run is: what its journal counts so far (the last sequence
/// number among them), and whether its loop is over. Readers of its event
/// stream wait on changes, and its status is answered from here without
/// reading the journal again; the run never waits for either.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// `None` until counted, or if the journal could not be read when the
    /// loop began.
    pub counts: Option<JournalCounts>,
    pub ended: bool,
}

/// A run in its agent loop here.
#[derive(Debug)]
pub struct LiveRun {
    pub tenant: String,
    pub id: String,
    pub cancel: RunCancel,
    pub progress: watch::Sender<Progress>,
    /// The chat app commits the reply itself: a commit in flight is the
    /// app's to answer (`awaiting_host_commit`).
    pub host_commit: bool,
    /// Set to drop the loop where it waits, with no terminal event (this
    /// cluster node lost the run's lease).
    pub interrupted: watch::Sender<bool>,
}

impl LiveRun {
    /// Drop the run's loop where it waits: the run is left interrupted.
    pub fn interrupt(&self) {
        self.interrupted.send_replace(true);
    }
}

#[derive(Debug, Default)]
struct Active {
    runs: HashMap<(String, String), Arc<LiveRun>>,
    per_tenant: HashMap<String, usize>,
    total: usize,
    chats: HashSet<PathBuf>,
}

#[derive(Debug)]
pub struct Registry {
    active: Arc<Mutex<Active>>,
    calls: Arc<Semaphore>,
    pub limits: Limits,
    /// The final counts of the runs that ended here lately.
    pub ended_runs: super::journal::EndedRuns,
}

/// A place among the running runs, held from before the run directory is
/// made until its loop ends; dropping it frees the place and the chat.
#[derive(Debug)]
pub struct Slot {
    active: Arc<Mutex<Active>>,
    tenant: String,
    chat: Option<PathBuf>,
    key: Option<(String, String)>,
}

impl Registry {
    pub fn new(limits: Limits) -> Self {
        Self {
            active: Arc::default(),
            calls: Arc::new(Semaphore::new(limits.calls_in_flight.max(1))),
            limits,
            ended_runs: super::journal::EndedRuns::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Active> {
        lock(&self.active)
    }

    /// Whether a run could take a place now (a cluster node pulls a run
    /// only then).
    pub fn has_room(&self) -> bool {
        self.lock().total < self.limits.runs_total
    }

    /// A place for a new or resumed run of `tenant` writing `chat`.
    pub fn reserve(&self, tenant: &str, chat: Option<&Path>) -> Result<Slot, ApiError> {
        let mut active = self.lock();
        let retry = self.limits.retry_after_secs;
        if active.total >= self.limits.runs_total {
            return Err(ApiError::too_many(
                "serve.too_many_runs",
                format!(
                    "{} runs and MCP sessions are open, the most this server takes",
                    active.total
                ),
                retry,
            ));
        }
        let mine = active.per_tenant.get(tenant).copied().unwrap_or(0);
        if mine >= self.limits.runs_per_tenant {
            return Err(ApiError::too_many(
                "serve.too_many_runs",
                format!(
                    "{mine} of your runs and MCP sessions are open, the most a tenant may have"
                ),
                retry,
            ));
        }
        if let Some(chat) = chat
            && !active.chats.insert(chat.to_owned())
        {
            return Err(ApiError::conflict(
                "chat.busy",
                "another run is writing this chat; wait for it to end",
            ));
        }
        active.total += 1;
        *active.per_tenant.entry(tenant.to_owned()).or_default() += 1;
        Ok(Slot {
            active: Arc::clone(&self.active),
            tenant: tenant.to_owned(),
            chat: chat.map(Path::to_owned),
            key: None,
        })
    }

    /// Put `run` among the live runs for as long as `slot` is held.
    pub fn enter(&self, slot: &mut Slot, run: Arc<LiveRun>) {
        let key = (run.tenant.clone(), run.id.clone());
        self.lock().runs.insert(key.clone(), run);
        slot.key = Some(key);
    }

    /// The live run `id` of `tenant`.
    pub fn live(&self, tenant: &str, id: &str) -> Option<Arc<LiveRun>> {
        self.lock()
            .runs
            .get(&(tenant.to_owned(), id.to_owned()))
            .cloned()
    }

    /// Every live run (for shutdown).
    pub fn all_live(&self) -> Vec<Arc<LiveRun>> {
        self.lock().runs.values().cloned().collect()
    }

    /// A place for one direct call.
    pub fn call_permit(&self) -> Result<OwnedSemaphorePermit, ApiError> {
        Arc::clone(&self.calls).try_acquire_owned().map_err(|_| {
            ApiError::too_many(
                "serve.too_many_calls",
                format!(
                    "{} calls are in flight, the most this server takes",
                    self.limits.calls_in_flight
                ),
                self.limits.retry_after_secs,
            )
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut active = lock(&self.active);
        active.total = active.total.saturating_sub(1);
        if let Some(count) = active.per_tenant.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                active.per_tenant.remove(&self.tenant);
            }
        }
        if let Some(chat) = &self.chat {
            active.chats.remove(chat);
        }
        if let Some(key) = &self.key {
            active.runs.remove(key);
        }
    }
}

fn lock(active: &Mutex<Active>) -> MutexGuard<'_, Active> {
    // Every change under the lock is a few counter updates that cannot
    // panic half-way; a poisoned lock holds consistent data.
    active
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_hold_and_a_dropped_slot_frees_its_place_and_chat() {
        let registry = Registry::new(Limits {
            runs_total: 2,
            runs_per_tenant: 1,
            calls_in_flight: 1,
            retry_after_secs: 3,
            ..Limits::default()
        });
        let chat = Path::new("/c/chat.jsonl");
        let first = registry.reserve("acme", Some(chat)).expect("first");
        let error = registry.reserve("acme", None).expect_err("per tenant");
        assert_eq!((error.status, error.retry_after), (429, Some(3)));
        let error = registry
            .reserve("globex", Some(chat))
            .expect_err("busy chat");
        assert_eq!(error.code, "chat.busy");
        let second = registry.reserve("globex", None).expect("second");
        let error = registry.reserve("initech", None).expect_err("total");
        assert_eq!(error.code, "serve.too_many_runs");
        drop(first);
        drop(second);
        registry.reserve("globex", Some(chat)).expect("freed");
        let permit = registry.call_permit().expect("call");
        assert_eq!(registry.call_permit().expect_err("calls").status, 429);
        drop(permit);
        let _permit = registry.call_permit().expect("call again");
    }
}
