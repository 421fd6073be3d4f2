//! The JetStream resources one cluster shares, made by the first node that
//! starts and found by the others: the run queue, the journal stream, the
//! lease and claim buckets and the file store. A node adopts the resources
//! as they exist: the lease length is the lease bucket's age limit, so every
//! node measures leases alike (docs/cluster.md, "Lease sizing").

use std::time::Duration;

use async_nats::jetstream::{self, kv, object_store, stream};

use crate::{ClusterAddress, ClusterError, Leases, NodeName, Nodes, RunFiles, RunKey, RunQueue};

/// The journal stream: one subject per run, `toolhost.journal.<tenant>.<run>`.
pub(crate) const JOURNAL_STREAM: &str = "TOOLHOST_JOURNAL";
pub(crate) const JOURNAL_SUBJECTS: &str = "toolhost.journal";
/// The work queue of runs waiting for a node.
pub(crate) const QUEUE_STREAM: &str = "TOOLHOST_RUNS";
pub(crate) const QUEUE_SUBJECT: &str = "toolhost.runs.queued";
/// The durable pull consumer every node takes runs from.
pub(crate) const QUEUE_CONSUMER: &str = "nodes";
/// Run owners: a key per run, gone when its owner stops renewing it.
pub(crate) const LEASE_BUCKET: &str = "toolhost_leases";
/// The nodes: each one's record, gone when it stops announcing itself.
pub(crate) const NODE_BUCKET: &str = "toolhost_nodes";
/// Create-only names: a file's name is claimed here before it is stored.
pub(crate) const CLAIM_BUCKET: &str = "toolhost_claims";
/// Audit files, model replies and workspace checkpoints.
pub(crate) const FILE_BUCKET: &str = "toolhost_files";

/// How a node sets the cluster up when it is the first, and how it waits.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// Copies of every stream and bucket: 1 for one NATS server, 3 for a
    /// production cluster of three.
    pub replicas: usize,
    /// How long a lease lasts unrenewed; owners renew at a third of it.
    pub lease: Duration,
    /// Runs the queue holds before a new one is refused (`429`).
    pub queue_limit: i64,
    /// How long a run's journal append is retried while NATS does not answer
    /// before the run is stopped as interrupted.
    pub append_window: Duration,
    /// How long one request to NATS may take before it is tried again.
    pub request_timeout: Duration,
    /// How long a pulled run may go without its owner saying it is in
    /// progress before it is handed to another node (the owner died). At
    /// least the lease: an owner says so at every renewal.
    pub claim_wait: Duration,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self {
            replicas: 1,
            lease: Duration::from_secs(10),
            queue_limit: 1000,
            append_window: Duration::from_secs(30),
            request_timeout: Duration::from_secs(2),
            claim_wait: Duration::from_secs(10),
        }
    }
}

/// A node's connection to the cluster and handles on its resources.
#[derive(Clone)]
pub struct Cluster {
    address: ClusterAddress,
    node: NodeName,
    settings: ClusterSettings,
    client: async_nats::Client,
    jetstream: jetstream::Context,
    journal: stream::Stream,
    queue: stream::Stream,
    leases: kv::Store,
    nodes: kv::Store,
    claims: kv::Store,
    files: object_store::ObjectStore,
}

