//! `toolhost ext …`: install extension components, grant them capabilities,
//! list, inspect, revoke and remove them; start a new one from a template
//! and seal its manifest with the built component's sha256.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Subcommand;
use toolhost_core::{Capability, CapabilitySet, ProfileVersion};
use toolhost_extensions::{ExtensionRegistry, InstalledExtension, sha256_hex};
use toolhost_sandbox::Sandbox;

mod build;
mod grant;
mod new;

use crate::load;
use crate::terminal::line;
use new::new_extension;

#[derive(Subcommand)]
pub enum ExtCommand {
    /// Check an extension (manifest, sha256, WIT version, imports against
    /// the requested capabilities, its describe()), precompile it into the
    /// cache and record it disabled. A manifest with `[build]` is first
    /// built by its directory's own build (cargo, npm, componentize-py:
    /// install only code you would run) and sealed; `--no-build` skips it.
    Install {
        /// Its `toolhost-extension.toml`, or the directory holding it.
        path: PathBuf,
        /// Replace an installed extension of the same id (its grant is
        /// dropped). A development extension (a manifest with `[build]`)
        /// always replaces an installed extension of its id.
        #[arg(long)]
        upgrade: bool,
        /// Install the component the manifest is sealed with, even when it
        /// has a `[build]` table (the release flow: no build, no seal).
        #[arg(long)]
        no_build: bool,
    },
    /// Authorize an extension: its tools may be offered to snapshots.
    Grant {
        id: String,
        #[command(flatten)]
        flags: grant::GrantFlags,
    },
    /// Disable an extension again (it stays installed).
    Revoke { id: String },
    /// The installed extensions, their state and grants.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One installed extension in full.
    Info {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Uninstall an extension and delete its stored component.
    Remove { id: String },
    /// Write a ready-to-build extension into a new directory: a Rust crate,
    /// a JavaScript or TypeScript package, or a Python module; then
    /// `ext install DIR` builds, seals and installs it.
    New {
        /// The extension id (`[a-z][a-z0-9_-]*`), also the package's name.
        name: String,
        /// The tool's native name [default: the extension id].
        #[arg(long, value_name = "NAME")]
        tool: Option<String>,
        /// Where to create it [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The language it is written in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: new::Lang,
        /// The guest SDK to depend on by path (`guest-tools/sdk` or, for
        /// js/ts, `guest-tools/sdk-js` of a toolhost checkout) [default: the
        /// checkout this binary was built from].
        #[arg(long, value_name = "DIR")]
        sdk_path: Option<PathBuf>,
    },
    /// Write the built component's sha256 into the manifest.
    Seal {
        /// Its `toolhost-extension.toml`, or the directory holding it.
        #[arg(default_value = ".")]
        path: PathBuf,
    },
}

/// `--ext-dir`, else `$TOOLHOST_EXT_DIR`, else `$XDG_DATA_HOME/toolhost/extensions`,
/// else `~/.local/share/toolhost/extensions`.
pub fn ext_dir(flag: Option<&Path>) -> Result<PathBuf> {
    load::user_dir(
        flag,
        "TOOLHOST_EXT_DIR",
        ("XDG_DATA_HOME", ".local/share"),
        "toolhost/extensions",
    )
    .context("no extensions directory: give --ext-dir or set TOOLHOST_EXT_DIR")
}

pub async fn run(dir: &Path, cache_dir: Option<PathBuf>, command: ExtCommand) -> Result<ExitCode> {
    match command {
        ExtCommand::Install {
            path,
            upgrade,
            no_build,
        } => {
            // A development extension: built and sealed here, then installed
            // over its previous build.
            let manifest = toolhost_extensions::manifest_path(&path);
            let checked = toolhost_extensions::Manifest::load(&manifest)
                .map_err(|error| anyhow::anyhow!("{error}"))?;
            let upgrade = match (&checked.manifest.build, no_build) {
                (Some(recipe), false) => {
                    build::build(&checked.dir, recipe, &checked.component_path())?;
                    if let Ok(registry) = ExtensionRegistry::load(dir)
                        && let Ok(installed) = registry.get(&checked.manifest.id)
                    {
                        eprintln!(
                            "note: this replaces the installed {} {} (its grant is dropped: grant it again)",
                            installed.id, installed.version
                        );
                    }
                    let (_, sha) = seal(&manifest)?;
                    eprintln!("sealed {}: sha256 {sha}", manifest.display());
                    true
                }
                _ => upgrade,
            };
            let sandbox = Sandbox::new(load::sandbox_config(cache_dir))?;
            let progress = load::Progress::new();
            let installed =
                toolhost_runtime::extensions::install(&sandbox, dir, &path, upgrade, &|event| {
                    progress.observe(event)
                })
                .await;
            progress.finish();
            let installed = installed.map_err(|error| anyhow::anyhow!("{error}"))?;
            let extension = &installed.extension;
            println!(
                "installed {} {} (disabled): tool ext/{}:{}",
                extension.id,
                extension.version,
                extension.id,
                extension.tools.join(", ")
            );
            println!(
                "  imports {}; requests {}",
                set_text(&extension.imports),
                set_text(&extension.requested)
            );
            let limits = &installed.limits;
            println!(
                "  limits per call: fuel {}, deadline {} ms, memory {} MiB, instances {}",
                limits
                    .fuel
                    .map_or("unmetered".to_owned(), |f| f.to_string()),
                limits.deadline.as_millis(),
                limits.memory_bytes / (1024 * 1024),
                limits.instances
            );
            for lowered in &installed.clamped {
                println!(
                    "  note: {} {} requested, lowered to the host cap {}",
                    lowered.limit, lowered.requested, lowered.cap
                );
            }
            for key in extension.requested_secrets.keys() {
                println!(
                    "  it asks for secret {key}: store it with `toolhost secret set {}`",
                    shell_word(&grant::printed_name(&extension.id, key))
                );
            }
            println!("  authorize it with `{}`", grant_line(extension));
        }
        ExtCommand::Grant { id, flags } => {
            let (extension, before) = grant::grant(dir, &id, flags)?;
            println!("granted {}: {}", extension.id, grant_text(&extension));
            grant::notes(dir, &extension, before.as_ref());
        }
        ExtCommand::Revoke { id } => {
            let extension =
                ExtensionRegistry::update(dir, |registry| registry.revoke(&id).cloned())?;
            println!("revoked {}: installed, disabled", extension.id);
        }
        ExtCommand::Remove { id } => {
            let removed = ExtensionRegistry::update(dir, |registry| registry.remove(&id))?;
            println!("removed {} {}", removed.id, removed.version);
        }
        ExtCommand::List { json } => {
            let registry = ExtensionRegistry::load(dir)?;
            if json {
                println!("{}", serde_json::to_string_pretty(registry.extensions())?);
            } else if registry.extensions().is_empty() {
                println!("no extensions installed (toolhost ext install PATH)");
            } else {
                let rows: Vec<[String; 4]> = registry
                    .extensions()
                    .iter()
                    .map(|e| {
                        [
                            e.id.clone(),
                            e.version.clone(),
                            e.tools
                                .iter()
                                .map(|tool| format!("ext/{}:{tool}", e.id))
                                .collect::<Vec<_>>()
                                .join(", "),
                            grant_text(e),
                        ]
                    })
                    .collect();
                crate::table::print(["ID", "VERSION", "TOOLS", "GRANT"], &rows);
            }
        }
        ExtCommand::Info { id, json } => {
            let registry = ExtensionRegistry::load(dir)?;
            let extension = registry.get(&id)?;
            if json {
                println!("{}", serde_json::to_string_pretty(extension)?);
            } else {
                print_info(&registry, extension);
            }
        }
        ExtCommand::New {
            name,
            tool,
            dir: target,
            lang,
            sdk_path,
        } => {
            let target = target.unwrap_or_else(|| PathBuf::from(&name));
            let tool = tool.unwrap_or_else(|| name.clone());
            new_extension(&target, &name, &tool, lang, sdk_path.as_deref())?;
            println!(
                "created {} — build, seal and install it, grant it, call it:\n  cd {}\n  {}",
                target.display(),
                shell_word(&target.display().to_string()),
                lang.next_steps(&name).replace("TOOL", &tool)
            );
        }
        ExtCommand::Seal { path } => {
            let (manifest, sha) = seal(&path)?;
            println!("sealed {}: sha256 {sha}", manifest.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `ext grant` line that gives an extension what its manifest asks
/// for, each secret bound to a stored secret named after the extension and
/// the key (`fetch-js.TOKEN`): a manifest naming its key after a secret the
/// user keeps for something else (`GITHUB_TOKEN`) does not get that one by
/// a paste. Every word is quoted for a POSIX shell: it is there to be
/// pasted, and a manifest's words are its author's.
pub(crate) fn grant_line(extension: &InstalledExtension) -> String {
    let mut line = format!("toolhost ext grant {}", shell_word(&extension.id));
    for (key, secret) in &extension.requested_secrets {
        line.push_str(&format!(
            " --secret {} --for {} --header {} --format {}",
            shell_word(&format!(
                "{key}={}",
                grant::printed_name(&extension.id, key)
            )),
            shell_word(&secret.host.to_string()),
            shell_word(&secret.header),
            shell_word(&secret.format)
        ));
    }
    line
}

/// `text` as one POSIX shell word.
fn shell_word(text: &str) -> String {
    if !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@=".contains(&b))
    {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

fn set_text(capabilities: &[Capability]) -> String {
    CapabilitySet::new(capabilities.iter().copied()).to_string()
}

fn grant_text(extension: &InstalledExtension) -> String {
    match &extension.grant {
        None => "disabled (not granted)".to_owned(),
        Some(grant) => {
            let profiles = match &grant.profiles {
                None => "every profile".to_owned(),
                Some(versions) => format!(
                    "profile{} {}",
                    if versions.len() == 1 { "" } else { "s" },
                    versions
                        .iter()
                        .map(profile_text)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            let results = if grant.tool_results {
                " (tool-results/ readable)"
            } else {
                ""
            };
            let hosts = if grant.allowed_hosts.is_empty() {
                String::new()
            } else {
                format!(" (reaching {})", grant.allowed_hosts())
            };
            let secrets: String = grant
                .secrets
                .iter()
                .map(|binding| {
                    format!(
                        " (secret {} as {} into `{}` of {})",
                        binding.secret, binding.key, binding.header, binding.host
                    )
                })
                .collect();
            format!(
                "{}{results}{hosts}{secrets} for {profiles}",
                set_text(&grant.capabilities)
            )
        }
    }
}

/// `[tenant/]id@sha256-prefix`, or why a grant from an older registry
/// covers nothing.
fn profile_text(version: &ProfileVersion) -> String {
    let owner = version
        .tenant
        .as_deref()
        .map(|tenant| format!("{tenant}/"))
        .unwrap_or_default();
    match version.sha256.get(..12) {
        Some(prefix) => format!("{owner}{}@{prefix}", version.id),
        None => format!("{owner}{} (granted by id only: grant again)", version.id),
    }
}

fn print_info(registry: &ExtensionRegistry, e: &InstalledExtension) {
    println!("{} {}", e.id, e.version);
    // The manifest's words: one safe line each.
    println!("  {}", line(&e.description));
    if let Some(author) = &e.author {
        println!("  author: {}", line(author));
    }
    for tool in &e.tools {
        println!("  tool: ext/{}:{}", e.id, line(tool));
    }
    println!(
        "  targets: toolhost:tool@0.1.0, toolhost:host@{}",
        e.host_wit
    );
    println!("  requests: {}", set_text(&e.requested));
    if !e.requested_hosts.is_empty() {
        println!("  requests hosts: {}", e.requested_hosts());
        let granted = e.grant.as_ref().map(|grant| grant.allowed_hosts());
        println!(
            "  allowed hosts: {}",
            match granted {
                Some(hosts) if !hosts.is_empty() => hosts.to_string(),
                _ => "none (grant outbound-http to allow them)".to_owned(),
            }
        );
    }
    for (key, secret) in &e.requested_secrets {
        println!(
            "  requests secret {key}: {} (into `{}` of requests to {})",
            line(&secret.description),
            secret.header,
            secret.host
        );
    }
    println!("  imports: {}", set_text(&e.imports));
    println!("  grant: {}", grant_text(e));
    if let Some(grant) = &e.grant
        && grant.capabilities.contains(&Capability::WorkspaceRead)
    {
        println!(
            "  tool-results/ (other calls' results): {}",
            if grant.tool_results {
                "readable (granted with --tool-results)"
            } else {
                "hidden (grant again with --tool-results to show it)"
            }
        );
    }
    if e.grant
        .as_ref()
        .is_some_and(|grant| grant.profiles.is_some())
    {
        println!(
            "  a grant covers each profile as it was when granted ([tenant/]id@content sha256), for that tenant only (none: the local use): a changed profile needs `toolhost ext grant {} --profile FILE [--tenant T]` again",
            e.id
        );
    }
    let limits = &e.limits;
    println!(
        "  requested limits: fuel {}, deadline {}, memory {}, instances {}",
        limits.fuel.map_or("default".into(), |v| v.to_string()),
        limits
            .deadline_ms
            .map_or("default".into(), |v| format!("{v} ms")),
        limits
            .memory_bytes
            .map_or("default".into(), |v| format!("{v} bytes")),
        limits.instances.map_or("default".into(), |v| v.to_string()),
    );
    println!("  sha256: {}", e.sha256);
    println!("  component: {}", registry.component_path(e).display());
}

/// Write the sha256 of the manifest's component into it, keeping its
/// comments and layout.
fn seal(path: &Path) -> Result<(PathBuf, String)> {
    let manifest = toolhost_extensions::manifest_path(path);
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("reading {}", manifest.display()))?;
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .with_context(|| format!("{} is not TOML", manifest.display()))?;
    let component = document
        .get("component")
        .and_then(|item| item.as_str())
        .with_context(|| format!("{} has no `component` path", manifest.display()))?;
    let base = manifest.parent().unwrap_or(Path::new("."));
    let component_path = base.join(component);
    let bytes = std::fs::read(&component_path).with_context(|| {
        format!(
            "reading the component {} (build it first)",
            component_path.display()
        )
    })?;
    let sha = sha256_hex(&bytes);
    document["sha256"] = toml_edit::value(sha.clone());
    std::fs::write(&manifest, document.to_string())
        .with_context(|| format!("writing {}", manifest.display()))?;
    Ok((manifest, sha))
}
