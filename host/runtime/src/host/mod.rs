//! `ToolHost`: every tool source loaded into one [`ToolCatalog`] — the
//! builtins, granted extensions and MCP servers — and the policies over
//! them. Assembly is here; running a call on its source is [`dispatch`].
//!
//! Two executors sit behind the catalog: the sandbox (builtin and granted
//! extension components) and MCP servers (their cached tools, called over
//! rmcp).

mod dispatch;
mod lazy_builtin;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use toolhost_core::policy::Policies;
use toolhost_core::{
    AgentToolCatalogItemDto, CatalogError, ProfileVersion, SnapshotSources, ToolCatalog, ToolId,
    ToolProvider, ToolSourceDto,
};
use toolhost_extensions::ExtensionRegistry;
use toolhost_mcp::{McpRegistry, Omitted, Permission};
use toolhost_sandbox::{
    CapabilitySet, ComponentSpec, LimitOverrides, LoadError, LoadEvent, Sandbox, SandboxConfig,
    SandboxError, ToolComponent, Trust,
};
use uuid::Uuid;

use lazy_builtin::LazyBuiltin;
pub use toolhost_builtins::BuiltinComponent;

#[derive(Debug, Default, Clone)]
pub struct ToolHostConfig {
    pub sandbox: SandboxConfig,
    /// Per-tool limit overrides, by canonical id or native name, applied over
    /// the defaults and capped by the sandbox policy.
    pub limits: HashMap<String, LimitOverrides>,
    /// How long one MCP call may take, connection to answer.
    pub mcp_call_timeout: Option<Duration>,
}

/// The default for [`ToolHostConfig::mcp_call_timeout`].
pub const MCP_CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Largest arguments object sent to an MCP server, serialized.
pub const MCP_MAX_ARGUMENT_BYTES: usize = 256 * 1024;

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
    #[error("builtin component `{package}` has no entry in the builtin table (no tool.json)")]
    NotInTable { package: String },
}

/// Where a catalog entry's code comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    Builtin {
        package: String,
    },
    /// A tool of a registered MCP server.
    Mcp {
        registration: Uuid,
        server: String,
    },
    /// A granted extension's component.
    Extension {
        id: String,
        version: String,
        /// The registry it was granted in, rechecked before every call.
        registry: PathBuf,
    },
}

/// An installed extension whose tool is not in the catalog, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtensionOmitted {
    pub id: String,
    pub code: &'static str,
    pub reason: String,
}

enum Entry {
    /// A builtin from the generated table, loaded at its first use.
    Builtin(Box<LazyBuiltin>),
    Component {
        // Boxed: a loaded component is large, an MCP entry small.
        component: Box<ToolComponent>,
        source: ToolSource,
    },
    /// Called through the registry in `dir`, rechecked before each call.
    Mcp {
        dir: PathBuf,
        registration: Uuid,
        server: String,
    },
}

pub struct ToolHost {
    sandbox: Sandbox,
    catalog: ToolCatalog,
    entries: BTreeMap<ToolId, Entry>,
    /// Display names of MCP registrations, for aliases.
    mcp_server_names: BTreeMap<Uuid, String>,
    /// MCP servers and tools left out of the catalog, and why.
    mcp_omitted: Vec<Omitted>,
    /// Installed extensions left out of the catalog, and why.
    extension_omitted: Vec<ExtensionOmitted>,
    /// Every omission, keyed for the snapshot compiler's diagnostics.
    unavailable: BTreeMap<String, String>,
    /// Extensions granted to some profiles only.
    restricted_to_profiles: BTreeMap<String, BTreeSet<ProfileVersion>>,
    /// The user's and the platform's policies.
    policies: Policies,
    /// Tools whose source asks for a person's approval (MCP `Ask`).
    source_approvals: BTreeMap<ToolId, String>,
    mcp_call_timeout: Duration,
}

