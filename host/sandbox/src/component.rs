//! Loading a tool component: integrity, compile or cache, capability check,
//! link, and one sandboxed `describe()` to learn the descriptor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};
use toolhost_core::{Annotations, ToolDescriptor, ToolId, ToolProvider};
use wasmtime::component::Component;

use crate::cache::{Lookup, Rejected};
use crate::call::{Export, ExportResult};
use crate::capability::{
    CapabilitySet, HostVersion, TOOL_EXPORT, imported_capabilities, ungranted_imports,
    unsupported_wit,
};
use crate::engine::Sandbox;
use crate::failure::SandboxFailure;
use crate::limits::{Clamped, LimitError, LimitOverrides, Limits};
use crate::state::{CallEntropy, bindings};

/// What to load and under which grant.
#[derive(Debug, Clone)]
pub struct ComponentSpec<'a> {
    /// Names the component in messages: a package or extension id.
    pub label: &'a str,
    pub bytes: &'a [u8],
    /// When set, the bytes must hash to it (hex sha256).
    pub expected_sha256: Option<&'a str>,
    /// The provider the tool's id is formed with.
    pub provider: ToolProvider,
    /// The capabilities it may import.
    pub grant: CapabilitySet,
    /// Limits it asks for over the defaults; capped by the host policy.
    pub limits: LimitOverrides,
    /// What the host trusts the component with beyond its grant.
    pub trust: Trust,
}

/// What a component is trusted with beyond its capability grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Shipped with toolhost: a `control` tool may request effects (through
    /// `toolhost:control`, its world's), and a skill reader charges the
    /// skill budget for what it shows.
    Builtin,
    /// Third-party: never changes the run, whatever its annotations (it is
    /// never granted `toolhost:control`); the host charges the skill budget
    /// for every character it reads.
    Extension,
}

/// Progress of a load, for terminals and logs.
#[derive(Debug, Clone)]
pub enum LoadEvent<'a> {
    Compiling { label: &'a str, bytes: usize },
    Compiled { label: &'a str, elapsed: Duration },
    FromCache { label: &'a str },
    CacheRejected { label: &'a str, reason: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedFrom {
    Compiled,
    Cache,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("component `{label}` has sha256 {actual}, expected {expected}: refusing to load it")]
    IntegrityMismatch {
        label: String,
        expected: String,
        actual: String,
    },
    #[error("component `{label}`: {source}")]
    Limits {
        label: String,
        #[source]
        source: LimitError,
    },
    #[error("component `{label}` does not compile: {message}")]
    Compile { label: String, message: String },
    #[error(transparent)]
    Cache(#[from] crate::cache::CacheError),
    #[error(
        "component `{label}` was built against {}, which this toolhost does not support (it supports toolhost:tool@{} and toolhost:host@{}..={}): rebuild it against a supported version",
        found.join(", "),
        crate::capability::TOOL_VERSION,
        HostVersion::ALL[0],
        HostVersion::ALL[HostVersion::ALL.len() - 1]
    )]
    UnsupportedWit { label: String, found: Vec<String> },
    #[error(
        "component `{label}` imports {} that its grant ({grant}) does not include: refusing to load it",
        imports.join(", ")
    )]
    UngrantedImports {
        label: String,
        imports: Vec<String>,
        grant: CapabilitySet,
    },
    #[error("component `{label}` does not export {TOOL_EXPORT} (it exports: {})", exports.join(", "))]
    NotATool { label: String, exports: Vec<String> },
    #[error("component `{label}` cannot be linked: {message}")]
    Link { label: String, message: String },
    #[error("component `{label}` failed in describe(): {failure}")]
    Describe {
        label: String,
        failure: SandboxFailure,
    },
    #[error("component `{label}` describes itself wrongly: {message}")]
    Descriptor { label: String, message: String },
}

