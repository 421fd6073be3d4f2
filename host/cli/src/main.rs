//! `toolhost`: list the sandboxed tools, call one through the control plane,
//! run an agent loop against a model, and inspect snapshots and run journals.
//!
//! Exit status: 0 on success; 1 when the tool answered with a recoverable
//! error (the `## Tool error` text is printed, as the model would see it);
//! 2 on a system failure, a policy denial or bad usage.

mod approvals;
mod call;
mod catalog_watch;
mod cluster;
mod commits;
mod ext;
mod flags;
mod inspect;
mod load;
mod mcp;
mod replay;
mod run;
mod secret;
mod serve;
mod service;
mod stdio;
mod table;
mod terminal;
mod tools;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// mimalloc rather than glibc's malloc: a served run allocates and frees
/// small objects on every tokio worker (JSON values, events, paths), and
/// glibc's arenas made malloc and free ~11 % of `toolhost serve` under
/// load (docs/benchmarks.md). The libraries leave the allocator to whoever
/// embeds them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "toolhost",
    version,
    about = "A WebAssembly-sandboxed tool host for LLM agents"
)]
struct Cli {
    /// Where compiled components are cached [default: $TOOLHOST_CACHE_DIR,
    /// else $XDG_CACHE_HOME/toolhost, else ~/.cache/toolhost].
    #[arg(long, global = true, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile every component afresh and cache nothing.
    #[arg(long, global = true, conflicts_with = "cache_dir")]
    no_cache: bool,
    /// Where MCP registrations and tool caches live [default:
    /// $TOOLHOST_MCP_DIR, else $XDG_CONFIG_HOME/toolhost/mcp, else
    /// ~/.config/toolhost/mcp].
    #[arg(long, global = true, value_name = "DIR")]
    mcp_dir: Option<PathBuf>,
    /// Where installed extensions and their grants live [default:
    /// $TOOLHOST_EXT_DIR, else $XDG_DATA_HOME/toolhost/extensions, else
    /// ~/.local/share/toolhost/extensions].
    #[arg(long, global = true, value_name = "DIR")]
    ext_dir: Option<PathBuf>,
    /// The user's tool policy: tools denied or needing approval whatever a
    /// profile allows (docs/policy.md) [default: $TOOLHOST_POLICY, else
    /// $XDG_CONFIG_HOME/toolhost/policy.json when it exists, else
    /// ~/.config/toolhost/policy.json when it exists].
    #[arg(long, global = true, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// The platform's tool policy, given by the host application: no
    /// profile overrides what it denies (docs/policy.md).
    #[arg(long, global = true, value_name = "FILE")]
    platform_policy: Option<PathBuf>,
    /// More log output on stderr (-v info, -vv debug); TOOLHOST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the host over HTTP: a JSON API under /v1 (the catalog, runs,
    /// their events, calls and files; the OpenAPI document at
    /// /v1/openapi.json) and MCP at /mcp/{profile}. Beyond loopback only
    /// with --tokens and --tls-cert/--tls-key.
    Serve(service::ServiceArgs),
    /// Inspect the tool catalog.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Call one tool once, as a model's tool call would go: through a
    /// profile's snapshot, the gate and the sandbox, journalled in a run
    /// directory.
    Call(call::CallArgs),
    /// Run an agent: the model's requests and tool calls, round after round,
    /// until it commits its reply into the chat and finishes (or fails).
    /// Exit 0 completed, 1 partial success (commits kept), 2 failed, 130
    /// cancelled (Ctrl-C).
    Run(run::RunArgs),
    /// Print the snapshot a profile compiles to (JSON on stdout; omitted
    /// tools and why on stderr).
    Snapshot {
        /// The profile [default: the built-in profiles/default.json].
        #[arg(long, value_name = "FILE")]
        profile: Option<PathBuf>,
        /// Compile for a return-mode child (task.return instead of finishing tools).
        #[arg(long)]
        child: bool,
        /// The invocation id the snapshot is for.
        #[arg(long, default_value = "inv_root")]
        id: String,
    },
    /// MCP servers: register, list, pause/resume, refresh tool lists, grant.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Extension tools: install, grant, list, inspect, revoke, remove;
    /// start one from a template (`new`) and seal its manifest.
    Ext {
        #[command(subcommand)]
        command: ext::ExtCommand,
    },
    /// Secrets an extension's requests carry without the extension reading
    /// them: set (from stdin or a file), list (names only), remove; per
    /// `toolhost serve` tenant with --tenant. Bound with `ext grant --secret`.
    Secret {
        #[command(subcommand)]
        command: secret::SecretCommand,
    },
    /// Re-execute an ended run's calls in a scratch copy, against its
    /// recorded replies, entropy and initial persist/, and report per call
    /// whether the result is byte-identical (MCP and control tools are taken
    /// from the record). Exit 1 when one differs.
    Replay {
        /// The run directory.
        run_dir: PathBuf,
        /// Keep the scratch copy here (absent or empty) [default: a
        /// temporary directory, removed afterwards].
        #[arg(long, value_name = "DIR")]
        scratch: Option<PathBuf>,
        /// The report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print a run's journal (events.jsonl) as a table.
    Journal {
        /// The run directory.
        run_dir: PathBuf,
        /// Only the events of this invocation.
        #[arg(long, value_name = "ID")]
        invocation: Option<String>,
        /// The raw events as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Calls of a run waiting for a person's approval: list them, approve
    /// or deny one (docs/policy.md).
    Approvals {
        #[command(subcommand)]
        command: approvals::ApprovalsCommand,
    },
    /// Commits a host-commit run waits for the chat app to make: list them,
    /// answer one (docs/serve.md, "Host commit").
    Commits {
        #[command(subcommand)]
        command: commits::CommitsCommand,
    },
    /// A cluster of `toolhost serve` nodes on NATS JetStream: its nodes,
    /// their runs and leases, the queue (docs/cluster.md).
    Cluster {
        #[command(subcommand)]
        command: cluster::ClusterCommand,
    },
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// List every tool: canonical id, alias, title, annotations, source.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Load every builtin's component now rather than at its first call:
    /// verified by sha256, compiled on every core (or read from the cache),
    /// its describe() checked against its table entry. Says where each came
    /// from and how long it took; warms the cache (say, before `serve`).
    /// Exit 1 when one fails to load.
    Load,
}

/// A server's runtime workers. A run's loop creates its audit files and
/// appends its journal on the worker it runs on: on a disk a file creation
/// can wait on the device (an ext4 inode, a journal commit) and many
/// workers per core keep the other runs going meanwhile; on a memory file
/// system nothing waits, and a few workers per core keep the cores busy
/// with the least switching between threads (docs/benchmarks.md,
/// serve_load). `run_dirs`: where runs are written (the data directory; a
/// cluster node's own directory too); one on a disk counts as a disk.
fn default_worker_threads(run_dirs: &[&Path]) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let on_disk = run_dirs.is_empty() || run_dirs.iter().any(|dir| may_wait_at(dir));
    workers_for(cores, on_disk)
}

fn workers_for(cores: usize, on_disk: bool) -> usize {
    if on_disk {
        (16 * cores).clamp(16, 256)
    } else {
        (2 * cores).clamp(4, 64)
    }
}

/// Whether syncs can wait where `dir` is (or will be made: its nearest
/// existing ancestor is on that file system).
fn may_wait_at(dir: &Path) -> bool {
    std::path::absolute(dir)
        .ok()
        .and_then(|dir| {
            dir.ancestors()
                .find(|ancestor| ancestor.exists())
                .map(toolhost_journal::sync_may_wait)
        })
        .unwrap_or(true)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    // One thread for a command; a server's workers depend on the file
    // system its runs are written to (`default_worker_threads`).
    let runtime = match &cli.command {
        Command::Serve(args) => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            let workers = args.worker_threads.unwrap_or_else(|| {
                let data_dir = args.data_dir();
                let run_dirs: Vec<&Path> = data_dir
                    .as_deref()
                    .into_iter()
                    .chain(args.cluster.node_dir.as_deref())
                    .collect();
                default_worker_threads(&run_dirs)
            });
            builder.worker_threads(workers.max(1));
            builder
        }
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => return system_failure(&anyhow::Error::new(error)),
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => system_failure(&error),
    }
}

