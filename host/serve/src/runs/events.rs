//! `GET /v1/runs/{id}/events`: the run's journal as Server-Sent Events.
//! Each event is one journal line: `id` is its `seq`, `event` its type,
//! `data` the line. A client that reconnects with `Last-Event-ID` gets the
//! events after it. A live run's stream follows it and ends when its loop
//! ends; any other run's stream ends after its last event.
//!
//! The stream reads the journal file, never the run: the run only updates
//! a watch value after each event, so a slow reader holds nothing up and
//! costs the server one bounded chunk at a time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::watch;

use super::read_root;
use super::registry::Progress;
use crate::ServeState;
use crate::error::ApiError;
use crate::node::ClusterNode;
use crate::tokens::Tenant;
use toolhost_journal::tail::{Line, read_from};

/// How long a follower sleeps at most before looking at the file again.
const POLL: Duration = Duration::from_secs(1);

/// Follow a run's journal.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/events",
    params(
        ("id" = String, Path, description = "The run id"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this journal seq"),
    ),
    responses(
        (status = 200, description = "`text/event-stream`: one event per journal line", content_type = "text/event-stream"),
        (status = 404, description = "No such run of this tenant", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn events(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>>, ApiError> {
    let at = read_root(&state, &tenant, &id).await?;
    let root = at.root.clone();
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "serve.invalid_request",
                    "Last-Event-ID is a journal seq: a whole number",
                )
            })?,
    };
    let follower = Follower {
        journal: root.join("events.jsonl"),
        offset: 0,
        after,
        pending: Vec::new().into_iter(),
        live: state
            .runs
            .live(&tenant, &id)
            .map(|run| run.progress.subscribe()),
        done: false,
        copy: match (&state.node, at.is_copy()) {
            (Some(node), true) => Some(CopyOf {
                node: Arc::clone(node),
                tenant: tenant.clone(),
                id: id.clone(),
            }),
            _ => None,
        },
        ended: false,
        last_pull: false,
    };
    let stream = futures_util::stream::unfold(follower, |mut follower| async move {
        let event = follower.next().await?;
        Some((Ok(event), follower))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

struct Follower {
    journal: PathBuf,
    offset: u64,
    /// Events up to this seq are not sent.
    after: u64,
    pending: std::vec::IntoIter<Line>,
    /// The run's progress while it is live here.
    live: Option<watch::Receiver<Progress>>,
    done: bool,
    /// On a cluster node: the run read from the cluster's copy, followed by
    /// bringing the copy up to date while another node drives it.
    copy: Option<CopyOf>,
    /// A terminal event was read.
    ended: bool,
    /// The copy was pulled once after its run stopped being driven.
    last_pull: bool,
}

struct CopyOf {
    node: Arc<ClusterNode>,
    tenant: String,
    id: String,
}

/// How often a copy of a run another node drives is brought up to date.
const COPY_POLL: Duration = Duration::from_millis(250);

impl Follower {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(line) = self.pending.next() {
                self.after = line.seq;
                self.ended |= toolhost_runtime::TERMINAL_EVENTS.contains(&line.event_type.as_str());
                return Some(
                    Event::default()
                        .id(line.seq.to_string())
                        .event(line.event_type)
                        .data(line.json),
                );
            }
            if self.done {
                return None;
            }
            // Whether the run had ended before this read: then the read
            // sees every event it wrote, and is the last.
            let ended = self
                .live
                .as_ref()
                .is_none_or(|progress| progress.borrow().ended);
            let journal = self.journal.clone();
            let offset = self.offset;
            let chunk = tokio::task::spawn_blocking(move || read_from(&journal, offset))
                .await
                .ok()?
                .ok()?;
            self.offset = chunk.offset;
            let after = self.after;
            let fresh: Vec<Line> = chunk
                .lines
                .into_iter()
                .filter(|line| line.seq > after)
                .collect();
            if !fresh.is_empty() {
                self.pending = fresh.into_iter();
                continue;
            }
            if chunk.offset > offset {
                // Only lines already sent: read on.
                continue;
            }
            if let Some(copy) = &self.copy {
                // A copy: follow it while another node drives the run.
                let driven = !self.ended && copy.node.is_driven(&copy.tenant, &copy.id).await;
                tracing::debug!(run = %copy.id, driven, ended = self.ended, after = self.after, offset = self.offset, "following a copy");
                if !driven {
                    // The driver may have written its last events between
                    // the last pull and letting go: pull once more, read
                    // that, then stop.
                    if !self.ended && !self.last_pull {
                        self.last_pull = true;
                        copy.node.read_copy(&copy.tenant, &copy.id).await.ok()?;
                        continue;
                    }
                    self.done = true;
                    continue;
                }
                tokio::time::sleep(COPY_POLL).await;
                copy.node.read_copy(&copy.tenant, &copy.id).await.ok()?;
                continue;
            }
            if ended {
                self.done = true;
                continue;
            }
            if let Some(progress) = &mut self.live {
                // Woken by the run's next event, its end, or the poll.
                let _ = tokio::time::timeout(POLL, progress.changed()).await;
            }
        }
    }
}
