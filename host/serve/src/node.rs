//! This server as a node of a cluster (`toolhost serve --cluster`,
//! docs/cluster.md). A new run goes to the cluster's queue instead of
//! starting here; the node pulls runs while it has room, takes each one's
//! lease, and drives it like any served run, with its journal replicated
//! to the cluster (fenced by the lease) and its directory checkpointed
//! before each journal line that follows a change. Its run directories are
//! a cache: a run taken again is rebuilt from the cluster first.
//!
//! A run stays in the queue until it ends, its owner saying "in progress"
//! at every lease renewal; a node that dies stops saying so, the run is
//! handed out again, and the node that gets it takes the lease once it ran
//! out, rebuilds the run and resumes it — `run_resumed`, its first append,
//! fences the old owner out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use axum::http::StatusCode;
use toolhost_cluster::{
    Cluster, ClusterError, JournalReplica, Lease, Leases, NodeRecord, QueuedRun, ReadCopy, RunKey,
    RunLog, RunMirror, RunTicket,
};
use toolhost_journal::Replica;
use toolhost_runtime::{LOOP_RECORD_PATH, ReplicaFactory};

use crate::ServeState;
use crate::error::ApiError;
use crate::fence::{ChatFence, RevocableReplica};
use crate::runs::{StartRun, restart_taken, resume_taken, start_taken};

/// A run's summary in the cluster, kept by the node that drove it to its end.
const SUMMARY_FILE: &str = "summary.json";

/// How long the puller waits for a run before it looks at its room again.
const PULL_WAIT: Duration = Duration::from_secs(1);

/// Most read copies a node keeps track of; past it they are all made again.
const MAX_READ_COPIES: usize = 10_000;

/// A run's lease token on this node, and the flag its fence sets to stop
/// its journal.
type HeldToken = (u64, Arc<AtomicBool>);

/// A node's place in its cluster.
pub struct ClusterNode {
    cluster: Cluster,
    leases: Leases,
    dir: PathBuf,
    listen: String,
    /// Copies of runs this node reads but does not drive, by tenant and id.
    copies: tokio::sync::Mutex<HashMap<(String, String), ReadCopy>>,
    /// Runs whose lease this node keeps now (taken, not yet let go).
    keeping: Arc<std::sync::atomic::AtomicUsize>,
    /// The lease token of each run this node took, by tenant and id: what
    /// its chat commits are fenced with, and the flag that stops its
    /// journal once a commit found the lease gone.
    tokens: std::sync::Mutex<HashMap<(String, String), HeldToken>>,
}

impl ClusterNode {
    /// Join `cluster` with the run directories kept under `dir`.
    pub async fn join(
        cluster: Cluster,
        dir: PathBuf,
        listen: String,
    ) -> Result<Self, ClusterError> {
        let leases = cluster.leases().await?;
        Ok(Self {
            cluster,
            leases,
            dir,
            listen,
            copies: tokio::sync::Mutex::default(),
            keeping: Arc::default(),
            tokens: std::sync::Mutex::default(),
        })
    }

