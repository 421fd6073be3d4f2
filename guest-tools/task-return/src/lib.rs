//! `task.return`: a delegated agent's report to the agent that delegated
//! it. Given by the runtime to return-mode children only. The tool checks
//! the report and returns a `task-return` effect; the host checks the
//! artifact paths, writes `agent-results/<invocation>.json` and
//! `summaries/<workspace-key>-result.md`, and ends the child.

use serde_json::{Value, json};
use toolhost_guest::{Arguments, Effect, Output, TaskReturnRequest, ToolError};

toolhost_guest::builtin_control_tool!(TaskReturn, |args| task_return(&args));

pub fn task_return(args: &Arguments) -> Result<Output, ToolError> {
    args.only(&[
        "summary",
        "status",
        "confidence",
        "artifacts",
        "findings",
        "warnings",
        "suggestedNextActions",
        "questionsForCaller",
    ])?;
    let summary = args.required_str("summary")?;
    let status = args
        .optional_choice("status", &["completed", "failed"])?
        .unwrap_or("completed");
    let confidence = args.optional_choice("confidence", &["low", "medium", "high"])?;
    let mut report = json!({"summary": summary, "status": status});
    if let Some(confidence) = confidence {
        report["confidence"] = confidence.into();
    }
    if let Some(items) = args.get("artifacts") {
        report["artifacts"] = artifacts(items)?;
    }
    if let Some(items) = args.get("findings") {
        match items {
            Value::Array(list) if list.iter().all(Value::is_object) => {
                report["findings"] = items.clone();
            }
            _ => {
                return Err(ToolError::invalid_arguments(
                    "findings must be an array of objects",
                ));
            }
        }
    }
    for key in ["warnings", "suggestedNextActions", "questionsForCaller"] {
        if let Some(list) = args.optional_str_list(key)? {
            report[key] = json!(list);
        }
    }
    Ok(Output::text("Task return requested.")
        .structured(report.clone())
        .effect(Effect::TaskReturn(TaskReturnRequest {
            report: report.to_string(),
        })))
}

/// `[{path, kind, role}]`, all three non-blank strings.
fn artifacts(items: &Value) -> Result<Value, ToolError> {
    let Value::Array(list) = items else {
        return Err(ToolError::invalid_arguments("artifacts must be an array"));
    };
    let mut normalized = Vec::with_capacity(list.len());
    for (index, item) in list.iter().enumerate() {
        let artifact = Arguments::from_value(item.clone()).map_err(|_| {
            ToolError::invalid_arguments(format!("artifacts[{index}] must be an object"))
        })?;
        let field = |key: &str| {
            artifact.required_str(key).map_err(|error| {
                ToolError::invalid_arguments(format!("artifacts[{index}].{}", error.message))
            })
        };
        normalized
            .push(json!({"path": field("path")?, "kind": field("kind")?, "role": field("role")?}));
    }
    Ok(Value::Array(normalized))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::args;

    #[test]
    fn a_report_is_normalized_into_the_effect() {
        let output = task_return(&args(json!({
            "summary": " The lantern came from the Drowned Library. ",
            "confidence": "high",
            "artifacts": [{"path": "summaries/lantern.md", "kind": "markdown", "role": "notes"}],
            "warnings": ["one source only"]
        })))
        .expect("return");
        match output.effect {
            Some(Effect::TaskReturn(request)) => {
                let report: Value = serde_json::from_str(&request.report).expect("json");
                assert_eq!(
                    report["summary"],
                    "The lantern came from the Drowned Library."
                );
                assert_eq!(report["status"], "completed");
                assert_eq!(report["confidence"], "high");
                assert_eq!(report["artifacts"][0]["path"], "summaries/lantern.md");
                assert_eq!(report["warnings"][0], "one source only");
            }
            other => panic!("expected a task-return effect, got {other:?}"),
        }
    }

    #[test]
    fn a_bad_report_is_recoverable() {
        for (value, expected) in [
            (json!({}), "summary is required"),
            (
                json!({"summary": "x", "status": "done"}),
                "status must be one of",
            ),
            (
                json!({"summary": "x", "artifacts": [{"path": "a"}]}),
                "artifacts[0].kind is required",
            ),
            (
                json!({"summary": "x", "artifacts": "a"}),
                "artifacts must be an array",
            ),
            (
                json!({"summary": "x", "findings": ["f"]}),
                "findings must be an array of objects",
            ),
            (
                json!({"summary": "x", "extra": 1}),
                "extra is not supported",
            ),
        ] {
            let error = task_return(&args(value.clone())).expect_err("refused");
            assert_eq!(error.code, "tool.invalid_arguments");
            assert!(
                error.message.starts_with(expected),
                "{value}: {}",
                error.message
            );
        }
    }
}
