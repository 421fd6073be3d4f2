//! `toolhost call`: one tool call, as a model's would go — profile →
//! snapshot → turn → gate → sandbox → audit files and journal — in a run
//! directory the person can inspect afterwards with `toolhost journal`.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use toolhost_core::{Classified, ExitPolicy, Profile, ToolId, builtin, snapshot::OmitReason};
use toolhost_journal::ROOT_INVOCATION_ID;
use toolhost_runtime::approval::Answer;
use toolhost_runtime::{DirectCaller, Invocation, Run, RunFailure, ToolHost};
use toolhost_sandbox::CallEntropy;

use crate::flags::{DurabilityArg, InputArgs};
use crate::load;

/// `toolhost call`'s flags, read here as clap parsed them. The fields'
/// order is `--help`'s order.
#[derive(clap::Args)]
pub struct CallArgs {
    /// A canonical id (`builtin:dice.roll`) or a unique native name (`dice.roll`).
    pub tool: String,
    /// The arguments: a JSON object.
    #[arg(default_value = "{}")]
    pub arguments: String,
    /// The profile whose snapshot the call goes through [default: a
    /// profile offering every tool of the catalog].
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The run directory: a new run is created there, or an existing run
    /// is continued (its frozen snapshot and budgets) [default: a new
    /// directory under --runs-dir].
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Where new run directories go.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "runs",
        env = "TOOLHOST_RUNS_DIR"
    )]
    pub runs_dir: PathBuf,
    /// When journal events and audit files reach the disk.
    #[arg(long, value_enum, default_value_t = DurabilityArg::Batched)]
    pub durability: DurabilityArg,
    // What a new run is bound to (a chat, world info, skills).
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Print the whole result, the call report and the run directory as JSON.
    #[arg(long)]
    pub json: bool,
    /// Replay: use this random seed (from a previous `--json` report).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Replay: what the tool's wall clock reads, in ms since the Unix epoch.
    #[arg(long, requires = "seed")]
    pub clock_ms: Option<u64>,
    /// Approve the call if its tool needs a person's approval
    /// (docs/policy.md); without it such a call is denied.
    #[arg(long)]
    pub approve: bool,
}

impl CallArgs {
    /// Fresh entropy, or a previous call's again (`--seed`, `--clock-ms`).
    fn entropy(&self) -> CallEntropy {
        match self.seed {
            None => CallEntropy::fresh(),
            Some(seed) => CallEntropy {
                seed,
                clock_ms: self
                    .clock_ms
                    .unwrap_or_else(|| CallEntropy::fresh().clock_ms),
            },
        }
    }
}

pub async fn call(host: &ToolHost, args: CallArgs) -> Result<ExitCode> {
    let entropy = args.entropy();
    let tool = host.catalog().lookup(&args.tool)?.id.clone();
    let profile = match &args.profile {
        Some(path) => Some(load::profile(Some(path))?),
        None => None,
    };
    let (run, mut session) = open_session(host, &args, profile.as_ref())?;
    eprintln!("run: {}", run.root().display());
    if args.approve {
        run.set_approver(Arc::new(Answer::allow("toolhost call --approve")));
    }

    if !session.snapshot().contains(&tool) {
        let reason = not_offered(&session, profile.as_ref(), &tool);
        return fail(&run, RunFailure::NotOffered(reason));
    }
    match call_once(host, &mut session, &tool, &args, entropy).await {
        Ok((text, is_error, details)) => {
            run.complete()?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&details)?);
            } else {
                // Exactly what the model reads, unless a person reads it.
                if std::io::stdout().is_terminal() {
                    println!("{}", crate::terminal::block(&text));
                } else {
                    println!("{text}");
                }
            }
            Ok(if is_error {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Err(failure) => fail(&run, failure),
    }
}

async fn call_once(
    host: &ToolHost,
    session: &mut Invocation,
    tool: &ToolId,
    args: &CallArgs,
    entropy: CallEntropy,
) -> Result<(String, bool, Value), RunFailure> {
    // Decoded through a turn like a provider's reply (a string holding the
    // object), so the arguments are read exactly as a model's would be.
    let caller = DirectCaller {
        requester: "cli",
        call_id_prefix: "cli",
    };
    let arguments = Some(Value::String(args.arguments.clone()));
    let outcome = session
        .call_directly(host, caller, tool, arguments, entropy)
        .await
        .map_err(RunFailure::from)?;
    let details = json!({
        "result": outcome.result,
        "report": outcome.report,
        "runDir": session.run().root(),
        "resultRef": outcome.result_ref,
    });
    Ok((outcome.model_text(), outcome.result.is_error, details))
}

