//! `toolhost mcp …`: register MCP servers, list them, pause and resume
//! them, refresh their cached tool lists, set per-tool permissions.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Subcommand, ValueEnum};
use toolhost_mcp::{McpRegistry, Permission, State, Transport, cache, offered_tools, refresh};

use crate::terminal::line;

#[derive(Subcommand)]
pub enum McpCommand {
    /// Register a server: `toolhost mcp add NAME -- COMMAND [ARGS…]` (stdio),
    /// or `toolhost mcp add NAME --url URL` (streamable HTTP: `https://`
    /// anywhere, `http://` only on this machine). Each tool it lists is off
    /// until allowed with `mcp grant NAME TOOL allow`.
    Add {
        name: String,
        /// Allow every tool the server lists, now and later, unless denied
        /// by name.
        #[arg(long)]
        allow_all: bool,
        /// A streamable-HTTP endpoint instead of a command.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// The environment variable holding the secret sent as
        /// `Authorization: Bearer …` (only its name is stored).
        #[arg(long, value_name = "VAR", requires = "url")]
        auth_env: Option<String>,
        /// Trust only the CA certificates in this PEM file for the server's
        /// TLS certificate [default: the system's roots].
        #[arg(long, value_name = "FILE", requires = "url")]
        ca_file: Option<PathBuf>,
        /// An environment variable for the server process; repeatable.
        #[arg(long, value_name = "KEY=VALUE")]
        env: Vec<String>,
        /// The command and its arguments (after `--`).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// The registered servers and their cached tools.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Forget a server (by id or name).
    Remove { server: String },
    /// Keep a server registered but offer none of its tools.
    Pause { server: String },
    /// Offer a paused or switched-off server's tools again.
    Resume { server: String },
    /// Switch a server off.
    Off { server: String },
    /// Ask servers for their tools now and cache the lists (every active
    /// server, or the one named). Runs never touch the network for this.
    Refresh {
        server: Option<String>,
        /// Seconds to wait for each server.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// Serve a profile's tools as an MCP server over stdio (one run; every
    /// call through the gate and the journal).
    Serve(crate::serve::ServeArgs),
    /// Set what runs may do with one of a server's tools.
    Grant {
        server: String,
        tool: String,
        #[arg(value_enum)]
        permission: PermissionArg,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum PermissionArg {
    Allow,
    /// Behaves like allow: no one is asked during a run.
    Ask,
    Deny,
}

/// `--mcp-dir`, else `$TOOLHOST_MCP_DIR`, else `$XDG_CONFIG_HOME/toolhost/mcp`,
/// else `~/.config/toolhost/mcp`.
pub fn mcp_dir(flag: Option<&Path>) -> Result<PathBuf> {
    crate::load::user_dir(
        flag,
        "TOOLHOST_MCP_DIR",
        ("XDG_CONFIG_HOME", ".config"),
        "toolhost/mcp",
    )
    .context("no MCP directory: give --mcp-dir or set TOOLHOST_MCP_DIR")
}

pub async fn run(dir: &Path, command: McpCommand) -> Result<ExitCode> {
    let mut registry = McpRegistry::load(dir)?;
    match command {
        McpCommand::Add {
            name,
            allow_all,
            url,
            auth_env,
            ca_file,
            env,
            command,
        } => {
            let transport = match (url, command.split_first()) {
                (Some(url), _) => Transport::Http {
                    url,
                    auth_env,
                    // Stored absolute: later commands run from anywhere.
                    ca_file: ca_file.map(|path| std::path::absolute(&path).unwrap_or(path)),
                },
                (None, Some((program, args))) => Transport::Stdio {
                    command: program.clone(),
                    args: args.to_vec(),
                    env: env
                        .iter()
                        .map(|pair| {
                            pair.split_once('=')
                                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                                .with_context(|| format!("--env {pair}: expected KEY=VALUE"))
                        })
                        .collect::<Result<_>>()?,
                },
                (None, None) => bail!("give the server's command after `--`, or --url"),
            };
            let id = if allow_all {
                registry.add_allowing_all(&name, transport)?
            } else {
                registry.add(&name, transport)?
            };
            let allowing = if allow_all {
                "every tool allowed"
            } else {
                "each tool off until `toolhost mcp grant NAME TOOL allow`"
            };
            println!(
                "registered {} as {id} ({allowing}); run `toolhost mcp refresh` to list its tools",
                line(&name)
            );
        }
        McpCommand::List { json } => list(&registry, json)?,
        McpCommand::Remove { server } => {
            let removed = registry.remove(&server)?;
            println!("removed {} ({})", removed.display_name, removed.id);
        }
        McpCommand::Pause { server } => set(&mut registry, &server, State::Paused)?,
        McpCommand::Resume { server } => set(&mut registry, &server, State::Active)?,
        McpCommand::Off { server } => set(&mut registry, &server, State::Off)?,
        McpCommand::Refresh { server, timeout } => {
            let targets: Vec<_> = match &server {
                Some(key) => vec![registry.find(key)?.clone()],
                None => registry
                    .registrations()
                    .iter()
                    .filter(|r| r.state == State::Active)
                    .cloned()
                    .collect(),
            };
            let mut failed = false;
            for registration in targets {
                match refresh(&registry, &registration, Duration::from_secs(timeout)).await {
                    Ok(cache) => println!(
                        "{}: {} tool(s) cached",
                        line(&registration.display_name),
                        cache.tools.len()
                    ),
                    Err(error) => {
                        failed = true;
                        eprintln!(
                            "{}: {}",
                            line(&registration.display_name),
                            line(&error.to_string())
                        );
                    }
                }
            }
            if failed {
                return Ok(ExitCode::from(2));
            }
        }
        McpCommand::Serve(_) => unreachable!("served by main with the tool host"),
        McpCommand::Grant {
            server,
            tool,
            permission,
        } => {
            let permission = match permission {
                PermissionArg::Allow => Permission::Allow,
                PermissionArg::Ask => {
                    println!(
                        "note: ask: every call of the tool waits for a person's approval (docs/policy.md); MCP clients of toolhost get it only with mcp serve --approve-all"
                    );
                    Permission::Ask
                }
                PermissionArg::Deny => Permission::Deny,
            };
            registry.grant(&server, &tool, permission)?;
            println!("{server} {tool}: {permission:?}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn set(registry: &mut McpRegistry, server: &str, state: State) -> Result<()> {
    registry.set_state(server, state)?;
    println!("{server}: {state:?}");
    Ok(())
}

fn list(registry: &McpRegistry, json: bool) -> Result<()> {
    let (offered, omitted) = offered_tools(registry);
    if json {
        let servers: Vec<serde_json::Value> = registry
            .registrations()
            .iter()
            .map(|registration| {
                let cache = cache::load_cache(registry.dir(), registration.id)
                    .ok()
                    .flatten();
                serde_json::json!({
                    "registration": registration,
                    "refreshedAt": cache.as_ref().map(|c| c.refreshed_at.clone()),
                    "tools": offered.iter()
                        .filter(|tool| tool.registration.id == registration.id)
                        .map(|tool| tool.descriptor.id.as_str())
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let value = serde_json::json!({"servers": servers, "omitted": omitted});
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    if registry.registrations().is_empty() {
        println!("no MCP servers registered (toolhost mcp add NAME -- COMMAND …)");
        return Ok(());
    }
    for registration in registry.registrations() {
        let tools: Vec<&str> = offered
            .iter()
            .filter(|tool| tool.registration.id == registration.id)
            .map(|tool| tool.tool.name.as_str())
            .collect();
        let transport = match &registration.transport {
            Transport::Stdio { command, args, .. } => format!("{command} {}", args.join(" ")),
            Transport::Http { url, auth_env, .. } => match auth_env {
                Some(name) => format!("{url} (Authorization from ${name})"),
                None => url.clone(),
            },
        };
        // Names, commands and tool names may come from a server or a
        // hand-edited file: one safe line each.
        println!(
            "{} {} [{:?}] {}\n  tools: {}",
            registration.id,
            line(&registration.display_name),
            registration.state,
            line(transport.trim()),
            if tools.is_empty() {
                "none offered".to_owned()
            } else {
                line(&tools.join(", ")).into_owned()
            }
        );
    }
    for omission in &omitted {
        let what = omission.tool.as_deref().unwrap_or("(all tools)");
        eprintln!(
            "omitted {} {}: {} ({})",
            line(&omission.server),
            line(what),
            line(&omission.reason),
            omission.code
        );
    }
    Ok(())
}
