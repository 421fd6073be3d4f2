//! `ToolHost`: every tool source loaded into one [`ToolCatalog`], and the
//! executor that runs a [`ToolInvocation`] on the right one.
//!
//! Today the only executor is the sandbox (builtin components); MCP servers
//! and extensions join as further sources behind the same catalog.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use toolhost_core::{
    AgentToolCatalogItemDto, AgentToolResult, CatalogError, IdentityMismatch, SnapshotSources,
    ToolBinding, ToolCatalog, ToolEffect, ToolId, ToolInvocation, ToolProvider, ToolSourceDto,
};
use toolhost_sandbox::{
    CallContext, CallEntropy, CallReport, CapabilitySet, ComponentSpec, HostFault, LimitError,
    LimitOverrides, LoadError, LoadEvent, Sandbox, SandboxConfig, SandboxError, ToolComponent,
};
use uuid::Uuid;

pub use toolhost_builtins::BuiltinComponent;

#[derive(Debug, Default, Clone)]
pub struct ToolHostConfig {
    pub sandbox: SandboxConfig,
    /// Per-tool limit overrides, by canonical id or native name, applied over
    /// the defaults and capped by the sandbox policy.
    pub limits: HashMap<String, LimitOverrides>,
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("builtin `{package}` declares the unknown world `{world}`")]
    UnknownWorld { package: String, world: String },
}

/// A system failure while executing: the run cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error("tool.executor_missing: no executor for tool `{0}`")]
    UnknownTool(ToolId),
    #[error(transparent)]
    Identity(#[from] Box<IdentityMismatch>),
    #[error("sandbox.limits_invalid: the limits of `{tool}` cannot be applied: {source}")]
    Limits { tool: ToolId, source: LimitError },
    /// A host capability hit a system failure during the call (a symlink
    /// planted in the workspace, an I/O error); the call was stopped.
    #[error("{0}")]
    HostFault(HostFault),
}

impl ExecuteError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownTool(_) => "tool.executor_missing",
            Self::Identity(_) => "tool.result_identity_mismatch",
            Self::Limits { .. } => "sandbox.limits_invalid",
            // Codes of host faults are the capability's own (`workspace.*`);
            // the static ones here name the class.
            Self::HostFault(_) => "sandbox.host_fault",
        }
    }
}

/// Runs invocations. The control plane (gate, journal, audit) sits in front
/// of every executor; an executor only runs the call and binds the result
/// to it.
pub trait ToolExecutor {
    /// Run `invocation` as `binding` (its frozen descriptor and limits) with
    /// the recorded nondeterministic inputs `entropy`, its capabilities
    /// acting on `context` (the invocation's workspace session).
    fn execute(
        &self,
        invocation: &ToolInvocation,
        binding: &ToolBinding,
        entropy: CallEntropy,
        context: CallContext,
    ) -> impl std::future::Future<Output = Result<Execution, ExecuteError>> + Send;
}

/// Where a catalog entry's code comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    Builtin { package: String },
}

struct Entry {
    component: ToolComponent,
    source: ToolSource,
}

/// One finished execution.
#[derive(Debug)]
pub struct Execution {
    pub result: AgentToolResult,
    /// For the runtime to apply; never part of the stored result.
    pub effect: Option<ToolEffect>,
    pub report: CallReport,
}

pub struct ToolHost {
    sandbox: Sandbox,
    catalog: ToolCatalog,
    entries: BTreeMap<ToolId, Entry>,
    /// Display names of MCP registrations (none until MCP lands).
    mcp_server_names: BTreeMap<Uuid, String>,
}

