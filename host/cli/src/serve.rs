//! `toolhost mcp serve`: a profile's snapshot as an MCP server over stdio,
//! so any MCP client can use the sandboxed tools. One run, one invocation:
//! every call goes through a turn naming that one tool, the gate (the
//! profile's budgets), the sandbox, the audit files and the journal, like
//! a model's. Control tools (commit, finish, delegation) need an agent loop
//! to apply their effects, so they are not served.
//!
//! A call that ends the run (a host fault such as a symlink planted in the
//! workspace, an MCP call whose outcome is unknown) ends the server too: the
//! journal gets `run_failed`, that request and every one still in flight
//! are answered with a JSON-RPC error naming `run.failed` and the code,
//! stdout is closed and the process exits 2. A client never goes on against
//! a run that has failed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::ServiceExt;
use toolhost_journal::Durability;
use toolhost_runtime::{RunBindings, ToolHost};
use toolhost_serve::mcp::{McpTools, NeedingApproval, RunPlace, ServedFor};

use crate::load;

/// `toolhost mcp serve`'s flags, read here as clap parsed them. The
/// fields' order is `--help`'s order.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// The profile whose snapshot is served [default: the built-in one].
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// The run directory (absent or empty) [default: a new one under --runs-dir].
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    // No help text, as before: `--help` is held to its snapshot
    // (tests/help.rs).
    #[arg(
        long,
        value_name = "DIR",
        default_value = "runs",
        env = "TOOLHOST_RUNS_DIR"
    )]
    pub runs_dir: PathBuf,
    /// Bind the run to a SillyTavern chat for the chat tools.
    #[arg(long, value_name = "FILE")]
    pub chat: Option<PathBuf>,
    /// Serve the tools whose calls need a person's approval too, every
    /// call approved (journalled as approved by this flag); without it
    /// they are left out, as an MCP client has no one to ask.
    #[arg(long)]
    pub approve_all: bool,
}

/// Exit status when the run failed.
const RUN_FAILED_EXIT: u8 = 2;

pub async fn serve(host: Arc<ToolHost>, args: ServeArgs) -> Result<ExitCode> {
    let profile = load::profile(args.profile.as_deref())?;
    let place = match &args.run_dir {
        Some(dir) => RunPlace::At(dir.clone()),
        None => RunPlace::Under(args.runs_dir.clone()),
    };
    let needing_approval = if args.approve_all {
        NeedingApproval::ApprovedByFlag
    } else {
        NeedingApproval::LeftOut
    };
    let tools = McpTools::new(
        host,
        // The local use: no tenant, no policies beyond the host's.
        ServedFor::default(),
        profile,
        place,
        RunBindings {
            chat: args.chat.clone(),
            ..RunBindings::default()
        },
        Durability::Batched,
        needing_approval,
    )?;
    // Made now, so a bad run directory is said before serving.
    let run = tools.open_run().await?;
    let (reader, writer, kind) = crate::stdio::transport();
    // stdout is the protocol: everything for people goes to stderr.
    eprintln!(
        "toolhost mcp serve: run {} ({}), {} tool(s) over stdio ({})",
        run.run_id(),
        run.root().display(),
        tools.tool_count(),
        match kind {
            crate::stdio::StdioKind::Pipes => "pipes",
            crate::stdio::StdioKind::Blocking => "blocking",
        }
    );
    let running = tools
        .clone()
        .serve((reader, writer))
        .await
        .context("starting the MCP server on stdio")?;
    // Cancelling stops the loop; rmcp then answers the requests still in
    // flight before it closes the transport.
    let cancel = running.cancellation_token();
    let watcher = tools.clone();
    tokio::spawn(async move {
        watcher.run_ended().await;
        cancel.cancel();
    });
    let quit = running.waiting().await;
    // rmcp stops waiting for calls still running after a few seconds, but
    // does not stop them: `close` waits for such a call and completes the
    // run, so no call runs after the run is completed or failed.
    tools.close().await?;
    if let Some(failed) = tools.ended() {
        eprintln!(
            "toolhost mcp serve: run {} failed: {}: {}",
            run.run_id(),
            failed.code,
            crate::terminal::block(&failed.message)
        );
        // stdin is read by a blocking thread that would keep the process
        // alive; everything is journalled and synced, and stdout flushed.
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        std::process::exit(i32::from(RUN_FAILED_EXIT));
    }
    quit.context("serving MCP")?;
    Ok(ExitCode::SUCCESS)
}
