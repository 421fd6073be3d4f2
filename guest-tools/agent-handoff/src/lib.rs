//! `agent.handoff`: pass the rest of this run to another agent. The tool
//! checks the brief and returns a `handoff` effect; the host checks the
//! handoff policy, depth and pending tasks, and the target continues the
//! same run with its own tools while this agent's part ends.

use serde_json::json;
use toolhost_guest::control;
use toolhost_guest::{Arguments, Effect, HandoffRequest, Output, ToolError};

toolhost_guest::builtin_control_tool!(AgentHandoff, |args| handoff(&args));

pub fn handoff(args: &Arguments) -> Result<Output, ToolError> {
    args.only(&["agentId", "handoff", "pendingTaskPolicy"])?;
    let agent_id = args.required_str("agentId")?;
    args.optional_choice("pendingTaskPolicy", &["denyIfPending"])?;
    let brief = control::brief(
        args,
        "handoff",
        &["title", "reason", "contextSummary"],
        &["workspaceRefs", "mustPreserve", "completionCriteria"],
    )?;
    let brief = brief.to_value();
    Ok(Output::text(format!("Handoff to {agent_id} requested."))
        .structured(json!({"agentId": agent_id, "handoff": brief}))
        .effect(Effect::Handoff(HandoffRequest {
            agent_id: agent_id.to_owned(),
            brief: brief.to_string(),
        })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::args;

    #[test]
    fn a_brief_becomes_a_handoff_effect() {
        let output = handoff(&args(json!({
            "agentId": "editor",
            "handoff": {"objective": "Polish the reply", "mustPreserve": ["the lantern"]},
            "pendingTaskPolicy": "denyIfPending"
        })))
        .expect("handoff");
        match output.effect {
            Some(Effect::Handoff(request)) => {
                assert_eq!(request.agent_id, "editor");
                let brief: serde_json::Value = serde_json::from_str(&request.brief).expect("json");
                assert_eq!(brief["mustPreserve"][0], "the lantern");
            }
            other => panic!("expected a handoff effect, got {other:?}"),
        }
    }

    #[test]
    fn a_bad_brief_is_recoverable() {
        for (value, expected) in [
            (json!({"agentId": "e"}), "handoff is required"),
            (
                json!({"agentId": "e", "handoff": {}}),
                "handoff.objective is required",
            ),
            (
                json!({"agentId": "e", "handoff": {"objective": "x", "mustPreserve": "all"}}),
                "handoff.mustPreserve must be an array",
            ),
            (
                json!({"agentId": "e", "handoff": {"objective": "x"}, "pendingTaskPolicy": "wait"}),
                "pendingTaskPolicy must be one of denyIfPending",
            ),
        ] {
            let error = handoff(&args(value.clone())).expect_err("refused");
            assert_eq!(error.code, "tool.invalid_arguments");
            assert!(
                error.message.starts_with(expected),
                "{value}: {}",
                error.message
            );
        }
    }
}
