//! What can go wrong between a node and the cluster, typed so the service
//! can answer each case its own way (a full queue is a `429`, a fenced
//! append ends the run's local driver, NATS away past the window is an
//! interruption).

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "cluster.invalid_name: the {what} `{value}` may hold only ASCII letters, digits, `-` and `_` (1 to 128)"
    )]
    InvalidName { what: &'static str, value: String },
    #[error("cluster.unreachable: NATS at {url} did not answer: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("cluster.access_refused: {reason}")]
    Access { reason: String },
    #[error("cluster.unauthorized: NATS at {url} refused this node's credential: {reason}")]
    Unauthorized { url: String, reason: String },
    #[error("cluster.setup_failed: {resource}: {reason}")]
    Setup { resource: String, reason: String },
    #[error("cluster.queue_full: the run queue holds its limit of {limit} runs; try again later")]
    QueueFull { limit: i64 },
    #[error(
        "cluster.fenced: another node wrote to the journal of {run} (expected its last entry at stream sequence {expected}); this node no longer owns it"
    )]
    Fenced { run: String, expected: u64 },
    #[error("cluster.lease_lost: the lease on {run} is no longer this node's")]
    LeaseLost { run: String },
    #[error("cluster.unavailable: {what} got no answer from NATS within {waited:?}")]
    Unavailable { what: String, waited: Duration },
    #[error("cluster.file_exists: {name} was written already (files are create-only)")]
    FileExists { name: String },
    #[error("cluster.not_found: {what}")]
    NotFound { what: String },
    #[error("cluster.nats_error: {what}: {reason}")]
    Nats { what: String, reason: String },
}

impl ClusterError {
    /// The stable code (`cluster.*`) before the colon of the message.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidName { .. } => "cluster.invalid_name",
            Self::Unreachable { .. } => "cluster.unreachable",
            Self::Access { .. } => "cluster.access_refused",
            Self::Unauthorized { .. } => "cluster.unauthorized",
            Self::Setup { .. } => "cluster.setup_failed",
            Self::QueueFull { .. } => "cluster.queue_full",
            Self::Fenced { .. } => "cluster.fenced",
            Self::LeaseLost { .. } => "cluster.lease_lost",
            Self::Unavailable { .. } => "cluster.unavailable",
            Self::FileExists { .. } => "cluster.file_exists",
            Self::NotFound { .. } => "cluster.not_found",
            Self::Nats { .. } => "cluster.nats_error",
        }
    }

    /// A failed connection: refused credentials apart from a server that
    /// did not answer (or did not speak TLS as asked).
    pub(crate) fn connect(
        address: &crate::ClusterAddress,
        error: &async_nats::ConnectError,
    ) -> Self {
        use async_nats::ConnectErrorKind;
        let (url, reason) = (address.to_string(), error.to_string());
        match error.kind() {
            ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => {
                Self::Unauthorized { url, reason }
            }
            _ => Self::Unreachable { url, reason },
        }
    }

    pub(crate) fn nats(what: impl Into<String>, error: impl std::fmt::Display) -> Self {
        Self::Nats {
            what: what.into(),
            reason: error.to_string(),
        }
    }
}

/// The JetStream API error behind a client error, if the server sent one.
pub(crate) fn jetstream_code(error: &(dyn std::error::Error + 'static)) -> Option<u64> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(api) = error.downcast_ref::<async_nats::jetstream::Error>() {
            return Some(api.error_code().0);
        }
        next = error.source();
    }
    None
}
