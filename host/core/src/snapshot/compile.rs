//! The snapshot compiler: profile + catalog + exit policy → one frozen
//! [`InvocationToolSnapshot`] and the reasons any allowed tool was left out.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use uuid::Uuid;

use super::tool_refs;
use super::{ExitPolicy, InvocationToolSnapshot, SnapshotError, ToolBinding};
use crate::alias::{AliasAllocator, builtin_alias, extension_alias_base, mcp_alias_base};
use crate::builtin::{self, TASK_RETURN};
use crate::policy::{self, Policies, ToolDecision, ToolFacts};
use crate::profile::{Profile, ProfileVersion};
use crate::{ToolCatalog, ToolId, ToolProvider};

/// Where descriptors and source names come from.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotSources<'a> {
    pub catalog: &'a ToolCatalog,
    /// Display names of MCP registrations, for aliases. A registration
    /// without one gets the `server` fallback.
    pub mcp_server_names: &'a BTreeMap<Uuid, String>,
    /// Why external tools are not in the catalog: by tool id
    /// (`mcp/<uuid>:<name>`) or, for a whole source, by its provider
    /// (`mcp/<uuid>`, `ext/<id>`). The diagnostic of an allowed tool that is
    /// missing says this reason.
    pub unavailable: &'a BTreeMap<String, String>,
    /// Providers whose tools only the listed profile versions may be offered
    /// (an extension granted to some profiles), by provider (`ext/<id>`).
    pub restricted_to_profiles: &'a BTreeMap<String, BTreeSet<ProfileVersion>>,
    /// Whose run the snapshot is for: the `toolhost serve` tenant, `None`
    /// for the local use. A profile-restricted grant covers the profile of
    /// the tenant it was given for, never the same content sent by another.
    pub tenant: Option<&'a str>,
    /// The user's and the platform's policies, above every profile.
    pub policies: &'a Policies,
    /// Tools whose source asks for approval of every call, and why (an
    /// MCP registration's `Ask`).
    pub source_approvals: &'a BTreeMap<ToolId, String>,
}

impl<'a> SnapshotSources<'a> {
    /// Only `catalog` and its MCP registrations' names: nothing omitted or
    /// restricted, no policy, no source asking for approval, the local use
    /// (tests, benches, an embedder without external tools).
    pub fn of(catalog: &'a ToolCatalog, mcp_server_names: &'a BTreeMap<Uuid, String>) -> Self {
        Self {
            catalog,
            mcp_server_names,
            unavailable: &NO_OMISSIONS,
            restricted_to_profiles: &NO_RESTRICTIONS,
            tenant: None,
            policies: &crate::policy::NO_POLICIES,
            source_approvals: &NO_SOURCE_APPROVALS,
        }
    }

    /// The same sources under other user and platform policies (a
    /// tenant's, under `toolhost serve`).
    pub fn with_policies(self, policies: &'a Policies) -> Self {
        Self { policies, ..self }
    }

    /// The same sources for `tenant`'s run (`None`: the local use).
    pub fn for_tenant(self, tenant: Option<&'a str>) -> Self {
        Self { tenant, ..self }
    }
}

/// No omissions (for sources without external tools).
pub static NO_OMISSIONS: BTreeMap<String, String> = BTreeMap::new();
/// No per-profile restrictions.
pub static NO_RESTRICTIONS: BTreeMap<String, BTreeSet<ProfileVersion>> = BTreeMap::new();
/// No source asks for approval.
pub static NO_SOURCE_APPROVALS: BTreeMap<ToolId, String> = BTreeMap::new();

/// Why an allowed tool is not in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OmitReason {
    /// Denied by the user's policy, the highest layer.
    DeniedByUser,
    /// Denied by the platform policy, which no profile overrides.
    DeniedByPlatform,
    /// Listed in `tools.deny` (deny beats allow).
    Denied,
    /// Not in `tools.allow`.
    NotAllowed,
    /// No source provides it now: a builtin this build does not ship, an MCP
    /// tool with no cached catalog entry, an extension not installed.
    Unavailable,
    /// A return-mode child reports with `task.return` instead.
    ExcludedForChild,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotDiagnostic {
    pub tool_id: ToolId,
    pub reason: OmitReason,
    pub message: String,
}

