//! `toolhost run`: one agent run — a profile, a chat, a model — from the
//! first request to `workspace.finish` (or a failure), with a live line per
//! journal event on stderr and a summary at the end.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use toolhost_core::profile::Presentation;
use toolhost_journal::{Level, Observer};
use toolhost_model::{HttpOptions, ModelSource, ModelSpec};
use toolhost_runtime::host_commit::{DEFAULT_HOST_COMMIT_TIMEOUT, HostCommits};
use toolhost_runtime::{
    AgentDirectory, ChatHost, LoopConfig, LoopParts, LoopSummary, Run, RunCancel, RunStatus,
    SillyTavernChatHost, ToolHost, run_agent_loop,
};

use crate::approvals::ApprovalArgs;
use crate::flags::{DurabilityArg, InputArgs};
use crate::{inspect, load};

/// `toolhost run`'s flags: what clap parses is what the run reads, with no
/// copy in between. The fields' order is `--help`'s order.
#[derive(clap::Args)]
pub struct RunArgs {
    /// The agent's profile [default: the built-in profiles/default.json].
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// The model: `script:FILE`, `openai:URL`, `openai-responses:URL`,
    /// `anthropic:URL` or `gemini:URL` [with --resume: the recorded one].
    #[arg(long, value_name = "KIND:WHERE", required_unless_present = "resume")]
    pub model: Option<String>,
    /// The provider's model name [default: the profile's model.id].
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
    /// The most tokens one reply may have [default: the profile's
    /// model.maxOutputTokens]; Anthropic requires a value.
    #[arg(long, value_name = "N")]
    pub max_output_tokens: Option<u32>,
    /// The model's window in characters (Unicode scalars): requests are
    /// trimmed to fit. A profile's context.maxInputChars takes precedence
    /// [default: 160000].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(4096..))]
    pub context_chars: Option<u32>,
    /// Who writes the reply into the chat: `file` (toolhost writes the
    /// SillyTavern chat file) or `host` (the chat app saves it and answers
    /// with `toolhost commits answer RUN_DIR COMMIT_ID`) [default: file;
    /// with --resume: the recorded one].
    #[arg(long, value_enum)]
    pub commit: Option<CommitArg>,
    /// Seconds a host commit waits for the chat app's answer before the
    /// model is told the reply was not saved.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..),
          default_value_t = DEFAULT_HOST_COMMIT_TIMEOUT.as_secs())]
    pub host_commit_timeout: u64,
    /// The environment variable holding the API key [default:
    /// OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY by kind].
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// Stream model replies (server-sent events).
    #[arg(long)]
    pub stream: bool,
    /// Seconds one model call may take.
    #[arg(long, value_name = "SECONDS", default_value_t = MODEL_TIMEOUT_SECS)]
    pub model_timeout: u64,
    /// The first user message: what the run is for [default: "Write the
    /// next reply of this chat."].
    #[arg(long)]
    pub task: Option<String>,
    /// Overrides the profile's tools.maxRounds.
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// The chat's persist directory: projected into persist/ at the start,
    /// changed files copied back when the run finishes.
    #[arg(long, value_name = "DIR")]
    pub persist: Option<PathBuf>,
    /// Agent profiles (`*.json`) this run may delegate tasks or hand off to.
    #[arg(long, value_name = "DIR")]
    pub agents: Option<PathBuf>,
    /// The run directory (absent or empty) [default: a new directory under --runs-dir].
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub run_dir: Option<PathBuf>,
    /// Go on with an interrupted run from what its directory recorded
    /// (input/loop.json, the journal, the stored replies and results);
    /// keys come from the environment again. A flag that contradicts the
    /// record is refused; an ended run is never resumed.
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// The run seed: ids and every call's entropy (and its clock) derive
    /// from it, so two runs of one script are comparable [default: random,
    /// recorded in input/loop.json].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub approvals: ApprovalArgs,
    // No help text, as before: `--help` is held to its snapshot
    // (tests/help.rs).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "runs",
        env = "TOOLHOST_RUNS_DIR"
    )]
    pub runs_dir: PathBuf,
    #[arg(long, value_enum, default_value_t = DurabilityArg::Batched)]
    pub durability: DurabilityArg,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--model-timeout`'s default, and a resumed run's when its record names
/// none.
const MODEL_TIMEOUT_SECS: u64 = 120;

const DEFAULT_TASK: &str = "Write the next reply of this chat.";

/// A run ready for its loop: new, or resumed from its record.
struct Prepared {
    run: Arc<Run>,
    models: Arc<dyn ModelSource>,
    agents: AgentDirectory,
    config: LoopConfig,
}

/// Exit 0 when the run completed, 1 on a partial success (commits kept),
/// 2 when it failed, 130 when it was cancelled. `verbose`: also print
/// debug-level events.
pub async fn run(host: Arc<ToolHost>, args: RunArgs, verbose: bool) -> Result<ExitCode> {
    // Where calls needing approval are decided (a terminal starts reading
    // stdin now).
    let approver = args.approvals.approver();
    let prepared = match &args.resume {
        Some(dir) => resume(&args, dir)?,
        None => start(&args)?,
    };
    let Prepared {
        run,
        models,
        agents,
        mut config,
    } = prepared;
    let chat = run
        .chat()
        .context("the run is bound to no chat (toolhost run needs one)")?;
    let chat_path = chat.path().to_owned();
    // `--commit host`: another program saves the reply into the chat and
    // answers (`toolhost commits answer`); toolhost writes no chat.
    let chat_host: Arc<dyn ChatHost> = if config.host_commit {
        Arc::new(HostCommits::new(
            run.root(),
            Duration::from_secs(args.host_commit_timeout),
        ))
    } else {
        let model = config
            .model_name
            .clone()
            .or_else(|| run.profile().model.id.clone())
            // A script (or a model without a name): what it is.
            .unwrap_or_else(|| models.describe());
        Arc::new(SillyTavernChatHost::new(Arc::clone(chat)).with_model(model))
    };
    let profile = run.profile();
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
    run.observe(Some(progress_printer(verbose)));
    run.set_approver(approver);

    let cancel = RunCancel::new();
    config.cancel = cancel.clone();
    // Ctrl-C stops the run at its next step; the journal records it and the
    // run is over (`run_cancelled`). SIGTERM or a kill leaves it resumable.
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
        policies: None,
        tenant: None,
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

/// A new run: its directory, its models and the record of its settings.
fn start(args: &RunArgs) -> Result<Prepared> {
    let profile = load::profile(args.profile.as_deref())?;
    let agents = match &args.agents {
        Some(dir) => AgentDirectory::load(dir)?,
        None => AgentDirectory::default(),
    };
    let spec_text = args.model.clone().context("--model is required")?;
    let spec: ModelSpec = spec_text.parse()?;
    let options = HttpOptions {
        key_variable: args.api_key_env.clone(),
        stream: args.stream,
        timeout: Duration::from_secs(args.model_timeout),
    };
    let models = spec.open(&options)?;
    let bindings = args.inputs.bindings()?;
    if bindings.chat.is_none() {
        bail!(
            "a run writes its reply into a chat: give the SillyTavern chat file with --chat FILE"
        );
    }
    if let Some(dir) = &args.run_dir
        && dir.join("run.json").exists()
    {
        bail!(
            "{} already holds a run; `toolhost run` starts a new one (pick an empty or new --run-dir, or go on with --resume {})",
            dir.display(),
            dir.display()
        );
    }
    let durability = args.durability.into();
    let run = match &args.run_dir {
        Some(dir) => Run::at(dir),
        None => Run::under(&args.runs_dir),
    }
    .durability(durability)
    .bindings(&bindings)
    .create(&profile)?;
    let config = LoopConfig {
        task: args.task.clone().unwrap_or_else(|| DEFAULT_TASK.to_owned()),
        model_name: args.model_name.clone(),
        max_output_tokens: args.max_output_tokens,
        max_rounds: args.max_rounds,
        context_chars: args.context_chars,
        host_commit: args.commit == Some(CommitArg::Host),
        persist_dir: args.persist.as_deref().map(absolute).transpose()?,
        seed: args.seed,
        model: model_record(&spec_text, &options),
        ..LoopConfig::default()
    };
    Ok(Prepared {
        run,
        models,
        agents,
        config,
    })
}

/// An interrupted run, reopened with what it recorded; a flag given again
/// must say what the record says.
fn resume(args: &RunArgs, dir: &Path) -> Result<Prepared> {
    if args.inputs.any() {
        bail!(
            "a resumed run keeps the chat, world info and skills run.json recorded: drop --chat, --worldinfo, --prompt-snapshot and --skills"
        );
    }
    let (run, record) = Run::resume(dir).with_context(|| format!("resuming {}", dir.display()))?;
    if let Some(path) = &args.profile {
        let profile = load::profile(Some(path))?;
        if !run.was_created_with(&profile) {
            bail!(
                "{} is not the profile {} was created with (run.json holds its digest)",
                path.display(),
                dir.display()
            );
        }
    }
    let recorded = |key: &str| record.model.get(key).cloned().unwrap_or(Value::Null);
    let spec_text = recorded("spec").as_str().map(str::to_owned).context(
        "input/loop.json names no model spec: resume it through the API with the models it used",
    )?;
    let spec: ModelSpec = spec_text.parse()?;
    match &args.model {
        Some(given) if *given != spec_text => {
            bail!("the run was recorded with --model {spec_text}, not {given}")
        }
        // A key goes only where the person says: the run directory may not
        // be theirs alone, so an HTTP model is named again.
        None if !spec_text.starts_with("script:") => bail!(
            "the run talks to {spec_text}: give --model {spec_text} again (and --api-key-env if it used one) to send your key there"
        ),
        _ => {}
    }
    let recorded_variable = recorded("keyVariable").as_str().map(str::to_owned);
    if args.api_key_env != recorded_variable {
        bail!(
            "the run was recorded with --api-key-env {}: give the same",
            recorded_variable.as_deref().unwrap_or("(none)")
        );
    }
    let options = HttpOptions {
        key_variable: recorded_variable,
        stream: recorded("stream").as_bool().unwrap_or(false),
        timeout: Duration::from_secs(
            recorded("timeoutSecs")
                .as_u64()
                .unwrap_or(MODEL_TIMEOUT_SECS)
                .min(3600),
        ),
    };
    if args.stream && !options.stream {
        bail!("the run was recorded without --stream");
    }
    let models = spec.open(&options)?;
    let agents = match &args.agents {
        // Checked against the record by the loop, before its first step.
        Some(dir) => AgentDirectory::load(dir)?,
        None => record.agents()?,
    };
    let mut config = record.config();
    if let Some(task) = &args.task {
        config.task = task.clone();
    }
    config.model_name = args.model_name.clone().or(config.model_name);
    config.max_output_tokens = args.max_output_tokens.or(config.max_output_tokens);
    config.max_rounds = args.max_rounds.or(config.max_rounds);
    config.context_chars = args.context_chars.or(config.context_chars);
    if let Some(commit) = args.commit {
        config.host_commit = commit == CommitArg::Host;
    }
    match (&args.persist, &record.persist_dir) {
        (Some(persist), _) => config.persist_dir = Some(absolute(persist)?),
        // Promotion writes there: the person confirms where.
        (None, Some(recorded)) => bail!(
            "the run promotes persist/ into {}: give --persist {} again to confirm",
            recorded.display(),
            recorded.display()
        ),
        (None, None) => {}
    }
    if let Some(seed) = args.seed {
        config.seed = Some(seed);
    }
    Ok(Prepared {
        run,
        models,
        agents,
        config,
    })
}

/// What input/loop.json keeps of the model: enough to open it again, never
/// the key itself.
fn model_record(spec: &str, options: &HttpOptions) -> Value {
    serde_json::json!({
        "spec": spec,
        "keyVariable": options.key_variable,
        "stream": options.stream,
        "timeoutSecs": options.timeout.as_secs(),
    })
}

/// A persist directory, absolute: a resume may run from anywhere.
fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))
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

/// `toolhost run --commit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CommitArg {
    File,
    Host,
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
