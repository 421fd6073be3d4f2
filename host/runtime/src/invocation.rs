//! `Invocation`: one invocation's serial tool loop state — its frozen
//! snapshot, its gate, its round — and the path every tool call takes:
//!
//! ```text
//! arguments stored (create-only) → tool_call_requested
//!   → gate ── rejected ──────────────────────────────┐
//!   → tool_call_started → executor → identity check   │
//!   → result stored (create-only) → tool_result_stored ◄┘
//!   → tool_call_completed | tool_call_failed
//! ```
//!
//! A rejected or failed call the run survives (budget exhausted, tool error,
//! sandbox limit) comes back as a [`CallOutcome`] the model reads; anything
//! that ends the run is a [`RunFailure`], journalled as an `error`-level
//! `tool_call_failed` before it is returned.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use toolhost_capabilities::{BindInputs, CallScope, CallableAgent, InvocationBound, Settlement};
use toolhost_core::{
    AgentToolResult, Classified, InvocationToolSnapshot, ModelTurn, Profile, ToolBinding, ToolCall,
    ToolChoice, ToolEffect, ToolFailure, ToolId, ToolOutcome, ToolRequestGate, ToolTurnContract,
    snapshot::SnapshotDiagnostic,
};
use toolhost_journal::{
    Event as _, ModelRequestCreated, ToolCallApprovalDecided, ToolCallApprovalRequested,
    ToolCallCompleted, ToolCallFailed, ToolCallOutcome, ToolCallRequested, ToolCallStarted,
    ToolCallSystemFailed, ToolResultStored,
};
use toolhost_sandbox::{CallEntropy, CallReport};
use toolhost_workspace::WorkspaceSession;

use crate::approval::{ApprovalDecision, ApprovalRequest, ArgumentsSummary, Verdict};
use crate::executor::ToolExecutor;
use crate::failure::RunFailure;
use crate::resume::{self, InDoubt};
use crate::run::Run;

/// A finished call the run goes on after.
#[derive(Debug)]
pub struct CallOutcome {
    pub result: AgentToolResult,
    /// For the runtime to apply (control tools only).
    pub effect: Option<ToolEffect>,
    /// The sandbox's report, when the call reached the sandbox.
    pub report: Option<CallReport>,
    /// Run-relative path of the stored result (`tool-results/call_<hex>.json`).
    pub result_ref: String,
}

impl CallOutcome {
    /// Exactly what the model reads for this call.
    pub fn model_text(&self) -> String {
        self.result.model_text()
    }
}

/// A call that ran but whose result is not stored yet (see
/// [`Invocation::execute`]).
#[derive(Debug)]
pub struct ExecutedCall {
    invocation: ToolCall,
    result: AgentToolResult,
    effect: Option<ToolEffect>,
    report: Option<CallReport>,
    round: u32,
    started: Instant,
    /// What the call spent of its capabilities.
    settlement: Settlement,
    /// A resumed run's stored result for this call: what the model reads,
    /// whatever the replayed effect says.
    stored: Option<AgentToolResult>,
}

impl ExecutedCall {
    /// The stored result, when this call was replayed from the record.
    pub(crate) fn stored_result(&self) -> Option<&AgentToolResult> {
        self.stored.as_ref()
    }

    pub fn call(&self) -> &ToolCall {
        &self.invocation
    }

    pub fn result(&self) -> &AgentToolResult {
        &self.result
    }

    /// The control effect, taken out to be applied.
    pub fn take_effect(&mut self) -> Option<ToolEffect> {
        self.effect.take()
    }

    /// Answer with what the host did instead of what the tool said (the
    /// identity stays the call's).
    pub fn replace_outcome(&mut self, outcome: ToolOutcome) {
        self.result = AgentToolResult::from_outcome(&self.invocation, outcome).0;
    }
}

