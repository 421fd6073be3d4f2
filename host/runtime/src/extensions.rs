//! Extension tools in the runtime: installing one (every check, then a
//! precompile into the component cache, then a disabled record) and loading
//! the granted ones into a [`ToolHost`](crate::ToolHost).
//!
//! The checks at install, in order: the manifest's fields and WIT target;
//! the component's file and size; its sha256 against the manifest (by the
//! sandbox, which hashes it anyway for the cache key); its WIT versions;
//! its imports against the capabilities the manifest requests; a sandboxed
//! `describe()` whose tool name must be the one the manifest declares. The
//! same component is checked again at every load against the *granted*
//! capabilities, so a grant narrower than the imports never loads.

use std::path::Path;
use std::time::Duration;

use toolhost_capabilities::http::SecretHeader;
use toolhost_core::limits::{Clamped, Limits};
use toolhost_core::{CapabilitySet, ProfileVersion, ToolProvider};
use toolhost_extensions::{
    ExtensionError, ExtensionRegistry, Grant, InstalledExtension, Manifest, SecretError,
    SecretStore,
};
use toolhost_sandbox::capability::newest_host_import;
use toolhost_sandbox::{
    ComponentSpec, LoadError, LoadEvent, LoadedFrom, Sandbox, ToolComponent, Trust,
};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error(transparent)]
    Extension(#[from] ExtensionError),
    /// The component imports host capabilities (or anything else) its
    /// manifest does not request.
    #[error(
        "ext.imports_not_requested: `{id}` imports {} but its manifest requests only {requested}: refusing to install it",
        imports.join(", ")
    )]
    ImportsNotRequested {
        id: String,
        imports: Vec<String>,
        requested: String,
    },
    #[error("ext.wit_unsupported: {0}")]
    WitUnsupported(LoadError),
    #[error("ext.load_failed: {0}")]
    Load(LoadError),
    #[error(
        "ext.tools_mismatch: `{id}`'s manifest declares the tool `{declared}`, but its component describes `{described}`"
    )]
    ToolsMismatch {
        id: String,
        declared: String,
        described: String,
    },
}

impl InstallError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Extension(error) => error.code(),
            Self::ImportsNotRequested { .. } => "ext.imports_not_requested",
            Self::WitUnsupported(_) => "ext.wit_unsupported",
            Self::Load(_) => "ext.load_failed",
            Self::ToolsMismatch { .. } => "ext.tools_mismatch",
        }
    }
}

/// One successful install.
#[derive(Debug, Clone)]
pub struct Installed {
    pub extension: InstalledExtension,
    /// The limits its calls run under (before any profile override).
    pub limits: Limits,
    /// Requested limits the host policy lowered.
    pub clamped: Vec<Clamped>,
    pub loaded_from: LoadedFrom,
    pub load_time: Duration,
}

