//! A commit the chat app makes itself (`commit: "host"`): SillyTavern keeps
//! its chat in the page and saves it whole, so a reply written into the file
//! behind its back would not show, and the page's next save would drop it.
//! Then `chat_commit_requested` carries the text, the run waits, and the app
//! — having saved the reply its own way — answers with where the message is
//! (or why it could not), as a file in the run directory
//! (`host-commits/<commit stem>.json`, written by the HTTP API). A resumed
//! run finds the answer there, or waits again: the app is asked once and
//! never told to apply a commit twice.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_capabilities::{ChatHost, ChatHostError, CommitFuture, CommitOutcome, CommitRequest};
use toolhost_journal::{
    ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested, Event as _, TERMINAL_EVENTS,
};

use crate::answer_file::{self, AnswerFileError};

/// Where answers are, in the run directory.
pub const HOST_COMMITS_DIR: &str = "host-commits";
pub const ANSWER_KIND: &str = "toolhost.hostCommitAnswer";
/// How long a run waits for an answer unless told otherwise.
pub const DEFAULT_HOST_COMMIT_TIMEOUT: Duration = Duration::from_secs(600);
/// A refusal the model reads: the app said it could not commit.
pub const HOST_COMMIT_FAILED: &str = "chat.host_commit_failed";
/// A refusal the model reads: the app did not answer in time.
pub const HOST_COMMIT_TIMEOUT: &str = "chat.host_commit_timeout";
/// Largest answer read.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// Longest failure message kept.
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// What the app did with a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum HostAnswer {
    /// Saved as the chat's message at this index.
    #[serde(rename_all = "camelCase")]
    Committed { message_index: u32 },
    /// Not saved, and why: the model reads it.
    Failed { message: String },
    /// Written by the run itself when it stopped waiting, so an answer
    /// that comes after is refused rather than saved and never read.
    #[serde(rename_all = "camelCase")]
    TimedOut { after_secs: u64 },
}

/// An app's answer, as a file in the run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerFile {
    pub schema_version: u32,
    pub kind: String,
    pub commit_id: String,
    #[serde(flatten)]
    pub answer: HostAnswer,
    pub by: String,
}

impl AnswerFile {
    pub fn new(commit_id: &str, answer: HostAnswer, by: &str) -> Self {
        let answer = match answer {
            HostAnswer::Failed { message } => HostAnswer::Failed {
                message: message.chars().take(MAX_MESSAGE_CHARS).collect(),
            },
            committed => committed,
        };
        Self {
            schema_version: 1,
            kind: ANSWER_KIND.into(),
            commit_id: commit_id.to_owned(),
            answer,
            by: by.chars().take(200).collect(),
        }
    }