#[derive(Debug)]
pub struct Invocation {
    run: Arc<Run>,
    invocation_id: String,
    snapshot: Arc<InvocationToolSnapshot>,
    gate: ToolRequestGate,
    round: u32,
    /// Why allowed tools were left out of the snapshot (empty on resume).
    diagnostics: Vec<SnapshotDiagnostic>,
    /// This invocation's view of the workspace: what it has read, for
    /// compare-and-swap edits.
    workspace: Arc<WorkspaceSession>,
    /// The read-state as last stored in the run (`read_state.json`).
    stored_read_state: Option<Vec<u8>>,
    /// What its capabilities are bound from (the run's inputs, the
    /// workspace session above, the snapshot, the agents it may call).
    inputs: BindInputs,
    /// Its capabilities' bound parts; each call's are prepared from them.
    bound: Arc<InvocationBound>,
    /// MCP results longer than this (characters) go to a readable view
    /// file; the model reads a preview and where the rest is.
    mcp_inline_limit: usize,
}

/// Where a reopened invocation's gate and rounds stand (`None` for a new
/// invocation: a fresh gate, round 0).
pub(crate) struct Reopened {
    pub gate: ToolRequestGate,
    pub round: u32,
}

impl Invocation {
    pub(crate) fn new(
        run: Arc<Run>,
        invocation_id: &str,
        snapshot: Arc<InvocationToolSnapshot>,
        reopened: Option<Reopened>,
        workspace: Arc<WorkspaceSession>,
        profile: &Profile,
        tenant: Option<&str>,
        skill_chars_charged: u64,
    ) -> Self {
        let inputs = BindInputs {
            run: Some(Arc::clone(run.inputs())),
            profile: Some(Arc::new(profile.clone())),
            workspace: Some(Arc::clone(&workspace)),
            snapshot: Some(Arc::clone(&snapshot)),
            agents: None,
            skill_chars_charged,
            grant_profile: Some(Arc::new(profile.version_for(tenant))),
        };
        let bound = Arc::new(InvocationBound::bind(&inputs));
        let (gate, round) = match reopened {
            Some(Reopened { gate, round }) => (gate, round),
            None => (ToolRequestGate::new(Arc::clone(&snapshot)), 0),
        };
        Self {
            gate,
            run,
            invocation_id: invocation_id.to_owned(),
            snapshot,
            round,
            diagnostics: Vec::new(),
            workspace,
            stored_read_state: None,
            inputs,
            bound,
            mcp_inline_limit: DEFAULT_MCP_INLINE_LIMIT,
        }
    }

    /// The profile's `tools.mcpResultInlineCharLimit`.
    pub fn set_mcp_inline_limit(&mut self, chars: u32) {
        self.mcp_inline_limit = chars.max(1) as usize;
    }

    /// Tell this invocation's tools which agents it may call. Before its
    /// first call: the capabilities are bound again (binding is cheap and
    /// reads only the inputs; no call has charged anything yet).
    pub fn set_agents(&mut self, agents: Vec<CallableAgent>) {
        debug_assert_eq!(self.round, 0, "agents are set before the first turn");
        self.inputs.agents = Some(Arc::new(agents));
        self.bound = Arc::new(InvocationBound::bind(&self.inputs));
    }

    /// Take over what an earlier process of this invocation had read.
    pub(crate) fn with_read_state(mut self, stored: Vec<u8>) -> Result<Self, RunFailure> {
        let file: ReadStateFile = serde_json::from_slice(&stored).map_err(|error| {
            RunFailure::State(format!(
                "the stored read-state of `{}` does not load: {error}",
                self.invocation_id
            ))
        })?;
        self.workspace.restore_states(file.states);
        self.stored_read_state = Some(stored);
        Ok(self)
    }

