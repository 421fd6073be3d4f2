//! Runs spread over several hosts on NATS JetStream (docs/cluster.md): the
//! JetStream resources a cluster uses (`resources`), the queue of runs
//! waiting for a node (`queue`), the lease that makes one node a run's owner
//! (`lease`), the run's journal as a subject appended only by its owner
//! (`run_log`) and the run journal's replica made of it (`replica`),
//! create-only files in the object store (`files`), the run directory as
//! checkpoints any node can rebuild it from (`mirror`), the nodes and what
//! `toolhost cluster status` shows (`nodes`, `status`). No wasmtime, and
//! nothing here knows what a run does: the service drives these pieces.

pub mod address;
pub mod error;
pub mod files;
pub mod lease;
pub mod mirror;
pub mod names;
pub mod nodes;
pub mod queue;
pub mod replica;
pub mod resources;
pub mod run_log;
pub mod status;
#[cfg(feature = "testing")]
pub mod testing;

pub use address::{ClusterAddress, Credential, TlsFiles};
pub use error::ClusterError;
pub use files::RunFiles;
pub use lease::{Lease, LeaseHolder, Leases};
pub use mirror::{Checkpoint, ReadCopy, RunMirror};
pub use names::{NodeName, RunKey};
pub use nodes::{NodeRecord, Nodes, SeenNode};
pub use queue::{QueuedRun, RunPuller, RunQueue, RunTicket};
pub use replica::JournalReplica;
pub use resources::{Cluster, ClusterSettings};
pub use run_log::{LogEntry, RunLog};
pub use status::{ClusterStatus, LeasedRun, NodeStatus};
