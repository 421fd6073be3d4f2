//! `toolhost`: list the sandboxed tools and call one.
//!
//! Exit status: 0 on success; 1 when the tool answered with a recoverable
//! error (the `## Tool error` text is printed, as the model would see it);
//! 2 on a system failure or bad usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use toolhost_core::{AgentToolCatalogItemDto, ToolInvocation, alias};
use toolhost_runtime::{ToolHost, ToolHostConfig, arguments_from_text};
use toolhost_sandbox::{CallEntropy, LoadEvent, SandboxConfig};

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
    /// More log output on stderr (-v info, -vv debug); TOOLHOST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect the tool catalog.
    Tools {
        #[command(subcommand)]
        command: ToolsCommand,
    },
    /// Call one tool once, as a model's tool call would.
    Call {
        /// A canonical id (`builtin:dice.roll`) or a unique native name (`dice.roll`).
        tool: String,
        /// The arguments: a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Print the whole result and the call report as JSON.
        #[arg(long)]
        json: bool,
        /// Replay: use this random seed (from a previous `--json` report).
        #[arg(long)]
        seed: Option<u64>,
        /// Replay: what the tool's wall clock reads, in ms since the Unix epoch.
        #[arg(long, requires = "seed")]
        clock_ms: Option<u64>,
    },
}

#[derive(Subcommand)]
enum ToolsCommand {
    /// List every tool: canonical id, alias, title, annotations, source.
    List {
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return system_failure(&anyhow::Error::new(error)),
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(error) => system_failure(&error),
    }
}

fn system_failure(error: &anyhow::Error) -> ExitCode {
    eprintln!("error: {error:#}");
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
    let host = load_host(&cli).await?;
    match cli.command {
        Command::Tools {
            command: ToolsCommand::List { json },
        } => {
            list_tools(&host.catalog_items(), json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            tool,
            arguments,
            json,
            seed,
            clock_ms,
        } => call(&host, &tool, &arguments, json, seed, clock_ms).await,
    }
}

fn cache_dir(cli: &Cli) -> Option<PathBuf> {
    if cli.no_cache {
        return None;
    }
    let from_env = |key: &str| std::env::var_os(key).filter(|value| !value.is_empty());
    cli.cache_dir
        .clone()
        .or_else(|| from_env("TOOLHOST_CACHE_DIR").map(PathBuf::from))
        .or_else(|| from_env("XDG_CACHE_HOME").map(|dir| PathBuf::from(dir).join("toolhost")))
        .or_else(|| from_env("HOME").map(|home| PathBuf::from(home).join(".cache/toolhost")))
}

async fn load_host(cli: &Cli) -> Result<ToolHost> {
    let config = ToolHostConfig {
        sandbox: SandboxConfig {
            cache_dir: cache_dir(cli),
            ..SandboxConfig::default()
        },
        ..ToolHostConfig::default()
    };
    // Compiling a component takes a noticeable moment the first time; show it
    // on a terminal (indicatif draws nothing when stderr is not one).
    let progress = ProgressBar::new_spinner();
    progress.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let observe = |event: LoadEvent<'_>| match event {
        LoadEvent::Compiling { label, bytes } => {
            progress.enable_steady_tick(Duration::from_millis(80));
            progress.set_message(format!("compiling {label} ({} KiB)", bytes / 1024));
        }
        LoadEvent::Compiled { label, elapsed } => {
            progress.println(format!("compiled {label} in {} ms", elapsed.as_millis()));
        }
        LoadEvent::CacheRejected { label, reason } => {
            progress.println(format!("cache entry for {label} rejected: {reason}"));
        }
        LoadEvent::FromCache { .. } => {}
    };
    let host = ToolHost::with_builtins(config, &observe)
        .await
        .context("loading the builtin tools")?;
    progress.finish_and_clear();
    Ok(host)
}

fn list_tools(items: &[AgentToolCatalogItemDto], json: bool) -> Result<()> {
    if json {
        let rows: Vec<_> = items
            .iter()
            .map(|item| {
                let mut row = serde_json::to_value(item)?;
                row["alias"] = json!(alias::builtin_alias(item.id.native_name()));
                Ok(row)
            })
            .collect::<Result<_, serde_json::Error>>()?;
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let header = ["ID", "ALIAS", "TITLE", "ANNOTATIONS", "SOURCE"].map(String::from);
    let rows: Vec<[String; 5]> = items
        .iter()
        .map(|item| {
            [
                item.id.to_string(),
                alias::builtin_alias(item.id.native_name()),
                item.title.clone().unwrap_or_default(),
                annotation_summary(&item.annotations),
                format!(
                    "{} {} ({})",
                    item.source.kind,
                    item.source.name,
                    item.source.capabilities.join(", ")
                ),
            ]
        })
        .collect();
    let mut widths = header.clone().map(|cell| cell.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
    Ok(())
}

/// The flags that are set, then the source kind: `readOnly, sourceKind=random`.
fn annotation_summary(annotations: &serde_json::Value) -> String {
    let Some(map) = annotations.as_object() else {
        return String::new();
    };
    let mut parts: Vec<String> = map
        .iter()
        .filter(|(_, value)| value.as_bool() == Some(true))
        .map(|(key, _)| key.clone())
        .collect();
    if let Some(kind) = map.get("sourceKind").and_then(|kind| kind.as_str()) {
        parts.push(format!("sourceKind={kind}"));
    }
    parts.join(", ")
}

async fn call(
    host: &ToolHost,
    tool: &str,
    arguments: &str,
    json: bool,
    seed: Option<u64>,
    clock_ms: Option<u64>,
) -> Result<ExitCode> {
    let descriptor = host.catalog().lookup(tool)?;
    let invocation = ToolInvocation {
        call_id: format!("cli_{}", uuid::Uuid::new_v4().simple()),
        tool_id: descriptor.id.clone(),
        arguments: arguments_from_text(arguments),
        provider_metadata: serde_json::Value::Null,
    };
    let entropy = match seed {
        None => CallEntropy::fresh(),
        Some(seed) => CallEntropy {
            seed,
            clock_ms: clock_ms.unwrap_or_else(|| CallEntropy::fresh().clock_ms),
        },
    };
    let execution = host.execute(&invocation, entropy).await?;
    if json {
        let output = json!({ "result": execution.result, "report": execution.report });
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        println!("{}", execution.result.model_text());
    }
    Ok(if execution.result.is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
