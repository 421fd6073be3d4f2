//! What every invocation of a run shares: the run, its tools and models,
//! the chat host, the commit ledger and the task board.

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use toolhost_core::Classified;
use toolhost_journal::{PersistentChangesCommitted, PreservedCommit};
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
    /// One commit at a time: a commit awaits its chat host, and the run's
    /// message must be the one the ledger names when the next one starts.
    pub commit_gate: tokio::sync::Mutex<()>,
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
    /// Commits asked of the chat host, refused ones too: each gets its own
    /// id (`<runId>:commit_NNN`).
    pub commit_requests: u32,
    /// A `workspace.commit` reached the chat host, whatever came of it: the
    /// model commits itself from then on, so nothing is auto-published (a
    /// reply the chat app refused is not offered again behind its back).
    pub explicit_requested: bool,
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
            commit_gate: tokio::sync::Mutex::new(()),
            persist_base: Mutex::new(None),
        }
    }

    pub fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
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
