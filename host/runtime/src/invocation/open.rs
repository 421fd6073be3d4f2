//! Opening an invocation of a run: a new one (its snapshot compiled,
//! stored create-only and journalled), one a resumed run had started (its
//! stored snapshot, rechecked), or one of a reopened run (`toolhost call`,
//! the API), with its gate and rounds as the journal left them.

use std::sync::Arc;

use serde_json::Value;
use toolhost_core::{
    ExitPolicy, InvocationToolSnapshot, Profile, SnapshotSources, ToolChoice, ToolId,
    ToolRequestGate, ToolTurnContract, snapshot,
};
use toolhost_journal::{
    ContextAssembled, Event as _, ModelRequestCreated, ToolCallCompleted, ToolCallFailed,
    ToolCallStarted, ToolCallUnknown, read_events,
};

use super::{Agent, Invocation, Reopened};
use crate::failure::RunFailure;
use crate::run::Run;

impl Run {
    /// Compile, store (create-only) and journal the snapshot of a new
    /// invocation, and open its session.
    pub fn start_invocation(
        self: &Arc<Self>,
        profile: &Profile,
        sources: SnapshotSources<'_>,
        invocation_id: &str,
        exit_policy: ExitPolicy,
    ) -> Result<Invocation, RunFailure> {
        self.start_agent_invocation(profile, sources, invocation_id, exit_policy, None)
    }

    /// [`Self::start_invocation`] for an agent, whose `context_assembled`
    /// also says what of the app's prompt its first request carries.
    pub(crate) fn start_agent_invocation(
        self: &Arc<Self>,
        profile: &Profile,
        sources: SnapshotSources<'_>,
        invocation_id: &str,
        exit_policy: ExitPolicy,
        prompt: Option<Value>,
    ) -> Result<Invocation, RunFailure> {
        let compiled = snapshot::compile(profile, sources, invocation_id, exit_policy)?;
        if self.resume_log().is_some()
            && let Some(session) =
                self.restart_invocation(profile, invocation_id, sources.tenant, &compiled, &prompt)?
        {
            return Ok(session);
        }
        let snapshot = Arc::new(compiled.snapshot);
        let diagnostics: Vec<Value> = compiled
            .diagnostics
            .iter()
            .map(|diagnostic| serde_json::to_value(diagnostic).unwrap_or(Value::Null))
            .collect();
        let snapshot_path = self
            .dir()
            .write_snapshot(invocation_id, snapshot.to_json_pretty().as_bytes())?;
        self.record_context(invocation_id, &snapshot, snapshot_path, diagnostics, prompt)?;
        let workspace = self.workspace_session_for(profile)?;
        let session = Invocation::new(
            Arc::clone(self),
            invocation_id,
            snapshot,
            None,
            workspace,
            Agent {
                profile: Arc::new(profile.clone()),
                tenant: sources.tenant,
                skill_chars_charged: 0,
            },
        )
        .with_diagnostics(compiled.diagnostics);
        Ok(session)
    }

    /// `context_assembled` for an invocation's snapshot.
    fn record_context(
        &self,
        invocation_id: &str,
        snapshot: &InvocationToolSnapshot,
        snapshot_path: String,
        diagnostics: Vec<Value>,
        prompt: Option<Value>,
    ) -> Result<(), RunFailure> {
        let contract = ToolTurnContract::all(snapshot, ToolChoice::Auto)?;
        self.record(&ContextAssembled {
            invocation_id: invocation_id.to_owned(),
            snapshot_id: snapshot.id().to_owned(),
            snapshot_path,
            snapshot: snapshot.summary(),
            turn_contract: serde_json::to_value(&contract).unwrap_or(Value::Null),
            diagnostics,
            prompt,
        })?;
        Ok(())
    }

