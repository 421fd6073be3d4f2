//! `agent.delegate`: hand a task to another agent, which works on it in the
//! background in this run and reports back. The tool checks the brief and
//! returns a `delegate` effect; the host checks the delegation policy and
//! budgets, starts the child and answers with its task id.

use serde_json::json;
use toolhost_guest::control;
use toolhost_guest::{Arguments, DelegateRequest, Effect, Output, ToolError};

toolhost_guest::builtin_control_tool!(AgentDelegate, |args| delegate(&args));

pub fn delegate(args: &Arguments) -> Result<Output, ToolError> {
    args.only(&["agentId", "task"])?;
    let agent_id = args.required_str("agentId")?;
    let task = control::brief(args, "task", &["title", "context", "expectedOutput"], &[])?;
    let brief = task.to_value();
    Ok(Output::text(format!("Delegation to {agent_id} requested."))
        .structured(json!({"agentId": agent_id, "task": brief}))
        .effect(Effect::Delegate(DelegateRequest {
            agent_id: agent_id.to_owned(),
            task: brief.to_string(),
        })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::args;

    #[test]
    fn a_brief_becomes_a_delegate_effect_with_its_extra_keys() {
        let output = delegate(&args(json!({
            "agentId": " researcher ",
            "task": {"objective": "Find the lantern's origin", "deadline": "tonight"}
        })))
        .expect("delegate");
        match output.effect {
            Some(Effect::Delegate(request)) => {
                assert_eq!(request.agent_id, "researcher");
                let task: serde_json::Value = serde_json::from_str(&request.task).expect("json");
                assert_eq!(task["objective"], "Find the lantern's origin");
                assert_eq!(task["deadline"], "tonight");
            }
            other => panic!("expected a delegate effect, got {other:?}"),
        }
    }

    #[test]
    fn a_bad_brief_is_a_recoverable_error_naming_the_field() {
        let cases = [
            (json!({"task": {"objective": "x"}}), "agentId is required"),
            (json!({"agentId": "a"}), "task is required"),
            (
                json!({"agentId": "a", "task": "do it"}),
                "task must be an object",
            ),
            (
                json!({"agentId": "a", "task": {}}),
                "task.objective is required",
            ),
            (
                json!({"agentId": "a", "task": {"objective": " "}}),
                "task.objective must not be empty",
            ),
            (
                json!({"agentId": "a", "task": {"objective": "x", "title": 3}}),
                "task.title must be a string",
            ),
            (
                json!({"agentId": "a", "task": {"objective": "x".repeat(8_001)}}),
                "task.objective is 8001 bytes",
            ),
            (
                json!({"agentId": "a", "task": {"objective": "x"}, "budget": 3}),
                "budget is not supported",
            ),
        ];
        for (value, expected) in cases {
            let error = delegate(&args(value.clone())).expect_err("refused");
            assert_eq!(error.code, "tool.invalid_arguments", "{value}");
            assert!(
                error.message.starts_with(expected),
                "{value}: {}",
                error.message
            );
        }
    }
}
