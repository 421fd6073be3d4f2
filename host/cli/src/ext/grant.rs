//! `toolhost ext grant`: the flags turned into a grant request, checked by
//! the registry under its lock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolhost_core::allowed_hosts::{AllowedHosts, HostPattern};
use toolhost_core::{Capability, CapabilitySet, ProfileVersion};
use toolhost_extensions::{
    ExtensionRegistry, Grant, GrantRequest, InstalledExtension, SecretBinding, SecretRequest,
    SecretStore,
};

use crate::load;

/// `ext grant`'s flags as given.
#[derive(clap::Args)]
pub(crate) struct GrantFlags {
    /// Grant only these of the requested capabilities; repeatable
    /// [default: everything its manifest requests].
    #[arg(long = "capability", value_name = "NAME")]
    pub capabilities: Vec<String>,
    /// Only snapshots of this profile, as its file is now, may offer its
    /// tools (bound to its id and content digest: a changed profile
    /// needs a new grant); repeatable [default: every profile that
    /// allows them].
    #[arg(long = "profile", value_name = "FILE")]
    pub profiles: Vec<PathBuf>,
    /// The `toolhost serve` tenant whose profiles these are: only that
    /// tenant's runs of them may offer and call its tools (another
    /// tenant sending the same profile gets nothing). Without it, the
    /// profiles are granted for the local use (`toolhost run`, `call`,
    /// `mcp serve`) and for no served tenant; a server without a tokens
    /// file serves the tenant `local`.
    #[arg(long, value_name = "TENANT", requires = "profiles")]
    pub tenant: Option<String>,
    /// Also let it read `tool-results/` through workspace-read: other
    /// calls' results (chat text, skill text, MCP output). Builtins
    /// always see it; an extension only with this.
    #[arg(long)]
    pub tool_results: bool,
    /// Let outbound-http reach only these of the requested hosts
    /// (`[scheme://]host[:port]`, `*.suffix`, or narrower than a
    /// requested pattern); repeatable [default: every requested host].
    #[arg(long = "allow-host", value_name = "PATTERN")]
    pub allow_hosts: Vec<String>,
    /// Bind the secret its manifest calls KEY to the stored secret NAME
    /// (`toolhost secret set NAME`; `KEY` alone: NAME = ID.KEY): the host
    /// writes it into that header of requests to that host, after
    /// admitting them; the extension never reads it. Repeatable.
    #[arg(long = "secret", value_name = "KEY=NAME")]
    pub secrets: Vec<String>,
    /// The host each --secret goes to, in order: one the grant allows,
    /// exactly (a scheme, a name, a port; plain http only to loopback)
    /// [default: the manifest's].
    #[arg(long = "for", value_name = "HOST")]
    pub secret_hosts: Vec<String>,
    /// The header each --secret goes into, in order [default: the
    /// manifest's].
    #[arg(long = "header", value_name = "NAME")]
    pub secret_headers: Vec<String>,
    /// The header's value for each --secret, `{}` where the secret goes
    /// (`"Bearer {}"`), in order [default: the manifest's].
    #[arg(long = "format", value_name = "FORMAT")]
    pub secret_formats: Vec<String>,
}

/// The stored secret the printed grant line binds `key` to: named after
/// the extension and the key, so a manifest never picks a secret kept for
/// something else; `None` when that name would be too long (then the user
/// names one).
pub(super) fn stored_name(id: &str, key: &str) -> Option<String> {
    let scoped = format!("{id}.{key}");
    toolhost_extensions::secrets::is_secret_name(&scoped).then_some(scoped)
}

/// [`stored_name`] as a command line shows it: `NAME` for the user to
/// fill in when there is none.
pub(super) fn printed_name(id: &str, key: &str) -> String {
    stored_name(id, key).unwrap_or_else(|| "NAME".to_owned())
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
        let secrets = (0..flags.secrets.len())
            .map(|at| binding(id, at, &flags, &installed.requested_secrets))
            .collect::<Result<Vec<_>, String>>()
            .map_err(
                |message| toolhost_extensions::ExtensionError::GrantInvalid {
                    id: id.to_owned(),
                    message,
                },
            )?;
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

/// The `at`-th `--secret KEY[=NAME]` with its `--for`, `--header` and
/// `--format`, each the manifest's proposal for the key when not given.
fn binding(
    id: &str,
    at: usize,
    flags: &GrantFlags,
    requested: &BTreeMap<String, SecretRequest>,
) -> Result<SecretBinding, String> {
    let pair = &flags.secrets[at];
    let (key, secret) = match pair.split_once('=') {
        Some((key, name)) => (key, name.to_owned()),
        None => (
            pair.as_str(),
            stored_name(id, pair).ok_or_else(|| {
                format!("`{id}.{pair}` is too long for a secret's name: give --secret {pair}=NAME")
            })?,
        ),
    };
    let proposed = requested
        .get(key)
        .ok_or_else(|| format!("its manifest asks for no secret `{key}`"))?;
    let host = match flags.secret_hosts.get(at) {
        Some(text) => text
            .parse::<HostPattern>()
            .map_err(|error| format!("--for {text}: {error}"))?,
        None => proposed.host.clone(),
    };
    let given = |values: &[String], proposal: &str| {
        values
            .get(at)
            .cloned()
            .unwrap_or_else(|| proposal.to_owned())
    };
    Ok(SecretBinding {
        key: key.to_owned(),
        secret,
        host,
        header: given(&flags.secret_headers, &proposed.header),
        format: given(&flags.secret_formats, &proposed.format),
    })
}

/// What a person should know after a grant: a bound secret not stored yet
/// for an owner the grant covers (the tool's calls would be refused until
/// it is), a stored secret another extension's grant already sends
/// elsewhere, and a binding the new grant dropped (a grant replaces the old
/// one whole).
pub(super) fn notes(dir: &Path, extension: &InstalledExtension, before: Option<&Grant>) {
    let store = SecretStore::of_registry(dir);
    let Some(grant) = &extension.grant else {
        return;
    };
    // Whose values its calls read: the tenants of the profiles it is
    // granted to, or the local use.
    let owners: BTreeSet<Option<String>> = match &grant.profiles {
        Some(profiles) => profiles
            .iter()
            .map(|profile| profile.tenant.clone())
            .collect(),
        None => BTreeSet::from([None]),
    };
    let others = ExtensionRegistry::load(dir).ok();
    for binding in &grant.secrets {
        for owner in &owners {
            if let Err(error) = store.get(owner.as_deref(), &binding.secret) {
                eprintln!("note: {error}");
            }
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
        if !grant
            .secrets
            .iter()
            .any(|binding| binding.key == dropped.key)
        {
            eprintln!(
                "note: dropped the binding of secret {} ({}); give --secret {}={} again to keep it",
                dropped.key, dropped.secret, dropped.key, dropped.secret
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::stored_name;

    /// A printed binding names the extension, so a manifest never picks a
    /// secret kept for something else; too long a name is left to the user.
    #[test]
    fn a_printed_binding_names_the_extension_or_asks_for_a_name() {
        assert_eq!(
            stored_name("fetch-js", "TOKEN").as_deref(),
            Some("fetch-js.TOKEN")
        );
        assert_eq!(stored_name(&"a".repeat(60), "GITHUB_TOKEN"), None);
    }
}