/// Journal the failure, say it, exit 2.
fn fail(run: &Arc<Run>, failure: RunFailure) -> Result<ExitCode> {
    if let Err(journal) = run.fail(&failure) {
        eprintln!("error: could not journal the failure: {journal}");
    }
    eprintln!(
        "error: {} ({})",
        crate::terminal::block(&failure.to_string()),
        failure.class()
    );
    Ok(ExitCode::from(2))
}

/// A new run (the default, or `--run-dir` naming an empty or absent
/// directory), or an existing one continued (`--run-dir` naming a run).
fn open_session(
    host: &ToolHost,
    args: &CallArgs,
    profile: Option<&Profile>,
) -> Result<(Arc<Run>, Invocation)> {
    if let Some(dir) = &args.run_dir
        && dir.join("run.json").exists()
    {
        if args.inputs.any() {
            bail!(
                "run {} already exists and keeps the chat, world info and skills it was created with; drop --chat/--worldinfo/--prompt-snapshot/--skills or start a new run",
                dir.display()
            );
        }
        return continue_run(dir, profile);
    }
    // Without a profile a person may call any tool of the catalog; each call
    // still names its one tool (a `specific` turn).
    let profile = match profile {
        Some(profile) => profile.clone(),
        None => Profile::for_tools(
            "cli-call",
            host.catalog()
                .iter()
                .map(|descriptor| descriptor.id.clone())
                // Runtime-only tools are given by the runtime, never a profile.
                .filter(|id| !(id.is_builtin() && id.native_name() == builtin::TASK_RETURN))
                .collect(),
        ),
    };
    let (durability, bindings) = (args.durability.into(), args.inputs.bindings()?);
    let run = match &args.run_dir {
        Some(dir) => Run::at(dir),
        None => Run::under(&args.runs_dir),
    }
    .durability(durability)
    .bindings(&bindings)
    .create(&profile)?;
    let session = run.start_invocation(
        &profile,
        host.snapshot_sources(),
        ROOT_INVOCATION_ID,
        ExitPolicy::RunFinishAllowed,
    );
    match session {
        Ok(session) => Ok((run, session)),
        Err(failure) => {
            let _ = run.fail(&failure);
            Err(failure.into())
        }
    }
}

/// Go on with an existing run: its frozen profile and snapshot, and a gate
/// that remembers the calls already made.
fn continue_run(dir: &Path, profile: Option<&Profile>) -> Result<(Arc<Run>, Invocation)> {
    let (run, recovery) =
        Run::open(dir).with_context(|| format!("reopening run {}", dir.display()))?;
    if let Some(torn) = recovery.torn_bytes {
        eprintln!("note: cut a torn last journal line ({torn} bytes) left by a crash");
    }
    if let Some(profile) = profile
        && !run.was_created_with(profile)
    {
        bail!(
            "run {} was created with profile `{}`; its snapshot is frozen, so omit --profile or start a new run",
            dir.display(),
            run.manifest().profile.id
        );
    }
    let session = run
        .resume_invocation(ROOT_INVOCATION_ID, None)?
        .with_context(|| format!("run {} has no root invocation", dir.display()))?;
    Ok((run, session))
}

fn not_offered(session: &Invocation, profile: Option<&Profile>, tool: &ToolId) -> String {
    let why = session
        .diagnostics()
        .iter()
        .find(|diagnostic| &diagnostic.tool_id == tool)
        .map(|diagnostic| match diagnostic.reason {
            OmitReason::Denied => "it is denied by tools.deny".to_owned(),
            _ => diagnostic.message.clone(),
        })
        .unwrap_or_else(|| match profile {
            Some(_) => "it is not in tools.allow".to_owned(),
            None => "the run's frozen snapshot does not offer it".to_owned(),
        });
    let profile_id = &session.run().manifest().profile.id;
    format!("`{tool}` is not offered to profile `{profile_id}`: {why}")
}
