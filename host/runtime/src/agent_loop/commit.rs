//! Publishing a workspace file as the run's message, through the chat host:
//! `chat_commit_requested`, the host's answer, then `chat_commit_completed`
//! or `chat_commit_failed`. A commit is asked once: a resumed run that
//! finds a request without its end asks the host what became of it
//! ([`ChatHost::find_commit`]) and asks again only when nothing is known.

use toolhost_capabilities::{ChatHostError, CommitOutcome, CommitRequest};
use toolhost_core::{CommitMode, ToolFailure};
use toolhost_journal::{ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested, Event};

use super::CommitRecord;
use super::shared::{CommitOrigin, RunShared};
use crate::failure::RunFailure;
use crate::host_commit::{HOST_COMMIT_FAILED, HOST_COMMIT_TIMEOUT};

impl RunShared {
    /// Publish a workspace file as the run's message. `Ok(Err)` is a
    /// refusal the model can fix (missing, empty, not visible, or the chat
    /// app did not take it); `Err` ends the run (the chat host failed).
    pub async fn commit(
        &self,
        path: &str,
        mode: CommitMode,
        origin: CommitOrigin<'_>,
    ) -> Result<Result<CommitRecord, ToolFailure>, RunFailure> {
        // One commit at a time: the ledger's run message must match the chat.
        let _gate = self.commit_gate.lock().await;
        let (commit_id, run_message) = {
            let ledger = self.ledger();
            (
                format!(
                    "{}:commit_{:03}",
                    self.run.run_id(),
                    ledger.commit_requests + 1
                ),
                ledger.run_message,
            )
        };
        let explicit = origin.call_id.is_some();
        let mode_name = match mode {
            CommitMode::Replace => "replace",
            CommitMode::Append => "append",
        };
        let recorded = self
            .run
            .resume_log()
            .and_then(|log| log.recorded_commit(&commit_id));
        // What the record already says of this commit: how it ended, or
        // what the chat host says now of one it was asked for.
        let known = match &recorded {
            None => None,
            Some(recorded) => match (recorded.completed, &recorded.failed) {
                (Some(index), _) => Some(Ok(CommitOutcome::Committed(index))),
                (None, Some((code, message))) => Some(ended_as(code, message)),
                (None, None) => self
                    .parts
                    .chat
                    .find_commit(&commit_id)
                    .map_err(|error| RunFailure::ChatCommit(error.to_string()))?
                    .map(Ok),
            },
        };
        // The text, unless the record settles the commit: the file may have
        // changed since, or be gone.
        let file = match known {
            Some(_) => None,
            None => match origin.workspace.read_text(path) {
                Ok(file) => Some(file),
                Err(error) if error.is_system() => return Err(error.into()),
                // A commit asked for before keeps its id all the same.
                Err(error) => {
                    if recorded.is_some() {
                        self.ledger().commit_requests += 1;
                    }
                    return Ok(Err(ToolFailure::new(error.code(), error.message())));
                }
            },
        };
        if let Some(file) = &file
            && file.text.trim().is_empty()
        {
            if recorded.is_some() {
                self.ledger().commit_requests += 1;
            }
            return Ok(Err(ToolFailure::new(
                "workspace.required_artifact_empty",
                format!(
                    "{} is empty; write your reply into it before committing",
                    file.path
                ),
            )));
        }
        {
            let mut ledger = self.ledger();
            ledger.commit_requests += 1;
            ledger.explicit_requested |= explicit;
        }
        let invocation_id = origin.invocation_id.to_owned();
        let target = self.run.inputs().reply_target();
        let committed_path = file
            .as_ref()
            .map(|file| file.path.clone())
            .or_else(|| recorded.as_ref().map(|recorded| recorded.path.clone()))
            .unwrap_or_else(|| path.to_owned());
        match &file {
            Some(file) => {
                self.run.record(&ChatCommitRequested {
                    commit_id: commit_id.clone(),
                    invocation_id: invocation_id.clone(),
                    call_id: origin.call_id.clone(),
                    path: file.path.clone(),
                    mode: mode_name,
                    reason: origin
                        .reason
                        .clone()
                        .or_else(|| (!explicit).then(|| "auto_publish".to_owned())),
                    chars: file.text.chars().count(),
                    sha256: file.sha256.clone(),
                    // An app that commits itself needs the text; a file
                    // host reads it from the workspace.
                    text: self.parts.chat.app_commits().then(|| file.text.clone()),
                    run_message,
                    generation_type: target.map(|(kind, _)| kind),
                    target_index: target.map(|(_, index)| index),
                })?;
            }
            None => {
                if let Some(log) = self.run.resume_log() {
                    log.take(&invocation_id, ChatCommitRequested::TYPE);
                }
            }
        }
        let outcome = match (known, &file) {
            (Some(outcome), _) => outcome,
            (None, Some(file)) => {
                toolhost_core::crash_point::hit("chat_commit");
                let request = CommitRequest {
                    commit_id: &commit_id,
                    text: &file.text,
                    mode,
                    run_message,
                };
                self.parts.chat.commit(request).await
            }
            (None, None) => {
                return Err(RunFailure::State(format!(
                    "{commit_id} has neither an outcome nor a text"
                )));
            }
        };
        let failed = |code: &str, message: &str| ChatCommitFailed {
            commit_id: commit_id.clone(),
            invocation_id: invocation_id.clone(),
            call_id: origin.call_id.clone(),
            path: committed_path.clone(),
            mode: mode_name,
            code: code.to_owned(),
            message: message.to_owned(),
        };
        match outcome {
            Ok(CommitOutcome::Committed(index)) => {
                toolhost_core::crash_point::hit("chat_committed");
                let mut ledger = self.ledger();
                ledger.run_message = Some(index);
                let record = CommitRecord {
                    path: committed_path.clone(),
                    mode: mode_name,
                    message_index: index,
                    round: origin.round,
                    explicit,
                    invocation_id: invocation_id.clone(),
                };
                ledger.commits.push(record.clone());
                let commit_count = ledger.commits.len();
                drop(ledger);
                self.run.record(&ChatCommitCompleted {
                    commit_id: commit_id.clone(),
                    invocation_id: invocation_id.clone(),
                    call_id: origin.call_id.clone(),
                    path: committed_path.clone(),
                    mode: mode_name,
                    message_index: index,
                    commit_count,
                    explicit,
                })?;
                Ok(Ok(record))
            }
            Ok(CommitOutcome::Refused { code, message }) => {
                self.run.record(&failed(&code, &message))?;
                Ok(Err(ToolFailure::new(code, message)))
            }
            Err(error) => {
                self.run.record(&failed(&error.code, &error.message))?;
                Err(RunFailure::ChatCommit(error.to_string()))
            }
        }
    }
}

/// A commit the journal shows failed, as it failed then: a chat app's
/// refusal goes back to the model again; anything else failed the run.
fn ended_as(code: &str, message: &str) -> Result<CommitOutcome, ChatHostError> {
    if [HOST_COMMIT_FAILED, HOST_COMMIT_TIMEOUT].contains(&code) {
        Ok(CommitOutcome::Refused {
            code: code.to_owned(),
            message: message.to_owned(),
        })
    } else {
        Err(ChatHostError {
            code: code.to_owned(),
            message: message.to_owned(),
        })
    }
}
