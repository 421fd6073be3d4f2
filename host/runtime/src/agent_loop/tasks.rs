//! The task board: delegated tasks of a run, their status and results, and
//! how a parent waits for them (`agent.await`) or is told of them (results
//! put before its next request).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use toolhost_core::{AwaitMode, ToolFailure};
use toolhost_journal::AgentTaskEnded;

use super::TaskSummary;
use crate::run::Run;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TaskStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    pub fn ended(self) -> bool {
        self != TaskStatus::Running
    }
}

/// A task as a parent sees it.
#[derive(Debug, Clone)]
pub(super) struct TaskView {
    pub task_id: String,
    pub agent_id: String,
    pub child_invocation_id: String,
    pub workspace_key: String,
    pub status: TaskStatus,
    /// The child's `task.return` report.
    pub report: Option<Value>,
    pub result_ref: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug)]
struct TaskEntry {
    view: TaskView,
    parent: String,
    delivered: bool,
    abort: Option<tokio::task::AbortHandle>,
}

pub(super) struct TaskBoard {
    entries: Mutex<Vec<TaskEntry>>,
    /// Bumped on every status change; waiters watch it.
    changed: watch::Sender<u64>,
}

impl Default for TaskBoard {
    fn default() -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
            changed: watch::channel(0).0,
        }
    }
}

