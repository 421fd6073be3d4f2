//! A profile's tools as an MCP server ([`McpTools`], an rmcp
//! `ServerHandler`): served over stdio by `toolhost mcp serve`, and over
//! streamable HTTP at `/mcp/{profile}` by `toolhost serve`, both protocol
//! eras (rmcp negotiates them).
//!
//! One handler, one run, one invocation: every call goes through a turn
//! naming that one tool, the gate (the profile's budgets), the sandbox,
//! the audit files and the journal, like a model's. The run is created at
//! the first call (listing tools needs none) and completed when the
//! handler goes (a session closed, a stateless request answered, the stdio
//! client gone). Control tools (commit, finish, delegation) need an agent
//! loop to apply their effects, so they are not served.
//!
//! A call that ends the run (a host fault such as a symlink planted in the
//! workspace, an MCP call whose outcome is unknown) journals `run_failed`;
//! that request and every later one is answered with a JSON-RPC error
//! naming `run.failed` and the code. A client never goes on against a run
//! that has failed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::Mutex;
use toolhost_core::policy::Policies;
use toolhost_core::{Classified, ExitPolicy, Profile, ToolBinding, builtin, snapshot};
use toolhost_journal::{Durability, ROOT_INVOCATION_ID};
use toolhost_runtime::approval::Answer;
use toolhost_runtime::{
    DirectCallError, DirectCaller, Invocation, Run, RunBindings, RunFailure, ToolHost,
};
use toolhost_sandbox::CallEntropy;

/// Whose tools they are: the `toolhost serve` tenant (`None`: the local
/// use) and the policies its snapshots are compiled under.
#[derive(Clone, Default)]
pub struct ServedFor {
    pub tenant: Option<String>,
    pub policies: Option<Arc<Policies>>,
}

/// Where the handler's run is made.
#[derive(Debug, Clone)]
pub enum RunPlace {
    /// A new directory `<dir>/<run-id>`.
    Under(PathBuf),
    /// Exactly this (absent or empty) directory.
    At(PathBuf),
}

/// Why the run ended, as every later request is told.
#[derive(Debug, Clone)]
pub struct RunEnded {
    pub code: String,
    pub message: String,
}

impl RunEnded {
    fn error(&self) -> ErrorData {
        ErrorData::internal_error(
            format!("run.failed: {}: {}", self.code, self.message),
            Some(serde_json::json!({"code": "run.failed", "cause": self.code})),
        )
    }
}

/// What an MCP server does with a tool whose calls need a person's
/// approval: an MCP client has no one to ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeedingApproval {
    /// Not served: left out of `tools/list`, a call of it is unknown.
    LeftOut,
    /// Served, every call approved (`mcp serve --approve-all`), journalled
    /// as approved by that flag.
    ApprovedByFlag,
}

/// The served profile; cheap to clone (rmcp clones handlers).
#[derive(Clone)]
pub struct McpTools {
    inner: Arc<Inner>,
}

struct Inner {
    host: Arc<ToolHost>,
    needing_approval: NeedingApproval,
    /// The policies the snapshot is compiled under, when not the host's
    /// (a tenant's).
    policies: Option<Arc<Policies>>,
    /// The tenant whose profile this is (`None`: the local `mcp serve`):
    /// what an extension's per-profile grant is checked against.
    tenant: Option<String>,
    profile: Profile,
    place: RunPlace,
    bindings: RunBindings,
    durability: Durability,
    /// The snapshot's tools, less the control tools.
    tools: Vec<ToolBinding>,
    /// Each served tool's place in `tools` by its model alias: a call finds
    /// its tool in the same time whatever the profile's size.
    by_alias: HashMap<String, usize>,
    /// The run and its one invocation, once the first call made them.
    opened: Mutex<Option<Opened>>,
    /// Set by the call that ended the run; every later call is refused.
    ended: std::sync::Mutex<Option<RunEnded>>,
    /// Notified once the run ended.
    stop: tokio::sync::Notify,
    /// Its place among `toolhost serve`'s runs, freed when the handler goes
    /// (after `Drop` completed the run).
    counted: crate::mcp_limits::Counted,
}

struct Opened {
    run: Arc<Run>,
    session: Invocation,
    /// Completed (or failed) already: nothing to do when dropped.
    closed: bool,
}