impl ToolHost {
    /// A host offering every builtin, described from the generated table:
    /// nothing is compiled here. Each component is loaded (verified by
    /// sha256, compiled or read from the cache, its `describe()` checked
    /// against its entry) at its first call, or by [`preload`](Self::preload).
    pub fn with_builtins(config: ToolHostConfig) -> Result<Self, HostError> {
        let (mut host, limits) = Self::empty(config)?;
        for component in toolhost_builtins::components() {
            let entry = toolhost_core::builtin::all()
                .iter()
                .find(|entry| entry.package == component.package)
                .ok_or_else(|| HostError::NotInTable {
                    package: component.package.into(),
                })?;
            let grant = CapabilitySet::for_world(component.world).ok_or_else(|| {
                HostError::UnknownWorld {
                    package: component.package.into(),
                    world: component.world.into(),
                }
            })?;
            let descriptor = entry.descriptor();
            let overrides = limits
                .get(descriptor.id.as_str())
                .or_else(|| limits.get(descriptor.id.native_name()))
                .cloned()
                .unwrap_or_default();
            let lazy = LazyBuiltin::new(
                &host.sandbox,
                component,
                grant,
                overrides,
                descriptor.clone(),
            )?;
            let id = descriptor.id.clone();
            host.catalog.insert(descriptor)?;
            host.entries.insert(id, Entry::Builtin(Box::new(lazy)));
        }
        Ok(host)
    }

    /// A host without tools, and the configuration's limit overrides.
    fn empty(config: ToolHostConfig) -> Result<(Self, HashMap<String, LimitOverrides>), HostError> {
        let mut sandbox_config = config.sandbox;
        sandbox_config
            .capabilities
            .get_or_insert(toolhost_capabilities::link);
        let host = Self {
            sandbox: Sandbox::new(sandbox_config)?,
            catalog: ToolCatalog::new(),
            entries: BTreeMap::new(),
            mcp_server_names: BTreeMap::new(),
            mcp_omitted: Vec::new(),
            extension_omitted: Vec::new(),
            unavailable: BTreeMap::new(),
            restricted_to_profiles: BTreeMap::new(),
            policies: Policies::default(),
            source_approvals: BTreeMap::new(),
            mcp_call_timeout: config.mcp_call_timeout.unwrap_or(MCP_CALL_TIMEOUT),
        };
        Ok((host, config.limits))
    }