fn system_failure(error: &anyhow::Error) -> ExitCode {
    // Errors quote what guests, servers and files said.
    eprintln!("error: {}", terminal::block(&format!("{error:#}")));
    ExitCode::from(2)
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

async fn run(cli: Cli) -> Result<ExitCode> {
    // Reading a journal needs no tools: do not load (or compile) any.
    if let Command::Journal {
        run_dir,
        invocation,
        json,
    } = &cli.command
    {
        inspect::print_journal(run_dir, *json, invocation.as_deref())?;
        return Ok(ExitCode::SUCCESS);
    }
    // Neither does deciding an approval.
    if let Command::Approvals { command } = cli.command {
        return approvals::run(command);
    }
    // Nor answering a commit.
    if let Command::Commits { command } = cli.command {
        return commits::run(command);
    }
    // Nor looking at a cluster.
    if let Command::Cluster { command } = cli.command {
        return cluster::run(command).await;
    }
    let cache_dir = load::cache_dir(cli.cache_dir.as_deref(), cli.no_cache);
    // Managing extensions loads only the one being installed.
    if let Command::Ext { command } = cli.command {
        let dir = ext::ext_dir(cli.ext_dir.as_deref())?;
        return ext::run(&dir, cache_dir, command).await;
    }
    if let Command::Secret { command } = cli.command {
        let dir = ext::ext_dir(cli.ext_dir.as_deref())?;
        return secret::run(&dir, command);
    }
    let ext_dir = ext::ext_dir(cli.ext_dir.as_deref()).ok();
    let policy = load::PolicyFiles::locate(cli.policy.as_deref(), cli.platform_policy.clone());
    // Managing MCP servers needs no tools either (serving them does).
    if let Command::Mcp { command } = cli.command {
        let dir = mcp::mcp_dir(cli.mcp_dir.as_deref())?;
        let mcp::McpCommand::Serve(args) = command else {
            return mcp::run(&dir, command).await;
        };
        let dir = load::selects_mcp(args.profile.as_deref(), None).then_some(dir);
        let host = load::host(cache_dir, dir, ext_dir, &policy).await?;
        return serve::serve(std::sync::Arc::new(host), args).await;
    }
    // A new run, a call or a snapshot of profiles that allow no MCP tool
    // never reads the MCP directory; anything else (a resumed run, a call
    // offering the whole catalog, `serve`, `tools`) may need it.
    let selects_mcp = match &cli.command {
        Command::Run(args) if args.resume.is_none() => {
            load::selects_mcp(args.profile.as_deref(), args.agents.as_deref())
        }
        Command::Call(args) if args.run_dir.is_none() && args.profile.is_some() => {
            load::selects_mcp(args.profile.as_deref(), None)
        }
        Command::Snapshot { profile, .. } => load::selects_mcp(profile.as_deref(), None),
        _ => true,
    };
    // Where the tools come from: loaded now, and watched by `serve`.
    let sources = catalog_watch::Sources {
        cache_dir,
        mcp_dir: mcp::mcp_dir(cli.mcp_dir.as_deref())
            .ok()
            .filter(|_| selects_mcp),
        ext_dir,
        policy,
    };
    // `serve` watches the sources from what they held before this load, so
    // a change made while the tools load is seen at the first poll.
    let loaded_fingerprint = matches!(cli.command, Command::Serve(_))
        .then(|| sources.fingerprint())
        .unwrap_or_default();
    // Under `serve` each tenant is a user with its own policy.json; a user
    // policy named for the server would silently apply to no one.
    if matches!(cli.command, Command::Serve(_)) && matches!(sources.policy.user, Some((_, true))) {
        anyhow::bail!(
            "--policy (or TOOLHOST_POLICY) names a user's policy, which toolhost serve does not use: each tenant's is <data-dir>/tenants/<tenant>/policy.json, and the operator's is --platform-policy (docs/policy.md)"
        );
    }
    let host = sources.load().await?;
    match cli.command {
        Command::Tools {
            command: ToolsCommand::List { json },
        } => {
            tools::list(&host.catalog_items(), json)?;
            for omitted in host.mcp_omitted() {
                let what = omitted.tool.as_deref().unwrap_or("(all tools)");
                eprintln!(
                    "omitted mcp {} {}: {} ({})",
                    terminal::line(&omitted.server),
                    terminal::line(what),
                    terminal::line(&omitted.reason),
                    omitted.code
                );
            }
            for omitted in host.extension_omitted() {
                eprintln!(
                    "omitted extension {}: {} ({})",
                    omitted.id,
                    terminal::line(&omitted.reason),
                    omitted.code
                );
            }
        }
        Command::Tools {
            command: ToolsCommand::Load,
        } => {
            if !tools::load(&host).await? {
                std::process::exit(1);
            }
        }
        Command::Call(args) => return call::call(&host, args).await,
        Command::Run(args) => {
            return run::run(std::sync::Arc::new(host), args, cli.verbose > 0).await;
        }
        Command::Replay {
            run_dir,
            scratch,
            json,
        } => {
            return replay::replay(&host, &run_dir, scratch, json).await;
        }
        Command::Snapshot { profile, child, id } => {
            let profile = load::profile(profile.as_deref())?;
            inspect::print_snapshot(&host, &profile, child, &id)?;
        }
        Command::Serve(args) => {
            let watched = service::Watched {
                sources,
                loaded_fingerprint,
            };
            return service::serve(host, args, watched).await;
        }
        Command::Journal { .. }
        | Command::Approvals { .. }
        | Command::Commits { .. }
        | Command::Cluster { .. }
        | Command::Mcp { .. }
        | Command::Ext { .. }
        | Command::Secret { .. } => {
            unreachable!("handled above")
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_on_a_disk_gets_many_workers_and_on_memory_a_few() {
        assert_eq!(workers_for(2, true), 32);
        assert_eq!(workers_for(2, false), 4);
        assert_eq!(workers_for(1, true), 16);
        assert_eq!(workers_for(64, true), 256);
        assert_eq!(workers_for(64, false), 64);
        // Not yet made, and relative: the file system it will be made on.
        let here = std::env::current_dir().expect("cwd");
        let relative = Path::new("not/made/yet");
        assert_eq!(
            may_wait_at(relative),
            toolhost_journal::sync_may_wait(&here)
        );
        // No directory known: a disk.
        assert_eq!(
            default_worker_threads(&[]),
            workers_for(
                std::thread::available_parallelism().map_or(1, usize::from),
                true
            )
        );
    }
}
