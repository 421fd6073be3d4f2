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

use std::borrow::Cow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::Mutex;
use toolhost_core::{Classified, ExitPolicy, ProviderToolCall, ToolBinding, ToolChoice, builtin};
use toolhost_journal::{Durability, ROOT_INVOCATION_ID};
use toolhost_runtime::{InvocationSession, Run, RunBindings, RunFailure, ToolHost};
use toolhost_sandbox::CallEntropy;

use crate::load;

pub struct ServeArgs {
    pub profile: Option<PathBuf>,
    pub run_dir: Option<PathBuf>,
    pub runs_dir: PathBuf,
    pub bindings: RunBindings,
}

#[derive(Clone)]
struct Served {
    host: Arc<ToolHost>,
    run: Arc<Run>,
    session: Arc<Mutex<InvocationSession>>,
    tools: Arc<Vec<ToolBinding>>,
    /// Set by the call that ended the run; every later call is refused.
    ended: Arc<std::sync::Mutex<Option<RunEnded>>>,
    /// Notified once the run ended: the server stops.
    stop: Arc<tokio::sync::Notify>,
}

/// Why the run ended, as every later request is told.
#[derive(Debug, Clone)]
struct RunEnded {
    code: String,
    message: String,
}

impl RunEnded {
    fn error(&self) -> ErrorData {
        ErrorData::internal_error(
            format!("run.failed: {}: {}", self.code, self.message),
            Some(serde_json::json!({"code": "run.failed", "cause": self.code})),
        )
    }
}

/// Exit status when the run failed.
const RUN_FAILED_EXIT: u8 = 2;

pub async fn serve(host: Arc<ToolHost>, args: ServeArgs) -> Result<ExitCode> {
    let profile = load::profile(args.profile.as_deref())?;
    let run = match &args.run_dir {
        Some(dir) => Run::create_with(dir, &profile, Durability::Batched, &args.bindings)?,
        None => Run::create_under(
            &args.runs_dir,
            &profile,
            Durability::Batched,
            &args.bindings,
        )?,
    };
    let session = run.start_invocation(
        &profile,
        host.snapshot_sources(),
        ROOT_INVOCATION_ID,
        ExitPolicy::RunFinishAllowed,
    )?;
    let tools: Vec<ToolBinding> = session
        .snapshot()
        .bindings()
        .iter()
        .filter(|binding| {
            // Their effects only an agent loop applies.
            !builtin::of(&binding.descriptor.id).is_some_and(|builtin| builtin.control)
        })
        .cloned()
        .collect();
    // stdout is the protocol: everything for people goes to stderr.
    eprintln!(
        "toolhost mcp serve: run {} ({}), {} tool(s) over stdio",
        run.run_id(),
        run.root().display(),
        tools.len()
    );
    let served = Served {
        host,
        run: Arc::clone(&run),
        session: Arc::new(Mutex::new(session)),
        tools: Arc::new(tools),
        ended: Arc::new(std::sync::Mutex::new(None)),
        stop: Arc::new(tokio::sync::Notify::new()),
    };
    let ended = Arc::clone(&served.ended);
    let stop = Arc::clone(&served.stop);
    let session = Arc::clone(&served.session);
    let running = served
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP server on stdio")?;
    // Cancelling stops the loop; rmcp then answers the requests still in
    // flight before it closes the transport.
    let cancel = running.cancellation_token();
    tokio::spawn(async move {
        stop.notified().await;
        cancel.cancel();
    });
    let quit = running.waiting().await;
    // rmcp stops waiting for calls still running after a few seconds, but
    // does not stop them: take the session (waiting for such a call) and
    // keep it, so that no call runs after the run is completed or failed.
    let _no_more_calls = session.lock().await;
    let failed = ended
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone();
    if let Some(failed) = failed {
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
    run.complete()?;
    quit.context("serving MCP")?;
    Ok(ExitCode::SUCCESS)
}

fn describe(binding: &ToolBinding) -> Tool {
    let schema = match &binding.descriptor.input_schema {
        Value::Object(map) => map.clone(),
        _ => serde_json::Map::new(),
    };
    let description = binding.descriptor.description.clone().unwrap_or_default();
    let mut tool = Tool::new(
        Cow::Owned(binding.model_alias.clone()),
        Cow::Owned(description),
        Arc::new(schema),
    );
    tool.title = binding.descriptor.title.clone();
    let hint = |key: &str| binding.descriptor.annotations[key].as_bool();
    tool.annotations = Some(
        ToolAnnotations::new()
            .read_only(hint("readOnly").unwrap_or(false))
            .idempotent(hint("idempotent").unwrap_or(false))
            .open_world(hint("openWorld").unwrap_or(false)),
    );
    tool
}

impl Served {
    fn ended(&self) -> Option<RunEnded> {
        self.ended
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// `failure` ended the run: journal `run_failed`, refuse everything from
    /// now on, stop serving. Called with the session lock held, so no other
    /// call starts in between.
    fn end_run(&self, failure: &RunFailure) -> RunEnded {
        if let Err(journal) = self.run.fail(failure) {
            eprintln!("error: could not journal the failure: {journal}");
        }
        let ended = RunEnded {
            code: failure.code().to_owned(),
            message: failure.to_string(),
        };
        *self
            .ended
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(ended.clone());
        // A stored permit: the watcher wakes even if it waits later.
        self.stop.notify_one();
        ended
    }
}

impl ServerHandler for Served {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.iter().map(describe).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let Some(binding) = self.tools.iter().find(|b| b.model_alias == name) else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            ));
        };
        let tool = binding.descriptor.id.clone();
        let mut session = self.session.lock().await;
        if let Some(ended) = self.ended() {
            return Err(ended.error());
        }
        let turn = match session.begin_turn(ToolChoice::Specific(tool), "mcp-serve") {
            Ok(turn) => turn,
            // A journal that cannot be written ends the run too.
            Err(failure) => return Err(self.end_run(&failure).error()),
        };
        let invocation = turn
            .decode_call(ProviderToolCall {
                call_id: Some(format!("mcp_{}", uuid::Uuid::new_v4().simple())),
                name: Some(name),
                arguments: request.arguments.map(Value::Object),
                provider_metadata: Value::Null,
            })
            .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?;
        let outcome = match session
            .call(self.host.as_ref(), &turn, invocation, CallEntropy::fresh())
            .await
        {
            Ok(outcome) => outcome,
            Err(failure) => return Err(self.end_run(&failure).error()),
        };
        let text = ContentBlock::text(outcome.model_text());
        Ok(if outcome.result.is_error {
            CallToolResult::error(vec![text])
        } else {
            CallToolResult::success(vec![text])
        }
        .into())
    }
}
