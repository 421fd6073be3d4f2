//! One model request's view of the tools: the [`ToolTurnContract`] (which
//! ToolIds this call may request, and the typed choice), its projection into
//! [`AgentModelTool`]s for a provider adapter, and the decoder that turns a
//! provider's tool call back into a [`ToolCall`].
//!
//! The decoder resolves aliases through this turn only. A name that is not
//! one of this request's aliases — a canonical name, a native name, another
//! snapshot's alias, a typo — is never guessed at: a model's reply keeps it
//! as an [`UnknownToolCall`] the run loop answers with an error
//! ([`ModelTurn::decode_part`]); a call no model made fails
//! ([`ModelTurn::decode_call`]).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Classified, ErrorClass};
use crate::model::{AgentModelContentPart, UnknownToolCall};
use crate::snapshot::InvocationToolSnapshot;
use crate::{ToolCall, ToolId};

/// What the model must do with tools in this request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// No tool calls allowed.
    None,
    /// The model decides (production runs always use this).
    Auto,
    /// At least one tool call.
    Required,
    /// Exactly this tool.
    Specific(ToolId),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error("tool.turn_duplicate_id: `{0}` is listed twice in the turn")]
    DuplicateId(ToolId),
    #[error("tool.turn_required_empty: tool choice `required` with no tools")]
    RequiredEmpty,
    #[error("tool.turn_specific_not_available: the specific tool `{0}` is not in the turn")]
    SpecificNotAvailable(ToolId),
    #[error(
        "tool.turn_snapshot_mismatch: turn of snapshot `{turn}` used with snapshot `{snapshot}`"
    )]
    SnapshotMismatch { turn: String, snapshot: String },
    #[error("tool.turn_tool_not_in_snapshot: `{0}` is in the turn but not in its snapshot")]
    ToolNotInSnapshot(ToolId),
}

impl Classified for TurnError {
    fn code(&self) -> &'static str {
        match self {
            Self::DuplicateId(_) => "tool.turn_duplicate_id",
            Self::RequiredEmpty => "tool.turn_required_empty",
            Self::SpecificNotAvailable(_) => "tool.turn_specific_not_available",
            Self::SnapshotMismatch { .. } => "tool.turn_snapshot_mismatch",
            Self::ToolNotInSnapshot(_) => "tool.turn_tool_not_in_snapshot",
        }
    }

    /// The runtime builds turns; a bad one is its own bug.
    fn class(&self) -> ErrorClass {
        ErrorClass::SystemFailure
    }
}

/// The ToolIds one model call may request, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolTurnContract {
    snapshot_id: String,
    tools: Vec<ToolId>,
    choice: ToolChoice,
}

impl ToolTurnContract {
    pub fn new(
        snapshot_id: impl Into<String>,
        tools: Vec<ToolId>,
        choice: ToolChoice,
    ) -> Result<Self, TurnError> {
        let mut seen = HashSet::new();
        for tool in &tools {
            if !seen.insert(tool) {
                return Err(TurnError::DuplicateId(tool.clone()));
            }
        }
        match &choice {
            ToolChoice::Required if tools.is_empty() => return Err(TurnError::RequiredEmpty),
            ToolChoice::Specific(tool) if !tools.contains(tool) => {
                return Err(TurnError::SpecificNotAvailable(tool.clone()));
            }
            _ => {}
        }
        Ok(Self {
            snapshot_id: snapshot_id.into(),
            tools,
            choice,
        })
    }

    /// Every tool of the snapshot, in its order.
    pub fn all(snapshot: &InvocationToolSnapshot, choice: ToolChoice) -> Result<Self, TurnError> {
        let tools = snapshot
            .bindings()
            .iter()
            .map(|binding| binding.tool_id().clone())
            .collect();
        Self::new(snapshot.id(), tools, choice)
    }

    /// The turn of a call no model asked for (`toolhost call`, MCP, the
    /// API): only `tool`, chosen. It names one tool however many the
    /// snapshot binds, so building it, journalling it and checking a call
    /// against it cost the same for a 1-tool and an all-builtins profile.
    /// A tool outside the snapshot is refused as [`all`](Self::all) refuses
    /// it under `Specific`.
    pub fn only(snapshot: &InvocationToolSnapshot, tool: &ToolId) -> Result<Self, TurnError> {
        if !snapshot.contains(tool) {
            return Err(TurnError::SpecificNotAvailable(tool.clone()));
        }
        Self::new(
            snapshot.id(),
            vec![tool.clone()],
            ToolChoice::Specific(tool.clone()),
        )
    }