    /// Runs whose lease this node still keeps; the server waits for them to
    /// be handed back when it stops.
    pub fn keeping(&self) -> usize {
        self.keeping.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// This node's copy of `tenant`'s run `id` as the cluster has it now
    /// (under `views/`), for reading a run it does not drive; `None` when
    /// the cluster has no such run.
    pub async fn read_copy(&self, tenant: &str, id: &str) -> Result<Option<PathBuf>, ClusterError> {
        let key = RunKey::new(tenant, id)?;
        let dir = self.views(tenant).runs().join(id);
        let mut copies = self.copies.lock().await;
        let at = (tenant.to_owned(), id.to_owned());
        if copies.len() >= MAX_READ_COPIES && !copies.contains_key(&at) {
            copies.clear();
        }
        let copy = copies.entry(at).or_default();
        let found = RunMirror::sync_into(&self.cluster, &key, &dir, copy).await?;
        if found {
            self.copy_summary(&key).await;
        }
        Ok(found.then_some(dir))
    }

    /// Where this node keeps the summary of a run it read from the cluster.
    pub fn copy_summary_path(&self, tenant: &str, id: &str) -> PathBuf {
        self.views(tenant).summaries().join(format!("{id}.json"))
    }

    /// The tenant's runs and summaries as this node copies them from the
    /// cluster: the tenant layout, under `views/`.
    fn views(&self, tenant: &str) -> crate::tenant::TenantDirs {
        crate::tenant::TenantDirs::new(&self.dir.join("views"), tenant)
    }

    /// Fetch `key`'s summary (kept in the cluster by the node that drove it
    /// to its end) if this node has none of it yet.
    async fn copy_summary(&self, key: &RunKey) {
        let path = self.copy_summary_path(key.tenant(), key.run());
        if path.exists() {
            return;
        }
        let Ok(Some(bytes)) = self.cluster.files(key).get(SUMMARY_FILE).await else {
            return;
        };
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, &bytes));
        if let Err(error) = written {
            tracing::warn!(run = %key, %error, "the run's summary was not copied");
        }
    }

    /// Whether some node holds the lease of `tenant`'s run `id` now.
    pub async fn is_driven(&self, tenant: &str, id: &str) -> bool {
        self.driver_name(tenant, id)
            .await
            .is_ok_and(|driver| driver.is_some())
    }

    /// The node holding the lease of `tenant`'s run `id` now, if any.
    pub async fn driver_name(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<String>, ClusterError> {
        let key = RunKey::new(tenant, id)?;
        Ok(self.leases.holder(&key).await?.map(|holder| holder.node))
    }

    /// [`driver_name`](Self::driver_name), and where that node listens (as
    /// its record says): for a change refused here, to say where to send it.
    pub async fn driver(
        &self,
        tenant: &str,
        id: &str,
    ) -> Result<Option<(String, String)>, ClusterError> {
        let Some(name) = self.driver_name(tenant, id).await? else {
            return Ok(None);
        };
        let listen = self
            .cluster
            .nodes()
            .all()
            .await?
            .into_iter()
            .find(|seen| seen.record.node == name)
            .map(|seen| seen.record.listen)
            .unwrap_or_default();
        Ok(Some((name, listen)))
    }

    /// The fence of `tenant`'s run `id`'s chat commits, when this node
    /// took it (`None`: not a run of this node's).
    pub fn chat_fence(&self, state: &ServeState, tenant: &str, id: &str) -> Option<ChatFence> {
        let (token, revoked) = self
            .tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(&(tenant.to_owned(), id.to_owned()))
            .cloned()?;
        Some(ChatFence {
            leases: self.leases.clone(),
            key: RunKey::new(tenant, id).ok()?,
            token,
            locks: state.tenant_dirs(tenant).root().join("locks"),
            runtime: tokio::runtime::Handle::try_current().ok()?,
            revoked,
        })
    }

    /// Remember `key`'s token; the flag its fence and its journal share.
    fn hold_token(&self, key: &RunKey, token: u64) -> Arc<AtomicBool> {
        let revoked = Arc::new(AtomicBool::new(false));
        self.tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(
                (key.tenant().to_owned(), key.run().to_owned()),
                (token, Arc::clone(&revoked)),
            );
        revoked
    }

    /// Forget `key`'s token if it is still `token`: the run may have been
    /// taken here again meanwhile, under a new one.
    fn forget_token(&self, key: &RunKey, token: u64) {
        let mut tokens = self
            .tokens
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let at = (key.tenant().to_owned(), key.run().to_owned());
        if tokens.get(&at).is_some_and(|(held, _)| *held == token) {
            tokens.remove(&at);
        }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Where this node keeps its copies of the runs it drives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Queue the run `id` of `tenant`: `429` when the queue is full.
    pub(crate) async fn submit(
        &self,
        tenant: &str,
        id: &str,
        request: &StartRun,
    ) -> Result<(), ApiError> {
        let request = serde_json::to_value(request)
            .map_err(|error| ApiError::internal("queueing the run", error))?;
        let ticket = RunTicket {
            tenant: tenant.to_owned(),
            run: id.to_owned(),
            reason: "start".to_owned(),
            request: Some(request),
        };
        // A start request travels to whichever node takes it as one NATS
        // message: a long chat's prompt snapshot may not fit one.
        let size = serde_json::to_vec(&ticket).map_or(0, |bytes| bytes.len());
        let limit = self.cluster.max_payload();
        if size > limit {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "serve.body_too_large",
                format!(
                    "this start request is {size} bytes queued; the cluster's NATS server takes messages of at most {limit} bytes (its max_payload): send a shorter promptSnapshot, or raise max_payload"
                ),
            ));
        }
        self.cluster
            .queue()
            .submit(&ticket)
            .await
            .map_err(|error| match error {
                ClusterError::QueueFull { .. } => ApiError::too_many(
                    error.code(),
                    error.to_string(),
                    self.leases.renew_every().as_secs().max(1),
                ),
                other => ApiError::internal("queueing the run", other),
            })
    }

    /// Say who this node is and how busy, until the server stops.
    async fn announce(self: Arc<Self>, state: Arc<ServeState>) {
        let mut stopping = state.stopping();
        loop {
            let record = NodeRecord {
                node: self.cluster.node().to_string(),
                listen: self.listen.clone(),
                capacity: state.runs.limits.runs_total as u64,
                running: state.runs.all_live().len() as u64,
            };
            if let Err(error) = self.cluster.nodes().announce(&record).await {
                tracing::warn!(%error, "the node's record was not put");
            }
            tokio::select! {
                _ = tokio::time::sleep(self.leases.renew_every()) => {}
                _ = stopping.wait_for(|stop| *stop) => break,
            }
        }
        let _ = self.cluster.nodes().leave(self.cluster.node()).await;
    }
}