/// A loaded, checked tool, ready to be called any number of times.
pub struct ToolComponent {
    pub(crate) label: Arc<str>,
    pub(crate) descriptor: ToolDescriptor,
    pub(crate) sha256_hex: String,
    pub(crate) imports: Vec<String>,
    /// It imports an interface every component may (`toolhost:catalog`),
    /// found once at load so a call prepares that state only when used.
    pub(crate) imports_ungated: bool,
    pub(crate) grant: CapabilitySet,
    pub(crate) limits: Limits,
    pub(crate) clamped: Vec<Clamped>,
    pub(crate) trust: Trust,
    pub(crate) pre: bindings::PureToolPre<crate::state::CallState>,
    pub(crate) loaded_from: LoadedFrom,
    pub(crate) load_time: Duration,
}

impl ToolComponent {
    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    pub fn id(&self) -> &ToolId {
        &self.descriptor.id
    }

    pub fn sha256_hex(&self) -> &str {
        &self.sha256_hex
    }

    /// The component's imports, as checked against its grant.
    pub fn imports(&self) -> &[String] {
        &self.imports
    }

    /// Whether it imports an interface granted to every component
    /// (`toolhost:catalog`).
    pub fn imports_ungated(&self) -> bool {
        self.imports_ungated
    }

    pub fn grant(&self) -> &CapabilitySet {
        &self.grant
    }

    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// The host capabilities its imports actually use (within the grant).
    pub fn imported_capabilities(&self) -> CapabilitySet {
        imported_capabilities(self.imports.iter().map(String::as_str))
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Requested limits that the host policy lowered.
    pub fn clamped_limits(&self) -> &[Clamped] {
        &self.clamped
    }

    pub fn loaded_from(&self) -> LoadedFrom {
        self.loaded_from
    }

    /// Time spent in `load`, including compilation or the cache read.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }
}

impl std::fmt::Debug for ToolComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolComponent")
            .field("id", &self.descriptor.id)
            .field("sha256", &self.sha256_hex)
            .field("grant", &self.grant)
            .finish_non_exhaustive()
    }
}

impl Sandbox {
    /// Load a component. `observe` sees compile and cache events.
    pub async fn load(
        &self,
        spec: ComponentSpec<'_>,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<ToolComponent, LoadError> {
        let started = Instant::now();
        let label = spec.label;
        let sha256_hex = hex::encode(Sha256::digest(spec.bytes));
        if let Some(expected) = spec.expected_sha256
            && !expected.eq_ignore_ascii_case(&sha256_hex)
        {
            return Err(LoadError::IntegrityMismatch {
                label: label.to_owned(),
                expected: expected.to_owned(),
                actual: sha256_hex,
            });
        }

        let (limits, clamped) = self
            .policy
            .resolve(Limits::default(), &spec.limits)
            .map_err(|source| LoadError::Limits {
                label: label.to_owned(),
                source,
            })?;
        warn_clamped(label, &clamped);

        let (component, loaded_from) = self
            .compiled(label, spec.bytes, &sha256_hex, observe)
            .await?;

        let component_type = component.component_type();
        let imports: Vec<String> = component_type
            .imports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let exports: Vec<String> = component_type
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let foreign = unsupported_wit(imports.iter().chain(&exports).map(String::as_str));
        if !foreign.is_empty() {
            return Err(LoadError::UnsupportedWit {
                label: label.to_owned(),
                found: foreign,
            });
        }
        let extra = ungranted_imports(imports.iter().map(String::as_str), &spec.grant);
        if !extra.is_empty() {
            return Err(LoadError::UngrantedImports {
                label: label.to_owned(),
                imports: extra,
                grant: spec.grant,
            });
        }
        if !exports.iter().any(|name| name == TOOL_EXPORT) {
            return Err(LoadError::NotATool {
                label: label.to_owned(),
                exports,
            });
        }

        let link = |error: wasmtime::Error| LoadError::Link {
            label: label.to_owned(),
            message: format!("{error:#}"),
        };
        let instance_pre = self.linker.instantiate_pre(&component).map_err(link)?;
        let pre = bindings::PureToolPre::new(instance_pre).map_err(link)?;

        let label_arc: Arc<str> = Arc::from(label);
        let report = self
            .invoke(
                crate::call::Guest {
                    label: &label_arc,
                    pre: &pre,
                    trust: spec.trust,
                },
                &limits,
                CallEntropy::seeded(0),
                crate::CallCapabilities::new(),
                Export::Describe,
            )
            .await;
        let descriptor = match report.result {
            Ok(ExportResult::Descriptor(descriptor)) => descriptor,
            Ok(ExportResult::Call(_)) => unreachable!("describe() returns a descriptor"),
            Err(failure) => {
                return Err(LoadError::Describe {
                    label: label.to_owned(),
                    failure,
                });
            }
        };
        let descriptor = convert_descriptor(&spec.provider, descriptor).map_err(|message| {
            LoadError::Descriptor {
                label: label.to_owned(),
                message,
            }
        })?;
        tracing::debug!(tool = %descriptor.id, ?loaded_from, elapsed = ?started.elapsed(), "component loaded");

        Ok(ToolComponent {
            label: label_arc,
            descriptor,
            sha256_hex,
            imports_ungated: imports
                .iter()
                .any(|import| toolhost_core::capability::is_ungated(import)),
            imports,
            grant: spec.grant,
            limits,
            clamped,
            trust: spec.trust,
            pre,
            loaded_from,
            load_time: started.elapsed(),
        })
    }