/// Between a stdio client's requests the server idles: there, once this
/// answer is handed to the transport, make the unnamed files of the next
/// call's audit files ([`Run::make_files_ahead`]), so the next call only
/// writes and links them. On `mcp serve`'s current-thread runtime a task
/// that yields once runs after the runtime next polls for I/O, so in
/// practice after the answer is written to the pipe (a pipe too full to
/// take it is the exception; the order changes nothing but speed).
/// On `toolhost serve`'s multi-threaded runtime the task could wake
/// another worker, which costs more than it hides, and under load there is
/// no idle time to use: nothing is done there.
fn make_files_after_the_answer(run: &Arc<Run>) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if let Ok(runtime) = Handle::try_current()
        && runtime.runtime_flavor() == RuntimeFlavor::CurrentThread
    {
        let run = Arc::clone(run);
        runtime.spawn(async move {
            tokio::task::yield_now().await;
            run.make_files_ahead();
        });
    }
}

impl McpTools {
    /// The tools `profile`'s snapshot offers, to be called in a run made at
    /// `place` when the first call comes.
    pub fn new(
        host: Arc<ToolHost>,
        served_for: ServedFor,
        profile: Profile,
        place: RunPlace,
        bindings: RunBindings,
        durability: Durability,
        needing_approval: NeedingApproval,
    ) -> Result<Self, RunFailure> {
        let ServedFor { tenant, policies } = served_for;
        let compiled = snapshot::compile(
            &profile,
            host.snapshot_sources_under(policies.as_deref(), tenant.as_deref()),
            ROOT_INVOCATION_ID,
            ExitPolicy::RunFinishAllowed,
        )?;
        let tools = compiled
            .snapshot
            .bindings()
            .iter()
            // Their effects only an agent loop applies.
            .filter(|binding| !builtin::of(&binding.descriptor.id).is_some_and(|b| b.control))
            .filter(|binding| {
                binding.approval.is_none() || needing_approval == NeedingApproval::ApprovedByFlag
            })
            .cloned()
            .collect::<Vec<ToolBinding>>();
        // Aliases are unique within a snapshot.
        let by_alias = tools
            .iter()
            .enumerate()
            .map(|(place, binding)| (binding.model_alias.clone(), place))
            .collect();
        Ok(Self {
            inner: Arc::new(Inner {
                host,
                needing_approval,
                policies,
                tenant,
                profile,
                place,
                bindings,
                durability,
                tools,
                by_alias,
                opened: Mutex::new(None),
                ended: std::sync::Mutex::new(None),
                stop: tokio::sync::Notify::new(),
                counted: crate::mcp_limits::Counted::default(),
            }),
        })
    }

    /// Its count among `toolhost serve`'s runs and calls.
    pub(crate) fn counted(&self) -> &crate::mcp_limits::Counted {
        &self.inner.counted
    }

    /// How many tools are served.
    pub fn tool_count(&self) -> usize {
        self.inner.tools.len()
    }

    /// The run, made now if no call made it yet.
    pub async fn open_run(&self) -> Result<Arc<Run>, RunFailure> {
        let mut opened = self.inner.opened.lock().await;
        Ok(Arc::clone(&self.inner.open(&mut opened)?.run))
    }

    /// Why the run ended, once it did.
    pub fn ended(&self) -> Option<RunEnded> {
        self.inner.ended()
    }

    /// Resolves once a call ended the run.
    pub async fn run_ended(&self) {
        self.inner.stop.notified().await;
    }

    /// Wait for a call in flight, then complete the run (unless a call
    /// ended it): no call runs after this.
    pub async fn close(&self) -> Result<(), RunFailure> {
        let mut opened = self.inner.opened.lock().await;
        if let Some(opened) = opened.as_mut()
            && !opened.closed
        {
            opened.closed = true;
            opened.run.complete()?;
        }
        Ok(())
    }
}

