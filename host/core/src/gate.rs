//! `ToolRequestGate`: every tool call a model asks for passes here before it
//! runs. In order: the turn belongs to this invocation's snapshot, the tool
//! is in the snapshot and in the turn, the typed choice allows it, and then
//! the total and per-tool budgets are checked and reserved in one step (the
//! gate is `&mut`, owned by the invocation's serial loop, so no other call
//! can interleave between check and reserve).
//!
//! Counters are keyed by canonical ToolId: a builtin `search` and an MCP
//! `search` are different tools with different budgets.
//!
//! The end tools (builtins flagged `endTool`: commit, finish, task return)
//! are outside the total: a spent total must never keep an invocation from
//! committing and ending, or the run burns its remaining rounds and fails.
//! They still pass every other check, their own per-tool budget included,
//! and have a pool of their own (as large as the total, at least
//! [`END_CALLS_FLOOR`]), so a model that calls them without end still does
//! bounded work.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use crate::alias::code_list;
use crate::error::{Classified, ErrorClass};
use crate::snapshot::InvocationToolSnapshot;
use crate::turn::{ToolChoice, ToolTurnContract};
use crate::{ToolFailure, ToolId, builtin};

/// Which budget ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetScope {
    /// `maxCallsPerInvocation`.
    Invocation,
    /// The end tools' own pool ([`ToolRequestGate::end_pool`]): spent,
    /// it refuses only them, while ordinary tools still use the total.
    EndTools,
    /// The tool's own `maxCalls`.
    Tool(ToolId),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateRejection {
    #[error(
        "tool.turn_snapshot_mismatch: a turn of snapshot `{turn}` reached the gate of snapshot `{snapshot}`"
    )]
    SnapshotMismatch { turn: String, snapshot: String },
    #[error("model.unknown_tool_call: {message}")]
    NotInSnapshot {
        tool: ToolId,
        /// Model-readable: this invocation's tools, by alias.
        message: String,
    },
    #[error("model.unknown_tool_call: `{0}` was not offered in this request")]
    NotInTurn(ToolId),
    #[error("model.tool_choice_violation: `{tool}` called under tool choice {choice:?}")]
    ChoiceViolation { tool: ToolId, choice: ToolChoice },
    #[error("agent.tool_budget_exhausted: {}", .message)]
    BudgetExhausted {
        scope: BudgetScope,
        limit: u32,
        /// Model-readable, in the model's own names.
        message: String,
    },
}

impl Classified for GateRejection {
    fn code(&self) -> &'static str {
        match self {
            Self::SnapshotMismatch { .. } => "tool.turn_snapshot_mismatch",
            Self::NotInSnapshot { .. } | Self::NotInTurn(_) => "model.unknown_tool_call",
            Self::ChoiceViolation { .. } => "model.tool_choice_violation",
            Self::BudgetExhausted { .. } => "agent.tool_budget_exhausted",
        }
    }

    fn class(&self) -> ErrorClass {
        match self {
            Self::SnapshotMismatch { .. } => ErrorClass::SystemFailure,
            // A turn the runtime built was broken: its own bug.
            Self::NotInTurn(_) | Self::ChoiceViolation { .. } => {
                ErrorClass::PolicyDenied { fail_fast: true }
            }
            // The model reads it and works on: with the tools it has
            // (charged, so never retried for free), or without that tool.
            Self::NotInSnapshot { .. } | Self::BudgetExhausted { .. } => {
                ErrorClass::PolicyDenied { fail_fast: false }
            }
        }
    }
}

impl GateRejection {
    /// The result the model reads for a rejection the run survives.
    pub fn to_tool_failure(&self) -> Option<ToolFailure> {
        if let Self::NotInSnapshot { message, .. } = self {
            return Some(ToolFailure::new(self.code(), message.clone()));
        }
        let Self::BudgetExhausted {
            scope,
            limit,
            message,
        } = self
        else {
            return None;
        };
        let scope = match scope {
            BudgetScope::Invocation => json!({"scope": "invocation"}),
            BudgetScope::EndTools => json!({"scope": "endTools"}),
            BudgetScope::Tool(tool) => json!({"scope": "tool", "toolId": tool}),
        };
        let mut failure = ToolFailure::new(self.code(), message.clone());
        failure.structured = json!({
            "error": {"code": self.code(), "message": message},
            "budget": {"limit": limit, "scope": scope},
        });
        Some(failure)
    }
}