impl ToolHost {
    /// A host with every builtin component loaded (each verified by sha256).
    pub async fn with_builtins(
        config: ToolHostConfig,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<Self, HostError> {
        Self::with_components(config, toolhost_builtins::components(), observe).await
    }

    /// A host with the given builtin components (tests load hostile ones).
    pub async fn with_components(
        config: ToolHostConfig,
        components: &[BuiltinComponent],
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<Self, HostError> {
        let sandbox = Sandbox::new(config.sandbox)?;
        let mut catalog = ToolCatalog::new();
        let mut entries = BTreeMap::new();
        for builtin in components {
            let grant =
                CapabilitySet::for_world(builtin.world).ok_or_else(|| HostError::UnknownWorld {
                    package: builtin.package.into(),
                    world: builtin.world.into(),
                })?;
            let mut component = sandbox
                .load(
                    ComponentSpec {
                        label: builtin.package,
                        bytes: builtin.bytes,
                        expected_sha256: Some(builtin.sha256_hex),
                        provider: ToolProvider::Builtin,
                        grant,
                        limits: LimitOverrides::default(),
                        allow_effects: true,
                    },
                    observe,
                )
                .await?;
            let id = component.id();
            if let Some(overrides) = config
                .limits
                .get(id.as_str())
                .or_else(|| config.limits.get(id.native_name()))
            {
                sandbox.override_limits(&mut component, overrides)?;
            }
            catalog.insert(component.descriptor().clone())?;
            entries.insert(
                component.id().clone(),
                Entry {
                    component,
                    source: ToolSource::Builtin {
                        package: builtin.package.into(),
                    },
                },
            );
        }
        Ok(Self {
            sandbox,
            catalog,
            entries,
            mcp_server_names: BTreeMap::new(),
        })
    }

    pub fn catalog(&self) -> &ToolCatalog {
        &self.catalog
    }

    /// What the snapshot compiler copies descriptors and names from.
    pub fn snapshot_sources(&self) -> SnapshotSources<'_> {
        SnapshotSources {
            catalog: &self.catalog,
            mcp_server_names: &self.mcp_server_names,
        }
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    pub fn component(&self, id: &ToolId) -> Option<&ToolComponent> {
        self.entries.get(id).map(|entry| &entry.component)
    }

    pub fn source(&self, id: &ToolId) -> Option<&ToolSource> {
        self.entries.get(id).map(|entry| &entry.source)
    }

    /// What `tools list` and profile UIs show, in catalog order.
    pub fn catalog_items(&self) -> Vec<AgentToolCatalogItemDto> {
        self.catalog
            .iter()
            .filter_map(|descriptor| {
                let entry = self.entries.get(&descriptor.id)?;
                let ToolSource::Builtin { package } = &entry.source;
                let source = ToolSourceDto {
                    kind: "builtin".into(),
                    name: package.clone(),
                    sha256: Some(entry.component.sha256_hex().to_owned()),
                    capabilities: entry
                        .component
                        .grant()
                        .iter()
                        .map(|capability| capability.to_string())
                        .collect(),
                };
                Some(AgentToolCatalogItemDto::new(descriptor, source))
            })
            .collect()
    }

    /// Run one invocation outside any snapshot, under the tool's own
    /// limits. Tool errors and sandbox failures are results the model reads;
    /// only a missing executor or an identity mismatch is a system failure.
    pub async fn execute(
        &self,
        invocation: &ToolInvocation,
        entropy: CallEntropy,
    ) -> Result<Execution, ExecuteError> {
        self.run(invocation, None, entropy, CallContext::default())
            .await
    }

    async fn run(
        &self,
        invocation: &ToolInvocation,
        overrides: Option<&LimitOverrides>,
        entropy: CallEntropy,
        context: CallContext,
    ) -> Result<Execution, ExecuteError> {
        let entry = self
            .entries
            .get(&invocation.tool_id)
            .ok_or_else(|| ExecuteError::UnknownTool(invocation.tool_id.clone()))?;
        let component = &entry.component;
        let limits = match overrides {
            None => *component.limits(),
            Some(overrides) => {
                let (limits, clamped) = self
                    .sandbox
                    .policy()
                    .resolve(*component.limits(), overrides)
                    .map_err(|source| ExecuteError::Limits {
                        tool: invocation.tool_id.clone(),
                        source,
                    })?;
                for lowered in clamped {
                    tracing::debug!(
                        tool = %invocation.tool_id,
                        limit = lowered.limit,
                        requested = lowered.requested,
                        cap = lowered.cap,
                        "profile limit lowered to the host policy cap"
                    );
                }
                limits
            }
        };
        let report = self
            .sandbox
            .call_under(component, &limits, &invocation.arguments, entropy, context)
            .await;
        if let Some(fault) = report.host_fault.clone() {
            return Err(ExecuteError::HostFault(fault));
        }
        let (result, effect) = AgentToolResult::from_outcome(invocation, report.outcome());
        result.check_identity(invocation)?;
        Ok(Execution {
            result,
            effect,
            report,
        })
    }
}

impl ToolExecutor for ToolHost {
    fn execute(
        &self,
        invocation: &ToolInvocation,
        binding: &ToolBinding,
        entropy: CallEntropy,
        context: CallContext,
    ) -> impl std::future::Future<Output = Result<Execution, ExecuteError>> + Send {
        self.run(invocation, binding.limits.as_ref(), entropy, context)
    }
}

/// Parse a person's argument text the way a provider's would be: text that is
/// not JSON is passed on as a JSON string, which the object check then refuses
/// as `tool.invalid_arguments`.
pub fn arguments_from_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}