impl Inner {
    fn ended(&self) -> Option<RunEnded> {
        self.ended
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// The run and its invocation: made now unless a call made them.
    fn open<'a>(&self, opened: &'a mut Option<Opened>) -> Result<&'a mut Opened, RunFailure> {
        let made = match opened.take() {
            Some(made) => made,
            None => self.make()?,
        };
        Ok(opened.insert(made))
    }

    fn make(&self) -> Result<Opened, RunFailure> {
        let run = match &self.place {
            RunPlace::At(dir) => Run::at(dir)
                .durability(self.durability)
                .bindings(&self.bindings)
                .create(&self.profile)?,
            RunPlace::Under(dir) => Run::under(dir)
                .durability(self.durability)
                .bindings(&self.bindings)
                .create(&self.profile)?,
        };
        if self.needing_approval == NeedingApproval::ApprovedByFlag {
            run.set_approver(Arc::new(Answer::allow("mcp serve --approve-all")));
        }
        let session = run.start_invocation(
            &self.profile,
            self.host
                .snapshot_sources_under(self.policies.as_deref(), self.tenant.as_deref()),
            ROOT_INVOCATION_ID,
            ExitPolicy::RunFinishAllowed,
        );
        match session {
            Ok(session) => Ok(Opened {
                run,
                session,
                closed: false,
            }),
            Err(failure) => {
                let _ = run.fail(&failure);
                Err(failure)
            }
        }
    }

    /// `failure` ended the run: journal `run_failed`, refuse everything from
    /// now on. Called with the session lock held, so no other call starts
    /// in between.
    fn end_run(&self, opened: &mut Opened, failure: &RunFailure) -> RunEnded {
        if let Err(journal) = opened.run.fail(failure) {
            tracing::error!("could not journal the failure: {journal}");
        }
        opened.closed = true;
        let ended = RunEnded {
            code: failure.code().to_owned(),
            message: failure.to_string(),
        };
        *self
            .ended
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(ended.clone());
        // A stored permit: a watcher wakes even if it waits later.
        self.stop.notify_one();
        ended
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle went without `close`: complete the run here.
        if let Some(opened) = self.opened.get_mut()
            && !opened.closed
            && let Err(error) = opened.run.complete()
        {
            tracing::error!(
                run = opened.run.run_id(),
                "could not complete the run: {error}"
            );
        }
    }
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

impl ServerHandler for McpTools {
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
            self.inner.tools.iter().map(describe).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // In flight until this call returns (over HTTP; `mcp_limits`).
        let _permit = crate::mcp_limits::call_permit(&context.extensions);
        let inner = &self.inner;
        let name = request.name.to_string();
        let Some(binding) = inner
            .by_alias
            .get(name.as_str())
            .and_then(|place| inner.tools.get(*place))
        else {
            return Err(ErrorData::invalid_params(
                format!("unknown tool: {name}"),
                None,
            ));
        };
        let tool = binding.descriptor.id.clone();
        let mut opened = inner.opened.lock().await;
        if let Some(ended) = inner.ended() {
            return Err(ended.error());
        }
        if opened.as_ref().is_some_and(|opened| opened.closed) {
            return Err(ErrorData::internal_error(
                "run.closed: the run is complete",
                None,
            ));
        }
        if opened.is_none() {
            inner.counted.place()?;
        }
        let opened = inner.open(&mut opened).map_err(|failure| {
            ErrorData::internal_error(
                format!("run.not_started: {failure}"),
                Some(serde_json::json!({"code": failure.code()})),
            )
        })?;
        let caller = DirectCaller {
            requester: "mcp-serve",
            call_id_prefix: "mcp",
        };
        let arguments = request.arguments.map(Value::Object);
        let called = opened
            .session
            .call_directly(
                inner.host.as_ref(),
                caller,
                &tool,
                arguments,
                CallEntropy::fresh(),
            )
            .await;
        let outcome = match called {
            Ok(outcome) => outcome,
            Err(DirectCallError::Arguments(error)) => {
                return Err(ErrorData::invalid_params(error.to_string(), None));
            }
            // A journal that cannot be written, a host fault: the run ends.
            Err(DirectCallError::Run(failure)) => {
                return Err(inner.end_run(opened, &failure).error());
            }
        };
        make_files_after_the_answer(&opened.run);
        let text = ContentBlock::text(outcome.model_text());
        Ok(if outcome.result.is_error {
            CallToolResult::error(vec![text])
        } else {
            CallToolResult::success(vec![text])
        }
        .into())
    }
}
