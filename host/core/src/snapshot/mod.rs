//! `InvocationToolSnapshot`: the tools one invocation may call, frozen when it
//! starts — descriptors copied from the catalog, the model alias of each, and
//! the call budgets. Execution reads only the snapshot, never the profile or
//! a registry again.
//!
//! Its invariants hold on construction and on deserialization, so a snapshot
//! read back from `tool_snapshot.json` is as trustworthy as a fresh one.

mod compile;
mod index;
mod recheck;
pub mod tool_refs;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::alias::is_valid_alias;
use crate::error::{Classified, ErrorClass};
use crate::limits::LimitOverrides;
use crate::{DescriptorError, ToolDescriptor, ToolId};

pub use compile::{
    CompiledSnapshot, NO_OMISSIONS, NO_RESTRICTIONS, NO_SOURCE_APPROVALS, OmitReason,
    SnapshotDiagnostic, SnapshotSources, compile,
};

use crate::policy::ToolDecision;

/// Written by this version: 2 adds each tool's policy decision
/// (`decisions`) and each binding's `approval`.
pub const SNAPSHOT_SCHEMA_VERSION: u32 = 2;
/// Every version this one reads; a version-1 snapshot (no decisions) loads
/// as it was written.
pub const SNAPSHOT_SCHEMA_VERSIONS: [u32; 2] = [1, 2];

/// How an invocation may end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitPolicy {
    /// A root or handoff invocation: it ends the run with `workspace.finish`.
    RunFinishAllowed,
    /// A return-mode child: it reports to its parent with `task.return`.
    TaskReturnRequired,
}

/// One tool as this invocation offers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolBinding {
    pub descriptor: ToolDescriptor,
    /// The name the provider sees; unique within the snapshot.
    pub model_alias: String,
    /// Calls of this tool allowed in this invocation (none = only the total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<u32>,
    /// Sandbox limit overrides from the profile, lowered to the host policy
    /// cap at every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitOverrides>,
    /// Why each call of it waits for a person's approval, when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
}

impl ToolBinding {
    pub fn tool_id(&self) -> &ToolId {
        &self.descriptor.id
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    #[error(
        "tool.snapshot_schema_unsupported: snapshot schemaVersion {0} is not supported (expected {SNAPSHOT_SCHEMA_VERSION})"
    )]
    SchemaUnsupported(u32),
    #[error(
        "tool.snapshot_id_invalid: snapshot id `{0}` must be 1 to 128 of A-Z, a-z, 0-9, `_`, `-`"
    )]
    IdInvalid(String),
    #[error("tool.snapshot_budget_invalid: maxCallsPerInvocation must be greater than zero")]
    BudgetInvalid,
    #[error("tool.snapshot_tool_budget_invalid: maxCalls of `{0}` must be greater than zero")]
    ToolBudgetInvalid(ToolId),
    #[error("tool.snapshot_duplicate_id: `{0}` is bound twice")]
    DuplicateId(ToolId),
    #[error("tool.snapshot_duplicate_alias: alias `{alias}` is given to `{first}` and `{second}`")]
    DuplicateAlias {
        alias: String,
        first: String,
        second: String,
    },
    #[error(
        "tool.snapshot_alias_invalid: alias `{alias}` of `{id}` is not 1 to 64 of A-Z, a-z, 0-9, `_`, `-`"
    )]
    AliasInvalid { id: ToolId, alias: String },
    #[error("tool.snapshot_descriptor_invalid: {0}")]
    Descriptor(#[from] DescriptorError),
    #[error(
        "tool.snapshot_decision_mismatch: `{0}`: the bindings and the policy decisions disagree (a binding without a visible decision, a tool decided twice, or an approval only one of them records)"
    )]
    DecisionMismatch(ToolId),
    #[error(
        "tool.snapshot_loosened: the stored snapshot grants `{tool}` more than its profile and policies do now: {what}"
    )]
    Loosened { tool: String, what: String },
}

