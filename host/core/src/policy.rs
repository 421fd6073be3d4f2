//! Tool policy resolution (seed §6): what each tool of an invocation is —
//! visible, callable, needing a person's approval — and why, from every
//! layer that has a say.
//!
//! The layers, highest first:
//! 1. the **user's policy** (a file in the user's config directory): its
//!    `deny` is the highest word, nothing re-allows what it denies;
//! 2. the **platform policy** (given by the host application, e.g.
//!    `--platform-policy FILE`): a profile can never override its `deny`;
//! 3. the **profile's tool policy**: `tools.allow` (a tool not allowed is
//!    not visible), `tools.deny` (deny beats allow), budgets;
//! 4. the **source's policy**: a tool no source offers now (an MCP tool
//!    denied in its registration, an extension not granted to this
//!    profile) is not visible; an MCP tool whose permission is `Ask` needs
//!    approval;
//! 5. the tool's own annotations: an explicit `destructiveHint: true` adds
//!    an approval (a server's annotations can add one, never waive one).
//!
//! Approval is not deny: a tool that needs approval stays visible and
//! callable, and each call waits for a person. [`decide`] is the one place
//! these rules live; the snapshot compiler freezes its answers into the
//! snapshot (`decisions`, and each binding's `approval`).

use serde::{Deserialize, Serialize};

use crate::ToolId;
use crate::snapshot::OmitReason;

pub const POLICY_SCHEMA_VERSION: u32 = 1;
pub const POLICY_KIND: &str = "toolhost.toolPolicy";

/// Which tools a policy entry names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum ToolPattern {
    /// Every tool (`*`).
    All,
    /// Every tool whose canonical id starts with this: `builtin:*`,
    /// `mcp/*`, `ext/*`, `mcp/<uuid>:*`, `ext/<id>:*`.
    Prefix(String),
    /// One tool: a canonical id, or a builtin's bare name.
    Exact(ToolId),
}

impl ToolPattern {
    pub fn matches(&self, tool: &ToolId) -> bool {
        match self {
            Self::All => true,
            Self::Prefix(prefix) => tool.as_str().starts_with(prefix.as_str()),
            Self::Exact(id) => id == tool,
        }
    }
}

impl TryFrom<String> for ToolPattern {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        if text == "*" {
            return Ok(Self::All);
        }
        if let Some(prefix) = text.strip_suffix('*') {
            let kind_only = matches!(prefix, "mcp/" | "ext/" | "builtin:");
            // One source: its provider must be one a tool id can have, in
            // the form ids are written in (a lowercase, hyphenated uuid; a
            // valid extension id), or the pattern would match nothing.
            let one_source = (prefix.starts_with("mcp/") || prefix.starts_with("ext/"))
                && prefix.strip_suffix(':').is_some_and(|provider| {
                    crate::ToolProvider::parse(provider)
                        .is_ok_and(|parsed| parsed.to_string() == provider)
                });
            if kind_only || one_source {
                return Ok(Self::Prefix(prefix.to_owned()));
            }
            return Err(format!(
                "policy.pattern_invalid: `{text}`: a `*` may only end `*`, `builtin:*`, `mcp/*`, `ext/*`, `mcp/<uuid>:*` or `ext/<id>:*`"
            ));
        }
        crate::profile::resolve_tool_ref(&text)
            .map(Self::Exact)
            .map_err(|message| message.replacen("agent.profile_", "policy.pattern_", 1))
    }
}

impl From<ToolPattern> for String {
    fn from(pattern: ToolPattern) -> String {
        match pattern {
            ToolPattern::All => "*".into(),
            ToolPattern::Prefix(prefix) => format!("{prefix}*"),
            ToolPattern::Exact(id) => id.to_string(),
        }
    }
}

/// A user's or a platform's tool policy file (`toolhost.toolPolicy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPolicy {
    schema_version: u32,
    kind: String,
    /// Tools never offered, whatever a profile allows.
    #[serde(default)]
    pub deny: Vec<ToolPattern>,
    /// Tools whose every call waits for a person's approval.
    #[serde(default)]
    pub require_approval: Vec<ToolPattern>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy.invalid: {origin}: {message}")]
    Invalid { origin: String, message: String },
}

impl ToolPolicy {
    /// A policy that denies nothing and asks for nothing.
    pub fn empty() -> Self {
        Self {
            schema_version: POLICY_SCHEMA_VERSION,
            kind: POLICY_KIND.into(),
            deny: Vec::new(),
            require_approval: Vec::new(),
        }
    }

    /// Parse a policy file; `origin` names it in errors (a path). An
    /// error names the field (`deny[2]`) and what is wrong with it.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, PolicyError> {
        let invalid = |message: String| PolicyError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        let deserializer = &mut serde_json::Deserializer::from_str(text);
        let policy: Self = serde_path_to_error::deserialize(deserializer)
            .map_err(|error| invalid(format!("{}: {}", error.path(), error.inner())))?;
        if policy.schema_version != POLICY_SCHEMA_VERSION {
            return Err(invalid(format!(
                "schemaVersion {} is not supported (expected {POLICY_SCHEMA_VERSION})",
                policy.schema_version
            )));
        }
        if policy.kind != POLICY_KIND {
            return Err(invalid(format!(
                "kind `{}` is not `{POLICY_KIND}`",
                policy.kind
            )));
        }
        Ok(policy)
    }

    fn denying(&self, tool: &ToolId) -> Option<&ToolPattern> {
        self.deny.iter().find(|pattern| pattern.matches(tool))
    }

    fn asking(&self, tool: &ToolId) -> Option<&ToolPattern> {
        self.require_approval
            .iter()
            .find(|pattern| pattern.matches(tool))
    }
}