/// What a successful reservation used up, counting this call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    pub total_used: u32,
    pub tool_used: u32,
}

/// The invocation-local gate. Its counters only ever grow.
#[derive(Debug, Clone)]
pub struct ToolRequestGate {
    snapshot: Arc<InvocationToolSnapshot>,
    total: u32,
    /// Calls of end tools: their own pool ([`ToolRequestGate::end_pool`]).
    end_calls: u32,
    per_tool: HashMap<ToolId, u32>,
}

impl ToolRequestGate {
    pub fn new(snapshot: Arc<InvocationToolSnapshot>) -> Self {
        Self {
            snapshot,
            total: 0,
            end_calls: 0,
            per_tool: HashMap::new(),
        }
    }

    /// A gate for an invocation that already reserved these calls (a run
    /// reopened from its journal).
    pub fn resume<'a>(
        snapshot: Arc<InvocationToolSnapshot>,
        reserved: impl IntoIterator<Item = &'a ToolId>,
    ) -> Self {
        let mut gate = Self::new(snapshot);
        for tool in reserved {
            if is_end_tool(tool) {
                gate.end_calls = gate.end_calls.saturating_add(1);
            } else {
                gate.total = gate.total.saturating_add(1);
            }
            *gate.per_tool.entry(tool.clone()).or_default() += 1;
        }
        gate
    }

    pub fn snapshot(&self) -> &Arc<InvocationToolSnapshot> {
        &self.snapshot
    }

    pub fn total_used(&self) -> u32 {
        self.total
    }

    pub fn tool_used(&self, tool: &ToolId) -> u32 {
        self.per_tool.get(tool).copied().unwrap_or(0)
    }

    /// Authorize `tool` for a call made under `turn` and reserve its budget.
    pub fn authorize_and_reserve(
        &mut self,
        turn: &ToolTurnContract,
        tool: &ToolId,
    ) -> Result<Reservation, GateRejection> {
        if turn.snapshot_id() != self.snapshot.id() {
            return Err(GateRejection::SnapshotMismatch {
                turn: turn.snapshot_id().to_owned(),
                snapshot: self.snapshot.id().to_owned(),
            });
        }
        let Some(binding) = self.snapshot.binding(tool) else {
            // Charged, so a model can never retry unknown calls for free;
            // once the total is spent it is refused like any call.
            self.charge_unknown()?;
            let aliases = code_list(
                self.snapshot
                    .bindings()
                    .iter()
                    .map(|binding| binding.model_alias.as_str()),
            );
            return Err(GateRejection::NotInSnapshot {
                tool: tool.clone(),
                message: format!(
                    "`{tool}` is not a tool of this invocation; the tools you can call are {aliases}"
                ),
            });
        };
        if !turn.contains(tool) {
            return Err(GateRejection::NotInTurn(tool.clone()));
        }
        match turn.choice() {
            ToolChoice::None => {
                return Err(GateRejection::ChoiceViolation {
                    tool: tool.clone(),
                    choice: ToolChoice::None,
                });
            }
            ToolChoice::Specific(only) if only != tool => {
                return Err(GateRejection::ChoiceViolation {
                    tool: tool.clone(),
                    choice: turn.choice().clone(),
                });
            }
            _ => {}
        }
        let end_tool = is_end_tool(tool);
        let limit = self.snapshot.max_calls_per_invocation();
        if !end_tool && self.total >= limit {
            return Err(self.total_spent());
        }
        if end_tool && self.end_calls >= self.end_pool() {
            return Err(self.end_pool_spent());
        }
        let used = self.tool_used(tool);
        if let Some(limit) = binding.max_calls
            && used >= limit
        {
            return Err(GateRejection::BudgetExhausted {
                scope: BudgetScope::Tool(tool.clone()),
                limit,
                message: format!(
                    "`{}` may be called {limit} time(s) and all are used; go on without it",
                    binding.model_alias
                ),
            });
        }
        if end_tool {
            self.end_calls += 1;
        } else {
            self.total += 1;
        }
        let tool_used = used + 1;
        match self.per_tool.get_mut(tool) {
            Some(count) => *count = tool_used,
            // Cloned once per tool, not once per call.
            None => {
                self.per_tool.insert(tool.clone(), tool_used);
            }
        }
        Ok(Reservation {
            total_used: self.total,
            tool_used,
        })
    }

    /// Charge a call under a name the request did not offer (the decoder
    /// kept it as an `UnknownToolCall`; nothing runs) to the total, so a
    /// model cannot retry invented names for free. Once the total is spent
    /// it is refused like any call. `Ok`: the total used, counting it.
    pub fn charge_unknown(&mut self) -> Result<u32, GateRejection> {
        if self.total >= self.snapshot.max_calls_per_invocation() {
            return Err(self.total_spent());
        }
        self.total += 1;
        Ok(self.total)
    }

    /// A reopened gate that also counts `charged` unknown calls the
    /// journal shows (`tool_call_unknown` with `charged`).
    pub fn with_unknown_charged(mut self, charged: u32) -> Self {
        self.total = self.total.saturating_add(charged);
        self
    }

    /// How many end-tool calls this invocation may make: as many as the
    /// total, and never fewer than [`END_CALLS_FLOOR`], so even a tiny
    /// total leaves room to commit, fix a refused commit, and finish.
    pub fn end_pool(&self) -> u32 {
        self.snapshot
            .max_calls_per_invocation()
            .max(END_CALLS_FLOOR)
    }

    /// The refusal of an end tool once their pool is spent. Only they are
    /// refused (ordinary tools still use the total), so it names them, by
    /// this snapshot's aliases, and says nothing of the other tools.
    fn end_pool_spent(&self) -> GateRejection {
        let pool = self.end_pool();
        let end_tools = code_list(
            self.snapshot
                .bindings()
                .iter()
                .filter(|binding| is_end_tool(binding.tool_id()))
                .map(|binding| binding.model_alias.as_str()),
        );
        GateRejection::BudgetExhausted {
            scope: BudgetScope::EndTools,
            limit: pool,
            message: format!(
                "you have called the tools that end your work ({end_tools}) {pool} times, all that are allowed; they cannot be called any more"
            ),
        }
    }

    /// The refusal of a call once the total is spent. It names, by this
    /// snapshot's aliases, exactly the end tools that can still be called
    /// (offered here and with per-tool budget left), so the model knows
    /// how to end instead of trying tools it cannot have.
    fn total_spent(&self) -> GateRejection {
        let limit = self.snapshot.max_calls_per_invocation();
        // The end tools' own pool spent: none of them is left either.
        let pool_left = self.end_calls < self.end_pool();
        let callable = code_list(
            self.snapshot
                .bindings()
                .iter()
                .filter(|binding| pool_left && is_end_tool(binding.tool_id()))
                .filter(|binding| {
                    binding
                        .max_calls
                        .is_none_or(|max| self.tool_used(binding.tool_id()) < max)
                })
                .map(|binding| binding.model_alias.as_str()),
        );
        let message = if callable.is_empty() {
            format!(
                "you have used all {limit} tool calls you are allowed; no tool can be called any more, so finish with what you have"
            )
        } else {
            format!(
                "you have used all {limit} tool calls you are allowed; only {callable} can still be called, so end with what you have"
            )
        };
        GateRejection::BudgetExhausted {
            scope: BudgetScope::Invocation,
            limit,
            message,
        }
    }
}

/// The least number of end-tool calls an invocation may make, whatever its
/// total.
pub const END_CALLS_FLOOR: u32 = 16;

/// Whether `tool` is one of the builtins flagged `endTool` in their
/// `tool.json` (the one list of them).
pub fn is_end_tool(tool: &ToolId) -> bool {
    builtin::of(tool).is_some_and(|builtin| builtin.end_tool)
}

#[cfg(test)]
mod tests;