    pub fn snapshot_id(&self) -> &str {
        &self.snapshot_id
    }

    pub fn tools(&self) -> &[ToolId] {
        &self.tools
    }

    pub fn choice(&self) -> &ToolChoice {
        &self.choice
    }

    pub fn contains(&self, tool: &ToolId) -> bool {
        self.tools.contains(tool)
    }
}

/// A tool as one request presents it to a provider adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentModelTool {
    pub tool_id: ToolId,
    pub model_alias: String,
    pub description: String,
    pub input_schema: Value,
}

/// Project a turn onto its snapshot: one [`AgentModelTool`] per turn tool,
/// in the turn's order.
pub fn project_agent_model_tools(
    snapshot: &InvocationToolSnapshot,
    turn: &ToolTurnContract,
) -> Result<Vec<AgentModelTool>, TurnError> {
    if turn.snapshot_id() != snapshot.id() {
        return Err(TurnError::SnapshotMismatch {
            turn: turn.snapshot_id().to_owned(),
            snapshot: snapshot.id().to_owned(),
        });
    }
    turn.tools()
        .iter()
        .map(|tool| {
            let binding = snapshot
                .binding(tool)
                .ok_or_else(|| TurnError::ToolNotInSnapshot(tool.clone()))?;
            let descriptor = &binding.descriptor;
            Ok(AgentModelTool {
                tool_id: tool.clone(),
                model_alias: binding.model_alias.clone(),
                description: descriptor
                    .description
                    .clone()
                    .or_else(|| descriptor.title.clone())
                    .unwrap_or_default(),
                input_schema: descriptor.input_schema.clone(),
            })
        })
        .collect()
}

/// A tool call as a provider adapter read it off the wire, before decoding.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProviderToolCall {
    pub call_id: Option<String>,
    /// The function name the model used.
    pub name: Option<String>,
    /// `None` or JSON `null` mean no arguments; a string is parsed as JSON.
    pub arguments: Option<Value>,
    /// Whatever the provider needs back on the next request (signatures, ids).
    pub provider_metadata: Value,
}

/// A provider reply that breaks the request's contract. A malformed call
/// fails the run; an unknown name in a model's reply is kept as an
/// [`UnknownToolCall`] and answered instead (the run loop decides).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelCallError {
    #[error("model.invalid_tool_call: {0}")]
    InvalidToolCall(String),
    #[error("model.unknown_tool_call: `{name}` is not a tool of this request{hint}")]
    UnknownToolCall { name: String, hint: String },
}

impl Classified for ModelCallError {
    fn code(&self) -> &'static str {
        match self {
            Self::InvalidToolCall(_) => "model.invalid_tool_call",
            Self::UnknownToolCall { .. } => "model.unknown_tool_call",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            // The wire reply is malformed: nothing to hold the model to.
            Self::InvalidToolCall(_) => ErrorClass::SystemFailure,
            Self::UnknownToolCall { .. } => ErrorClass::PolicyDenied { fail_fast: true },
        }
    }
}

/// One model request's tools, ready to encode and to decode against.
#[derive(Debug, Clone)]
pub struct ModelTurn {
    contract: ToolTurnContract,
    tools: Vec<AgentModelTool>,
    by_alias: HashMap<String, usize>,
}