    /// Apply further overrides (say, from a profile) to a loaded component,
    /// capped by the host policy like the ones it was loaded with.
    pub fn override_limits(
        &self,
        component: &mut ToolComponent,
        overrides: &LimitOverrides,
    ) -> Result<(), LoadError> {
        let (limits, clamped) =
            self.policy
                .resolve(component.limits, overrides)
                .map_err(|source| LoadError::Limits {
                    label: component.label.to_string(),
                    source,
                })?;
        warn_clamped(&component.label, &clamped);
        component.limits = limits;
        component.clamped.extend(clamped);
        Ok(())
    }

    /// Compile on tokio's blocking pool when there is a runtime, so the
    /// thread that awaits the load (perhaps a current-thread runtime's only
    /// one) keeps serving and several loads awaited together compile on
    /// several cores. The bytes are copied once: a compile costs far more.
    async fn compile_off_thread(&self, bytes: &[u8]) -> wasmtime::Result<Component> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Component::new(&self.engine, bytes);
        }
        let engine = self.engine.clone();
        let bytes = bytes.to_vec();
        match tokio::task::spawn_blocking(move || Component::new(&engine, &bytes)).await {
            Ok(compiled) => compiled,
            Err(joined) if joined.is_panic() => std::panic::resume_unwind(joined.into_panic()),
            Err(joined) => Err(wasmtime::Error::msg(format!(
                "the compile task was cancelled: {joined}"
            ))),
        }
    }

    /// The compiled component, from the cache when an intact entry exists.
    async fn compiled(
        &self,
        label: &str,
        bytes: &[u8],
        sha256_hex: &str,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<(Component, LoadedFrom), LoadError> {
        let key = format!("{sha256_hex}-{}", self.engine_digest);
        if let Some(cache) = &self.cache {
            match cache.get(&key)? {
                Lookup::Hit(artifact) => {
                    // SAFETY: the artifact was produced by `Component::serialize`
                    // under this engine digest, and its sha256 was just verified.
                    match unsafe { Component::deserialize(&self.engine, &artifact) } {
                        Ok(component) => {
                            observe(LoadEvent::FromCache { label });
                            return Ok((component, LoadedFrom::Cache));
                        }
                        Err(error) => {
                            cache.remove(&key)?;
                            let reason = format!("wasmtime rejected it: {error:#}");
                            warn_rejected(label, &reason, observe);
                        }
                    }
                }
                Lookup::Corrupt(reason) => warn_rejected(label, &rejected_text(&reason), observe),
                Lookup::Miss => {}
            }
        }

        observe(LoadEvent::Compiling {
            label,
            bytes: bytes.len(),
        });
        let started = Instant::now();
        let component =
            self.compile_off_thread(bytes)
                .await
                .map_err(|error| LoadError::Compile {
                    label: label.to_owned(),
                    message: format!("{error:#}"),
                })?;
        observe(LoadEvent::Compiled {
            label,
            elapsed: started.elapsed(),
        });
        if let Some(cache) = &self.cache {
            match component.serialize() {
                Ok(artifact) => cache.put(&key, &artifact)?,
                Err(error) => tracing::warn!(label, "cannot serialize for the cache: {error:#}"),
            }
        }
        Ok((component, LoadedFrom::Compiled))
    }
}

