//! A run's journal in the cluster: one subject of the journal stream per
//! run, each journal line one message, appended only by the run's owner.
//!
//! Every append says which entry it follows
//! (`Nats-Expected-Last-Subject-Sequence`): JetStream refuses it if anyone
//! else appended since, so a node that lost its run — paused past its
//! lease, cut off — cannot add a line even if it wakes and tries, once the
//! new owner has written its first (docs/cluster.md, "Fencing"). Each append
//! carries a message id made of the run, the owner's lease token and the
//! line's journal sequence. JetStream checks the expected sequence before
//! it looks for a duplicate id, so an append retried after a lost answer —
//! stored the first time — is refused as out of sequence; the refusal is
//! then read as what it is by looking at the subject's last line: if it
//! carries this append's id, the append is stored (once), else another
//! writer appended and this node is fenced. Another owner's line of the
//! same journal sequence has another id.

use std::time::{Duration, Instant};

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind};
use bytes::Bytes;

use crate::resources::JOURNAL_SUBJECTS;
use crate::{Cluster, ClusterError, Lease, RunKey};

/// Most lines read back from one run's journal.
pub const MAX_ENTRIES: usize = 1_000_000;

/// The first pause between tries of an unanswered append; it doubles up to
/// [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// The subject of `run`'s journal.
fn subject(run: &RunKey) -> String {
    format!("{JOURNAL_SUBJECTS}.{}", run.path())
}

/// A run's journal, open for appending by its owner.
#[derive(Debug)]
pub struct RunLog {
    jetstream: async_nats::jetstream::Context,
    stream: stream::Stream,
    key: RunKey,
    subject: String,
    token: u64,
    /// The stream sequence of the last line on the subject.
    last: u64,
    window: Duration,
}

impl RunLog {
    /// Open `lease`'s run for appending after its last line.
    pub async fn open(cluster: &Cluster, lease: &Lease) -> Result<Self, ClusterError> {
        let subject = subject(lease.key());
        let last = last_sequence(cluster.journal_stream(), &subject).await?;
        Ok(Self {
            jetstream: cluster.jetstream().clone(),
            stream: cluster.journal_stream().clone(),
            key: lease.key().clone(),
            subject,
            token: lease.token(),
            last,
            window: cluster.settings().append_window,
        })
    }

    pub fn key(&self) -> &RunKey {
        &self.key
    }

    /// The stream sequence of the last line this log knows of (0: none).
    pub fn last_sequence(&self) -> u64 {
        self.last
    }