/// Take runs from the cluster's queue while the server runs.
pub async fn work(state: Arc<ServeState>) {
    let Some(node) = state.node.clone() else {
        return;
    };
    tokio::spawn(Arc::clone(&node).announce(Arc::clone(&state)));
    let mut stopping = state.stopping();
    let puller = loop {
        match node.cluster.queue().puller().await {
            Ok(puller) => break puller,
            Err(error) => {
                tracing::warn!(%error, "cannot join the run queue yet");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
            }
        }
    };
    loop {
        if *stopping.borrow() {
            return;
        }
        if !state.runs.has_room() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stopping.wait_for(|stop| *stop) => return,
            }
            continue;
        }
        let pulled = tokio::select! {
            pulled = puller.next(PULL_WAIT) => pulled,
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        match pulled {
            Ok(Some(queued)) => take(&state, &node, queued).await,
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(%error, "pulling from the run queue failed");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// What became of a pulled run.
enum Begun {
    /// Its loop goes on here.
    Running,
    /// It had ended already (its owner died before saying so).
    Ended,
}

/// Why a pulled run is not going on here.
enum Refused {
    /// Not now: another node may, or this one later.
    Later(String),
    /// Never: it can never start (its request no longer makes sense).
    Never(String),
}

async fn take(state: &Arc<ServeState>, node: &Arc<ClusterNode>, queued: QueuedRun) {
    let Ok(key) = queued.ticket.key() else {
        let _ = queued.dropped().await;
        return;
    };
    // Handed out again while this node still drives it (its "in progress"
    // did not reach NATS in time): it stays here; never rebuilt over a
    // live run.
    if state.runs.live(key.tenant(), key.run()).is_some() {
        let _ = queued.later(node.leases.renew_every()).await;
        return;
    }
    let lease = match node.leases.acquire(&key).await {
        Ok(Some(lease)) => lease,
        // Its owner still holds it: look again once the lease could have
        // run out.
        Ok(None) => {
            let _ = queued.later(node.leases.renew_every()).await;
            return;
        }
        Err(error) => {
            tracing::warn!(run = %key, %error, "cannot take the run's lease");
            let _ = queued.later(Duration::from_secs(1)).await;
            return;
        }
    };
    let ticket = queued.ticket.clone();
    let revoked = node.hold_token(&key, lease.token());
    let begun = begin(state, node, &key, &ticket, &lease, revoked).await;
    if !matches!(begun, Ok(Begun::Running)) {
        node.forget_token(&key, lease.token());
    }
    match begun {
        Ok(Begun::Running) => {
            tracing::info!(run = %key, token = lease.token(), "took the run");
            node.keeping
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(keep(
                Arc::clone(state),
                Arc::clone(node),
                queued,
                lease,
                key,
            ));
        }
        Ok(Begun::Ended) => {
            let _ = queued.done().await;
            let _ = node.leases.release(lease).await;
        }
        Err(Refused::Later(reason)) => {
            tracing::info!(run = %key, %reason, "not taking the run now");
            let _ = node.leases.release(lease).await;
            let _ = queued.later(Duration::from_secs(1)).await;
        }
        Err(Refused::Never(reason)) => {
            tracing::warn!(run = %key, %reason, "the run can never start; dropped from the queue");
            let _ = node.leases.release(lease).await;
            let _ = queued.dropped().await;
        }
    }
}

/// Start, restart or resume `key` here, holding `lease`.
async fn begin(
    state: &Arc<ServeState>,
    node: &ClusterNode,
    key: &RunKey,
    ticket: &RunTicket,
    lease: &Lease,
    revoked: Arc<AtomicBool>,
) -> Result<Begun, Refused> {
    let (tenant, id) = (key.tenant(), key.run());
    let dirs = state.tenant_dirs(tenant);
    let root = dirs.runs().join(id);
    let prepared = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || {
            dirs.ensure()?;
            // The cluster is the truth: a copy left from an earlier turn
            // here is dropped and made again from it.
            match std::fs::remove_dir_all(&root) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            }
        })
        .await
    };
    match prepared {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(Refused::Later(format!("preparing its directory: {error}"))),
        Err(error) => return Err(Refused::Later(error.to_string())),
    }
    let later = |error: ClusterError| Refused::Later(error.to_string());
    let request = || -> Result<StartRun, Refused> {
        let value = ticket
            .request
            .clone()
            .ok_or_else(|| Refused::Never("the ticket holds no request".into()))?;
        serde_json::from_value(value).map_err(|error| Refused::Never(error.to_string()))
    };
    let log = RunLog::open(&node.cluster, lease).await.map_err(later)?;
    if log.last_sequence() == 0 {
        let replica = replica_factory(node, lease, log, Arc::clone(&revoked));
        start_taken(state, tenant, id, request()?, replica)
            .await
            .map_err(refused)?;
        return Ok(Begun::Running);
    }
    RunMirror::rebuild(&node.cluster, key, &root)
        .await
        .map_err(later)?;
    // Read what was rebuilt: ended already, or never looped?
    let journal = root.join(toolhost_journal::layout::JOURNAL_FILE);
    let (ended, looped) = {
        let root = root.clone();
        tokio::task::spawn_blocking(move || {
            let ended = crate::runs::journal::has_ended(&journal)?;
            Ok::<_, std::io::Error>((ended, root.join(LOOP_RECORD_PATH).exists()))
        })
        .await
        .map_err(|error| Refused::Later(error.to_string()))?
        .map_err(|error| Refused::Later(error.to_string()))?
    };
    if ended {
        return Ok(Begun::Ended);
    }
    let replica = replica_factory(node, lease, log, Arc::clone(&revoked));
    if looped {
        resume_taken(state, tenant, id, replica)
            .await
            .map_err(refused)?;
    } else {
        restart_taken(state, tenant, id, request()?, replica)
            .await
            .map_err(refused)?;
    }
    Ok(Begun::Running)
}