    /// An invocation of a resumed run that had started: its stored snapshot
    /// (kept: the model saw it; only checked against `fresh`, the same
    /// invocation compiled now, for what it may not grant), its read-state and the
    /// skill characters its calls were charged; a fresh gate, which the
    /// replayed calls fill again. `None` when it had not started.
    fn restart_invocation(
        self: &Arc<Self>,
        profile: &Profile,
        invocation_id: &str,
        tenant: Option<&str>,
        fresh: &snapshot::CompiledSnapshot,
        prompt: &Option<Value>,
    ) -> Result<Option<Invocation>, RunFailure> {
        let Some(bytes) = self.dir().read_snapshot(invocation_id)? else {
            return Ok(None);
        };
        let snapshot: InvocationToolSnapshot = serde_json::from_slice(&bytes).map_err(|error| {
            RunFailure::State(format!(
                "the stored snapshot of `{invocation_id}` does not load: {error}"
            ))
        })?;
        // A file of the run directory (on a cluster node, rebuilt from
        // NATS): it may not grant what today's profile, catalog and
        // policies would not.
        snapshot.recheck_against(fresh)?;
        let snapshot = Arc::new(snapshot);
        let snapshot_path = self
            .manifest_layout()
            .tool_snapshot(invocation_id)
            .map_err(|error| RunFailure::State(error.to_string()))?
            .relative;
        self.record_context(
            invocation_id,
            &snapshot,
            snapshot_path,
            Vec::new(),
            prompt.clone(),
        )?;
        let charged = self
            .resume_log()
            .map_or(0, |log| log.skill_chars(invocation_id));
        let session = Invocation::new(
            Arc::clone(self),
            invocation_id,
            snapshot,
            None,
            self.workspace_session_for(profile)?,
            Agent {
                profile: Arc::new(profile.clone()),
                tenant,
                skill_chars_charged: charged,
            },
        );
        Ok(Some(match self.dir().read_read_state(invocation_id)? {
            Some(stored) => session.with_read_state(stored)?,
            None => session,
        }))
    }

    /// Reopen an invocation of a reopened run: its stored snapshot, a gate
    /// that has already reserved every call the journal shows started, and
    /// the skill characters its calls were charged. Its calls are made for
    /// the run's profile as `tenant` runs it (`None`: the local use): an
    /// extension granted to some profiles checks that at every call.
    pub fn resume_invocation(
        self: &Arc<Self>,
        invocation_id: &str,
        tenant: Option<&str>,
    ) -> Result<Option<Invocation>, RunFailure> {
        let stored = self.dir().read_snapshot(invocation_id)?;
        let Some(bytes) = stored else {
            return Ok(None);
        };
        let snapshot: InvocationToolSnapshot = serde_json::from_slice(&bytes).map_err(|error| {
            RunFailure::State(format!(
                "the stored snapshot of `{invocation_id}` does not load: {error}"
            ))
        })?;
        let events = read_events(self.manifest_layout().journal().absolute)?;
        let mut started = Vec::new();
        let mut unknown_charged = 0_u32;
        let mut round = 0;
        let mut skill_chars = 0_u64;
        for event in &events {
            let ours = event
                .scope()
                .is_ok_and(|scope| scope.invocation_id == invocation_id);
            if !ours {
                continue;
            }
            match event.r#type.as_str() {
                // An invented name the model called used the total too.
                ToolCallUnknown::TYPE
                    if event.payload.get("charged").and_then(Value::as_bool) == Some(true) =>
                {
                    unknown_charged = unknown_charged.saturating_add(1);
                }
                ToolCallStarted::TYPE => {
                    let tool = event.payload.get("toolId").and_then(Value::as_str);
                    match tool.map(ToolId::parse) {
                        Some(Ok(tool)) => started.push(tool),
                        _ => {
                            return Err(RunFailure::State(format!(
                                "journal event {} has no valid toolId",
                                event.seq
                            )));
                        }
                    }
                }
                ModelRequestCreated::TYPE => {
                    let seen = event.payload.get("round").and_then(Value::as_u64);
                    round = round.max(seen.unwrap_or(0) as u32);
                }
                ToolCallCompleted::TYPE | ToolCallFailed::TYPE => {
                    let charged = event.payload.get("skillReadChars").and_then(Value::as_u64);
                    skill_chars = skill_chars.saturating_add(charged.unwrap_or(0));
                }
                _ => {}
            }
        }
        let snapshot = Arc::new(snapshot);
        let gate = ToolRequestGate::resume(Arc::clone(&snapshot), started.iter())
            .with_unknown_charged(unknown_charged);
        let session = Invocation::new(
            Arc::clone(self),
            invocation_id,
            snapshot,
            Some(Reopened { gate, round }),
            self.workspace_session(),
            Agent {
                // The run's own profile: shared, not copied, at every
                // reopening (each direct call of the API reopens one).
                profile: Arc::clone(self.profile()),
                tenant,
                skill_chars_charged: skill_chars,
            },
        );
        let stored = self.dir().read_read_state(invocation_id)?;
        Ok(Some(match stored {
            Some(bytes) => session.with_read_state(bytes)?,
            None => session,
        }))
    }
}