    /// A host with the given components loaded now, each describing itself
    /// (tests load hostile ones, which no table lists).
    pub async fn with_components(
        config: ToolHostConfig,
        components: &[BuiltinComponent],
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<Self, HostError> {
        let (mut host, limits) = Self::empty(config)?;
        let sandbox = &host.sandbox;
        let catalog = &mut host.catalog;
        let entries = &mut host.entries;
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
                        trust: Trust::Builtin,
                    },
                    observe,
                )
                .await?;
            let id = component.id();
            if let Some(overrides) = limits
                .get(id.as_str())
                .or_else(|| limits.get(id.native_name()))
            {
                sandbox.override_limits(&mut component, overrides)?;
            }
            catalog.insert(component.descriptor().clone())?;
            entries.insert(
                component.id().clone(),
                Entry::Component {
                    component: Box::new(component),
                    source: ToolSource::Builtin {
                        package: builtin.package.into(),
                    },
                },
            );
        }
        Ok(host)
    }

    /// Add the tools the registry's caches offer (never touching the
    /// network); what is left out is kept as [`mcp_omitted`](Self::mcp_omitted).
    pub fn with_mcp(mut self, registry: &McpRegistry) -> Result<Self, HostError> {
        let (offered, omitted) = toolhost_mcp::offered_tools(registry);
        for registration in registry.registrations() {
            self.mcp_server_names
                .insert(registration.id, registration.display_name.clone());
        }
        let mut omitted = omitted;
        for tool in offered {
            // A cache that lists a tool twice (or clashes otherwise) leaves
            // that tool out; the other tools stay.
            if let Err(error) = self.catalog.insert(tool.descriptor.clone()) {
                omitted.push(Omitted {
                    registration_id: tool.registration.id,
                    server: tool.registration.display_name.clone(),
                    tool: Some(tool.tool.name.clone()),
                    code: "mcp.catalog_conflict",
                    reason: error.to_string(),
                });
                continue;
            }
            if tool.registration.permission(&tool.tool.name) == Permission::Ask {
                self.source_approvals.insert(
                    tool.descriptor.id.clone(),
                    format!(
                        "the MCP registration `{}` asks (permission Ask)",
                        tool.registration.display_name
                    ),
                );
            }
            self.entries.insert(
                tool.descriptor.id.clone(),
                Entry::Mcp {
                    dir: registry.dir().to_owned(),
                    registration: tool.registration.id,
                    server: tool.registration.display_name.clone(),
                },
            );
        }
        for omission in &omitted {
            let key = match &omission.tool {
                Some(tool) => format!("mcp/{}:{tool}", omission.registration_id),
                None => format!("mcp/{}", omission.registration_id),
            };
            self.unavailable
                .insert(key, format!("{}: {}", omission.code, omission.reason));
        }
        self.mcp_omitted = omitted;
        Ok(self)
    }

    pub fn mcp_omitted(&self) -> &[Omitted] {
        &self.mcp_omitted
    }

    /// Add the registry's granted extensions, each checked and loaded under
    /// its grant (from the component cache when it was precompiled at
    /// install). One that is not granted or fails to load is left out with
    /// its reason; the others and the builtins stay.
    pub async fn with_extensions(
        mut self,
        registry: &ExtensionRegistry,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Self {
        for extension in registry.extensions() {
            let provider = format!("ext/{}", extension.id);
            let loaded =
                crate::extensions::load_granted(&self.sandbox, registry, extension, observe).await;
            let omitted = match loaded {
                Ok(component) => match self.catalog.insert(component.descriptor().clone()) {
                    Ok(()) => {
                        if let Some(profiles) =
                            extension.grant.as_ref().and_then(|g| g.profiles.clone())
                        {
                            self.restricted_to_profiles
                                .insert(provider.clone(), profiles);
                        }
                        self.entries.insert(
                            component.id().clone(),
                            Entry::Component {
                                component: Box::new(component),
                                source: ToolSource::Extension {
                                    id: extension.id.clone(),
                                    version: extension.version.clone(),
                                    registry: registry.dir().to_owned(),
                                },
                            },
                        );
                        continue;
                    }
                    Err(error) => ("ext.catalog_conflict", error.to_string()),
                },
                Err(omission) => omission,
            };
            let (code, reason) = omitted;
            if code != "ext.not_granted" {
                tracing::warn!(extension = %extension.id, code, %reason, "extension left out");
            }
            self.unavailable
                .insert(provider, format!("{code}: {reason}"));
            self.extension_omitted.push(ExtensionOmitted {
                id: extension.id.clone(),
                code,
                reason,
            });
        }
        self
    }

    pub fn extension_omitted(&self) -> &[ExtensionOmitted] {
        &self.extension_omitted
    }

    pub fn catalog(&self) -> &ToolCatalog {
        &self.catalog
    }

    /// What the snapshot compiler copies descriptors and names from.
    pub fn snapshot_sources(&self) -> SnapshotSources<'_> {
        SnapshotSources {
            catalog: &self.catalog,
            mcp_server_names: &self.mcp_server_names,
            unavailable: &self.unavailable,
            restricted_to_profiles: &self.restricted_to_profiles,
            tenant: None,
            policies: &self.policies,
            source_approvals: &self.source_approvals,
        }
    }

    /// [`snapshot_sources`](Self::snapshot_sources) for `tenant`'s run
    /// (`None`: the local use), under other user and platform policies
    /// when given (a tenant's, under `toolhost serve`).
    pub fn snapshot_sources_under<'a>(
        &'a self,
        policies: Option<&'a Policies>,
        tenant: Option<&'a str>,
    ) -> SnapshotSources<'a> {
        let sources = self.snapshot_sources().for_tenant(tenant);
        match policies {
            Some(policies) => sources.with_policies(policies),
            None => sources,
        }
    }

    /// The user's and the platform's tool policies, over every profile's
    /// snapshot from now on (docs/policy.md).
    pub fn with_policies(mut self, policies: Policies) -> Self {
        self.policies = policies;
        self
    }

    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The component behind a builtin or extension tool, loading it if
    /// this is its first use; `None` for an MCP tool or an unknown id.
    pub async fn component(&self, id: &ToolId) -> Result<Option<&ToolComponent>, LoadError> {
        match self.entries.get(id) {
            Some(Entry::Builtin(lazy)) => lazy.get(&self.sandbox, &|_| {}).await.map(Some),
            Some(Entry::Component { component, .. }) => Ok(Some(component)),
            Some(Entry::Mcp { .. }) | None => Ok(None),
        }
    }

    /// Every builtin of the catalog, in catalog order (what `preload`
    /// takes to load them all).
    pub fn builtin_ids(&self) -> Vec<ToolId> {
        self.catalog
            .iter()
            .filter(|descriptor| descriptor.id.is_builtin())
            .map(|descriptor| descriptor.id.clone())
            .collect()
    }

    /// Whether a builtin's component is loaded already (MCP tools and
    /// extensions, loaded with the host, count as loaded).
    pub fn is_loaded(&self, id: &ToolId) -> bool {
        match self.entries.get(id) {
            Some(Entry::Builtin(lazy)) => lazy.is_loaded(),
            Some(_) => true,
            None => false,
        }
    }

    /// Load the builtins among `ids` now rather than at their first call,
    /// all at once: their compiles run on several cores. A snapshot's tools
    /// before its first round, or everything a long-running server will
    /// serve. Each builtin's outcome, in the order given; other ids are
    /// skipped.
    pub async fn preload<'a>(
        &self,
        ids: impl IntoIterator<Item = &'a ToolId>,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Vec<(&'a ToolId, Result<&ToolComponent, LoadError>)> {
        let loads = ids.into_iter().filter_map(|id| match self.entries.get(id) {
            Some(Entry::Builtin(lazy)) => {
                Some(async move { (id, lazy.get(&self.sandbox, observe).await) })
            }
            _ => None,
        });
        futures_util::future::join_all(loads).await
    }

    pub fn source(&self, id: &ToolId) -> Option<ToolSource> {
        Some(match self.entries.get(id)? {
            Entry::Builtin(lazy) => ToolSource::Builtin {
                package: lazy.package().into(),
            },
            Entry::Component { source, .. } => source.clone(),
            Entry::Mcp {
                registration,
                server,
                ..
            } => ToolSource::Mcp {
                registration: *registration,
                server: server.clone(),
            },
        })
    }

    /// What `tools list` and profile UIs show, in catalog order.
    pub fn catalog_items(&self) -> Vec<AgentToolCatalogItemDto> {
        self.catalog
            .iter()
            .filter_map(|descriptor| {
                let source = match self.entries.get(&descriptor.id)? {
                    Entry::Builtin(lazy) => ToolSourceDto {
                        kind: "builtin".into(),
                        name: lazy.package().into(),
                        sha256: Some(lazy.sha256_hex().to_owned()),
                        capabilities: lazy
                            .grant()
                            .iter()
                            .map(|capability| capability.to_string())
                            .collect(),
                    },
                    Entry::Component { component, source } => ToolSourceDto {
                        kind: match source {
                            ToolSource::Extension { .. } => "extension",
                            _ => "builtin",
                        }
                        .into(),
                        name: match source {
                            ToolSource::Builtin { package } => package.clone(),
                            ToolSource::Mcp { server, .. } => server.clone(),
                            ToolSource::Extension { id, version, .. } => {
                                format!("{id} {version}")
                            }
                        },
                        sha256: Some(component.sha256_hex().to_owned()),
                        capabilities: component
                            .grant()
                            .iter()
                            .map(|capability| capability.to_string())
                            .collect(),
                    },
                    Entry::Mcp { server, .. } => ToolSourceDto {
                        kind: "mcp".into(),
                        name: server.clone(),
                        sha256: None,
                        capabilities: Vec::new(),
                    },
                };
                Some(AgentToolCatalogItemDto::new(descriptor, source))
            })
            .collect()
    }
}

/// Parse a person's argument text the way a provider's would be: text that is
/// not JSON is passed on as a JSON string, which the object check then refuses
/// as `tool.invalid_arguments`.
pub fn arguments_from_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}