impl Classified for SnapshotError {
    fn code(&self) -> &'static str {
        match self {
            Self::SchemaUnsupported(_) => "tool.snapshot_schema_unsupported",
            Self::IdInvalid(_) => "tool.snapshot_id_invalid",
            Self::BudgetInvalid => "tool.snapshot_budget_invalid",
            Self::ToolBudgetInvalid(_) => "tool.snapshot_tool_budget_invalid",
            Self::DuplicateId(_) => "tool.snapshot_duplicate_id",
            Self::DuplicateAlias { .. } => "tool.snapshot_duplicate_alias",
            Self::AliasInvalid { .. } => "tool.snapshot_alias_invalid",
            Self::Descriptor(_) => "tool.snapshot_descriptor_invalid",
            Self::DecisionMismatch(_) => "tool.snapshot_decision_mismatch",
            Self::Loosened { .. } => "tool.snapshot_loosened",
        }
    }

    /// A broken snapshot is the runtime's fault, never the model's.
    fn class(&self) -> ErrorClass {
        ErrorClass::SystemFailure
    }
}

/// The frozen tool set of one invocation. `id` is the invocation id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "RawSnapshot")]
pub struct InvocationToolSnapshot {
    schema_version: u32,
    id: String,
    bindings: Vec<ToolBinding>,
    max_calls_per_invocation: u32,
    /// Each tool the profile allows, as the policy layers decided it (none
    /// in a version-1 snapshot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    decisions: Vec<ToolDecision>,
    /// Each binding's position by tool: a call's lookup does not walk the
    /// bindings (issue 38: a call's cost independent of the snapshot's size).
    #[serde(skip)]
    index: index::BindingIndex,
}

/// The wire form, checked before it becomes a snapshot.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawSnapshot {
    schema_version: u32,
    id: String,
    bindings: Vec<ToolBinding>,
    max_calls_per_invocation: u32,
    #[serde(default)]
    decisions: Vec<ToolDecision>,
}

impl TryFrom<RawSnapshot> for InvocationToolSnapshot {
    type Error = SnapshotError;

    fn try_from(raw: RawSnapshot) -> Result<Self, Self::Error> {
        if !SNAPSHOT_SCHEMA_VERSIONS.contains(&raw.schema_version) {
            return Err(SnapshotError::SchemaUnsupported(raw.schema_version));
        }
        let version_one = raw.schema_version == 1;
        if version_one && let Some(binding) = raw.bindings.iter().find(|b| b.approval.is_some()) {
            // Version 1 had no approvals: a file claiming one is not one.
            return Err(SnapshotError::DecisionMismatch(binding.tool_id().clone()));
        }
        let snapshot = Self::new(raw.id, raw.bindings, raw.max_calls_per_invocation)?;
        // Decisions explain the bindings; the bindings (with their
        // approvals) are what a call is held to, so a snapshot written
        // without decisions loads without them.
        let mut snapshot = if raw.decisions.is_empty() {
            snapshot
        } else {
            snapshot.with_decisions(raw.decisions)?
        };
        snapshot.schema_version = raw.schema_version;
        Ok(snapshot)
    }
}