impl SnapshotDiagnostic {
    /// A tool no source offers, when the sources say nothing more. Every
    /// other reason's words are the policy decision's (`policy::decide`).
    fn unavailable(tool_id: &ToolId) -> Self {
        let message = match tool_id.provider() {
            ToolProvider::Builtin => "this build ships no component for this builtin",
            ToolProvider::Mcp(_) => {
                "no cached catalog entry for this MCP tool (refresh the server's catalog)"
            }
            ToolProvider::Extension(_) => "the extension is not installed or not granted",
        };
        Self {
            tool_id: tool_id.clone(),
            reason: OmitReason::Unavailable,
            message: message.to_owned(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CompiledSnapshot {
    pub snapshot: InvocationToolSnapshot,
    /// Allowed tools left out, in allow order.
    pub diagnostics: Vec<SnapshotDiagnostic>,
}

/// Compile the snapshot of invocation `id`.
///
/// Tools come in the profile's allow order; denied tools are dropped; every
/// binding copies its descriptor from the catalog, takes its per-tool budget
/// and sandbox limits from the profile, and gets an alias. A return-mode
/// child loses the finishing and delegating tools and gains `task.return`
/// last. Builtin aliases are reserved before any external tool is given one,
/// so an MCP or extension tool can never shadow a builtin.
pub fn compile(
    profile: &Profile,
    sources: SnapshotSources<'_>,
    id: &str,
    exit_policy: ExitPolicy,
) -> Result<CompiledSnapshot, SnapshotError> {
    let child = exit_policy == ExitPolicy::TaskReturnRequired;
    let task_return = ToolId::builtin(TASK_RETURN).ok();

    let mut aliases = AliasAllocator::new();
    for tool in profile.visible_tools().filter(|tool| tool.is_builtin()) {
        aliases.reserve(&builtin_alias(tool.native_name()));
    }
    aliases.reserve(&builtin_alias(TASK_RETURN));

    let mut bindings = Vec::new();
    let mut diagnostics = Vec::new();
    let mut decisions = Vec::new();
    // Hashed only when an extension is restricted to some profiles.
    let mut version: Option<ProfileVersion> = None;
    for tool in &profile.tools.allow {
        let descriptor = sources.catalog.get(tool);
        let unavailable = match descriptor {
            None => Some(
                sources
                    .unavailable
                    .get(tool.as_str())
                    .or_else(|| sources.unavailable.get(&tool.provider().to_string()))
                    .cloned()
                    .unwrap_or_else(|| SnapshotDiagnostic::unavailable(tool).message),
            ),
            Some(_) => {
                let provider = tool.provider().to_string();
                sources
                    .restricted_to_profiles
                    .get(&provider)
                    .and_then(|granted| {
                        let version =
                            version.get_or_insert_with(|| profile.version_for(sources.tenant));
                        (!granted.contains(version))
                            .then(|| not_granted_message(&provider, granted, version))
                    })
            }
        };
        let (decision, omitted) = policy::decide(
            sources.policies,
            &ToolFacts {
                tool,
                allowed_by_profile: true,
                denied_by_profile: profile.tools.deny.contains(tool),
                excluded_for_child: child
                    && builtin::of(tool).is_some_and(|builtin| builtin.child_excluded),
                unavailable,
                source_approval: sources.source_approvals.get(tool).map(String::as_str),
                destructive: descriptor.is_some_and(|descriptor| {
                    policy::explicitly_destructive(&descriptor.annotations)
                }),
                budget: profile.tools.max_calls_per_tool.get(tool).copied(),
            },
        );
        let approval = decision.approval_required.then(|| decision.reason.clone());
        let reason = decision.reason.clone();
        decisions.push(decision);
        if let Some(omitted) = omitted {
            diagnostics.push(SnapshotDiagnostic {
                tool_id: tool.clone(),
                reason: omitted,
                message: reason,
            });
            continue;
        }
        let Some(descriptor) = descriptor else {
            continue;
        };
        let mut descriptor = descriptor.clone();
        if let Some(text) = profile.tools.tool_descriptions.get(tool) {
            // The profile's words for this tool, frozen here: a resumed run
            // reads the snapshot, not the profile.
            descriptor.description = Some(text.clone());
        }
        let model_alias = match tool.provider() {
            ToolProvider::Builtin => builtin_alias(tool.native_name()),
            ToolProvider::Mcp(registration) => {
                let server = sources
                    .mcp_server_names
                    .get(registration)
                    .map_or("", String::as_str);
                aliases.allocate(&mcp_alias_base(server, tool.native_name()))
            }
            ToolProvider::Extension(extension) => {
                aliases.allocate(&extension_alias_base(extension, tool.native_name()))
            }
        };
        bindings.push(ToolBinding {
            descriptor,
            model_alias,
            max_calls: profile.tools.max_calls_per_tool.get(tool).copied(),
            limits: profile.sandbox.limits.get(tool).copied(),
            approval,
        });
    }
    if child && let Some(task_return) = task_return {
        match sources.catalog.get(&task_return) {
            Some(descriptor) => {
                // The runtime's own way back to the parent: no policy
                // layer decides it.
                decisions.push(ToolDecision {
                    tool_id: task_return.clone(),
                    visible: true,
                    callable: true,
                    approval_required: false,
                    reason: "given to every return-mode child".into(),
                    budget: None,
                });
                bindings.push(ToolBinding {
                    descriptor: descriptor.clone(),
                    model_alias: builtin_alias(TASK_RETURN),
                    max_calls: None,
                    limits: None,
                    approval: None,
                });
            }
            None => diagnostics.push(SnapshotDiagnostic::unavailable(&task_return)),
        }
    }
    // Builtins' text names other builtins by `{tool:NAME}`: written out as
    // the aliases this snapshot gives them.
    let aliases: Vec<(String, String)> = bindings
        .iter()
        .filter(|binding| binding.descriptor.id.is_builtin())
        .map(|binding| {
            let name = binding.descriptor.id.native_name().to_owned();
            (name, binding.model_alias.clone())
        })
        .collect();
    let alias = |name: &str| {
        aliases
            .iter()
            .find(|(native, _)| native == name)
            .map(|(_, alias)| alias.clone())
    };
    let refs = tool_refs::Refs {
        alias: &alias,
        message_body: &profile.output.message_body,
    };
    for binding in &mut bindings {
        let tool = binding.descriptor.id.clone();
        let overridden = profile.tools.tool_descriptions.contains_key(&tool);
        // A builtin's own text and the profile's are rendered; an MCP
        // server's or an extension's own text is never rewritten.
        if !tool.is_builtin() && !overridden {
            continue;
        }
        let descriptor = &mut binding.descriptor;
        if let Some(description) = &descriptor.description {
            descriptor.description = Some(tool_refs::render(description, &refs));
        }
        if tool.is_builtin() {
            tool_refs::render_schema(&mut descriptor.input_schema, &refs);
        }
    }
    let snapshot = InvocationToolSnapshot::new(id, bindings, profile.tools.max_calls_per_run)?
        .with_decisions(decisions)?;
    Ok(CompiledSnapshot {
        snapshot,
        diagnostics,
    })
}

/// Why a profile-restricted extension is not offered to `version`: another
/// profile, or this profile changed since the grant.
fn not_granted_message(
    provider: &str,
    granted: &BTreeSet<ProfileVersion>,
    version: &ProfileVersion,
) -> String {
    if let Some(earlier) = granted
        .iter()
        .find(|g| g.id == version.id && g.tenant == version.tenant)
    {
        return format!(
            "ext.not_granted_to_profile: {provider} was granted to profile `{}` of {} as it was then (sha256 {}); its content has changed since (sha256 {}): grant it again with `toolhost ext grant {} --profile FILE{}`",
            version.id,
            version.owner(),
            short(&earlier.sha256),
            short(&version.sha256),
            provider.strip_prefix("ext/").unwrap_or(provider),
            version
                .tenant
                .as_deref()
                .map(|tenant| format!(" --tenant {tenant}"))
                .unwrap_or_default(),
        );
    }
    // Only the profiles of this run's owner are named: another tenant's
    // profile names are none of this one's business.
    let ids: BTreeSet<&str> = granted
        .iter()
        .filter(|g| g.tenant == version.tenant)
        .map(|g| g.id.as_str())
        .collect();
    if ids.is_empty() {
        return format!(
            "ext.not_granted_to_profile: {provider} is granted to no profile of {}",
            version.owner()
        );
    }
    format!(
        "ext.not_granted_to_profile: {provider} is granted to {} only, not to profile `{}`",
        ids.into_iter().collect::<Vec<_>>().join(", "),
        version.id
    )
}

fn short(sha256: &str) -> &str {
    sha256.get(..12).unwrap_or(sha256)
}
