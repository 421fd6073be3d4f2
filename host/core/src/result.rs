//! One call's identity and outcome: `ToolCall` in, `AgentToolResult` out.
//!
//! Only `content` reaches the model (with `## Tool error` above it when the
//! result is an error); `structured`, `error_code` and `resource_refs` are for
//! the runtime, audit and UIs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolId;

/// A call the model asked for, already resolved to a canonical `ToolId`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The provider's call id, kept verbatim.
    pub call_id: String,
    pub tool_id: ToolId,
    pub arguments: Value,
    #[serde(default)]
    pub provider_metadata: Value,
}

/// How a control tool asks the host to change the run. Applied and journalled
/// by the runtime, never by the tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ToolEffect {
    #[serde(rename_all = "camelCase")]
    Commit {
        path: Option<String>,
        mode: CommitMode,
        reason: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Finish { reason: Option<String> },
    #[serde(rename_all = "camelCase")]
    Delegate { agent_id: String, task: Value },
    #[serde(rename_all = "camelCase")]
    Handoff { agent_id: String, brief: Value },
    #[serde(rename_all = "camelCase")]
    AwaitTasks {
        task_ids: Vec<String>,
        mode: AwaitMode,
        timeout_ms: Option<u32>,
    },
    #[serde(rename_all = "camelCase")]
    TaskReturn { report: Value },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommitMode {
    Replace,
    Append,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AwaitMode {
    NextCompleted,
    AllCompleted,
    StatusOnly,
}

/// What an executor produced for one call, before it is bound to the call's
/// identity.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    Success(ToolSuccess),
    /// A recoverable failure: the model reads it and the run goes on.
    Error(ToolFailure),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolSuccess {
    pub content: String,
    pub structured: Value,
    pub resource_refs: Vec<String>,
    pub effect: Option<ToolEffect>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    /// Dotted code, e.g. `dice.invalid_formula`, `sandbox.out_of_fuel`.
    pub code: String,
    pub message: String,
    pub structured: Value,
}

impl ToolFailure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            structured: Value::Null,
        }
    }
}

/// The result of one call, bound to the invocation that asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolResult {
    pub call_id: String,
    pub tool_id: ToolId,
    /// Markdown for the model.
    pub content: String,
    #[serde(default)]
    pub structured: Value,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    #[serde(default)]
    pub resource_refs: Vec<String>,
}

/// A result was about to be used for a call it does not belong to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool.result_identity_mismatch: result for call `{result_call_id}` of `{result_tool_id}` does not belong to call `{call_id}` of `{tool_id}`"
)]
pub struct IdentityMismatch {
    pub call_id: String,
    pub tool_id: ToolId,
    pub result_call_id: String,
    pub result_tool_id: ToolId,
}

pub const TOOL_ERROR_HEADING: &str = "## Tool error";

/// What the model reads of a tool error: the heading, then the error.
pub fn error_text(content: &str) -> String {
    format!("{TOOL_ERROR_HEADING}\n\n{content}")
}

impl AgentToolResult {
    /// Bind an outcome to its invocation. The effect, if any, is returned
    /// beside the result: it is for the runtime, not part of the record.
    pub fn from_outcome(invocation: &ToolCall, outcome: ToolOutcome) -> (Self, Option<ToolEffect>) {
        match outcome {
            ToolOutcome::Success(success) => (
                Self {
                    call_id: invocation.call_id.clone(),
                    tool_id: invocation.tool_id.clone(),
                    content: success.content,
                    structured: success.structured,
                    is_error: false,
                    error_code: None,
                    resource_refs: success.resource_refs,
                },
                success.effect,
            ),
            ToolOutcome::Error(failure) => (
                Self {
                    call_id: invocation.call_id.clone(),
                    tool_id: invocation.tool_id.clone(),
                    content: format!("{}: {}", failure.code, failure.message),
                    structured: failure.structured,
                    is_error: true,
                    error_code: Some(failure.code),
                    resource_refs: Vec::new(),
                },
                None,
            ),
        }
    }

    /// Refuse to interpret, store or send a result for another call. (Boxed:
    /// the mismatch is rare and carries four identities.)
    pub fn check_identity(&self, invocation: &ToolCall) -> Result<(), Box<IdentityMismatch>> {
        if self.call_id == invocation.call_id && self.tool_id == invocation.tool_id {
            return Ok(());
        }
        Err(Box::new(IdentityMismatch {
            call_id: invocation.call_id.clone(),
            tool_id: invocation.tool_id.clone(),
            result_call_id: self.call_id.clone(),
            result_tool_id: self.tool_id.clone(),
        }))
    }

    /// Exactly the text the model sees for this result.
    pub fn model_text(&self) -> String {
        if self.is_error {
            error_text(&self.content)
        } else {
            self.content.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn invocation(call_id: &str) -> ToolCall {
        ToolCall {
            call_id: call_id.into(),
            tool_id: ToolId::builtin("dice.roll").expect("id"),
            arguments: json!({"formula": "d6"}),
            provider_metadata: Value::Null,
        }
    }

    #[test]
    fn success_keeps_content_and_returns_the_effect_aside() {
        let (result, effect) = AgentToolResult::from_outcome(
            &invocation("call_1"),
            ToolOutcome::Success(ToolSuccess {
                content: "Rolled 1d6: 4.".into(),
                structured: json!({"total": 4}),
                resource_refs: vec![],
                effect: Some(ToolEffect::Finish { reason: None }),
            }),
        );
        assert!(!result.is_error);
        assert_eq!(result.model_text(), "Rolled 1d6: 4.");
        assert_eq!(effect, Some(ToolEffect::Finish { reason: None }));
    }

    #[test]
    fn errors_show_the_heading_and_code_to_the_model() {
        let (result, _) = AgentToolResult::from_outcome(
            &invocation("call_1"),
            ToolOutcome::Error(ToolFailure::new("dice.invalid_formula", "use NdS")),
        );
        assert!(result.is_error);
        assert_eq!(result.error_code.as_deref(), Some("dice.invalid_formula"));
        assert_eq!(
            result.model_text(),
            "## Tool error\n\ndice.invalid_formula: use NdS"
        );
    }

    #[test]
    fn identity_must_match_the_invocation() {
        let (result, _) = AgentToolResult::from_outcome(
            &invocation("call_1"),
            ToolOutcome::Success(ToolSuccess::default()),
        );
        assert!(result.check_identity(&invocation("call_1")).is_ok());
        let mismatch = result
            .check_identity(&invocation("call_2"))
            .expect_err("mismatch");
        assert!(
            mismatch
                .to_string()
                .starts_with("tool.result_identity_mismatch")
        );
    }

    #[test]
    fn serializes_camel_case() {
        let (result, _) = AgentToolResult::from_outcome(
            &invocation("c"),
            ToolOutcome::Error(ToolFailure::new("x.y", "z")),
        );
        let json = serde_json::to_value(&result).expect("serialize");
        assert_eq!(json["callId"], "c");
        assert_eq!(json["toolId"], "builtin:dice.roll");
        assert_eq!(json["isError"], true);
        assert_eq!(json["errorCode"], "x.y");
    }
}