impl TaskBoard {
    fn entries(&self) -> MutexGuard<'_, Vec<TaskEntry>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|version| *version += 1);
    }

    /// A new task's workspace key: the agent's id, then `<id>-002`, …
    pub fn workspace_key(&self, agent_id: &str) -> String {
        let earlier = self
            .entries()
            .iter()
            .filter(|entry| entry.view.agent_id == agent_id)
            .count();
        if earlier == 0 {
            agent_id.to_owned()
        } else {
            format!("{agent_id}-{:03}", earlier + 1)
        }
    }

    /// Tasks `parent` started for `agent_id`: (all, still running).
    pub fn counts(&self, parent: &str, agent_id: &str) -> (u32, u32) {
        let entries = self.entries();
        let mine = entries
            .iter()
            .filter(|entry| entry.parent == parent && entry.view.agent_id == agent_id);
        let (mut all, mut running) = (0, 0);
        for entry in mine {
            all += 1;
            if !entry.view.status.ended() {
                running += 1;
            }
        }
        (all, running)
    }

    pub fn start(&self, parent: &str, view: TaskView) {
        self.entries().push(TaskEntry {
            view,
            parent: parent.to_owned(),
            delivered: false,
            abort: None,
        });
        self.bump();
    }

    pub fn set_abort(&self, task_id: &str, abort: tokio::task::AbortHandle) {
        if let Some(entry) = self
            .entries()
            .iter_mut()
            .find(|entry| entry.view.task_id == task_id)
        {
            entry.abort = Some(abort);
        }
    }

    /// The task ended (first word wins: a cancelled task stays cancelled).
    /// Journals `agent_task_ended`.
    pub fn finish(
        &self,
        run: &Run,
        task_id: &str,
        status: TaskStatus,
        report: Option<Value>,
        result_ref: Option<String>,
        error: Option<String>,
    ) {
        let ended = {
            let mut entries = self.entries();
            let Some(entry) = entries
                .iter_mut()
                .find(|entry| entry.view.task_id == task_id && !entry.view.status.ended())
            else {
                return;
            };
            entry.view.status = status;
            entry.view.report = report;
            entry.view.result_ref = result_ref;
            entry.view.error = error;
            entry.abort = None;
            AgentTaskEnded {
                task_id: task_id.to_owned(),
                parent_invocation_id: entry.parent.clone(),
                child_invocation_id: entry.view.child_invocation_id.clone(),
                agent_id: entry.view.agent_id.clone(),
                status: status.as_str(),
                error: entry.view.error.clone(),
            }
        };
        if let Err(error) = run.record(&ended) {
            tracing::error!(%error, task_id, "could not journal a task's end");
        }
        self.bump();
    }

    /// Tasks of `parent` still running.
    pub fn running_of(&self, parent: &str) -> Vec<String> {
        self.entries()
            .iter()
            .filter(|entry| entry.parent == parent && !entry.view.status.ended())
            .map(|entry| entry.view.task_id.clone())
            .collect()
    }

    /// Stop every running task without a word in the journal: the run is
    /// being interrupted (its loop dropped), not ended, and resumes later.
    pub fn abort_all(&self) {
        for entry in self.entries().iter() {
            if let Some(abort) = &entry.abort {
                abort.abort();
            }
        }
    }

    /// Stop `parent`'s running tasks (all of them with `None`).
    pub fn cancel(&self, run: &Run, parent: Option<&str>) -> Vec<String> {
        let cancelled: Vec<String> = {
            let entries = self.entries();
            entries
                .iter()
                .filter(|entry| parent.is_none_or(|parent| entry.parent == parent))
                .filter(|entry| !entry.view.status.ended())
                .map(|entry| {
                    if let Some(abort) = &entry.abort {
                        abort.abort();
                    }
                    entry.view.task_id.clone()
                })
                .collect()
        };
        for task_id in &cancelled {
            self.finish(
                run,
                task_id,
                TaskStatus::Cancelled,
                None,
                None,
                Some("cancelled: the delegating agent finished first".into()),
            );
        }
        cancelled
    }

    /// `parent`'s ended tasks it has not been told about; now it has.
    pub fn take_undelivered(&self, parent: &str) -> Vec<TaskView> {
        let mut entries = self.entries();
        entries
            .iter_mut()
            .filter(|entry| entry.parent == parent && entry.view.status.ended() && !entry.delivered)
            .map(|entry| {
                entry.delivered = true;
                entry.view.clone()
            })
            .collect()
    }

    /// Check `ids` (empty = all of `parent`'s tasks) belong to `parent`.
    pub fn select(&self, parent: &str, ids: &[String]) -> Result<Vec<String>, ToolFailure> {
        let entries = self.entries();
        let mine: Vec<&TaskEntry> = entries
            .iter()
            .filter(|entry| entry.parent == parent)
            .collect();
        if mine.is_empty() {
            return Err(ToolFailure::new(
                "agent.no_child_tasks",
                format!(
                    "you have not delegated any task; {} starts one",
                    toolhost_core::alias::builtin_alias("agent.delegate")
                ),
            ));
        }
        if ids.is_empty() {
            return Ok(mine
                .iter()
                .map(|entry| entry.view.task_id.clone())
                .collect());
        }
        for id in ids {
            if !mine.iter().any(|entry| entry.view.task_id == *id) {
                return Err(ToolFailure::new(
                    "agent.await_task_not_found",
                    format!(
                        "{id} is not one of your tasks; yours: {}",
                        mine.iter()
                            .map(|entry| entry.view.task_id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        Ok(ids.to_vec())
    }

    /// Wait until every task of `ids` has ended, at most `timeout`, without
    /// marking any delivered (a resumed run lining its replay up with the
    /// record).
    pub async fn wait_ended(&self, ids: &[String], timeout: Duration) {
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let all_ended = self
                .entries()
                .iter()
                .filter(|entry| ids.contains(&entry.view.task_id))
                .all(|entry| entry.view.status.ended());
            if all_ended {
                return;
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                () = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    /// Wait as `mode` says for `ids` (all `parent`'s), at most `timeout`.
    /// Returns the tasks' views (ended ones marked delivered) and whether
    /// the wait timed out.
    pub async fn wait(
        &self,
        ids: &[String],
        mode: AwaitMode,
        timeout: Duration,
    ) -> (Vec<TaskView>, bool) {
        let mut changes = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        // Tasks already ended and told count for `nextCompleted` only when
        // nothing else is pending.
        let mut timed_out = false;
        loop {
            let done = {
                let entries = self.entries();
                let selected: Vec<&TaskEntry> = entries
                    .iter()
                    .filter(|entry| ids.contains(&entry.view.task_id))
                    .collect();
                match mode {
                    AwaitMode::StatusOnly => true,
                    AwaitMode::AllCompleted => selected.iter().all(|e| e.view.status.ended()),
                    AwaitMode::NextCompleted => {
                        selected
                            .iter()
                            .any(|e| e.view.status.ended() && !e.delivered)
                            || selected.iter().all(|e| e.view.status.ended())
                    }
                }
            };
            if done || timed_out {
                break;
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
                () = tokio::time::sleep_until(deadline) => timed_out = true,
            }
        }
        let mut entries = self.entries();
        let views = entries
            .iter_mut()
            .filter(|entry| ids.contains(&entry.view.task_id))
            .map(|entry| {
                if entry.view.status.ended() {
                    entry.delivered = true;
                }
                entry.view.clone()
            })
            .collect();
        (views, timed_out)
    }

    pub fn summaries(&self) -> Vec<TaskSummary> {
        self.entries()
            .iter()
            .map(|entry| TaskSummary {
                task_id: entry.view.task_id.clone(),
                agent_id: entry.view.agent_id.clone(),
                child_invocation_id: entry.view.child_invocation_id.clone(),
                status: entry.view.status.as_str(),
            })
            .collect()
    }
}

/// Tasks as the model reads them: one section per task.
pub(super) fn render_capsule(heading: &str, views: &[TaskView]) -> String {
    let mut text = format!("## {heading}\n");
    for view in views {
        text.push_str(&format!(
            "\n### {} ({}): {}\n",
            view.task_id,
            view.agent_id,
            view.status.as_str()
        ));
        if let Some(error) = &view.error {
            text.push_str(&format!("Error: {error}\n"));
        }
        let Some(report) = &view.report else {
            continue;
        };
        if let Some(confidence) = report["confidence"].as_str() {
            text.push_str(&format!("Confidence: {confidence}\n"));
        }
        if let Some(summary) = report["summary"].as_str() {
            text.push('\n');
            text.push_str(summary);
            text.push('\n');
        }
        let lists = [
            ("warnings", "Warnings"),
            ("suggestedNextActions", "Suggested next actions"),
            ("questionsForCaller", "Questions for you"),
        ];
        if let Some(artifacts) = report["artifacts"].as_array() {
            text.push_str("\nArtifacts:\n");
            for artifact in artifacts {
                text.push_str(&format!(
                    "- {} ({}, {})\n",
                    artifact["path"].as_str().unwrap_or(""),
                    artifact["kind"].as_str().unwrap_or(""),
                    artifact["role"].as_str().unwrap_or("")
                ));
            }
        }
        for (key, title) in lists {
            if let Some(items) = report[key].as_array() {
                text.push_str(&format!("\n{title}:\n"));
                for item in items {
                    text.push_str(&format!("- {}\n", item.as_str().unwrap_or("")));
                }
            }
        }
        if view.result_ref.is_some() {
            text.push_str(&format!(
                "\nSummary file: summaries/{}-result.md\n",
                view.workspace_key
            ));
        }
    }
    text
}

/// Tasks as structured output.
pub(super) fn tasks_json(views: &[TaskView]) -> Value {
    Value::Array(
        views
            .iter()
            .map(|view| {
                let mut task = json!({
                    "taskId": view.task_id,
                    "agentId": view.agent_id,
                    "status": view.status.as_str(),
                    "workspaceKey": view.workspace_key,
                });
                if let Some(error) = &view.error {
                    task["error"] = error.clone().into();
                }
                if let Some(report) = &view.report {
                    for key in [
                        "summary",
                        "confidence",
                        "artifacts",
                        "findings",
                        "warnings",
                        "suggestedNextActions",
                        "questionsForCaller",
                    ] {
                        if !report[key].is_null() {
                            task[key] = report[key].clone();
                        }
                    }
                }
                task
            })
            .collect(),
    )
}