/// `[A-Za-z0-9_-]{1,128}`: ids that become path segments.
pub fn is_valid_segment(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl InvocationToolSnapshot {
    pub fn new(
        id: impl Into<String>,
        bindings: Vec<ToolBinding>,
        max_calls_per_invocation: u32,
    ) -> Result<Self, SnapshotError> {
        let id = id.into();
        if !is_valid_segment(&id) {
            return Err(SnapshotError::IdInvalid(id));
        }
        if max_calls_per_invocation == 0 {
            return Err(SnapshotError::BudgetInvalid);
        }
        let mut ids = HashSet::new();
        let mut aliases: std::collections::HashMap<&str, &ToolId> = Default::default();
        for binding in &bindings {
            binding.descriptor.validate()?;
            let tool_id = binding.tool_id();
            if !ids.insert(tool_id) {
                return Err(SnapshotError::DuplicateId(tool_id.clone()));
            }
            if !is_valid_alias(&binding.model_alias) {
                return Err(SnapshotError::AliasInvalid {
                    id: tool_id.clone(),
                    alias: binding.model_alias.clone(),
                });
            }
            if let Some(first) = aliases.insert(&binding.model_alias, tool_id) {
                return Err(SnapshotError::DuplicateAlias {
                    alias: binding.model_alias.clone(),
                    first: first.to_string(),
                    second: tool_id.to_string(),
                });
            }
            if binding.max_calls == Some(0) {
                return Err(SnapshotError::ToolBudgetInvalid(tool_id.clone()));
            }
        }
        Ok(Self {
            schema_version: SNAPSHOT_SCHEMA_VERSION,
            id,
            index: index::BindingIndex::of(&bindings),
            bindings,
            max_calls_per_invocation,
            decisions: Vec::new(),
        })
    }

    /// Record the policy decisions the bindings came from. They must agree:
    /// one decision per tool, every binding's tool decided visible and
    /// callable, with an approval exactly when its decision requires one.
    pub fn with_decisions(mut self, decisions: Vec<ToolDecision>) -> Result<Self, SnapshotError> {
        // By tool, so the check is linear in the profile's size (the API
        // compiles a fresh snapshot at every call to recheck the stored one).
        let mut decided = std::collections::HashMap::new();
        for decision in &decisions {
            if decided.insert(&decision.tool_id, decision).is_some() {
                return Err(SnapshotError::DecisionMismatch(decision.tool_id.clone()));
            }
        }
        for binding in &self.bindings {
            let agrees = decided.get(binding.tool_id()).is_some_and(|decision| {
                decision.visible
                    && decision.callable
                    && decision.approval_required == binding.approval.is_some()
            });
            if !agrees {
                return Err(SnapshotError::DecisionMismatch(binding.tool_id().clone()));
            }
        }
        if let Some(stray) = decisions
            .iter()
            .find(|decision| decision.visible && !self.contains(&decision.tool_id))
        {
            return Err(SnapshotError::DecisionMismatch(stray.tool_id.clone()));
        }
        self.decisions = decisions;
        Ok(self)
    }

    /// Each allowed tool's policy decision (empty for a version-1 snapshot).
    pub fn decisions(&self) -> &[ToolDecision] {
        &self.decisions
    }

    pub fn schema_version(&self) -> u32 {
        self.schema_version
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// In provider advertisement order (the profile's allow order).
    pub fn bindings(&self) -> &[ToolBinding] {
        &self.bindings
    }

    pub fn max_calls_per_invocation(&self) -> u32 {
        self.max_calls_per_invocation
    }

    /// The binding of `id`, found through the index: the same cost for one
    /// bound tool or every builtin.
    pub fn binding(&self, id: &ToolId) -> Option<&ToolBinding> {
        self.index
            .position(id)
            .and_then(|position| self.bindings.get(position))
    }

    pub fn contains(&self, id: &ToolId) -> bool {
        self.binding(id).is_some()
    }

    /// The binding of a builtin by native name (`workspace.read_file`), for
    /// texts that tell the model which alias to use.
    pub fn builtin_alias_of(&self, native_name: &str) -> Option<&str> {
        self.bindings
            .iter()
            .find(|binding| {
                binding.tool_id().is_builtin() && binding.tool_id().native_name() == native_name
            })
            .map(|binding| binding.model_alias.as_str())
    }

    /// What model-facing text calls builtin `native_name` here: its alias
    /// in this snapshot, or the one it would have (builtins always get
    /// their native name with `.` → `_`).
    pub fn alias_of_builtin(&self, native_name: &str) -> String {
        self.builtin_alias_of(native_name)
            .map_or_else(|| crate::alias::builtin_alias(native_name), str::to_owned)
    }

    /// Pretty JSON, as stored in `input/invocations/<id>/tool_snapshot.json`.
    pub fn to_json_pretty(&self) -> String {
        // Strings, numbers and JSON values only: serializing cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The compact form the journal's `context_assembled` event records.
    pub fn summary(&self) -> Value {
        json!({
            "id": self.id,
            "schemaVersion": self.schema_version,
            "maxCallsPerInvocation": self.max_calls_per_invocation,
            "tools": self.bindings.iter().map(|binding| json!({
                "toolId": binding.tool_id(),
                "alias": binding.model_alias,
                "maxCalls": binding.max_calls,
                "approvalRequired": binding.approval.is_some(),
            })).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests;
