//! Runs spread over several hosts on NATS JetStream (docs/cluster.md): the
//! JetStream resources a cluster uses (`resources`), the queue of runs
//! waiting for a node (`queue`), the lease that makes one node a run's owner
//! (`lease`), the run's journal as a subject appended only by its owner
//! (`run_log`) and the run journal's replica made of it (`replica`), and
//! create-only files in the object store (`files`). No
//! wasmtime, and nothing here knows what a run does: the service drives
//! these pieces.

pub mod error;
pub mod files;
pub mod lease;
pub mod names;
pub mod queue;
pub mod replica;
pub mod resources;
pub mod run_log;
#[cfg(feature = "testing")]
pub mod testing;

pub use error::ClusterError;
pub use files::RunFiles;
pub use lease::{Lease, LeaseHolder, Leases};
pub use names::{NodeName, RunKey};
pub use queue::{QueuedRun, RunPuller, RunQueue, RunTicket};
pub use replica::JournalReplica;
pub use resources::{Cluster, ClusterSettings};
pub use run_log::RunLog;
