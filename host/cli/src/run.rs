//! `toolhost run`: one agent run — a profile, a chat, a model — from the
//! first request to `workspace.finish` (or a failure), with a live line per
//! journal event on stderr and a summary at the end.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use toolhost_core::profile::Presentation;
use toolhost_journal::{Durability, Level, Observer};
use toolhost_model::{HttpOptions, ModelSpec};
use toolhost_runtime::{
    AgentDirectory, LoopConfig, LoopParts, LoopSummary, Run, RunBindings, RunCancel, RunStatus,
    SillyTavernChatHost, ToolHost, run_agent_loop,
};

use crate::{inspect, load};

pub struct RunArgs {
    pub profile: Option<PathBuf>,
    pub bindings: RunBindings,
    pub model: String,
    pub model_name: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub api_key_env: Option<String>,
    pub stream: bool,
    pub model_timeout: Duration,
    pub task: String,
    pub max_rounds: Option<u32>,
    pub persist: Option<PathBuf>,
    /// Agent profiles the run may delegate or hand off to.
    pub agents: Option<PathBuf>,
    pub run_dir: Option<PathBuf>,
    pub runs_dir: PathBuf,
    pub durability: Durability,
    pub json: bool,
    /// Also print debug-level events.
    pub verbose: bool,
}

/// Exit 0 when the run completed, 1 on a partial success (commits kept),
/// 2 when it failed, 130 when it was cancelled.
pub async fn run(host: Arc<ToolHost>, args: RunArgs) -> Result<ExitCode> {
    let profile = load::profile(args.profile.as_deref())?;
    let agents = match &args.agents {
        Some(dir) => AgentDirectory::load(dir)?,
        None => AgentDirectory::default(),
    };
    let spec: ModelSpec = args.model.parse()?;
    let models = spec.open(&HttpOptions {
        key_variable: args.api_key_env.clone(),
        stream: args.stream,
        timeout: args.model_timeout,
    })?;
    let Some(chat_path) = args.bindings.chat.clone() else {
        bail!(
            "a run writes its reply into a chat: give the SillyTavern chat file with --chat FILE"
        );
    };
    if let Some(dir) = &args.run_dir
        && dir.join("run.json").exists()
    {
        bail!(
            "{} already holds a run; `toolhost run` starts a new one (pick an empty or new --run-dir)",
            dir.display()
        );
    }
    let run = match &args.run_dir {
        Some(dir) => Run::create_with(dir, &profile, args.durability, &args.bindings)?,
        None => Run::create_under(&args.runs_dir, &profile, args.durability, &args.bindings)?,
    };
    let chat = run
        .chat()
        .with_context(|| format!("binding the chat {}", chat_path.display()))?;
    let chat_host = Arc::new(SillyTavernChatHost::new(Arc::clone(chat)));
    eprintln!(
        "run {} — profile {} ({}), model {}, chat {} ({} messages), {} other agent(s)",
        run.run_id(),
        profile.id,
        match profile.run.presentation {
            Presentation::Foreground => "foreground",
            Presentation::Background => "background",
        },
        models.describe(),
        chat_path.display(),
        chat.message_count(),
        agents.len()
    );
    run.observe(Some(progress_printer(args.verbose)));

    let cancel = RunCancel::new();
    let config = LoopConfig {
        task: args.task.clone(),
        model_name: args.model_name.clone(),
        max_output_tokens: args.max_output_tokens,
        max_rounds: args.max_rounds,
        persist_dir: args.persist.clone(),
        cancel: cancel.clone(),
        ..LoopConfig::default()
    };
    // Ctrl-C stops the run at its next step; the journal records it.
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("cancelling the run (Ctrl-C)…");
            cancel.cancel();
        }
    });
    let parts = LoopParts {
        host,
        models,
        chat: chat_host,
        agents,
    };
    let summary = run_agent_loop(&run, parts, &config).await;
    run.observe(None);
    print_summary(&summary, &chat_path, args.json)?;
    Ok(match summary.status {
        RunStatus::Completed => ExitCode::SUCCESS,
        RunStatus::PartialSuccess => ExitCode::from(1),
        RunStatus::Failed => ExitCode::from(2),
        RunStatus::Cancelled => ExitCode::from(130),
    })
}

/// One stderr line per journal event as it is written.
fn progress_printer(verbose: bool) -> Observer {
    Arc::new(move |seq, level, event_type, invocation, payload| {
        if level == Level::Debug && !verbose {
            return;
        }
        let payload: Value = serde_json::from_slice(payload).unwrap_or(Value::Null);
        let details = inspect::details(event_type, &payload);
        let details = crate::terminal::line(&details);
        let marker = match level {
            Level::Error => "!",
            Level::Warn => "~",
            _ => " ",
        };
        // Which agent: the root, or the first hex digits of another invocation.
        let who = invocation
            .strip_prefix("inv_")
            .map_or(invocation, |id| &id[..id.len().min(8)]);
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(
            stderr,
            "{marker}{seq:>4} {who:<8} {event_type:<28} {details}"
        );
    })
}

fn print_summary(summary: &LoopSummary, chat: &std::path::Path, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    let status = match summary.status {
        RunStatus::Completed => "completed",
        RunStatus::PartialSuccess => "partial success (the chat keeps its commits)",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled (commits made before stay)",
    };
    println!("status:   {status}");
    if let Some(message) = &summary.message {
        let retry = if summary.user_retryable {
            " (you may retry)"
        } else {
            ""
        };
        println!("reason:   {}{retry}", crate::terminal::line(message));
    }
    if summary.agents.len() > 1 {
        println!("agents:   {}", summary.agents.join(" -> "));
    }
    println!("rounds:   {}", summary.rounds);
    println!("calls:    {}", summary.tool_calls);
    let explicit = summary.commits.iter().filter(|c| c.explicit).count();
    println!(
        "commits:  {} ({explicit} by workspace.commit, {} auto-published)",
        summary.commits.len(),
        summary.commits.len() - explicit
    );
    if let Some(last) = summary.commits.last() {
        println!(
            "chat:     {} (message #{})",
            chat.display(),
            last.message_index
        );
    } else {
        println!("chat:     {} (unchanged)", chat.display());
    }
    for task in &summary.tasks {
        println!(
            "task:     {} ({}): {}, result agent-results/{}.json",
            task.task_id, task.agent_id, task.status, task.child_invocation_id
        );
    }
    println!("run dir:  {}", summary.run_dir.display());
    println!("journal:  toolhost journal {}", summary.run_dir.display());
    Ok(())
}