fn warn_clamped(label: &str, clamped: &[Clamped]) {
    for Clamped {
        limit,
        requested,
        cap,
    } in clamped
    {
        tracing::warn!(
            label,
            limit,
            requested,
            cap,
            "limit lowered to the host policy cap"
        );
    }
}

fn rejected_text(reason: &Rejected) -> String {
    format!("entry is {reason}; rebuilding")
}

fn warn_rejected(label: &str, reason: &str, observe: &(dyn Fn(LoadEvent<'_>) + Sync)) {
    tracing::warn!(label, reason, "discarding a damaged component cache entry");
    observe(LoadEvent::CacheRejected {
        label,
        reason: reason.to_owned(),
    });
}

type WitDescriptor = bindings::toolhost::tool::types::Descriptor;

/// Most a `describe()` may say: its text reaches catalogs, snapshots, model
/// requests and terminals, so it is bounded like a call's output is.
pub const MAX_TITLE_CHARS: usize = 128;
pub const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;
pub const MAX_SOURCE_KIND_BYTES: usize = 64;

/// The first bound `wit` breaks, if any.
fn oversized(wit: &WitDescriptor) -> Option<String> {
    let too_long = |what: &str, size: usize, max: usize, unit: &str| {
        (size > max).then(|| format!("{what} is {size} {unit}; at most {max} are accepted"))
    };
    let title = wit
        .title
        .as_deref()
        .map_or(0, |title| title.chars().count());
    too_long("the title", title, MAX_TITLE_CHARS, "characters")
        .or_else(|| {
            too_long(
                "the description",
                wit.description.len(),
                MAX_DESCRIPTION_BYTES,
                "bytes",
            )
        })
        .or_else(|| {
            too_long(
                "the input schema",
                wit.input_schema.len(),
                MAX_SCHEMA_BYTES,
                "bytes",
            )
        })
        .or_else(|| {
            too_long(
                "the output schema",
                wit.output_schema.as_ref().map_or(0, String::len),
                MAX_SCHEMA_BYTES,
                "bytes",
            )
        })
        .or_else(|| {
            too_long(
                "the source kind",
                wit.annotations.source_kind.as_ref().map_or(0, String::len),
                MAX_SOURCE_KIND_BYTES,
                "bytes",
            )
        })
}

fn convert_descriptor(
    provider: &ToolProvider,
    wit: WitDescriptor,
) -> Result<ToolDescriptor, String> {
    if let Some(problem) = oversized(&wit) {
        return Err(problem);
    }
    let id = ToolId::new(provider, &wit.native_name).map_err(|error| error.to_string())?;
    let parse = |what: &str, text: &str| -> Result<Value, String> {
        serde_json::from_str(text).map_err(|error| format!("{what} is not JSON: {error}"))
    };
    if wit.description.trim().is_empty() {
        return Err("the description is empty".into());
    }
    let hints = &wit.annotations;
    let annotations = Annotations {
        read_only: hints.read_only,
        mutating: hints.mutating,
        control: hints.control,
        idempotent: hints.idempotent,
        open_world: hints.open_world,
        source_kind: hints.source_kind.clone(),
    };
    let descriptor = ToolDescriptor {
        id,
        title: wit.title.filter(|title| !title.trim().is_empty()),
        description: Some(wit.description),
        input_schema: parse("the input schema", &wit.input_schema)?,
        output_schema: wit
            .output_schema
            .as_deref()
            .map(|text| parse("the output schema", text))
            .transpose()?,
        annotations: annotations.to_json(),
    };
    descriptor.validate().map_err(|error| error.to_string())?;
    Ok(descriptor)
}