    fn outcome(self) -> CommitOutcome {
        match self.answer {
            HostAnswer::Committed { message_index } => CommitOutcome::Committed(message_index),
            HostAnswer::Failed { message } => CommitOutcome::Refused {
                code: HOST_COMMIT_FAILED.into(),
                message: format!("the chat app did not save the reply: {message}"),
            },
            HostAnswer::TimedOut { after_secs } => CommitOutcome::Refused {
                code: HOST_COMMIT_TIMEOUT.into(),
                message: format!(
                    "the chat app did not answer within {after_secs} s; the reply was not saved. Commit again to offer it once more"
                ),
            },
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostCommitError {
    #[error("chat.commit_already_answered: commit `{0}` has an answer already")]
    AlreadyAnswered(String),
    #[error("chat.commit_not_pending: no commit `{0}` of this run waits for an answer")]
    NotPending(String),
    #[error(
        "chat.commit_timed_out: the run stopped waiting for commit `{0}`; do not save it (the model was told it was not saved)"
    )]
    TimedOut(String),
    #[error("chat.commit_answer_invalid: {0}")]
    Invalid(String),
    #[error("chat.io_error: {0}")]
    Io(#[from] std::io::Error),
}

fn commit_error(error: AnswerFileError) -> HostCommitError {
    match error {
        AnswerFileError::Io(error) => HostCommitError::Io(error),
        other => HostCommitError::Invalid(other.to_string()),
    }
}

/// The answer to `commit_id`, if the app gave one.
pub fn read_answer(
    run_root: &Path,
    commit_id: &str,
) -> Result<Option<AnswerFile>, HostCommitError> {
    answer_file::read_answer(run_root, HOST_COMMITS_DIR, commit_id, MAX_ANSWER_BYTES)
        .map_err(commit_error)
}

impl answer_file::Answer for AnswerFile {
    const KIND: &'static str = ANSWER_KIND;

    fn kind(&self) -> &str {
        &self.kind
    }

    fn schema_version(&self) -> u32 {
        self.schema_version
    }

    fn key(&self) -> &str {
        &self.commit_id
    }
}

/// Answer `file.commit_id`, a commit of the run at `run_root` that waits
/// for one ([`pending`]): what the HTTP API does. Once only.
pub fn answer_waiting(run_root: &Path, file: &AnswerFile) -> Result<(), HostCommitError> {
    let waiting = pending(run_root)?
        .iter()
        .any(|commit| commit.request["commitId"] == file.commit_id.as_str());
    if !waiting {
        // Answered and read already, or never asked of the app.
        return Err(already(run_root, &file.commit_id)
            .unwrap_or_else(|| HostCommitError::NotPending(file.commit_id.clone())));
    }
    let mut bytes =
        serde_json::to_vec_pretty(file).map_err(|e| HostCommitError::Invalid(e.to_string()))?;
    bytes.push(b'\n');
    answer_file::write_once(run_root, HOST_COMMITS_DIR, &file.commit_id, &bytes).map_err(|error| {
        match error {
            AnswerFileError::Exists => already(run_root, &file.commit_id)
                .unwrap_or_else(|| HostCommitError::AlreadyAnswered(file.commit_id.clone())),
            other => commit_error(other),
        }
    })
}

/// Why a commit that has an answer takes no other: the app answered it
/// already, or the run stopped waiting.
fn already(run_root: &Path, commit_id: &str) -> Option<HostCommitError> {
    match read_answer(run_root, commit_id) {
        Ok(Some(AnswerFile {
            answer: HostAnswer::TimedOut { .. },
            ..
        })) => Some(HostCommitError::TimedOut(commit_id.to_owned())),
        Ok(Some(_)) => Some(HostCommitError::AlreadyAnswered(commit_id.to_owned())),
        _ => None,
    }
}

/// A commit the app was asked to make and the run has not seen end.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCommit {
    pub seq: u64,
    pub timestamp: String,
    /// The `chat_commit_requested` payload: `commitId`, `text`, `chars`,
    /// `sha256`, `mode`, `runMessage`, `path`, `reason`.
    pub request: Value,
    /// An answer is written and the run has not read it yet.
    pub answered: bool,
}

/// The commits of the run at `run_root` asked of the chat app and not
/// ended in its journal. The journal may be growing: only whole lines are
/// read, and only the commit events are kept in memory.
pub fn pending(run_root: &Path) -> Result<Vec<PendingCommit>, HostCommitError> {
    let journal = toolhost_journal::RunLayout::new(run_root)
        .journal()
        .absolute;
    let mut requested: Vec<Value> = Vec::new();
    let mut ended = false;
    let wanted = |kind: &str| {
        TERMINAL_EVENTS.contains(&kind)
            || [
                ChatCommitRequested::TYPE,
                ChatCommitCompleted::TYPE,
                ChatCommitFailed::TYPE,
            ]
            .contains(&kind)
    };
    toolhost_journal::tail::each_event(&journal, wanted, |kind, event| {
        // A run that ended waits for nothing.
        if TERMINAL_EVENTS.contains(&kind) {
            ended = true;
            return ControlFlow::Break(());
        }
        if kind == ChatCommitRequested::TYPE {
            // Only a commit the app makes itself carries its text.
            if event["payload"].get("text").is_some() {
                requested.push(event);
            }
        } else {
            let id = &event["payload"]["commitId"];
            requested.retain(|asked| asked["payload"]["commitId"] != *id);
        }
        ControlFlow::Continue(())
    })?;
    if ended {
        return Ok(Vec::new());
    }
    Ok(requested
        .into_iter()
        .map(|event| {
            let commit_id = event["payload"]["commitId"].as_str().unwrap_or("");
            PendingCommit {
                seq: event["seq"].as_u64().unwrap_or(0),
                timestamp: event["timestamp"].as_str().unwrap_or("").to_owned(),
                answered: matches!(read_answer(run_root, commit_id), Ok(Some(_))),
                request: event["payload"].clone(),
            }
        })
        .collect())
}

/// The chat host of a run whose app commits itself: waits for the app's
/// answer file, looking every `poll`; past `timeout` the model reads
/// `chat.host_commit_timeout` and may commit again.
#[derive(Debug, Clone)]
pub struct HostCommits {
    run_root: PathBuf,
    pub poll: Duration,
    pub timeout: Duration,
}

impl HostCommits {
    pub fn new(run_root: &Path, timeout: Duration) -> Self {
        Self {
            run_root: run_root.to_owned(),
            poll: Duration::from_millis(100),
            timeout,
        }
    }
}

impl ChatHost for HostCommits {
    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> CommitFuture<'a> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            loop {
                match read_answer(&self.run_root, request.commit_id) {
                    Ok(Some(answer)) => return Ok(answer.outcome()),
                    Ok(None) => {}
                    Err(error) => tracing::warn!(
                        commit = %request.commit_id,
                        "a host commit answer does not read: {error}"
                    ),
                }
                if Instant::now() >= deadline {
                    // One file decides: the run's "timed out", or the answer
                    // the app wrote just before it.
                    let timed_out = AnswerFile::new(
                        request.commit_id,
                        HostAnswer::TimedOut {
                            after_secs: self.timeout.as_secs(),
                        },
                        "the run",
                    );
                    let mut bytes = serde_json::to_vec_pretty(&timed_out).unwrap_or_default();
                    bytes.push(b'\n');
                    match answer_file::write_once(
                        &self.run_root,
                        HOST_COMMITS_DIR,
                        request.commit_id,
                        &bytes,
                    ) {
                        Ok(()) => return Ok(timed_out.outcome()),
                        // The app answered meanwhile: read it next time round.
                        Err(AnswerFileError::Exists) => continue,
                        Err(error) => {
                            return Err(ChatHostError {
                                code: "chat.io_error".into(),
                                message: format!("recording the timeout: {error}"),
                            });
                        }
                    }
                }
                tokio::time::sleep(self.poll).await;
            }
        })
    }

    fn find_commit(&self, commit_id: &str) -> Result<Option<CommitOutcome>, ChatHostError> {
        read_answer(&self.run_root, commit_id)
            .map(|answer| answer.map(AnswerFile::outcome))
            .map_err(|error| ChatHostError {
                code: "chat.commit_answer_invalid".into(),
                message: error.to_string(),
            })
    }

    fn app_commits(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        "the chat app (host commit)".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use toolhost_core::CommitMode;

    use super::*;

    fn request(commit_id: &str) -> CommitRequest<'_> {
        CommitRequest {
            commit_id,
            text: "reply",
            mode: CommitMode::Replace,
            run_message: None,
        }
    }

    fn host(dir: &Path) -> HostCommits {
        HostCommits {
            poll: Duration::from_millis(10),
            ..HostCommits::new(dir, Duration::from_millis(100))
        }
    }

    #[tokio::test]
    async fn an_answer_is_read_and_a_late_one_finds_the_run_stopped_waiting() {
        let dir = tempfile::tempdir().expect("tempdir");
        let host = host(dir.path());
        let answer = AnswerFile::new(
            "r:commit_001",
            HostAnswer::Committed { message_index: 7 },
            "app",
        );
        let bytes = serde_json::to_vec(&answer).expect("json");
        answer_file::write_once(dir.path(), HOST_COMMITS_DIR, "r:commit_001", &bytes)
            .expect("write");
        assert_eq!(
            host.commit(request("r:commit_001"))
                .await
                .expect("answered"),
            CommitOutcome::Committed(7)
        );
        // No answer in time: the run writes its own, so a late one cannot land.
        let outcome = host.commit(request("r:commit_002")).await.expect("refused");
        assert!(
            matches!(&outcome, CommitOutcome::Refused { code, .. } if code == HOST_COMMIT_TIMEOUT),
            "{outcome:?}"
        );
        let late = AnswerFile::new(
            "r:commit_002",
            HostAnswer::Committed { message_index: 8 },
            "app",
        );
        let bytes = serde_json::to_vec(&late).expect("json");
        assert!(matches!(
            answer_file::write_once(dir.path(), HOST_COMMITS_DIR, "r:commit_002", &bytes),
            Err(AnswerFileError::Exists)
        ));
        assert!(matches!(
            already(dir.path(), "r:commit_002"),
            Some(HostCommitError::TimedOut(_))
        ));
        assert_eq!(
            host.find_commit("r:commit_002").expect("read"),
            Some(outcome),
            "a resumed run reads the same"
        );
    }
}
