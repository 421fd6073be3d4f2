//! `Invocation`: one agent's rounds inside a run — its frozen snapshot, its
//! gate, its round, its capabilities bound once — and the path every tool
//! call takes, in one direction:
//!
//! ```text
//! prior (decided once from a resumed run's record: new | stored | in doubt)
//!   → arguments stored (create-only) → tool_call_requested
//!   → gate ── refused ───────────────────────────────────────┐
//!   → approval (when asked for) ── denied ───────────────────┤
//!   → tool_call_started                                       │
//!   → the record's answer (stored, or a write in doubt), or   │
//!     begin → executor → settle                               │
//!   → identity check                                          │
//!   → result stored (create-only) → tool_result_stored ◄──────┘
//!   → tool_call_completed | tool_call_failed
//! ```
//!
//! One file per step: [`prior`] (resume), [`approval`], [`audit`] (the
//! stored arguments and results, the journal, the read-state), and
//! [`open`] (opening an invocation of a run). A long MCP result's readable
//! view is the MCP executor's ([`CallContext::views`]).
//!
//! A rejected or failed call the run survives (budget exhausted, tool error,
//! sandbox limit) comes back as a [`CallOutcome`] the model reads; anything
//! that ends the run is a [`RunFailure`], journalled as an `error`-level
//! `tool_call_failed` before it is returned.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use toolhost_capabilities::{BindInputs, CallScope, CallableAgent, InvocationBound, Settlement};
use toolhost_core::{
    AgentToolResult, InvocationToolSnapshot, ModelTurn, Profile, ToolBinding, ToolCall, ToolChoice,
    ToolEffect, ToolId, ToolOutcome, ToolRequestGate, ToolTurnContract,
    snapshot::SnapshotDiagnostic,
};
use toolhost_journal::{ModelRequestCreated, ToolCallStarted};
use toolhost_sandbox::{CallEntropy, CallReport};
use toolhost_workspace::WorkspaceSession;

use crate::executor::{CallContext, ToolExecutor};
use crate::failure::RunFailure;
use crate::readable_view::{ResultViews, ViewStore};
use crate::resume;
use crate::run::Run;

mod approval;
mod audit;
mod open;
mod prior;

use prior::Replay;

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

/// What the executor (or the gate's refusal) made of a call.
struct Ran {
    result: AgentToolResult,
    effect: Option<ToolEffect>,
    report: Option<CallReport>,
    settlement: Settlement,
}

impl Ran {
    fn refused(result: AgentToolResult) -> Self {
        Self {
            result,
            effect: None,
            report: None,
            settlement: Settlement::default(),
        }
    }
}

/// A call that ran but whose result is not stored yet (see
/// [`Invocation::execute`]).
#[derive(Debug)]
pub struct ExecutedCall {
    call: ToolCall,
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
        &self.call
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
        self.result = AgentToolResult::from_outcome(&self.call, outcome).0;
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
    /// How its long MCP results become readable views.
    views: Arc<ResultViews>,
}

/// Where a reopened invocation's gate and rounds stand (`None` for a new
/// invocation: a fresh gate, round 0).
pub(crate) struct Reopened {
    pub gate: ToolRequestGate,
    pub round: u32,
}

/// Whose invocation it is: the agent's profile, the tenant running it
/// (`None`: the local use) and the skill characters its calls were charged
/// before its run was reopened.
pub(crate) struct Agent<'a> {
    pub profile: Arc<Profile>,
    pub tenant: Option<&'a str>,
    pub skill_chars_charged: u64,
}

