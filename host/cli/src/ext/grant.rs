//! `toolhost ext grant`: the flags turned into a grant request, checked by
//! the registry under its lock.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolhost_core::allowed_hosts::{AllowedHosts, HostPattern};
use toolhost_core::{Capability, CapabilitySet, ProfileVersion};
use toolhost_extensions::{
    ExtensionRegistry, Grant, GrantRequest, InstalledExtension, SecretBinding, SecretStore,
};

use crate::load;

/// `ext grant`'s flags as given.
pub(super) struct GrantFlags {
    pub capabilities: Vec<String>,
    pub profiles: Vec<PathBuf>,
    pub tenant: Option<String>,
    pub tool_results: bool,
    pub allow_hosts: Vec<String>,
    pub secrets: Vec<String>,
    pub secret_hosts: Vec<String>,
    pub secret_headers: Vec<String>,
    pub secret_formats: Vec<String>,
}

/// The stored secret the printed grant line binds `key` to: named after
/// the extension and the key, or the key alone when that is too long.
pub(super) fn stored_name(id: &str, key: &str) -> String {
    let scoped = format!("{id}.{key}");
    if toolhost_extensions::secrets::is_secret_name(&scoped) {
        scoped
    } else {
        key.to_owned()
    }
}

/// Grant as the flags say; the extension as granted, and the grant it
/// replaced.
pub(super) fn grant(
    dir: &Path,
    id: &str,
    flags: GrantFlags,
) -> Result<(InstalledExtension, Option<Grant>)> {
    let allowed_hosts = if flags.allow_hosts.is_empty() {
        None
    } else {
        Some(AllowedHosts::new(
            flags
                .allow_hosts
                .iter()
                .map(|pattern| {
                    pattern
                        .parse::<HostPattern>()
                        .with_context(|| format!("--allow-host {pattern}"))
                })
                .collect::<Result<Vec<_>>>()?,
        ))
    };
    let capabilities = if flags.capabilities.is_empty() {
        None
    } else {
        Some(
            flags
                .capabilities
                .iter()
                .map(|name| {
                    Capability::parse(name)
                        .with_context(|| format!("--capability {name}: no such capability"))
                })
                .collect::<Result<CapabilitySet>>()?,
        )
    };
    let profiles = if flags.profiles.is_empty() {
        None
    } else {
        Some(
            flags
                .profiles
                .iter()
                .map(|path| {
                    load::profile(Some(path))
                        .map(|profile| profile.version_for(flags.tenant.as_deref()))
                })
                .collect::<Result<BTreeSet<ProfileVersion>>>()?,
        )
    };
    for (flag, given) in [
        ("--for", flags.secret_hosts.len()),
        ("--header", flags.secret_headers.len()),
        ("--format", flags.secret_formats.len()),
    ] {
        if given != 0 && given != flags.secrets.len() {
            bail!(
                "{flag} is given {given} times for {} --secret: give it once per --secret, in order, or not at all (the manifest's)",
                flags.secrets.len()
            );
        }
    }
    let mut before = None;
    let extension = ExtensionRegistry::update(dir, |registry| {
        let installed = registry.get(id)?;
        before = installed.grant.clone();
        let requested = installed.requested_secrets.clone();
        let secrets = flags
            .secrets
            .iter()
            .enumerate()
            .map(|(at, pair)| {
                let (key, name) = match pair.split_once('=') {
                    Some((key, name)) => (key, name.to_owned()),
                    None => (pair.as_str(), stored_name(id, pair)),
                };
                // The manifest's proposal for what the flags leave out.
                let proposed = requested.get(key);
                let pick = |given: &[String], proposal: Option<String>, what: &str| {
                    given.get(at).cloned().or(proposal).ok_or_else(|| {
                        toolhost_extensions::ExtensionError::GrantInvalid {
                            id: id.to_owned(),
                            message: format!(
                                "its manifest asks for no secret `{key}`, so give its {what}"
                            ),
                        }
                    })
                };
                let host = pick(
                    &flags.secret_hosts,
                    proposed.map(|p| p.host.to_string()),
                    "--for",
                )?;
                let host = host.parse::<HostPattern>().map_err(|error| {
                    toolhost_extensions::ExtensionError::GrantInvalid {
                        id: id.to_owned(),
                        message: format!("--for {host}: {error}"),
                    }
                })?;
                Ok(SecretBinding {
                    key: key.to_owned(),
                    secret: name,
                    host,
                    header: pick(
                        &flags.secret_headers,
                        proposed.map(|p| p.header.clone()),
                        "--header",
                    )?,
                    format: pick(
                        &flags.secret_formats,
                        proposed.map(|p| p.format.clone()),
                        "--format",
                    )?,
                })
            })
            .collect::<Result<Vec<_>, toolhost_extensions::ExtensionError>>()?;
        registry
            .grant(
                id,
                GrantRequest {
                    capabilities,
                    profiles,
                    tool_results: flags.tool_results,
                    allowed_hosts,
                    secrets,
                },
            )
            .cloned()
    })?;
    Ok((extension, before))
}

/// What a person should know after a grant: a bound secret not stored for
/// the local use yet (the tool's calls would be refused until it is), a
/// stored secret another extension's grant already sends elsewhere, and a
/// binding the new grant dropped (a grant replaces the old one whole).
pub(super) fn notes(dir: &Path, extension: &InstalledExtension, before: Option<&Grant>) {
    let store = SecretStore::of_registry(dir);
    let bindings = extension.grant.iter().flat_map(|grant| &grant.secrets);
    let others = ExtensionRegistry::load(dir).ok();
    for binding in bindings.clone() {
        if let Err(error) = store.get(None, &binding.secret) {
            eprintln!("note: {error}");
        }
        let elsewhere = others
            .iter()
            .flat_map(|registry| registry.extensions())
            .filter(|other| other.id != extension.id)
            .flat_map(|other| {
                other
                    .grant
                    .iter()
                    .flat_map(|grant| &grant.secrets)
                    .filter(|theirs| theirs.secret == binding.secret && theirs.host != binding.host)
                    .map(move |theirs| format!("{} ({})", other.id, theirs.host))
            });
        for other in elsewhere {
            eprintln!(
                "note: secret {} is also sent by {other}: one stored secret now goes to two hosts",
                binding.secret
            );
        }
    }
    for dropped in before.iter().flat_map(|grant| &grant.secrets) {
        if !bindings.clone().any(|binding| binding.key == dropped.key) {
            eprintln!(
                "note: dropped the binding of secret {} ({}); give --secret {}={} again to keep it",
                dropped.key, dropped.secret, dropped.key, dropped.secret
            );
        }
    }
}
