//! Runs waiting for a node: a work-queue stream (each message handed to one
//! consumer, gone once acknowledged) with a limit on what it holds and
//! discard-new, so a full queue refuses a new run — the service's `429` —
//! instead of dropping an old one. Nodes pull as they have room; no
//! coordinator decides who runs what.
//!
//! A run stays in the queue, unacknowledged, until it ends: its owner says
//! "in progress" at every lease renewal and acknowledges it when the run
//! ended. So the queue is also the list of runs not yet ended: when a node
//! dies, its runs are handed out again after the claim wait, and the node
//! that gets one takes its lease once it ran out, rebuilds it and resumes
//! it. The limit counts runs waiting and running.

use std::time::Duration;

use async_nats::jetstream::consumer::{self, pull};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, AckKind, stream};
use bytes::Bytes;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::error::jetstream_code;
use crate::resources::{QUEUE_CONSUMER, QUEUE_SUBJECT};
use crate::{ClusterError, ClusterSettings, RunKey};

/// The JetStream error a stream at its message or byte limit answers with.
const STORE_FAILED: u64 = 10077;

/// A run to be taken by a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunTicket {
    pub tenant: String,
    pub run: String,
    /// `start` for a new run, `resume` for one an operator asked to go on.
    pub reason: String,
    /// What the run is started with (the service's request), for the node
    /// that takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
}

impl RunTicket {
    pub fn key(&self) -> Result<RunKey, ClusterError> {
        RunKey::new(&self.tenant, &self.run)
    }
}

/// The queue of runs, as one node uses it.
#[derive(Clone)]
pub struct RunQueue {
    jetstream: jetstream::Context,
    stream: stream::Stream,
    settings: ClusterSettings,
}

impl RunQueue {
    pub(crate) fn new(
        jetstream: jetstream::Context,
        stream: stream::Stream,
        settings: ClusterSettings,
    ) -> Self {
        Self {
            jetstream,
            stream,
            settings,
        }
    }

    /// Queue `ticket`. The same run queued twice within two minutes is kept
    /// once. `QueueFull` when the queue holds its limit.
    pub async fn submit(&self, ticket: &RunTicket) -> Result<(), ClusterError> {
        let key = ticket.key()?;
        let payload = serde_json::to_vec(ticket)
            .map_err(|error| ClusterError::nats("encoding a run ticket", error))?;
        let message = PublishMessage::build()
            .payload(Bytes::from(payload))
            .message_id(format!("{}:{}", ticket.reason, key.path()));
        let sent = match self.jetstream.send_publish(QUEUE_SUBJECT, message).await {
            Ok(ack) => ack.await,
            Err(error) => Err(error),
        };
        match sent {
            Ok(_) => Ok(()),
            Err(error)
                if error.kind() == PublishErrorKind::Other
                    && jetstream_code(&error) == Some(STORE_FAILED) =>
            {
                Err(ClusterError::QueueFull {
                    limit: self.settings.queue_limit,
                })
            }
            Err(error) => Err(ClusterError::nats(format!("queueing {key}"), error)),
        }
    }

    /// Runs waiting now.
    pub async fn waiting(&self) -> Result<u64, ClusterError> {
        let info = self
            .stream
            .get_info()
            .await
            .map_err(|error| ClusterError::nats("reading the run queue", error))?;
        Ok(info.state.messages)
    }

    /// The nodes' shared consumer of the queue.
    pub async fn puller(&self) -> Result<RunPuller, ClusterError> {
        let consumer = self
            .stream
            .get_or_create_consumer(
                QUEUE_CONSUMER,
                pull::Config {
                    durable_name: Some(QUEUE_CONSUMER.to_owned()),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: self.settings.claim_wait,
                    // Every run not yet ended is one pending acknowledgement.
                    max_ack_pending: self.settings.queue_limit,
                    ..Default::default()
                },
            )
            .await
            .map_err(|error| ClusterError::nats("joining the run queue", error))?;
        Ok(RunPuller { consumer })
    }
}

/// Takes runs from the queue for one node.
pub struct RunPuller {
    consumer: consumer::Consumer<pull::Config>,
}

impl RunPuller {
    /// The next waiting run, or `None` after `wait` with none.
    pub async fn next(&self, wait: Duration) -> Result<Option<QueuedRun>, ClusterError> {
        loop {
            let mut batch = self
                .consumer
                .fetch()
                .max_messages(1)
                .expires(wait)
                .messages()
                .await
                .map_err(|error| ClusterError::nats("pulling from the run queue", error))?;
            let Some(message) = batch.next().await else {
                return Ok(None);
            };
            let message =
                message.map_err(|error| ClusterError::nats("pulling from the run queue", error))?;
            match serde_json::from_slice::<RunTicket>(&message.payload) {
                Ok(ticket) if ticket.key().is_ok() => {
                    return Ok(Some(QueuedRun { message, ticket }));
                }
                _ => {
                    // Not ours to run, and never will be: drop it for good.
                    tracing::warn!(
                        bytes = message.payload.len(),
                        "a message in the run queue is not a run ticket; dropped"
                    );
                    message
                        .ack_with(AckKind::Term)
                        .await
                        .map_err(|error| ClusterError::nats("dropping a bad ticket", error))?;
                }
            }
        }
    }
}

/// A run pulled from the queue, held by this node until it ends.
pub struct QueuedRun {
    message: jetstream::Message,
    pub ticket: RunTicket,
}

impl QueuedRun {
    /// The run is still going here: hand it to no one else for another
    /// claim wait (at every lease renewal).
    pub async fn in_progress(&self) -> Result<(), ClusterError> {
        self.message
            .ack_with(AckKind::Progress)
            .await
            .map_err(|error| ClusterError::nats("keeping a run", error))
    }

    /// The run ended (or was ended already): the queue forgets it.
    pub async fn done(self) -> Result<(), ClusterError> {
        self.message
            .double_ack()
            .await
            .map_err(|error| ClusterError::nats("acknowledging a run", error))
    }

    /// It can never run: remove it from the queue.
    pub async fn dropped(self) -> Result<(), ClusterError> {
        self.message
            .ack_with(AckKind::Term)
            .await
            .map_err(|error| ClusterError::nats("dropping a run", error))
    }

    /// Not now (no room here, or its lease is still another node's): hand
    /// it out again after `delay`.
    pub async fn later(self, delay: Duration) -> Result<(), ClusterError> {
        self.message
            .ack_with(AckKind::Nak(Some(delay)))
            .await
            .map_err(|error| ClusterError::nats("handing a run back", error))
    }

    /// Hand it back at once for another node.
    pub async fn put_back(self) -> Result<(), ClusterError> {
        self.message
            .ack_with(AckKind::Nak(None))
            .await
            .map_err(|error| ClusterError::nats("handing a run back", error))
    }
}