/// Whether connecting makes what is missing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Missing {
    Make,
    Refuse,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("address", &self.address)
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connect to NATS at `address` as `node` and find (or make) the
    /// cluster's resources. The connection reconnects by itself after an
    /// outage.
    pub async fn connect(
        address: &ClusterAddress,
        node: NodeName,
        settings: ClusterSettings,
    ) -> Result<Self, ClusterError> {
        Self::open(address, node, settings, Missing::Make).await
    }

    /// Connect to a cluster some node has set up, making nothing: for
    /// tools that only look (`toolhost cluster status`).
    pub async fn attach(address: &ClusterAddress, node: NodeName) -> Result<Self, ClusterError> {
        Self::open(address, node, ClusterSettings::default(), Missing::Refuse).await
    }

    async fn open(
        address: &ClusterAddress,
        node: NodeName,
        settings: ClusterSettings,
        missing: Missing,
    ) -> Result<Self, ClusterError> {
        let client = address
            .options()
            .await?
            .name(format!("toolhost {node}"))
            .connection_timeout(settings.request_timeout)
            .request_timeout(Some(settings.request_timeout))
            .connect(address.url())
            .await
            .map_err(|error| ClusterError::connect(address, &error))?;
        let jetstream = jetstream::ContextBuilder::new()
            .timeout(settings.request_timeout)
            .build(client.clone());
        let journal = ensure_stream(
            &jetstream,
            missing,
            stream::Config {
                name: JOURNAL_STREAM.to_owned(),
                subjects: vec![format!("{JOURNAL_SUBJECTS}.>")],
                num_replicas: settings.replicas,
                // Retried appends carry their message id: a repeat inside
                // this window is stored once (it is longer than the append
                // window).
                duplicate_window: Duration::from_secs(120),
                deny_delete: true,
                allow_direct: true,
                ..Default::default()
            },
        )
        .await?;
        let queue = ensure_stream(
            &jetstream,
            missing,
            stream::Config {
                name: QUEUE_STREAM.to_owned(),
                subjects: vec![QUEUE_SUBJECT.to_owned()],
                retention: stream::RetentionPolicy::WorkQueue,
                discard: stream::DiscardPolicy::New,
                max_messages: settings.queue_limit,
                num_replicas: settings.replicas,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            },
        )
        .await?;
        let expiring = |bucket: &str| kv::Config {
            bucket: bucket.to_owned(),
            history: 1,
            max_age: settings.lease,
            num_replicas: settings.replicas,
            ..Default::default()
        };
        let leases = ensure_bucket(&jetstream, missing, expiring(LEASE_BUCKET)).await?;
        let nodes = ensure_bucket(&jetstream, missing, expiring(NODE_BUCKET)).await?;
        let claims = ensure_bucket(
            &jetstream,
            missing,
            kv::Config {
                bucket: CLAIM_BUCKET.to_owned(),
                history: 1,
                num_replicas: settings.replicas,
                ..Default::default()
            },
        )
        .await?;
        let files = match jetstream.get_object_store(FILE_BUCKET).await {
            Ok(files) => files,
            Err(error) if missing == Missing::Refuse => return Err(not_set_up(FILE_BUCKET, error)),
            Err(_) => {
                let made = jetstream
                    .create_object_store(object_store::Config {
                        bucket: FILE_BUCKET.to_owned(),
                        num_replicas: settings.replicas,
                        ..Default::default()
                    })
                    .await;
                match made {
                    Ok(files) => files,
                    // Another node made it in the meantime.
                    Err(error) => jetstream
                        .get_object_store(FILE_BUCKET)
                        .await
                        .map_err(|_| setup(FILE_BUCKET, error))?,
                }
            }
        };
        Ok(Self {
            address: address.clone(),
            node,
            settings,
            client,
            jetstream,
            journal,
            queue,
            leases,
            nodes,
            claims,
            files,
        })
    }

    pub fn node(&self) -> &NodeName {
        &self.node
    }

    /// The largest message the NATS server takes (its `max_payload`): a
    /// queued run's ticket must fit in one.
    pub fn max_payload(&self) -> usize {
        self.client.server_info().max_payload
    }

    /// Where NATS is (no secret in it).
    pub fn address(&self) -> &ClusterAddress {
        &self.address
    }

    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    /// The queue of runs waiting for a node.
    pub fn queue(&self) -> RunQueue {
        RunQueue::new(
            self.jetstream.clone(),
            self.queue.clone(),
            self.settings.clone(),
        )
    }

    /// The run owners' leases; their length is the bucket's.
    pub async fn leases(&self) -> Result<Leases, ClusterError> {
        let status = self
            .leases
            .status()
            .await
            .map_err(|error| ClusterError::nats("reading the lease bucket", error))?;
        Ok(Leases::new(
            self.leases.clone(),
            self.node.clone(),
            status.max_age(),
        ))
    }

    /// The nodes' records.
    pub fn nodes(&self) -> Nodes {
        Nodes::new(self.nodes.clone())
    }

    /// The create-only files of `run`.
    pub fn files(&self, run: &RunKey) -> RunFiles {
        RunFiles::new(self.claims.clone(), self.files.clone(), run.clone())
    }

    pub(crate) fn jetstream(&self) -> &jetstream::Context {
        &self.jetstream
    }

    pub(crate) fn journal_stream(&self) -> &stream::Stream {
        &self.journal
    }

    /// The client, to watch its connection state.
    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }
}

fn setup(resource: &str, error: impl std::fmt::Display) -> ClusterError {
    ClusterError::Setup {
        resource: resource.to_owned(),
        reason: error.to_string(),
    }
}

fn not_set_up(resource: &str, error: impl std::fmt::Display) -> ClusterError {
    ClusterError::NotFound {
        what: format!("the cluster's {resource} ({error}): no node has set this NATS up yet"),
    }
}

/// The stream named in `config` as it exists, or made from `config`.
async fn ensure_stream(
    jetstream: &jetstream::Context,
    missing: Missing,
    config: stream::Config,
) -> Result<stream::Stream, ClusterError> {
    let name = config.name.clone();
    if missing == Missing::Refuse {
        return jetstream
            .get_stream(&name)
            .await
            .map_err(|error| not_set_up(&name, error));
    }
    jetstream
        .get_or_create_stream(config)
        .await
        .map_err(|error| setup(&name, error))
}

/// The bucket named in `config` as it exists, or made from `config`.
async fn ensure_bucket(
    jetstream: &jetstream::Context,
    missing: Missing,
    config: kv::Config,
) -> Result<kv::Store, ClusterError> {
    let name = config.bucket.clone();
    match jetstream.get_key_value(&name).await {
        Ok(store) => return Ok(store),
        Err(error) if missing == Missing::Refuse => return Err(not_set_up(&name, error)),
        Err(_) => {}
    }
    match jetstream.create_key_value(config).await {
        Ok(store) => Ok(store),
        // Another node made it in the meantime.
        Err(error) => jetstream
            .get_key_value(&name)
            .await
            .map_err(|_| setup(&name, error)),
    }
}