    /// Store the read-state when it changed, so a reopened run's invocation
    /// keeps what it has read (every later edit still re-checks the sha).
    fn store_read_state(&mut self) -> Result<(), RunFailure> {
        let file = ReadStateFile {
            schema_version: 1,
            states: self.workspace.states_snapshot(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(|error| {
            RunFailure::State(format!("read-state does not serialize: {error}"))
        })?;
        if self.stored_read_state.as_deref() == Some(bytes.as_slice()) {
            return Ok(());
        }
        let path = self
            .run
            .manifest_layout()
            .read_state(&self.invocation_id)
            .map_err(|error| RunFailure::State(error.to_string()))?;
        self.run.dir().replace_state_file(&path.relative, &bytes)?;
        self.stored_read_state = Some(bytes);
        Ok(())
    }

    pub(crate) fn with_diagnostics(mut self, diagnostics: Vec<SnapshotDiagnostic>) -> Self {
        self.diagnostics = diagnostics;
        self
    }

    pub fn diagnostics(&self) -> &[SnapshotDiagnostic] {
        &self.diagnostics
    }

    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    pub fn snapshot(&self) -> &Arc<InvocationToolSnapshot> {
        &self.snapshot
    }

    pub fn gate(&self) -> &ToolRequestGate {
        &self.gate
    }

    /// Charge a call under a name its turn did not offer to the total
    /// ([`ToolRequestGate::charge_unknown`]): nothing runs, the run loop
    /// answers it.
    pub fn charge_unknown(&mut self) -> Result<u32, toolhost_core::GateRejection> {
        self.gate.charge_unknown()
    }

    pub fn round(&self) -> u32 {
        self.round
    }

    pub fn run(&self) -> &Arc<Run> {
        &self.run
    }

    pub fn workspace(&self) -> &Arc<WorkspaceSession> {
        &self.workspace
    }

    /// Start the next model request: every tool of the snapshot under
    /// `choice`, journalled as `model_request_created`.
    pub fn begin_turn(
        &mut self,
        choice: ToolChoice,
        requester: &str,
    ) -> Result<ModelTurn, RunFailure> {
        let contract = ToolTurnContract::all(&self.snapshot, choice)?;
        self.open_turn(contract, requester, Written::Now)
    }

    /// The turn of a call made at once, with no model in between: it
    /// offers only `tool` ([`ToolTurnContract::only`]), so a call does the
    /// same work whatever the snapshot's size; the request line is held and
    /// goes out in the same write as the call's first events (or when the
    /// journal is flushed).
    pub(crate) fn begin_direct_turn(
        &mut self,
        tool: &ToolId,
        requester: &str,
    ) -> Result<ModelTurn, RunFailure> {
        let contract = ToolTurnContract::only(&self.snapshot, tool)?;
        self.open_turn(contract, requester, Written::WithTheNext)
    }

    fn open_turn(
        &mut self,
        contract: ToolTurnContract,
        requester: &str,
        written: Written,
    ) -> Result<ModelTurn, RunFailure> {
        let turn = ModelTurn::new(&self.snapshot, contract)?;
        self.round += 1;
        let created = ModelRequestCreated {
            round: self.round,
            invocation_id: self.invocation_id.clone(),
            turn_contract: serde_json::to_value(turn.contract()).unwrap_or(Value::Null),
            request: Run::request_summary(requester, turn.tools().len()),
        };
        match written {
            Written::Now => self.run.record(&created)?,
            Written::WithTheNext => self.run.hold(&created)?,
        };
        Ok(turn)
    }

    /// Take one call of `turn` through the gate, the executor and the audit.
    pub async fn call<E: ToolExecutor>(
        &mut self,
        executor: &E,
        turn: &ModelTurn,
        invocation: ToolCall,
        entropy: CallEntropy,
    ) -> Result<CallOutcome, RunFailure> {
        let executed = self.execute(executor, turn, invocation, entropy).await?;
        self.store(executed)
    }

    /// The first half of [`call`](Self::call): arguments stored, gate,
    /// executor, identity check. The result is not stored yet, so the run
    /// loop can apply a control tool's effect and answer with what it did
    /// ([`ExecutedCall::replace_outcome`]) before [`store`](Self::store).
    pub async fn execute<E: ToolExecutor>(
        &mut self,
        executor: &E,
        turn: &ModelTurn,
        invocation: ToolCall,
        entropy: CallEntropy,
    ) -> Result<ExecutedCall, RunFailure> {
        let started = Instant::now();
        let tool_id = invocation.tool_id.clone();
        let round = self.round;
        let resume_log = self.run.resume_log().cloned();
        let stored = match &resume_log {
            Some(_) => self.stored_result(&invocation)?,
            None => None,
        };
        let in_doubt = stored.is_none()
            && resume_log
                .as_ref()
                .is_some_and(|log| log.was_started(&self.invocation_id, &invocation.call_id));
        self.record_request(&invocation)?;

        let mut settlement = Settlement::default();
        let execution = match self.gate.authorize_and_reserve(turn.contract(), &tool_id) {
            Err(rejection) => match rejection.to_tool_failure() {
                Some(failure) => {
                    // Denied, but the run goes on: the model reads why.
                    let (result, _) =
                        AgentToolResult::from_outcome(&invocation, ToolOutcome::Error(failure));
                    (result, None, None)
                }
                None => {
                    let failure = RunFailure::Gate(rejection);
                    return Err(self.system_failure(&invocation, round, failure));
                }
            },
            Ok(_) => 'execution: {
                let snapshot = Arc::clone(&self.snapshot);
                let binding = snapshot
                    .binding(&tool_id)
                    .ok_or_else(|| RunFailure::State(format!("`{tool_id}` lost its binding")))?;
                // The frozen decision, tightened by the source as it is now.
                let approval = binding
                    .approval
                    .clone()
                    .or_else(|| executor.approval_required_now(&tool_id));
                if let Some(reason) = &approval
                    && let Some(denied) = self
                        .seek_approval(&invocation, binding, reason, round)
                        .await?
                {
                    // Denied: the tool never starts; the model reads why.
                    break 'execution (denied, None, None);
                }
                self.run.record(&ToolCallStarted {
                    round,
                    invocation_id: self.invocation_id.clone(),
                    call_id: invocation.call_id.clone(),
                    tool_id: tool_id.clone(),
                    snapshot_id: self.snapshot.id().to_owned(),
                    name: tool_id.native_name().to_owned(),
                })?;
                if let Some(stored) = &stored
                    && !resume::is_effect_tool(&tool_id)
                {
                    return Ok(self.replayed(invocation, stored.clone(), started, true));
                }
                if in_doubt && resume::is_write_tool(&tool_id) {
                    // `None`: it never landed, so it runs again.
                    if let Some(result) = self.resolve_write(&invocation)? {
                        return Ok(self.replayed(invocation, result, started, false));
                    }
                } else if in_doubt && resume::in_doubt(&tool_id) == InDoubt::Unknown {
                    let failure = resume::outcome_unknown(&tool_id);
                    let (result, _) =
                        AgentToolResult::from_outcome(&invocation, ToolOutcome::Error(failure));
                    return Ok(self.replayed(invocation, result, started, false));
                }
                let scope = CallScope {
                    write_intents: resume::is_write_tool(&tool_id)
                        .then(|| self.intent_sink(&invocation.call_id)),
                };
                self.bound.begin(&scope);
                let executed = executor
                    .execute(&invocation, binding, entropy, Arc::clone(&self.bound))
                    .await;
                settlement = self.bound.settle();
                match executed {
                    Ok(execution) => (execution.result, execution.effect, execution.report),
                    Err(error) => {
                        return Err(self.system_failure(&invocation, round, error.into()));
                    }
                }
            }
        };
        let (result, effect, report) = execution;
        // Never interpret or store a result that belongs to another call.
        if let Err(mismatch) = result.check_identity(&invocation) {
            return Err(self.system_failure(&invocation, round, mismatch.into()));
        }
        let result = match self.externalize_mcp_result(result) {
            Ok(result) => result,
            Err(failure) => return Err(self.system_failure(&invocation, round, failure)),
        };
        Ok(ExecutedCall {
            invocation,
            result,
            effect,
            report,
            round,
            started,
            settlement,
            stored,
        })
    }

    /// Ask for a person's approval of `invocation` (its binding requires
    /// one, for `reason`): journalled, decided by the journal (a resumed
    /// run), an earlier "for the run", or the run's approver. `Some`: the
    /// denied call's result, an `agent.tool_denied_by_user` the model reads.
    async fn seek_approval(
        &mut self,
        invocation: &ToolCall,
        binding: &ToolBinding,
        reason: &str,
        round: u32,
    ) -> Result<Option<AgentToolResult>, RunFailure> {
        let tool_id = &invocation.tool_id;
        let shown = ArgumentsSummary::of(&invocation.arguments);
        let request = ApprovalRequest {
            run_id: self.run.run_id().to_owned(),
            invocation_id: self.invocation_id.clone(),
            call_id: invocation.call_id.clone(),
            round,
            tool_id: tool_id.clone(),
            title: binding.descriptor.title.clone(),
            arguments_summary: shown.to_string(),
            arguments_shown: shown,
            annotations: binding.descriptor.annotations.clone(),
            source: tool_id.provider_str().to_owned(),
            reason: reason.to_owned(),
        };
        self.run.record(&ToolCallApprovalRequested {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: request.call_id.clone(),
            tool_id: tool_id.clone(),
            name: tool_id.native_name().to_owned(),
            title: request.title.clone(),
            arguments_shown: serde_json::to_value(&request.arguments_shown).unwrap_or_default(),
            arguments_summary: request.arguments_summary.clone(),
            annotations: request.annotations.clone(),
            source: request.source.clone(),
            reason: request.reason.clone(),
        })?;
        let recorded = self
            .run
            .resume_log()
            .and_then(|log| log.peek(&self.invocation_id))
            .filter(|next| {
                next.kind == ToolCallApprovalDecided::TYPE
                    && next.payload["callId"] == request.call_id.as_str()
            });
        let decision = if let Some(recorded) = recorded {
            // Decided before the run was interrupted: not asked again.
            let text = |key: &str| recorded.payload[key].as_str().map(str::to_owned);
            ApprovalDecision {
                verdict: text("decision")
                    .as_deref()
                    .and_then(Verdict::parse)
                    .unwrap_or(Verdict::Denied),
                by: text("by").unwrap_or_default(),
                note: text("note"),
            }
        } else if self.run.approved_for_run(tool_id) {
            ApprovalDecision {
                verdict: Verdict::Approved,
                by: "approved for the rest of the run".into(),
                note: None,
            }
        } else {
            let approver = self.run.approver();
            approver.decide(self.run.root(), &request).await
        };
        if decision.verdict == Verdict::ApprovedForRun {
            self.run.approve_for_run(tool_id);
        }
        self.run.record(&ToolCallApprovalDecided {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: request.call_id.clone(),
            tool_id: tool_id.clone(),
            decision: decision.verdict.as_str().to_owned(),
            by: decision.by.clone(),
            at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            note: decision.note.clone(),
        })?;
        if decision.verdict.allows() {
            return Ok(None);
        }
        let mut message = match decision.verdict {
            Verdict::TimedOut => format!(
                "no one approved this call of {} in time, so it did not run",
                self.snapshot
                    .binding(tool_id)
                    .map_or(tool_id.native_name(), |b| b.model_alias.as_str())
            ),
            _ => format!(
                "a person did not approve this call of {}, so it did not run",
                self.snapshot
                    .binding(tool_id)
                    .map_or(tool_id.native_name(), |b| b.model_alias.as_str())
            ),
        };
        if let Some(note) = &decision.note {
            message.push_str(&format!("; their note: {note}"));
        }
        let (result, _) = AgentToolResult::from_outcome(
            invocation,
            ToolOutcome::Error(ToolFailure::new("agent.tool_denied_by_user", message)),
        );
        Ok(Some(result))
    }

    /// A call a resumed run answers from its record, without executing it.
    /// Records each write of the call before it lands (create-only), so a
    /// resume can tell whether it did.
    fn intent_sink(&self, call_id: &str) -> toolhost_workspace::IntentSink {
        let run = Arc::clone(&self.run);
        let relative = resume::intent_path(&self.invocation_id, call_id);
        Arc::new(move |intent: &toolhost_workspace::WriteIntent| {
            let mut bytes = serde_json::to_vec_pretty(intent).unwrap_or_default();
            bytes.push(b'\n');
            // Again, when a resumed run re-runs a write that never landed.
            run.dir()
                .write_create_only_again(&relative, &bytes)
                .map_err(|error| {
                    toolhost_workspace::WorkspaceError::io(
                        "record the write's intent",
                        &relative,
                        error,
                    )
                })?;
            toolhost_core::crash_point::hit("write_intent");
            Ok(())
        })
    }

    /// A write a crash interrupted, seen from its recorded intent: landed
    /// (a success the model reads, and the file known as written), or
    /// `Ok(None)`: it never landed and runs again; anything else is
    /// `tool.outcome_unknown`.
    fn resolve_write(&self, invocation: &ToolCall) -> Result<Option<AgentToolResult>, RunFailure> {
        let relative = resume::intent_path(&self.invocation_id, &invocation.call_id);
        let Some(bytes) = self.run.read_file(&relative)? else {
            return Ok(None);
        };
        let intent: toolhost_workspace::WriteIntent = serde_json::from_slice(&bytes)
            .map_err(|error| RunFailure::State(format!("{relative} does not load: {error}")))?;
        let now = match self.run.workspace().read_text(&intent.path) {
            Ok(file) => Some(file.sha256),
            Err(error) if error.code() == "workspace.file_not_found" => None,
            Err(error) if error.is_system() => return Err(error.into()),
            Err(_) => None,
        };
        let outcome = if now.as_deref() == Some(intent.after_sha256.as_str()) {
            self.workspace
                .record_landed_write(&intent.path, &intent.after_sha256);
            ToolOutcome::Success(toolhost_core::ToolSuccess {
                content: format!(
                    "Wrote {}. (The run was interrupted after this write landed and before its result was recorded; the resumed run found the file as this call left it.)",
                    intent.path
                ),
                structured: json!({"path": intent.path, "sha256": intent.after_sha256,
                                   "resumedAfterInterruption": true}),
                resource_refs: vec![format!("workspace:{}", intent.path)],
                effect: None,
            })
        } else if now == intent.before_sha256 {
            return Ok(None);
        } else {
            ToolOutcome::Error(resume::outcome_unknown(&invocation.tool_id))
        };
        Ok(Some(AgentToolResult::from_outcome(invocation, outcome).0))
    }

    /// `from_record`: the result is the stored one; else it is new (an
    /// outcome the resume could not tell) and is stored like any other.
    fn replayed(
        &self,
        invocation: ToolCall,
        result: AgentToolResult,
        started: Instant,
        from_record: bool,
    ) -> ExecutedCall {
        ExecutedCall {
            invocation,
            stored: from_record.then(|| result.clone()),
            result,
            effect: None,
            report: None,
            round: self.round,
            started,
            settlement: Settlement::default(),
        }
    }

    /// The stored result of a call of this invocation, if a resumed run's
    /// record has one.
    fn stored_result(&self, invocation: &ToolCall) -> Result<Option<AgentToolResult>, RunFailure> {
        let path = self.run.manifest_layout().tool_result(&invocation.call_id);
        let Some(bytes) = self.run.read_file(&path.relative)? else {
            return Ok(None);
        };
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Stored {
            invocation_id: String,
            result: AgentToolResult,
        }
        let stored: Stored = serde_json::from_slice(&bytes).map_err(|error| {
            RunFailure::State(format!("{} does not load: {error}", path.relative))
        })?;
        if stored.invocation_id != self.invocation_id {
            return Err(RunFailure::State(format!(
                "{} holds a call of {}, not of {}",
                path.relative, stored.invocation_id, self.invocation_id
            )));
        }
        stored.result.check_identity(invocation)?;
        Ok(Some(stored.result))
    }

    /// An MCP result longer than the inline limit: the whole text goes to
    /// `tool-results/<call>.view.txt` (create-only, readable by every
    /// invocation), its over-long lines hard-wrapped so that line windows
    /// reach all of it ([`readable_view`](crate::readable_view)), and the
    /// model reads a preview, the size and how to read the rest with this
    /// snapshot's tools. The structured result stays the full, exact audit
    /// fact.
    fn externalize_mcp_result(
        &self,
        mut result: AgentToolResult,
    ) -> Result<AgentToolResult, RunFailure> {
        let is_mcp = matches!(
            result.tool_id.provider(),
            toolhost_core::ToolProvider::Mcp(_)
        );
        let chars = result.content.chars().count();
        if !is_mcp || chars <= self.mcp_inline_limit {
            return Ok(result);
        }
        let stem = toolhost_journal::audit_stem(&result.call_id);
        let path = format!("tool-results/{stem}.view.txt");
        let view =
            crate::readable_view::hard_wrap(&result.content, crate::readable_view::VIEW_LINE_CHARS);
        self.run.dir().write_create_only(&path, view.as_bytes())?;
        let alias = |native: &str| {
            ToolId::builtin(native)
                .ok()
                .and_then(|id| self.snapshot.binding(&id).map(|b| b.model_alias.clone()))
        };
        let how = match (
            alias("workspace.read_file"),
            alias("workspace.search_files"),
        ) {
            (Some(read), Some(search)) => {
                format!("Read it in parts with {read} (path `{path}`), or search it with {search}.")
            }
            (Some(read), None) => format!("Read it in parts with {read} (path `{path}`)."),
            (None, Some(search)) => format!("Search it with {search} (path `{path}`)."),
            (None, None) => {
                "No workspace reading tool is offered to you, so only this preview is readable."
                    .to_owned()
            }
        };
        let shown = MCP_PREVIEW_CHARS.min(self.mcp_inline_limit);
        let preview: String = result.content.chars().take(shown).collect();
        result.content = format!(
            "The result has {chars} characters, more than the {} shown inline, so it was saved to `{path}`. {how}\n\n## Prefix preview\n{preview}",
            self.mcp_inline_limit
        );
        let audit_path = format!("tool-results/{stem}.json");
        let full = std::mem::take(&mut result.structured);
        result.structured = json!({
            "externalized": true,
            "path": path,
            "auditPath": audit_path,
            "charCount": chars,
            "charLimit": self.mcp_inline_limit,
            "result": full,
        });
        result.resource_refs.push(format!("workspace:{path}"));
        result.resource_refs.push(format!("workspace:{audit_path}"));
        Ok(result)
    }

    /// Answer a call without running it (a call after a terminal tool in
    /// the same round): stored and journalled like any call, never charged
    /// to the budgets.
    pub fn refuse(
        &mut self,
        invocation: ToolCall,
        failure: ToolFailure,
    ) -> Result<CallOutcome, RunFailure> {
        let started = Instant::now();
        let stored = match self.run.resume_log() {
            Some(_) => self.stored_result(&invocation)?,
            None => None,
        };
        self.record_request(&invocation)?;
        let (result, _) = AgentToolResult::from_outcome(&invocation, ToolOutcome::Error(failure));
        self.store(ExecutedCall {
            invocation,
            result,
            effect: None,
            report: None,
            round: self.round,
            started,
            settlement: Settlement::default(),
            stored,
        })
    }

    /// The arguments are an audit fact before anything acts on them. A
    /// duplicate call id fails here, before any file is overwritten.
    fn record_request(&mut self, invocation: &ToolCall) -> Result<(), RunFailure> {
        let dir = self.run.dir();
        let arguments_ref = if self.run.resume_log().is_some() {
            dir.store_tool_args_again(
                &invocation.call_id,
                &invocation.tool_id,
                &self.invocation_id,
                self.round,
                &invocation.arguments,
            )?
        } else {
            dir.store_tool_args(
                &invocation.call_id,
                &invocation.tool_id,
                &self.invocation_id,
                self.round,
                &invocation.arguments,
            )?
        };
        drop(dir);
        // Written with what the gate decides next (`tool_call_started`, or
        // the refusal's result): nothing acts on the call in between.
        self.run.hold(&ToolCallRequested {
            round: self.round,
            invocation_id: self.invocation_id.clone(),
            call_id: invocation.call_id.clone(),
            tool_id: invocation.tool_id.clone(),
            snapshot_id: self.snapshot.id().to_owned(),
            name: invocation.tool_id.native_name().to_owned(),
            arguments_ref,
        })?;
        Ok(())
    }

    /// The second half of [`call`](Self::call): the result stored
    /// (create-only) and the call's outcome journalled.
    pub fn store(&mut self, executed: ExecutedCall) -> Result<CallOutcome, RunFailure> {
        let ExecutedCall {
            invocation,
            result,
            effect,
            report,
            round,
            started,
            settlement,
            stored,
        } = executed;
        let replayed = stored.is_some();
        let result = stored.unwrap_or(result);
        if let Err(mismatch) = result.check_identity(&invocation) {
            return Err(self.system_failure(&invocation, round, mismatch.into()));
        }
        let stored = if replayed {
            Ok(self
                .run
                .manifest_layout()
                .tool_result(&invocation.call_id)
                .relative)
        } else {
            self.run
                .dir()
                .store_tool_result(&self.invocation_id, round, &result)
        };
        let result_ref = match stored {
            Ok(path) => path,
            Err(error) => return Err(self.system_failure(&invocation, round, error.into())),
        };
        // Written with the call's outcome below: between them only the
        // read-state is stored, and a resumed run goes by the result file.
        self.run.hold(&ToolResultStored {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: invocation.call_id.clone(),
            tool_id: invocation.tool_id.clone(),
            path: result_ref.clone(),
        })?;
        let elapsed = started.elapsed();
        let elapsed_ms = elapsed.as_millis() as u64;
        let sandbox = report.as_ref().map(sandbox_summary);
        let outcome = ToolCallOutcome::from_result(
            round,
            &self.invocation_id,
            self.snapshot.id().to_owned(),
            &result,
            elapsed_ms,
            sandbox,
        )
        .with_elapsed_us(elapsed.as_micros() as u64)
        .with_skill_read_chars(settlement.skill_read_chars);
        // Read-state first: a crash after the completion leaves the file
        // matching the journal, so a resumed run knows what this call read
        // or wrote.
        self.store_read_state()?;
        if outcome.is_error {
            self.run.record(&ToolCallFailed(outcome))?;
        } else {
            self.run.record(&ToolCallCompleted(outcome))?;
        }
        Ok(CallOutcome {
            result,
            effect,
            report,
            result_ref,
        })
    }

    /// Journal a failure that ends the run from the run loop, inside a call
    /// (an effect the host could not apply).
    pub fn fail_call(&self, executed: &ExecutedCall, failure: RunFailure) -> RunFailure {
        self.system_failure(&executed.invocation, executed.round, failure)
    }

    /// Journal a failure that ends the run (best effort: if the journal
    /// itself is what failed, the original failure is still returned).
    fn system_failure(&self, invocation: &ToolCall, round: u32, failure: RunFailure) -> RunFailure {
        let event = ToolCallSystemFailed {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: invocation.call_id.clone(),
            tool_id: invocation.tool_id.clone(),
            snapshot_id: self.snapshot.id().to_owned(),
            name: invocation.tool_id.native_name().to_owned(),
            code: failure.code().to_owned(),
            message: failure.to_string(),
        };
        if let Err(journal) = self.run.record(&event) {
            tracing::error!(%journal, %failure, "could not journal a failed tool call");
        }
        failure
    }
}

/// The default of `tools.mcpResultInlineCharLimit`.
const DEFAULT_MCP_INLINE_LIMIT: usize = 50_000;

/// Characters of an externalized MCP result the model still reads inline
/// (fewer when the inline limit is lower).
pub const MCP_PREVIEW_CHARS: usize = 3_000;

/// `input/invocations/<id>/read_state.json`.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ReadStateFile {
    schema_version: u32,
    states: std::collections::BTreeMap<String, toolhost_workspace::ReadState>,
}

/// The replayable facts of a sandboxed call: rerun with the same seed and
/// clock to get the same result.
fn sandbox_summary(report: &CallReport) -> Value {
    json!({
        "seed": report.entropy.seed,
        "clockMs": report.entropy.clock_ms,
        "fuelConsumed": report.fuel_consumed,
        "elapsedUs": report.elapsed_us,
        "peakMemoryBytes": report.peak_memory_bytes,
        "randomDraws": report.random_draws,
    })
}

/// When a journal line goes out.
#[derive(Debug, Clone, Copy)]
enum Written {
    Now,
    /// Held, and written with the next line recorded.
    WithTheNext,
}
