//! [`ExtensionRegistry`]: the installed extensions of one directory.
//!
//! ```text
//! <extensions dir>/
//!   extensions.json            the records (written atomically)
//!   components/<sha256>.wasm   each installed component, named by its digest
//!   .lock                      held while a command changes the records
//! ```
//!
//! An installed extension is disabled until a grant authorizes it: a grant
//! names the capabilities it gets (never more than its manifest requested)
//! and, optionally, the only profiles whose snapshots may offer its tools.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use toolhost_core::allowed_hosts::{AllowedHosts, HostPattern};
use toolhost_core::{Capability, CapabilitySet, ProfileVersion, ToolProvider};

use crate::error::ExtensionError;
use crate::manifest::{CheckedManifest, RequestedLimits};
use crate::secrets::{MAX_SECRETS, SecretBinding, SecretRequest};

pub const REGISTRY_KIND: &str = "toolhost.extensions";
pub const REGISTRY_FILE: &str = "extensions.json";
const COMPONENTS_DIR: &str = "components";

/// One installed extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstalledExtension {
    pub id: String,
    pub version: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Native names of its tools, as its component describes them.
    pub tools: Vec<String>,
    /// Hex sha256 of the component; also its file name under `components/`.
    pub sha256: String,
    /// What the manifest requested.
    pub requested: Vec<Capability>,
    /// The capabilities its component actually imports (checked at install).
    pub imports: Vec<Capability>,
    /// The hosts its manifest asks `outbound-http` to reach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested_hosts: Vec<HostPattern>,
    /// The secrets its manifest asks for, by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requested_secrets: BTreeMap<String, SecretRequest>,
    /// The `toolhost:host` version it targets.
    pub host_wit: String,
    #[serde(default)]
    pub limits: RequestedLimits,
    /// `None`: installed but disabled, invisible to every snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
}

/// What a user authorized an extension to have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grant {
    pub capabilities: Vec<Capability>,
    /// The profiles whose snapshots may offer its tools, each as it was when
    /// granted (id and content digest: another profile declaring the same
    /// id, or this one changed, is not covered); `None` for every profile
    /// that allows them.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "granted_profiles"
    )]
    pub profiles: Option<BTreeSet<ProfileVersion>>,
    /// It may read `tool-results/` (other calls' results: chat text, skill
    /// text, MCP output) through `workspace-read`. Builtins always see it;
    /// an extension only when a user said so, separately from
    /// `workspace-read`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tool_results: bool,
    /// Where `outbound-http` may send requests: a subset of the requested
    /// hosts (empty without `outbound-http`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<HostPattern>,
    /// Stored secrets the host writes into its requests, by name (never
    /// the value), each for one host and header.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretBinding>,
}

impl Grant {
    pub fn allowed_hosts(&self) -> AllowedHosts {
        AllowedHosts::new(self.allowed_hosts.iter().cloned())
    }
}

/// What `ext grant` asks for.
#[derive(Debug, Clone, Default)]
pub struct GrantRequest {
    /// `None`: everything the manifest requests.
    pub capabilities: Option<CapabilitySet>,
    /// `None`: every profile that allows its tools.
    pub profiles: Option<BTreeSet<ProfileVersion>>,
    /// Let it read `tool-results/` (needs `workspace-read`).
    pub tool_results: bool,
    /// `None`: every host the manifest requests (when `outbound-http` is
    /// granted).
    pub allowed_hosts: Option<AllowedHosts>,
    /// Secrets bound to the manifest's keys (needs `outbound-http`).
    pub secrets: Vec<SecretBinding>,
}