impl Invocation {
    pub(crate) fn new(
        run: Arc<Run>,
        invocation_id: &str,
        snapshot: Arc<InvocationToolSnapshot>,
        reopened: Option<Reopened>,
        workspace: Arc<WorkspaceSession>,
        agent: Agent<'_>,
    ) -> Self {
        let Agent {
            profile,
            tenant,
            skill_chars_charged,
        } = agent;
        let inputs = BindInputs {
            run: Some(Arc::clone(run.inputs())),
            profile: Some(Arc::clone(&profile)),
            workspace: Some(Arc::clone(&workspace)),
            snapshot: Some(Arc::clone(&snapshot)),
            agents: None,
            skill_chars_charged,
            grant_profile: Some(Arc::new(profile.version_for(tenant))),
        };
        let bound = Arc::new(InvocationBound::bind(&inputs));
        let views = Arc::new(ResultViews::new(
            &snapshot,
            profile.tools.mcp_result_inline_char_limit,
            Arc::clone(&run) as Arc<dyn ViewStore>,
        ));
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
            views,
        }
    }

    /// Tell this invocation's tools which agents it may call, before its
    /// first turn: the capabilities are bound again (binding is cheap and
    /// reads only the inputs), which after a call would start its budgets
    /// afresh — so later it is refused.
    pub fn set_agents(&mut self, agents: Vec<CallableAgent>) -> Result<(), RunFailure> {
        if self.round > 0 {
            return Err(RunFailure::State(format!(
                "the agents of `{}` are set before its first turn, not at round {}",
                self.invocation_id, self.round
            )));
        }
        self.inputs.agents = Some(Arc::new(agents));
        self.bound = Arc::new(InvocationBound::bind(&self.inputs));
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
        call: ToolCall,
        entropy: CallEntropy,
    ) -> Result<CallOutcome, RunFailure> {
        let executed = self.execute(executor, turn, call, entropy).await?;
        self.store(executed)
    }

    /// The first half of [`call`](Self::call), the call path in one
    /// direction: what the record says of the call (decided once, from the
    /// journal), arguments stored, gate → approval → started → executor (or
    /// the record's answer) → identity check. The result is not stored yet,
    /// so the run loop can apply a control tool's effect and answer with
    /// what it did ([`ExecutedCall::replace_outcome`]) before
    /// [`store`](Self::store).
    pub async fn execute<E: ToolExecutor>(
        &mut self,
        executor: &E,
        turn: &ModelTurn,
        call: ToolCall,
        entropy: CallEntropy,
    ) -> Result<ExecutedCall, RunFailure> {
        let started = Instant::now();
        let round = self.round;
        let prior = self.prior(&call)?;
        self.record_request(&call)?;
        let ran = match self.admit(executor, turn, &call, round).await? {
            Some(refused) => Ran::refused(refused),
            None => {
                self.record_started(&call, round)?;
                if let Some(replay) = self.answer_from_record(&call, &prior)? {
                    return Ok(self.replayed(call, replay, started));
                }
                match self.run_executor(executor, &call, entropy).await {
                    Ok(ran) => ran,
                    Err(failure) => return Err(self.system_failure(&call, round, failure)),
                }
            }
        };
        // Never interpret or store a result that belongs to another call.
        if let Err(mismatch) = ran.result.check_identity(&call) {
            return Err(self.system_failure(&call, round, mismatch.into()));
        }
        Ok(ExecutedCall {
            call,
            result: ran.result,
            effect: ran.effect,
            report: ran.report,
            round,
            started,
            settlement: ran.settlement,
            stored: prior.into_stored(),
        })
    }

    /// The gate, then a person's approval when the call's binding (or its
    /// source, now) asks for one. `Some`: the call is refused with a result
    /// the model reads; a fail-fast rejection ends the run.
    async fn admit<E: ToolExecutor>(
        &mut self,
        executor: &E,
        turn: &ModelTurn,
        call: &ToolCall,
        round: u32,
    ) -> Result<Option<AgentToolResult>, RunFailure> {
        let tool_id = &call.tool_id;
        if let Err(rejection) = self.gate.authorize_and_reserve(turn.contract(), tool_id) {
            return match rejection.to_tool_failure() {
                // Denied, but the run goes on: the model reads why.
                Some(failure) => Ok(Some(
                    AgentToolResult::from_outcome(call, ToolOutcome::Error(failure)).0,
                )),
                None => Err(self.system_failure(call, round, RunFailure::Gate(rejection))),
            };
        }
        let snapshot = Arc::clone(&self.snapshot);
        let binding = self.binding_of(&snapshot, tool_id)?;
        // The frozen decision, tightened by the source as it is now.
        let approval = binding
            .approval
            .clone()
            .or_else(|| executor.approval_required_now(tool_id));
        match &approval {
            None => Ok(None),
            Some(reason) => self.seek_approval(call, binding, reason, round).await,
        }
    }

    fn binding_of<'s>(
        &self,
        snapshot: &'s InvocationToolSnapshot,
        tool_id: &ToolId,
    ) -> Result<&'s ToolBinding, RunFailure> {
        snapshot
            .binding(tool_id)
            .ok_or_else(|| RunFailure::State(format!("`{tool_id}` lost its binding")))
    }

    fn record_started(&self, call: &ToolCall, round: u32) -> Result<(), RunFailure> {
        self.run.record(&ToolCallStarted {
            round,
            invocation_id: self.invocation_id.clone(),
            call_id: call.call_id.clone(),
            tool_id: call.tool_id.clone(),
            snapshot_id: self.snapshot.id().to_owned(),
            name: call.tool_id.native_name().to_owned(),
        })?;
        Ok(())
    }

    /// The executor runs the call, the invocation's capabilities begun
    /// before and settled after it (a write tool's writes recorded as
    /// intents first, so a resume can tell whether they landed).
    async fn run_executor<E: ToolExecutor>(
        &self,
        executor: &E,
        call: &ToolCall,
        entropy: CallEntropy,
    ) -> Result<Ran, RunFailure> {
        let snapshot = Arc::clone(&self.snapshot);
        let binding = self.binding_of(&snapshot, &call.tool_id)?;
        let scope = CallScope {
            write_intents: resume::is_write_tool(&call.tool_id)
                .then(|| self.intent_sink(&call.call_id)),
            ..CallScope::default()
        };
        self.bound.begin(&scope);
        let context = CallContext {
            bound: Arc::clone(&self.bound),
            views: Some(Arc::clone(&self.views)),
            replaying: false,
        };
        let executed = executor.execute(call, binding, entropy, context).await;
        let settlement = self.bound.settle();
        let execution = executed?;
        Ok(Ran {
            result: execution.result,
            effect: execution.effect,
            report: execution.report,
            settlement,
        })
    }

    /// A call the record answered, without the executor.
    fn replayed(&self, call: ToolCall, replay: Replay, started: Instant) -> ExecutedCall {
        ExecutedCall {
            call,
            stored: replay.from_record.then(|| replay.result.clone()),
            result: replay.result,
            effect: None,
            report: None,
            round: self.round,
            started,
            settlement: Settlement::default(),
        }
    }
}

/// When a journal line goes out.
#[derive(Debug, Clone, Copy)]
enum Written {
    Now,
    /// Held, and written with the next line recorded.
    WithTheNext,
}