/// Install the extension whose manifest is `manifest` (a file, or a
/// directory holding `toolhost-extension.toml`) into the registry at `dir`.
/// It is recorded disabled: nothing offers its tools until it is granted.
pub async fn install(
    sandbox: &Sandbox,
    dir: &Path,
    manifest: &Path,
    upgrade: bool,
    observe: &(dyn Fn(LoadEvent<'_>) + Sync),
) -> Result<Installed, InstallError> {
    let checked = Manifest::load(manifest)?;
    let id = checked.manifest.id.clone();
    // Refused before the (possibly long) compile; checked again under the
    // registry's lock when recorded.
    if !upgrade && let Ok(existing) = ExtensionRegistry::load(dir)?.get(&id) {
        return Err(ExtensionError::AlreadyInstalled {
            id,
            version: existing.version.clone(),
        }
        .into());
    }
    let bytes = checked.read_component()?;
    // The sandbox checks the digest first, before compiling anything.
    let component = sandbox
        .load(
            ComponentSpec {
                label: &id,
                bytes: &bytes,
                expected_sha256: Some(&checked.manifest.sha256),
                provider: checked.provider.clone(),
                grant: checked.requested.clone(),
                limits: checked.manifest.limits.overrides(),
                trust: Trust::Extension,
            },
            observe,
        )
        .await
        .map_err(|error| match error {
            LoadError::IntegrityMismatch {
                expected, actual, ..
            } => ExtensionError::Sha256Mismatch {
                id: id.clone(),
                expected,
                actual,
            }
            .into(),
            LoadError::UngrantedImports { imports, grant, .. } => {
                InstallError::ImportsNotRequested {
                    id: id.clone(),
                    imports,
                    requested: grant.to_string(),
                }
            }
            error @ LoadError::UnsupportedWit { .. } => InstallError::WitUnsupported(error),
            error => InstallError::Load(error),
        })?;
    // The WIT version the component really imports must be one its
    // manifest admits to (what `ext info` shows is the fact, not the claim).
    if let Some(newest) = newest_host_import(component.imports().iter().map(String::as_str))
        && newest > checked.host_version
    {
        return Err(ExtensionError::WitUnsupported {
            target: format!("toolhost:host@{newest}"),
            reason: format!(
                "but its manifest targets toolhost:host@{}: correct `[wit] host`",
                checked.host_version
            ),
        }
        .into());
    }
    let declared = &checked.manifest.tools[0];
    let described = component.id().native_name();
    if described != declared {
        return Err(InstallError::ToolsMismatch {
            id,
            declared: declared.clone(),
            described: described.to_owned(),
        });
    }
    let tools = vec![described.to_owned()];
    let imports = component.imported_capabilities();
    let extension = ExtensionRegistry::update(dir, |registry| {
        registry
            .install(&checked, &bytes, tools, &imports, upgrade)
            .cloned()
    })?;
    Ok(Installed {
        extension,
        limits: *component.limits(),
        clamped: component.clamped_limits().to_vec(),
        loaded_from: component.loaded_from(),
        load_time: component.load_time(),
    })
}

/// The stored secrets `grant` binds, read for the call's owner (`None`:
/// the local use; a served tenant's own otherwise), each ready to be
/// written into its header; or why the call cannot run.
pub(crate) fn secret_headers(
    dir: &Path,
    grant: &Grant,
    owner: Option<&str>,
) -> Result<Vec<SecretHeader>, (&'static str, String)> {
    let store = SecretStore::of_registry(dir);
    grant
        .secrets
        .iter()
        .map(|binding| {
            let value = store.get(owner, &binding.secret).map_err(|error| {
                // The model (a served tenant's) reads this: the code and the
                // fix, never a path of the host's; the operator's log has it all.
                tracing::warn!(%error, key = %binding.key, "a bound secret cannot be read");
                let fix = match (&error, owner) {
                    (SecretError::NotSet { .. }, Some(tenant)) => format!(
                        "no secret `{}` is stored for tenant `{tenant}` (toolhost secret set {} --tenant {tenant})",
                        binding.secret, binding.secret
                    ),
                    (SecretError::NotSet { .. }, None) => format!(
                        "no secret `{}` is stored (toolhost secret set {})",
                        binding.secret, binding.secret
                    ),
                    _ => format!(
                        "the stored secret `{}` cannot be read; it must be set again",
                        binding.secret
                    ),
                };
                (error.code(), format!("this tool's secret `{}`: {fix}", binding.key))
            })?;
            SecretHeader::new(
                &binding.secret,
                binding.host.clone(),
                &binding.header,
                &binding.header_value(&value),
            )
            .map_err(|message| ("secret.value_invalid", message))
        })
        .collect()
}

/// The grant of a loaded extension as it is now, or why it may not run:
/// its registry cannot be read, it was removed or revoked, its component
/// changed, or its grant no longer names `profile` (the calling
/// invocation's profile, with its tenant; `None` outside an invocation).
pub(crate) fn recheck(
    dir: &Path,
    id: &str,
    sha256: &str,
    uses: &CapabilitySet,
    profile: Option<&ProfileVersion>,
) -> Result<Grant, (&'static str, String)> {
    let registry =
        ExtensionRegistry::load(dir).map_err(|error| (error.code(), error.to_string()))?;
    let Ok(extension) = registry.get(id) else {
        return Err((
            "ext.not_installed",
            format!("extension `{id}` is no longer installed"),
        ));
    };
    let Some(grant) = &extension.grant else {
        return Err(("ext.not_granted", format!("extension `{id}` was revoked")));
    };
    if extension.sha256 != sha256 {
        return Err((
            "ext.changed",
            format!("extension `{id}` was upgraded since this host loaded it; start a new run"),
        ));
    }
    // A grant narrowed since the host loaded the component must not leave
    // it calling what it no longer has.
    let lost: Vec<String> = uses
        .iter()
        .filter(|capability| !grant.capabilities.contains(capability))
        .map(|capability| capability.to_string())
        .collect();
    if !lost.is_empty() {
        return Err((
            "ext.not_granted",
            format!(
                "extension `{id}` is no longer granted {}, which it uses; grant it again or start a new run",
                lost.join(", ")
            ),
        ));
    }
    // The snapshot offered the tool for this profile when it was compiled;
    // a grant since narrowed to other profiles (or tenants) stops it here.
    if let Some(profiles) = &grant.profiles {
        match profile {
            Some(profile) if profiles.contains(profile) => {}
            Some(profile) => {
                return Err((
                    "ext.not_granted_to_profile",
                    format!(
                        "extension `{id}` is not granted to profile `{}` of {} as it is now",
                        profile.id,
                        profile.owner()
                    ),
                ));
            }
            None => {
                return Err((
                    "ext.not_granted_to_profile",
                    format!(
                        "extension `{id}` is granted to some profiles only, and this call is made for none"
                    ),
                ));
            }
        }
    }
    Ok(grant.clone())
}

/// Load one granted extension under its grant (from the component cache
/// when it was precompiled). The caller records a failure as an omission.
pub(crate) async fn load_granted(
    sandbox: &Sandbox,
    registry: &ExtensionRegistry,
    extension: &InstalledExtension,
    observe: &(dyn Fn(LoadEvent<'_>) + Sync),
) -> Result<ToolComponent, (&'static str, String)> {
    let Some(grant) = extension.granted_set() else {
        return Err((
            "ext.not_granted",
            format!(
                "extension `{}` is installed but not granted (toolhost ext grant {})",
                extension.id, extension.id
            ),
        ));
    };
    let bytes = registry
        .component_bytes(extension)
        .map_err(|error| (error.code(), error.to_string()))?;
    let provider = ToolProvider::Extension(extension.id.clone());
    let component = sandbox
        .load(
            ComponentSpec {
                label: &extension.id,
                bytes: &bytes,
                expected_sha256: Some(&extension.sha256),
                provider,
                grant,
                limits: extension.limits.overrides(),
                trust: Trust::Extension,
            },
            observe,
        )
        .await
        .map_err(|error| match error {
            LoadError::UnsupportedWit { .. } => ("ext.wit_unsupported", error.to_string()),
            _ => ("ext.load_failed", error.to_string()),
        })?;
    let described = component.id().native_name();
    if !extension.tools.iter().any(|tool| tool == described) {
        return Err((
            "ext.tools_mismatch",
            format!(
                "extension `{}` was installed with {}, but its component now describes `{described}`",
                extension.id,
                extension.tools.join(", ")
            ),
        ));
    }
    Ok(component)
}