impl ModelTurn {
    pub fn new(
        snapshot: &InvocationToolSnapshot,
        contract: ToolTurnContract,
    ) -> Result<Self, TurnError> {
        let tools = project_agent_model_tools(snapshot, &contract)?;
        let by_alias = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.model_alias.clone(), index))
            .collect();
        Ok(Self {
            contract,
            tools,
            by_alias,
        })
    }

    pub fn contract(&self) -> &ToolTurnContract {
        &self.contract
    }

    /// What a provider adapter advertises, in order.
    pub fn tools(&self) -> &[AgentModelTool] {
        &self.tools
    }

    /// This request's alias for a tool, for re-encoding history: a past call
    /// is sent under the current alias of its ToolId, or not at all.
    pub fn alias_of(&self, tool: &ToolId) -> Option<&str> {
        self.tools
            .iter()
            .find(|candidate| &candidate.tool_id == tool)
            .map(|candidate| candidate.model_alias.as_str())
    }

    /// Whether `name` is one of this request's aliases.
    pub fn offers(&self, name: &str) -> bool {
        self.by_alias.contains_key(name)
    }

    /// The tool a provider's function name stands for in this request.
    pub fn resolve(&self, name: &str) -> Result<&AgentModelTool, ModelCallError> {
        if let Some(index) = self.by_alias.get(name) {
            return Ok(&self.tools[*index]);
        }
        // Say what went wrong without ever accepting it.
        let hint = self
            .tools
            .iter()
            .find(|tool| tool.tool_id.as_str() == name || tool.tool_id.native_name() == name)
            .map(|tool| {
                format!(
                    " (`{name}` is a tool's canonical name; this request calls it `{}`)",
                    tool.model_alias
                )
            })
            .unwrap_or_default();
        Err(ModelCallError::UnknownToolCall {
            name: name.to_owned(),
            hint,
        })
    }

    /// Decode a provider's tool call into a canonical invocation; a name
    /// this request did not offer is an error (a call no model made:
    /// `toolhost call`, the API).
    pub fn decode_call(&self, call: ProviderToolCall) -> Result<ToolCall, ModelCallError> {
        self.decode(call)?.map_err(|unknown| unknown.error())
    }

    /// Decode a model's tool call into a reply's part: a canonical
    /// invocation, or — for a name this request did not offer — an
    /// [`UnknownToolCall`] that keeps the name and the hint, for the run
    /// loop to answer. A call without id or name is still an error: there
    /// is nothing to answer it under.
    pub fn decode_part(
        &self,
        call: ProviderToolCall,
    ) -> Result<AgentModelContentPart, ModelCallError> {
        Ok(match self.decode(call)? {
            Ok(call) => AgentModelContentPart::ToolCall { call },
            Err(call) => AgentModelContentPart::UnknownToolCall { call },
        })
    }

    fn decode(
        &self,
        call: ProviderToolCall,
    ) -> Result<Result<ToolCall, UnknownToolCall>, ModelCallError> {
        let call_id = call
            .call_id
            .filter(|id| !id.trim().is_empty())
            .ok_or_else(|| ModelCallError::InvalidToolCall("a tool call has no call id".into()))?;
        let name = call
            .name
            .filter(|name| !name.trim().is_empty())
            .ok_or_else(|| {
                ModelCallError::InvalidToolCall(format!("tool call `{call_id}` has no name"))
            })?;
        let arguments = normalize_arguments(call.arguments);
        Ok(match self.resolve(&name) {
            Ok(tool) => Ok(ToolCall {
                call_id,
                tool_id: tool.tool_id.clone(),
                arguments,
                provider_metadata: call.provider_metadata,
            }),
            Err(ModelCallError::UnknownToolCall { hint, .. }) => Err(UnknownToolCall {
                call_id,
                name,
                arguments,
                provider_metadata: call.provider_metadata,
                hint,
            }),
            Err(other) => return Err(other),
        })
    }

    /// What the model reads when it called `name`, which this request did
    /// not offer: the decoder's hint, and this request's aliases (the only
    /// names that resolve).
    pub fn unknown_call_message(&self, call: &UnknownToolCall) -> String {
        let aliases =
            crate::alias::code_list(self.tools.iter().map(|tool| tool.model_alias.as_str()));
        let offered = if aliases.is_empty() {
            "no tool is offered in this request".to_owned()
        } else {
            format!("the tools you can call are {aliases}")
        };
        format!(
            "{} is not a tool of this request{}; {offered}. Call one of them by exactly that name.",
            crate::model_path::quoted(&call.name),
            call.hint
        )
    }
}

/// A provider's arguments as the tool gets them: nothing or `null` is `{}`;
/// a string is parsed as JSON, and when it is not JSON it stays a string, so
/// the tool answers with a recoverable `tool.invalid_arguments` the model can
/// fix, as the reference does.
pub fn normalize_arguments(arguments: Option<Value>) -> Value {
    match arguments {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(Value::String(text)) => match serde_json::from_str(&text) {
            Ok(Value::Null) => Value::Object(Default::default()),
            Ok(parsed) => parsed,
            Err(_) => Value::String(text),
        },
        Some(other) => other,
    }
}

#[cfg(test)]
mod tests;