/// A registry written before grants were bound to a profile's content
/// lists bare ids; they load as versions no profile has (an empty digest),
/// so such a grant covers nothing until it is given again. A version
/// written before grants named a tenant has none: it covers the profile in
/// the local use only, never in a served tenant's run.
fn granted_profiles<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BTreeSet<ProfileVersion>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Granted {
        Version(ProfileVersion),
        Id(String),
    }
    let listed: Option<Vec<Granted>> = Option::deserialize(deserializer)?;
    Ok(listed.map(|listed| {
        listed
            .into_iter()
            .map(|granted| match granted {
                Granted::Version(version) => version,
                Granted::Id(id) => ProfileVersion {
                    id,
                    sha256: String::new(),
                    tenant: None,
                },
            })
            .collect()
    }))
}

impl InstalledExtension {
    pub fn requested_set(&self) -> CapabilitySet {
        CapabilitySet::new(self.requested.iter().copied())
    }

    pub fn requested_hosts(&self) -> AllowedHosts {
        AllowedHosts::new(self.requested_hosts.iter().cloned())
    }

    pub fn granted_set(&self) -> Option<CapabilitySet> {
        self.grant
            .as_ref()
            .map(|grant| CapabilitySet::new(grant.capabilities.iter().copied()))
    }

    /// A record read from disk is checked like one being written: the file
    /// may have been edited by hand, and a grant in it is never trusted
    /// beyond what install and grant would have allowed.
    fn check(&self) -> Result<(), String> {
        ToolProvider::parse(&format!("ext/{}", self.id)).map_err(|error| error.to_string())?;
        if self.sha256.len() != 64
            || !self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err("sha256 must be 64 lowercase hex digits".into());
        }
        let Some(granted) = self.granted_set() else {
            return Ok(());
        };
        if let Some(profiles) = self
            .grant
            .as_ref()
            .and_then(|grant| grant.profiles.as_ref())
        {
            check_tenants(profiles)?;
        }
        if let Some(refused) = granted.iter().find(|c| c.refused_to_extensions().is_some()) {
            return Err(format!("an extension can never be granted {refused}"));
        }
        if self.grant.as_ref().is_some_and(|grant| grant.tool_results)
            && !granted.contains(Capability::WorkspaceRead)
        {
            return Err("tool-results/ is granted without workspace-read".into());
        }
        let beyond = granted.without(&self.requested_set());
        if !beyond.is_empty() {
            return Err(format!(
                "the grant gives {beyond}, which was never requested"
            ));
        }
        let hosts = self
            .grant
            .as_ref()
            .map(Grant::allowed_hosts)
            .unwrap_or_default();
        check_hosts(&granted, &hosts, &self.requested_hosts())?;
        let secrets = self
            .grant
            .iter()
            .flat_map(|grant| grant.secrets.iter().cloned())
            .collect();
        check_secret_bindings(secrets, &granted, &hosts, &self.requested_secrets).map(|_| ())
    }

    /// Whether a snapshot of this version of a profile may offer its tools.
    pub fn visible_to(&self, profile: &ProfileVersion) -> bool {
        match &self.grant {
            None => false,
            Some(Grant { profiles: None, .. }) => true,
            Some(Grant {
                profiles: Some(profiles),
                ..
            }) => profiles.contains(profile),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegistryFile {
    schema_version: u32,
    kind: String,
    extensions: Vec<InstalledExtension>,
}

/// The installed extensions of one directory, as read.
#[derive(Debug, Clone)]
pub struct ExtensionRegistry {
    dir: PathBuf,
    extensions: Vec<InstalledExtension>,
    /// Component files no record uses any more, deleted once the records
    /// that dropped them are saved (never before: a failed save must not
    /// leave a record pointing at a deleted file).
    unused: Vec<PathBuf>,
}

impl ExtensionRegistry {
    /// Read `<dir>/extensions.json`; a missing file is an empty registry.
    pub fn load(dir: &Path) -> Result<Self, ExtensionError> {
        let extensions = toolhost_core::document::read::<RegistryFile>(
            &dir.join(REGISTRY_FILE),
            REGISTRY_KIND,
            1,
        )?
        .map(|file| file.extensions)
        .unwrap_or_default();
        for (at, extension) in extensions.iter().enumerate() {
            extension
                .check()
                .map_err(|message| ExtensionError::RegistryInvalid {
                    path: dir.join(REGISTRY_FILE),
                    message: format!("extensions[{at}] (`{}`): {message}", extension.id),
                })?;
        }
        Ok(Self {
            dir: dir.to_owned(),
            extensions,
            unused: Vec::new(),
        })
    }

    /// Change the records under the directory's lock: read the current file,
    /// apply `change`, write the result atomically. Two commands changing the
    /// registry at once never lose each other's change.
    pub fn update<T>(
        dir: &Path,
        change: impl FnOnce(&mut ExtensionRegistry) -> Result<T, ExtensionError>,
    ) -> Result<T, ExtensionError> {
        toolhost_core::document::with_dir_lock(dir, || {
            let mut registry = Self::load(dir)?;
            let value = change(&mut registry)?;
            registry.save()?;
            for path in registry.unused.drain(..) {
                // Best effort: a file left behind is only disk space.
                let _ = std::fs::remove_file(path);
            }
            Ok(value)
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn extensions(&self) -> &[InstalledExtension] {
        &self.extensions
    }

    pub fn get(&self, id: &str) -> Result<&InstalledExtension, ExtensionError> {
        self.extensions
            .iter()
            .find(|extension| extension.id == id)
            .ok_or_else(|| ExtensionError::NotInstalled(id.to_owned()))
    }

    fn get_mut(&mut self, id: &str) -> Result<&mut InstalledExtension, ExtensionError> {
        self.extensions
            .iter_mut()
            .find(|extension| extension.id == id)
            .ok_or_else(|| ExtensionError::NotInstalled(id.to_owned()))
    }

    /// Where an installed extension's component is stored.
    pub fn component_path(&self, extension: &InstalledExtension) -> PathBuf {
        self.dir
            .join(COMPONENTS_DIR)
            .join(format!("{}.wasm", extension.sha256))
    }

    /// The stored component, checked again against its recorded digest: a
    /// file changed on disk is refused, never loaded.
    pub fn component_bytes(
        &self,
        extension: &InstalledExtension,
    ) -> Result<Vec<u8>, ExtensionError> {
        let path = self.component_path(extension);
        let bytes = std::fs::read(&path).map_err(|source| ExtensionError::Io {
            path: path.clone(),
            source,
        })?;
        let actual = sha256_hex(&bytes);
        if actual != extension.sha256 {
            return Err(ExtensionError::StoredComponentChanged {
                id: extension.id.clone(),
                expected: extension.sha256.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Record a checked extension, disabled, and store its component. An
    /// installed id is refused unless `upgrade`; an upgrade replaces the
    /// record and drops its grant (new code is authorized anew).
    pub fn install(
        &mut self,
        checked: &CheckedManifest,
        bytes: &[u8],
        tools: Vec<String>,
        imports: &CapabilitySet,
        upgrade: bool,
    ) -> Result<&InstalledExtension, ExtensionError> {
        let manifest = &checked.manifest;
        if let Ok(existing) = self.get(&manifest.id)
            && !upgrade
        {
            return Err(ExtensionError::AlreadyInstalled {
                id: existing.id.clone(),
                version: existing.version.clone(),
            });
        }
        let record = InstalledExtension {
            id: manifest.id.clone(),
            version: manifest.version.clone(),
            description: manifest.description.clone(),
            author: manifest.author.clone(),
            tools,
            sha256: sha256_hex(bytes),
            requested: checked.requested.iter().collect(),
            imports: imports.iter().collect(),
            requested_hosts: checked.requested_hosts.patterns().to_vec(),
            requested_secrets: manifest.secrets.clone(),
            host_wit: checked.host_version.to_string(),
            limits: manifest.limits,
            grant: None,
        };
        let path = self.component_path(&record);
        let components = self.dir.join(COMPONENTS_DIR);
        std::fs::create_dir_all(&components).map_err(|source| ExtensionError::Io {
            path: components,
            source,
        })?;
        write_atomically(&path, bytes)?;
        let replaced = self.extensions.iter().position(|e| e.id == record.id);
        let old = replaced.map(|at| std::mem::replace(&mut self.extensions[at], record.clone()));
        if old.is_none() {
            self.extensions.push(record);
        }
        if let Some(old) = old {
            self.forget_component(&old);
        }
        self.get(&manifest.id)
    }

    /// Authorize an extension as `request` says.
    pub fn grant(
        &mut self,
        id: &str,
        request: GrantRequest,
    ) -> Result<&InstalledExtension, ExtensionError> {
        let GrantRequest {
            capabilities,
            profiles,
            tool_results,
            allowed_hosts,
            secrets,
        } = request;
        let extension = self.get_mut(id)?;
        let requested = extension.requested_set();
        let capabilities = capabilities.unwrap_or_else(|| requested.clone());
        let invalid = |message: String| ExtensionError::GrantInvalid {
            id: id.to_owned(),
            message,
        };
        if let Some((capability, reason)) = capabilities
            .iter()
            .find_map(|c| c.refused_to_extensions().map(|reason| (c, reason)))
        {
            return Err(ExtensionError::CapabilityRefused {
                capability: capability.to_string(),
                reason,
            });
        }
        let beyond = capabilities.without(&requested);
        if !beyond.is_empty() {
            return Err(invalid(format!(
                "{beyond} not requested by its manifest (it requests: {requested})"
            )));
        }
        let imports = CapabilitySet::new(extension.imports.iter().copied());
        let missing = imports.without(&capabilities);
        if !missing.is_empty() {
            return Err(invalid(format!(
                "its component imports {missing}; without it the component cannot load, so grant it or leave the extension disabled"
            )));
        }
        if let Some(profiles) = &profiles {
            if profiles.is_empty() {
                return Err(invalid("a grant for no profile grants nothing".into()));
            }
            check_tenants(profiles).map_err(invalid)?;
        }
        if tool_results && !capabilities.contains(Capability::WorkspaceRead) {
            return Err(invalid(
                "tool-results/ is read through workspace-read, which this grant does not give"
                    .into(),
            ));
        }
        let allowed_hosts = match allowed_hosts {
            Some(hosts) => hosts,
            None if capabilities.contains(Capability::OutboundHttp) => extension.requested_hosts(),
            None => AllowedHosts::default(),
        };
        check_hosts(&capabilities, &allowed_hosts, &extension.requested_hosts())
            .map_err(invalid)?;
        let secrets = check_secret_bindings(
            secrets,
            &capabilities,
            &allowed_hosts,
            &extension.requested_secrets,
        )
        .map_err(invalid)?;
        extension.grant = Some(Grant {
            capabilities: capabilities.iter().collect(),
            profiles,
            tool_results,
            allowed_hosts: allowed_hosts.patterns().to_vec(),
            secrets,
        });
        Ok(extension)
    }

    /// Disable an extension again; it stays installed.
    pub fn revoke(&mut self, id: &str) -> Result<&InstalledExtension, ExtensionError> {
        let extension = self.get_mut(id)?;
        extension.grant = None;
        Ok(extension)
    }

    pub fn remove(&mut self, id: &str) -> Result<InstalledExtension, ExtensionError> {
        let at = self
            .extensions
            .iter()
            .position(|extension| extension.id == id)
            .ok_or_else(|| ExtensionError::NotInstalled(id.to_owned()))?;
        let removed = self.extensions.remove(at);
        self.forget_component(&removed);
        Ok(removed)
    }

    /// Mark a component file no record uses any more for deletion after
    /// the save.
    fn forget_component(&mut self, old: &InstalledExtension) {
        if self.extensions.iter().all(|e| e.sha256 != old.sha256) {
            self.unused.push(self.component_path(old));
        }
    }

    fn save(&self) -> Result<(), ExtensionError> {
        let file = RegistryFile {
            schema_version: 1,
            kind: REGISTRY_KIND.to_owned(),
            extensions: self.extensions.clone(),
        };
        Ok(toolhost_core::document::write(
            &self.dir.join(REGISTRY_FILE),
            &file,
        )?)
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ExtensionError> {
    toolhost_core::document::write_atomically(path, bytes).map_err(|source| ExtensionError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A profile's tenant is a served tenant's name (`None`: the local use).
fn check_tenants(profiles: &BTreeSet<ProfileVersion>) -> Result<(), String> {
    match profiles
        .iter()
        .filter_map(|profile| profile.tenant.as_deref())
        .find(|tenant| !toolhost_core::profile::is_tenant_name(tenant))
    {
        Some(tenant) => Err(format!(
            "tenant `{}` must be 1 to 64 of a-z, 0-9, `-`, `_`",
            tenant.chars().take(64).collect::<String>()
        )),
        None => Ok(()),
    }
}

/// A secret goes with `outbound-http`, under a key the manifest asked for,
/// to a host the grant allows; one secret per host and header.
fn check_secret_bindings(
    secrets: Vec<SecretBinding>,
    granted: &CapabilitySet,
    hosts: &AllowedHosts,
    requested: &BTreeMap<String, SecretRequest>,
) -> Result<Vec<SecretBinding>, String> {
    if secrets.is_empty() {
        return Ok(secrets);
    }
    // Each well formed, and compared as checked (headers lowercased): a
    // hand-edited record spelling one header two ways is still two secrets
    // in one header.
    let secrets = secrets
        .into_iter()
        .map(SecretBinding::checked)
        .collect::<Result<Vec<_>, String>>()?;
    if !granted.contains(Capability::OutboundHttp) {
        return Err(
            "secrets go into HTTP requests, and this grant does not give outbound-http".into(),
        );
    }
    if secrets.len() > MAX_SECRETS {
        return Err(format!("a grant binds at most {MAX_SECRETS} secrets"));
    }
    for (at, binding) in secrets.iter().enumerate() {
        if !requested.contains_key(&binding.key) {
            let known: Vec<&str> = requested.keys().map(String::as_str).collect();
            return Err(format!(
                "its manifest asks for no secret `{}` (it asks for: {})",
                binding.key,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
        if !hosts
            .patterns()
            .iter()
            .any(|pattern| pattern.covers(&binding.host))
        {
            return Err(format!(
                "secret `{}` is for {}, which this grant does not let it reach ({hosts})",
                binding.key, binding.host
            ));
        }
        // Two secrets that could land in one header of one request: which
        // one a request carries must never depend on their order.
        if let Some(other) = secrets[..at].iter().find(|other| {
            other.header == binding.header
                && (other.host.covers(&binding.host) || binding.host.covers(&other.host))
        }) {
            return Err(format!(
                "secrets `{}` and `{}` both go into header `{}` of requests to {}",
                other.key, binding.key, binding.header, binding.host
            ));
        }
    }
    Ok(secrets)
}

/// Hosts go with `outbound-http` and only with it, and only those the
/// manifest asked for (or narrower: `api.example.com` of `*.example.com`).
fn check_hosts(
    granted: &CapabilitySet,
    hosts: &AllowedHosts,
    requested: &AllowedHosts,
) -> Result<(), String> {
    match (granted.contains(Capability::OutboundHttp), hosts.is_empty()) {
        (true, true) => {
            return Err(
                "outbound-http is granted with no host to reach: allow at least one".into(),
            );
        }
        (false, false) => {
            return Err(format!(
                "hosts ({hosts}) are allowed without outbound-http, which this grant does not give"
            ));
        }
        _ => {}
    }
    let beyond = hosts.beyond(requested);
    if !beyond.is_empty() {
        let beyond: Vec<String> = beyond.iter().map(ToString::to_string).collect();
        return Err(format!(
            "{} not requested by its manifest (it requests: {})",
            beyond.join(", "),
            if requested.is_empty() {
                "no host".to_owned()
            } else {
                requested.to_string()
            }
        ));
    }
    Ok(())
}
