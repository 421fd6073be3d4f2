//! What every invocation of a run shares: the run, its tools and models,
//! the chat host, the commit ledger and the task board.

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use toolhost_core::{Classified, CommitMode, ToolFailure};
use toolhost_journal::{
    ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested, Event, PersistentChangesCommitted,
    PreservedCommit,
};
use toolhost_workspace::{PersistBase, Workspace, persist};

use super::tasks::TaskBoard;
use super::{CommitRecord, LoopConfig, LoopParts, LoopSummary, RunStatus};
use crate::failure::RunFailure;
use crate::loop_record::LoopRecord;
use crate::run::Run;

pub(super) struct RunShared {
    pub run: Arc<Run>,
    pub parts: LoopParts,
    pub config: LoopConfig,
    pub ledger: Mutex<Ledger>,
    pub tasks: TaskBoard,
    /// `input/loop.json`: the run seed every id and call entropy derive from.
    pub record: LoopRecord,
    persist_base: Mutex<Option<PersistBase>>,
}

/// Run-wide counts: commits hold across handoffs (a predecessor's commit
/// lets its successor finish).
#[derive(Debug, Default)]
pub(super) struct Ledger {
    pub commits: Vec<CommitRecord>,
    /// The chat message this run owns, once a commit created it.
    pub run_message: Option<u32>,
    pub auto_published: bool,
    pub tool_calls: u32,
    pub rounds: u32,
    pub handoffs: u32,
    pub agents: Vec<String>,
}

impl Ledger {
    pub fn explicit_commits(&self) -> usize {
        self.commits.iter().filter(|commit| commit.explicit).count()
    }
}

/// Where a commit comes from.
pub(super) struct CommitOrigin<'a> {
    pub invocation_id: &'a str,
    /// The committing invocation's view of the workspace: a commit reads
    /// only through the roots its profile shows (a handoff target whose
    /// profile hides a root cannot publish a file under it).
    pub workspace: &'a Workspace,
    /// The `workspace.commit` call, or `None` for an auto-publish.
    pub call_id: Option<String>,
    pub reason: Option<String>,
    pub round: u32,
}

impl RunShared {
    pub fn new(run: Arc<Run>, parts: LoopParts, config: LoopConfig, record: LoopRecord) -> Self {
        Self {
            run,
            parts,
            config,
            record,
            ledger: Mutex::new(Ledger::default()),
            tasks: TaskBoard::default(),
            persist_base: Mutex::new(None),
        }
    }

