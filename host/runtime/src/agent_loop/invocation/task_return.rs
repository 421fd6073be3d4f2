//! A child's report: `task.return`'s artifacts (the result file, the
//! summary Markdown) and the task's end.

use serde_json::{Value, json};
use toolhost_core::{ToolFailure, ToolOutcome, ToolSuccess};
use toolhost_journal::TaskReturnCompleted;
use toolhost_workspace::{PathUse, WorkspacePath, WriteGuard};

use crate::agent_loop::tasks::TaskStatus;
use crate::failure::RunFailure;
use crate::invocation::ExecutedCall;

use super::*;

/// `summaries/<key>-result.md`, what the parent reads of a returned task.
pub(crate) fn task_summary_markdown(
    task_id: &str,
    profile_id: &str,
    status: &str,
    summary: &str,
) -> String {
    format!("# Task result: {task_id} ({profile_id})\n\nStatus: {status}\n\n{summary}\n")
}

impl InvocationLoop<'_> {
    pub(super) fn task_return(
        &mut self,
        executed: &mut ExecutedCall,
        report: Value,
    ) -> Result<Applied, RunFailure> {
        let InvocationRole::Child {
            task_id,
            parent_invocation_id,
            workspace_key,
        } = &self.spec.role
        else {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.task_return_denied",
                format!(
                    "only a delegated task reports with {}",
                    self.alias("task.return")
                ),
            )));
            return Ok(Applied::Nothing);
        };
        if self.returned {
            executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                "agent.task_already_finished",
                "this task already returned its result",
            )));
            return Ok(Applied::Nothing);
        }
        // Every artifact must be a visible workspace path.
        let roots = self.shared.run.workspace().roots();
        for artifact in report["artifacts"].as_array().into_iter().flatten() {
            let path = artifact["path"].as_str().unwrap_or("");
            let checked = WorkspacePath::parse(path, PathUse::File)
                .and_then(|parsed| roots.check_visible(&parsed));
            if let Err(error) = checked {
                executed.replace_outcome(ToolOutcome::Error(ToolFailure::new(
                    error.code(),
                    format!("artifact {path}: {}", error.message()),
                )));
                return Ok(Applied::Nothing);
            }
        }
        let status = report["status"].as_str().unwrap_or("completed").to_owned();
        let summary = report["summary"].as_str().unwrap_or("").to_owned();
        let result_ref = format!("agent-results/{}.json", self.id());
        let summary_ref = format!("summaries/{workspace_key}-result.md");
        let record = json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentTaskResult",
            "status": status,
            "summary": summary,
            "summaryRef": summary_ref,
            "result": report,
            "runtime": {
                "taskId": task_id,
                "runId": self.shared.run.run_id(),
                "parentInvocationId": parent_invocation_id,
                "childInvocationId": self.id(),
                "targetProfileId": self.spec.profile.id,
                "workspaceKey": workspace_key,
            },
        });
        let mut bytes = serde_json::to_vec_pretty(&record)
            .map_err(|error| RunFailure::State(format!("task result: {error}")))?;
        bytes.push(b'\n');
        self.shared
            .run
            .dir()
            .write_create_only_again(&result_ref, &bytes)?;
        let markdown = task_summary_markdown(task_id, &self.spec.profile.id, &status, &summary);
        self.shared
            .run
            .workspace()
            .write_text(&summary_ref, &markdown, WriteGuard::Unchecked)?;
        self.shared.run.record(&TaskReturnCompleted {
            task_id: task_id.clone(),
            parent_invocation_id: parent_invocation_id.clone(),
            child_invocation_id: self.id().to_owned(),
            status: status.clone(),
            result_ref: result_ref.clone(),
            summary_ref: summary_ref.clone(),
        })?;
        self.returned = true;
        let task_status = if status == "failed" {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        self.shared.tasks.finish(
            &self.shared.run,
            task_id,
            task_status,
            Some(report),
            Some(result_ref.clone()),
            None,
        );
        executed.replace_outcome(ToolOutcome::Success(ToolSuccess {
            content: format!("Result returned ({status}). Your task is complete."),
            structured: json!({"taskId": task_id, "status": status, "resultRef": result_ref, "summaryRef": summary_ref}),
            resource_refs: vec![format!("workspace:{summary_ref}")],
            effect: None,
        }));
        Ok(Applied::Ends(InvocationEnd::Returned))
    }
}