/// A refusal of the service as a refusal of the queued run: a limit or a
/// busy chat is for later, a request that no longer makes sense never runs.
fn refused(error: ApiError) -> Refused {
    let reason = format!("{}: {}", error.code, error.message);
    match error.status {
        400 | 404 => Refused::Never(reason),
        _ => Refused::Later(reason),
    }
}

/// The journal replica of a run this node holds `lease` on: its log, and
/// its directory checkpointed before each line that follows a change.
fn replica_factory(
    node: &ClusterNode,
    lease: &Lease,
    log: RunLog,
    revoked: Arc<AtomicBool>,
) -> ReplicaFactory {
    let files = node.cluster.files(lease.key());
    let token = lease.token();
    Box::new(move |root: &Path| {
        let mirror = RunMirror::new(files, root, token);
        JournalReplica::new(log).map(|replica| {
            Box::new(RevocableReplica::new(
                Box::new(replica.with_mirror(mirror)),
                revoked,
            )) as Box<dyn Replica>
        })
    })
}

/// Renew the run's lease and keep it in the queue while its loop goes on;
/// then say it ended, or hand it back.
async fn keep(
    state: Arc<ServeState>,
    node: Arc<ClusterNode>,
    queued: QueuedRun,
    mut lease: Lease,
    key: RunKey,
) {
    /// Counts the run out of `keeping` however this ends.
    struct Kept(Arc<std::sync::atomic::AtomicUsize>);
    impl Drop for Kept {
        fn drop(&mut self) {
            self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let _kept = Kept(Arc::clone(&node.keeping));
    /// Forgets the run's token however this ends.
    struct Held<'a>(&'a ClusterNode, &'a RunKey, u64);
    impl Drop for Held<'_> {
        fn drop(&mut self) {
            self.0.forget_token(self.1, self.2);
        }
    }
    let _held = Held(node.as_ref(), &key, lease.token());
    let (tenant, id) = (key.tenant().to_owned(), key.run().to_owned());
    if let Some(live) = state.runs.live(&tenant, &id) {
        let mut progress = live.progress.subscribe();
        loop {
            tokio::select! {
                _ = progress.wait_for(|progress| progress.ended) => break,
                _ = tokio::time::sleep(node.leases.renew_every()) => {}
            }
            match node.leases.renew(&mut lease).await {
                Ok(()) => {
                    if let Err(error) = queued.in_progress().await {
                        tracing::warn!(run = %key, %error, "the queue was not told the run goes on");
                    }
                }
                Err(ClusterError::LeaseLost { .. }) => {
                    // Another node has it: stop driving it, say nothing.
                    tracing::warn!(run = %key, "lost the run's lease; leaving it");
                    live.interrupt();
                    return;
                }
                // NATS away: the journal's append window decides.
                Err(error) => tracing::warn!(run = %key, %error, "the lease was not renewed"),
            }
        }
    }
    let journal = state
        .tenant_dirs(&tenant)
        .runs()
        .join(&id)
        .join(toolhost_journal::layout::JOURNAL_FILE);
    let summary = state
        .tenant_dirs(&tenant)
        .summaries()
        .join(format!("{id}.json"));
    // Ended for good (a terminal event), and its summary if it did.
    let (ended, summary) = tokio::task::spawn_blocking(move || {
        let ended = crate::runs::journal::has_ended(&journal).unwrap_or(false);
        (ended, ended.then(|| std::fs::read(&summary).ok()).flatten())
    })
    .await
    .unwrap_or((false, None));
    if ended {
        // Its summary, for every node's `GET /v1/runs/{id}`.
        if let Some(bytes) = summary {
            let kept = node
                .cluster
                .files(&key)
                .create(SUMMARY_FILE, bytes::Bytes::from(bytes))
                .await;
            if let Err(error) = kept {
                tracing::warn!(run = %key, %error, "the run's summary was not kept in the cluster");
            }
        }
    }
    let _ = node.leases.release(lease).await;
    if ended {
        if let Err(error) = queued.done().await {
            tracing::warn!(run = %key, %error, "the queue was not told the run ended");
        }
    } else {
        // Interrupted (the server stops, or the journal was refused):
        // another node goes on with it at once.
        let _ = queued.put_back().await;
    }
}