    pub fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Publish a workspace file as the run's message. `Ok(Err)` is a
    /// refusal the model can fix (missing, empty, not visible); `Err` ends
    /// the run (the chat host failed).
    pub fn commit(
        &self,
        path: &str,
        mode: CommitMode,
        origin: CommitOrigin<'_>,
    ) -> Result<Result<CommitRecord, ToolFailure>, RunFailure> {
        // One commit at a time: the ledger's run message must match the chat.
        let mut ledger = self.ledger();
        let commit_id = format!(
            "{}:commit_{:03}",
            self.run.run_id(),
            ledger.commits.len() + 1
        );
        let explicit = origin.call_id.is_some();
        let mode_name = match mode {
            CommitMode::Replace => "replace",
            CommitMode::Append => "append",
        };
        let recorded = self
            .run
            .resume_log()
            .and_then(|log| log.recorded_commit(&commit_id));
        let file = match &recorded {
            // Committed before the interruption: the file may have changed
            // since, and its text is not needed.
            Some(recorded) if recorded.completed.is_some() => None,
            _ => match origin.workspace.read_text(path) {
                Ok(file) => Some(file),
                Err(error) if error.is_system() => return Err(error.into()),
                Err(error) => {
                    return Ok(Err(ToolFailure::new(error.code(), error.message())));
                }
            },
        };
        if let Some(file) = &file
            && file.text.trim().is_empty()
        {
            return Ok(Err(ToolFailure::new(
                "workspace.required_artifact_empty",
                format!(
                    "{} is empty; write your reply into it before committing",
                    file.path
                ),
            )));
        }
        let invocation_id = origin.invocation_id.to_owned();
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
                })?;
            }
            None => {
                if let Some(log) = self.run.resume_log() {
                    log.take(&invocation_id, ChatCommitRequested::TYPE);
                }
            }
        }
        let landed = match (&recorded, &file) {
            (Some(recorded), _) if recorded.completed.is_some() => recorded.completed,
            // Requested before the interruption, never seen completing: the
            // chat says whether it landed.
            (Some(_), _) => self
                .parts
                .chat
                .find_commit(&commit_id)
                .map_err(|error| RunFailure::ChatCommit(error.to_string()))?,
            (None, _) => None,
        };
        let committed = match (landed, &file) {
            (Some(index), _) => Ok(index),
            (None, Some(file)) => {
                toolhost_core::crash_point::hit("chat_commit");
                self.parts
                    .chat
                    .commit(&file.text, mode, ledger.run_message, &commit_id)
            }
            (None, None) => {
                return Err(RunFailure::State(format!(
                    "{commit_id} was recorded as completed without a message index"
                )));
            }
        };
        match committed {
            Ok(index) => {
                toolhost_core::crash_point::hit("chat_committed");
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
                self.run.record(&ChatCommitCompleted {
                    commit_id,
                    invocation_id,
                    call_id: origin.call_id,
                    path: committed_path,
                    mode: mode_name,
                    message_index: index,
                    commit_count: ledger.commits.len(),
                    explicit,
                })?;
                Ok(Ok(record))
            }
            Err(error) => {
                self.run.record(&ChatCommitFailed {
                    commit_id,
                    invocation_id,
                    call_id: origin.call_id,
                    path: committed_path,
                    mode: mode_name,
                    code: error.code.clone(),
                    message: error.message.clone(),
                })?;
                Err(RunFailure::ChatCommit(error.to_string()))
            }
        }
    }

    pub fn project_persist(&self) -> Result<(), RunFailure> {
        if let Some(dir) = &self.config.persist_dir {
            // A resumed run was projected when it started, or was cut off
            // while projecting (its loop starts after).
            let base = if self.run.resume_log().is_some() {
                persist::project_again(dir, self.run.workspace())?
            } else {
                persist::project(dir, self.run.workspace())?
            };
            *self
                .persist_base
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(base);
        }
        Ok(())
    }

    /// Copy changed `persist/` files back to the chat (a finished run only).
    pub fn promote_persist(&self) -> Result<(), RunFailure> {
        let base = self
            .persist_base
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        let (Some(dir), Some(base)) = (&self.config.persist_dir, base) else {
            return Ok(());
        };
        let changes = persist::promote(self.run.workspace(), dir, &base)?;
        self.run.record(&PersistentChangesCommitted {
            change_count: changes.changes.len(),
            changes: serde_json::to_value(&changes.changes).unwrap_or(Value::Null),
        })?;
        Ok(())
    }

    /// Cancel what still runs, journal the run's end and sum it up.
    pub fn end(&self, ended: Result<(), RunFailure>) -> LoopSummary {
        self.tasks.cancel(&self.run, None);
        // Cancelled now or, racing the same token, by themselves just before.
        let cancelled_tasks: Vec<String> = self
            .tasks
            .summaries()
            .into_iter()
            .filter(|task| task.status == "cancelled")
            .map(|task| task.task_id)
            .collect();
        let ledger = self.ledger();
        let mut summary = LoopSummary {
            status: RunStatus::Completed,
            code: None,
            message: None,
            user_retryable: false,
            rounds: ledger.rounds,
            tool_calls: ledger.tool_calls,
            commits: ledger.commits.clone(),
            agents: ledger.agents.clone(),
            tasks: self.tasks.summaries(),
            run_dir: self.run.root().to_owned(),
        };
        let journalled = match ended {
            Ok(()) => self.run.complete(),
            Err(RunFailure::Cancelled) => {
                summary.status = RunStatus::Cancelled;
                summary.code = Some("agent.cancelled".into());
                summary.message = Some(RunFailure::Cancelled.to_string());
                summary.user_retryable = true;
                self.run.cancelled(ledger.commits.len(), cancelled_tasks)
            }
            Err(failure) => {
                summary.code = Some(failure.code().to_owned());
                summary.message = Some(failure.to_string());
                if ledger.commits.is_empty() {
                    summary.status = RunStatus::Failed;
                    summary.user_retryable = failure.user_retryable();
                    self.run.fail(&failure)
                } else {
                    summary.status = RunStatus::PartialSuccess;
                    let preserved = ledger
                        .commits
                        .iter()
                        .map(|commit| PreservedCommit {
                            path: commit.path.clone(),
                            mode: commit.mode,
                            message_index: commit.message_index,
                            round: commit.round,
                        })
                        .collect();
                    self.run.partial_success(&failure, preserved)
                }
            }
        };
        if let Err(error) = journalled {
            tracing::error!(%error, "could not journal the end of the run");
            summary.status = RunStatus::Failed;
            summary.code.get_or_insert_with(|| error.code().to_owned());
            summary.message.get_or_insert_with(|| error.to_string());
        }
        summary
    }
}
