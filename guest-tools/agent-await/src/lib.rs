//! `agent.await`: wait for (or look at) the tasks this agent delegated. The
//! tool checks the arguments and returns an `await-tasks` effect; the host
//! waits and answers with the results as a Markdown capsule.

use serde_json::json;
use toolhost_guest::{Arguments, AwaitMode, AwaitRequest, Effect, Output, ToolError};

/// Default and longest wait, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub const MAX_TIMEOUT_MS: u64 = 300_000;

toolhost_guest::builtin_control_tool!(AgentAwait, |args| await_tasks(&args));

pub fn await_tasks(args: &Arguments) -> Result<Output, ToolError> {
    args.only(&["taskIds", "mode", "timeoutMs"])?;
    let task_ids = args.optional_str_list("taskIds")?.unwrap_or_default();
    for (index, id) in task_ids.iter().enumerate() {
        if task_ids[..index].contains(id) {
            return Err(ToolError::invalid_arguments(format!(
                "taskIds lists {id} twice"
            )));
        }
    }
    let (mode, mode_name) =
        match args.optional_choice("mode", &["nextCompleted", "allCompleted", "statusOnly"])? {
            None | Some("nextCompleted") => (AwaitMode::NextCompleted, "nextCompleted"),
            Some("allCompleted") => (AwaitMode::AllCompleted, "allCompleted"),
            Some(_) => (AwaitMode::StatusOnly, "statusOnly"),
        };
    let timeout_ms = args
        .optional_u64("timeoutMs")?
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms > MAX_TIMEOUT_MS {
        return Err(ToolError::invalid_arguments(format!(
            "timeoutMs is at most {MAX_TIMEOUT_MS}, not {timeout_ms}"
        )));
    }
    Ok(Output::text("Await requested.")
        .structured(json!({"taskIds": task_ids, "mode": mode_name, "timeoutMs": timeout_ms}))
        .effect(Effect::AwaitTasks(AwaitRequest {
            task_ids: task_ids.iter().map(|id| (*id).to_owned()).collect(),
            mode,
            timeout_ms: Some(timeout_ms as u32),
        })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::args;

    #[test]
    fn defaults_wait_for_the_next_of_every_task() {
        match await_tasks(&Arguments::default()).expect("await").effect {
            Some(Effect::AwaitTasks(request)) => {
                assert!(request.task_ids.is_empty());
                assert!(matches!(request.mode, AwaitMode::NextCompleted));
                assert_eq!(request.timeout_ms, Some(120_000));
            }
            other => panic!("expected an await effect, got {other:?}"),
        }
        match await_tasks(&args(
            json!({"taskIds": ["task_a"], "mode": "allCompleted", "timeoutMs": 5}),
        ))
        .expect("await")
        .effect
        {
            Some(Effect::AwaitTasks(request)) => {
                assert_eq!(request.task_ids, vec!["task_a".to_owned()]);
                assert!(matches!(request.mode, AwaitMode::AllCompleted));
                assert_eq!(request.timeout_ms, Some(5));
            }
            other => panic!("expected an await effect, got {other:?}"),
        }
    }

    #[test]
    fn bad_arguments_are_recoverable() {
        for value in [
            json!({"taskIds": ["a", "a"]}),
            json!({"taskIds": [""]}),
            json!({"mode": "whenever"}),
            json!({"timeoutMs": 300_001}),
            json!({"timeoutMs": -1}),
            json!({"wait": true}),
        ] {
            let error = await_tasks(&args(value.clone())).expect_err("refused");
            assert_eq!(error.code, "tool.invalid_arguments", "{value}");
        }
    }
}