    /// Append `line`, the journal's event `event_seq`, after the last line.
    /// Tried again while NATS does not answer, for the append window; a
    /// refusal because another writer appended is final (`Fenced`).
    pub async fn append(&mut self, event_seq: u64, line: Bytes) -> Result<(), ClusterError> {
        let id = format!("{}:{}:{event_seq}", self.key.path(), self.token);
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            let message = PublishMessage::build()
                .payload(line.clone())
                .message_id(&id)
                .expected_last_subject_sequence(self.last);
            let sent = match self
                .jetstream
                .send_publish(self.subject.clone(), message)
                .await
            {
                Ok(ack) => ack.await,
                Err(error) => Err(error),
            };
            let error = match sent {
                Ok(ack) => {
                    self.last = ack.sequence;
                    return Ok(());
                }
                Err(error) => error,
            };
            if error.kind() == PublishErrorKind::WrongLastSequence {
                let last = last_message(&self.stream, &self.subject).await?;
                let ours = last.as_ref().is_some_and(|(_, last_id)| *last_id == id);
                if let (true, Some((sequence, _))) = (ours, last) {
                    self.last = sequence;
                    return Ok(());
                }
                return Err(ClusterError::Fenced {
                    run: self.key.to_string(),
                    expected: self.last,
                });
            }
            let waited = started.elapsed();
            if waited + pause > self.window {
                return Err(ClusterError::Unavailable {
                    what: format!("appending event {event_seq} of {}", self.key),
                    waited,
                });
            }
            tracing::warn!(run = %self.key, event_seq, %error, "journal append not answered; trying again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Every line of `run`'s journal, in order: what a node rebuilds the
    /// run's directory from.
    pub async fn read(cluster: &Cluster, run: &RunKey) -> Result<Vec<Bytes>, ClusterError> {
        Ok(Self::read_entries(cluster, run)
            .await?
            .into_iter()
            .map(|entry| entry.line)
            .collect())
    }

    /// Every line of `run`'s journal with the lease token of its writer.
    pub async fn read_entries(
        cluster: &Cluster,
        run: &RunKey,
    ) -> Result<Vec<LogEntry>, ClusterError> {
        Self::read_entries_after(cluster, run, 0).await
    }

    /// The lines of `run`'s journal stored after the stream sequence
    /// `after` (a [`LogEntry::stream_seq`]; 0: all of them).
    pub async fn read_entries_after(
        cluster: &Cluster,
        run: &RunKey,
        after: u64,
    ) -> Result<Vec<LogEntry>, ClusterError> {
        let stream = cluster.journal_stream();
        let subject = subject(run);
        let last = last_sequence(stream, &subject).await?;
        let mut entries = Vec::new();
        let mut next = after + 1;
        while next <= last {
            if entries.len() >= MAX_ENTRIES {
                return Err(ClusterError::nats(
                    format!("reading the journal of {run}"),
                    format!("more than {MAX_ENTRIES} lines"),
                ));
            }
            let message = stream
                .raw_message_builder()
                .sequence(next)
                .next_by_subject(subject.clone())
                .send()
                .await
                .map_err(|error| {
                    ClusterError::nats(format!("reading the journal of {run}"), error)
                })?;
            next = message.sequence + 1;
            let (token, seq) = message
                .headers
                .get(async_nats::header::NATS_MESSAGE_ID)
                .and_then(|id| parse_id(id.as_str()))
                .unwrap_or((0, 0));
            entries.push(LogEntry {
                line: message.payload,
                token,
                seq,
                stream_seq: message.sequence,
            });
        }
        Ok(entries)
    }

    /// The ids of `tenant`'s runs that have a journal in the cluster,
    /// unordered.
    pub async fn runs_of(cluster: &Cluster, tenant: &str) -> Result<Vec<String>, ClusterError> {
        use futures_util::TryStreamExt as _;
        // Checked like a key's tenant: one subject token.
        let probe = RunKey::new(tenant, "probe")?;
        let prefix = format!("{JOURNAL_SUBJECTS}.{}.", probe.tenant());
        let listing =
            |error: String| ClusterError::nats(format!("listing the runs of {tenant}"), error);
        let subjects: Vec<(String, usize)> = cluster
            .journal_stream()
            .info_with_subjects(format!("{prefix}*"))
            .await
            .map_err(|error| listing(error.to_string()))?
            .try_collect()
            .await
            .map_err(|error| listing(error.to_string()))?;
        Ok(subjects
            .into_iter()
            .filter_map(|(subject, _)| subject.strip_prefix(&prefix).map(str::to_owned))
            .collect())
    }
}

/// One line of a run's journal as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub line: Bytes,
    /// The lease token of the node that appended it.
    pub token: u64,
    /// The journal sequence its writer gave it.
    pub seq: u64,
    /// Where it is in the journal stream (for reading on after it).
    pub stream_seq: u64,
}

/// `(token, seq)` from an append's message id `<run path>:<token>:<seq>`.
fn parse_id(id: &str) -> Option<(u64, u64)> {
    let mut parts = id.rsplitn(3, ':');
    let seq = parts.next()?.parse().ok()?;
    let token = parts.next()?.parse().ok()?;
    Some((token, seq))
}

/// The stream sequence of `subject`'s last message, 0 when it has none.
async fn last_sequence(stream: &stream::Stream, subject: &str) -> Result<u64, ClusterError> {
    Ok(last_message(stream, subject)
        .await?
        .map_or(0, |(sequence, _)| sequence))
}

/// The stream sequence and message id of `subject`'s last message.
async fn last_message(
    stream: &stream::Stream,
    subject: &str,
) -> Result<Option<(u64, String)>, ClusterError> {
    match stream.get_last_raw_message_by_subject(subject).await {
        Ok(message) => {
            let id = message
                .headers
                .get(async_nats::header::NATS_MESSAGE_ID)
                .map(|id| id.as_str().to_owned())
                .unwrap_or_default();
            Ok(Some((message.sequence, id)))
        }
        Err(error) if error.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(error) => Err(ClusterError::nats(
            format!("finding the end of {subject}"),
            error,
        )),
    }
}