/// The policies above every profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policies {
    pub user: Option<ToolPolicy>,
    pub platform: Option<ToolPolicy>,
}

/// No user or platform policy.
pub static NO_POLICIES: Policies = Policies {
    user: None,
    platform: None,
};

/// What the snapshot compiler knows of one tool a profile allows.
#[derive(Debug, Clone)]
pub struct ToolFacts<'a> {
    pub tool: &'a ToolId,
    /// In the profile's `tools.allow`.
    pub allowed_by_profile: bool,
    /// In the profile's `tools.deny`.
    pub denied_by_profile: bool,
    /// A builtin a return-mode child does not get.
    pub excluded_for_child: bool,
    /// Why no source offers it now, when none does (not installed, not
    /// granted to this profile, denied in its MCP registration, …).
    pub unavailable: Option<String>,
    /// Why its source asks for approval (an MCP registration's `Ask`).
    pub source_approval: Option<&'a str>,
    /// Its annotations say `destructiveHint: true` explicitly.
    pub destructive: bool,
    /// Calls of it allowed per invocation (none = only the total).
    pub budget: Option<u32>,
}

/// One tool's resolved policy, as the snapshot freezes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDecision {
    pub tool_id: ToolId,
    /// Offered to the model.
    pub visible: bool,
    /// A call of it may run (after approval, when one is required).
    pub callable: bool,
    /// Each call waits for a person's decision.
    pub approval_required: bool,
    /// Which layer decided, in words (every reason for an approval).
    pub reason: String,
    /// Calls allowed per invocation (none = only the invocation's total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<u32>,
}

/// Resolve one tool: the rules of this module, highest layer first. With
/// the decision, why a tool that is not visible was left out (the
/// snapshot's diagnostics carry it).
pub fn decide(policies: &Policies, facts: &ToolFacts<'_>) -> (ToolDecision, Option<OmitReason>) {
    let hidden = |reason: String, omitted: OmitReason| {
        let decision = ToolDecision {
            tool_id: facts.tool.clone(),
            visible: false,
            callable: false,
            approval_required: false,
            reason,
            budget: facts.budget,
        };
        (decision, Some(omitted))
    };
    if let Some(pattern) = policies.user.as_ref().and_then(|p| p.denying(facts.tool)) {
        return hidden(
            format!(
                "denied by the user's policy (`{}`)",
                String::from(pattern.clone())
            ),
            OmitReason::DeniedByUser,
        );
    }
    if let Some(pattern) = policies
        .platform
        .as_ref()
        .and_then(|p| p.denying(facts.tool))
    {
        return hidden(
            format!(
                "denied by the platform policy (`{}`)",
                String::from(pattern.clone())
            ),
            OmitReason::DeniedByPlatform,
        );
    }
    if facts.denied_by_profile {
        return hidden("denied by tools.deny".into(), OmitReason::Denied);
    }
    if !facts.allowed_by_profile {
        return hidden("not in tools.allow".into(), OmitReason::NotAllowed);
    }
    if facts.excluded_for_child {
        return hidden(
            "a return-mode child reports with task.return instead".into(),
            OmitReason::ExcludedForChild,
        );
    }
    if let Some(reason) = &facts.unavailable {
        return hidden(reason.clone(), OmitReason::Unavailable);
    }
    let mut approvals = Vec::new();
    if let Some(pattern) = policies.user.as_ref().and_then(|p| p.asking(facts.tool)) {
        approvals.push(format!(
            "the user's policy asks (`{}`)",
            String::from(pattern.clone())
        ));
    }
    if let Some(pattern) = policies
        .platform
        .as_ref()
        .and_then(|p| p.asking(facts.tool))
    {
        approvals.push(format!(
            "the platform policy asks (`{}`)",
            String::from(pattern.clone())
        ));
    }
    if let Some(reason) = facts.source_approval {
        approvals.push(reason.to_owned());
    }
    if facts.destructive {
        approvals.push("its annotations say destructiveHint: true".into());
    }
    let decision = ToolDecision {
        tool_id: facts.tool.clone(),
        visible: true,
        callable: true,
        approval_required: !approvals.is_empty(),
        reason: if approvals.is_empty() {
            "allowed by the profile".into()
        } else {
            format!("allowed; approval required: {}", approvals.join("; "))
        },
        budget: facts.budget,
    };
    (decision, None)
}

/// The tool's annotations say `destructiveHint: true` in so many words
/// (MCP's implicit default does not count).
pub fn explicitly_destructive(annotations: &serde_json::Value) -> bool {
    annotations.get("destructiveHint") == Some(&serde_json::Value::Bool(true))
}

#[cfg(test)]
mod tests;
