//! `toolhost replay`: re-execute an ended run's calls in a scratch copy
//! and say, call by call, whether each result is byte-identical to the one
//! stored.
//!
//! The scratch copy starts as the run started: empty roots and the
//! `persist/` files it projected (kept in `input/persist_base/`). Calls are
//! taken in journal order of their completion — each call's writes landed
//! between its `tool_call_started` and its completion, so that order is the
//! order the workspace saw — with the entropy each recorded (`sandbox.seed`,
//! `sandbox.clockMs`), through each invocation's stored snapshot and a
//! workspace session of its own, so read-state builds up as it did. The
//! runtime's own writes are made again where the journal shows them
//! (`direct_output_captured`, `task_return_completed`). Control tools, MCP
//! tools and calls that were refused or never ran are taken from the
//! record: they are not executed. A builtin whose result differs under the
//! same inputs and entropy is not deterministic: a bug this finds.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use toolhost_capabilities::{BindInputs, CallScope, InvocationBound, RunContext, run_context};
use toolhost_core::{AgentToolResult, InvocationToolSnapshot, Profile, ToolCall, ToolId};
use toolhost_journal::{
    AgentDelegateStarted, AgentHandoffAccepted, DirectOutputCaptured, Event as _, JournalEvent,
    ROOT_INVOCATION_ID, RunLayout, RunManifest, TaskReturnCompleted, ToolCallCompleted,
    ToolCallFailed, read_events,
};
use toolhost_sandbox::CallEntropy;
use toolhost_workspace::{
    Workspace, WorkspaceLimits, WorkspaceRoots, WorkspaceSession, WriteGuard, persist,
};

use crate::agent_loop::{DIRECT_OUTPUT_PATH, LOOP_RECORD_PATH, LoopRecord, task_summary_markdown};
use crate::agents::AgentDirectory;
use crate::executor::{CallContext, ToolExecutor};
use crate::failure::RunFailure;
use crate::host::ToolHost;
use crate::resume::{TERMINAL_EVENTS, is_effect_tool};

/// What replaying one call found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum CallVerdict {
    /// Executed again: the same result, byte for byte.
    Identical,
    /// Executed again: another result.
    Different { stored: String, now: String },
    /// Not executed: taken from the record, and why.
    FromRecord { reason: String },
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayedCall {
    pub seq: u64,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: String,
    #[serde(flatten)]
    pub verdict: CallVerdict,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    pub run_id: String,
    pub calls: Vec<ReplayedCall>,
    pub identical: usize,
    pub different: usize,
    pub from_record: usize,
}

/// One invocation as the replay sees it.
struct Replayed {
    snapshot: Arc<InvocationToolSnapshot>,
    /// Its capabilities, bound as the run bound them.
    bound: Arc<InvocationBound>,
}

/// Replay the ended run at `run_dir` in `scratch` (absent or empty).
pub async fn replay_run(
    host: &ToolHost,
    run_dir: &Path,
    scratch: &Path,
) -> Result<ReplayReport, RunFailure> {
    let layout = RunLayout::new(run_dir);
    let manifest = RunManifest::from_json_bytes(&read(&layout.manifest().absolute)?)
        .map_err(|error| RunFailure::State(error.to_string()))?;
    let events = read_events(layout.journal().absolute)?;
    if !events
        .iter()
        .any(|event| TERMINAL_EVENTS.contains(&event.r#type.as_str()))
    {
        return Err(RunFailure::NotResumable(
            "the run has not ended: only an ended run is replayed (resume it first)".into(),
        ));
    }
    let root_profile = profile_from(&read(&layout.resolved_profile().absolute)?)?;
    let agents = match read_if_present(&run_dir.join(LOOP_RECORD_PATH))? {
        Some(bytes) => LoopRecord::from_json(&bytes)?.agents()?,
        None => AgentDirectory::default(),
    }
    .with_own(&root_profile);
    let profiles = invocation_profiles(&events, &root_profile, &agents);
    let loaded = Arc::new(run_context::reload(&manifest.inputs, run_dir)?);

    std::fs::create_dir_all(scratch).map_err(|error| io(scratch, error))?;
    for spec in &manifest.roots {
        std::fs::create_dir_all(scratch.join(&spec.path)).map_err(|error| io(scratch, error))?;
    }
    let roots = WorkspaceRoots::from_specs(&manifest.roots)?;
    let workspace = Arc::new(Workspace::open(scratch, roots, WorkspaceLimits::default())?);
    let base = run_dir.join(persist::PERSIST_BASE_DIR);
    if base.is_dir() {
        persist::project(&base, &workspace)?;
    }

    let mut invocations: HashMap<String, Replayed> = HashMap::new();
    let mut report = ReplayReport {
        run_id: manifest.run_id.clone(),
        calls: Vec::new(),
        identical: 0,
        different: 0,
        from_record: 0,
    };
    for event in &events {
        let Ok(scope) = event.scope() else { continue };
        let invocation_id = scope.invocation_id;
        match event.r#type.as_str() {
            DirectOutputCaptured::TYPE => {
                let reply = event.payload["modelResponsePath"].as_str().unwrap_or("");
                let bytes = read(&run_dir.join(reply))?;
                let record: Value = serde_json::from_slice(&bytes)
                    .map_err(|error| RunFailure::State(format!("{reply}: {error}")))?;
                let response: toolhost_core::AgentModelResponse =
                    serde_json::from_value(record["response"].clone())
                        .map_err(|error| RunFailure::State(format!("{reply}: {error}")))?;
                // Where the run kept it (its profile's message body root).
                let path = event.payload["path"].as_str().unwrap_or(DIRECT_OUTPUT_PATH);
                workspace.write_text(path, &response.message.text(), WriteGuard::Unchecked)?;
            }
            TaskReturnCompleted::TYPE => {
                let result_ref = event.payload["resultRef"].as_str().unwrap_or("");
                let summary_ref = event.payload["summaryRef"].as_str().unwrap_or("");
                let record: Value = serde_json::from_slice(&read(&run_dir.join(result_ref))?)
                    .map_err(|error| RunFailure::State(format!("{result_ref}: {error}")))?;
                let text = |key: &str| record[key].as_str().unwrap_or("").to_owned();
                let markdown = task_summary_markdown(
                    record["runtime"]["taskId"].as_str().unwrap_or(""),
                    record["runtime"]["targetProfileId"].as_str().unwrap_or(""),
                    &text("status"),
                    &text("summary"),
                );
                workspace.write_text(summary_ref, &markdown, WriteGuard::Unchecked)?;
            }
            ToolCallCompleted::TYPE | ToolCallFailed::TYPE
                if event.level != toolhost_journal::Level::Error =>
            {
                let entry = match invocations.get(&invocation_id) {
                    Some(entry) => entry,
                    None => {
                        let profile = profiles
                            .get(&invocation_id)
                            .cloned()
                            .unwrap_or_else(|| Arc::new(root_profile.clone()));
                        let entry = open_invocation(
                            &layout,
                            &invocation_id,
                            &profile,
                            &workspace,
                            &loaded,
                            &agents,
                        )?;
                        invocations.entry(invocation_id.clone()).or_insert(entry)
                    }
                };
                let verdict = replay_call(host, &layout, event, entry).await?;
                match verdict {
                    CallVerdict::Identical => report.identical += 1,
                    CallVerdict::Different { .. } => report.different += 1,
                    CallVerdict::FromRecord { .. } => report.from_record += 1,
                }
                report.calls.push(ReplayedCall {
                    seq: event.seq,
                    invocation_id: invocation_id.clone(),
                    call_id: event.payload["callId"].as_str().unwrap_or("").to_owned(),
                    tool_id: event.payload["toolId"].as_str().unwrap_or("").to_owned(),
                    verdict,
                });
            }
            _ => {}
        }
    }
    Ok(report)
}

async fn replay_call(
    host: &ToolHost,
    layout: &RunLayout,
    event: &JournalEvent,
    entry: &Replayed,
) -> Result<CallVerdict, RunFailure> {
    let from_record = |reason: &str| {
        Ok(CallVerdict::FromRecord {
            reason: reason.to_owned(),
        })
    };
    let payload = &event.payload;
    let call_id = payload["callId"].as_str().unwrap_or("");
    let tool_id = match payload["toolId"].as_str().map(ToolId::parse) {
        Some(Ok(tool_id)) => tool_id,
        _ => return from_record("the event names no valid tool"),
    };
    if !tool_id.is_builtin()
        && !matches!(
            tool_id.provider(),
            toolhost_core::ToolProvider::Extension(_)
        )
    {
        return from_record("an MCP call: its server is not called again");
    }
    if is_effect_tool(&tool_id) {
        return from_record("a control tool: its effect belongs to the run loop");
    }
    // Requests that carried a stored secret acted somewhere with someone's
    // credential (a served tenant's, perhaps): a replay sends none again,
    // with this machine's credential or any other.
    if payload["recorded"]["outbound-http"]["secrets"]
        .as_array()
        .is_some_and(|secrets| !secrets.is_empty())
    {
        return from_record("its requests carried stored secrets: they are not sent again");
    }
    let Some(sandbox) = payload.get("sandbox").filter(|sandbox| !sandbox.is_null()) else {
        return from_record("it never ran (refused before the sandbox)");
    };
    let stored = stored_result(layout, call_id)?;
    if stored.error_code.as_deref() == Some("tool.outcome_unknown")
        || stored.structured.get("resumedAfterInterruption").is_some()
    {
        return from_record("its outcome was settled when the run was resumed");
    }
    let arguments = stored_arguments(layout, call_id)?;
    let Some(binding) = entry.snapshot.binding(&tool_id) else {
        return from_record("the invocation's snapshot does not bind it");
    };
    let invocation = ToolCall {
        call_id: call_id.to_owned(),
        tool_id: tool_id.clone(),
        arguments,
        provider_metadata: Value::Null,
    };
    let entropy = CallEntropy {
        seed: sandbox["seed"].as_u64().unwrap_or(0),
        clock_ms: sandbox["clockMs"].as_u64().unwrap_or(0),
    };
    // What the call's capabilities read the first time, read again.
    let recorded = payload
        .get("recorded")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    entry.bound.begin(&CallScope {
        recorded,
        ..CallScope::default()
    });
    let execution = ToolExecutor::execute(
        host,
        &invocation,
        binding,
        entropy,
        CallContext {
            bound: Arc::clone(&entry.bound),
            views: None,
            replaying: true,
        },
    )
    .await;
    entry.bound.settle();
    let now = match execution {
        Ok(execution) => execution.result,
        Err(error) => {
            return Ok(CallVerdict::Different {
                stored: canonical(&stored),
                now: format!("the call could not run: {error}"),
            });
        }
    };
    let (stored, now) = (canonical(&stored), canonical(&now));
    Ok(if stored == now {
        CallVerdict::Identical
    } else {
        CallVerdict::Different { stored, now }
    })
}

fn canonical(result: &AgentToolResult) -> String {
    serde_json::to_string(result).unwrap_or_default()
}

fn open_invocation(
    layout: &RunLayout,
    invocation_id: &str,
    profile: &Profile,
    workspace: &Arc<Workspace>,
    loaded: &Arc<RunContext>,
    agents: &AgentDirectory,
) -> Result<Replayed, RunFailure> {
    let path = layout
        .tool_snapshot(invocation_id)
        .map_err(|error| RunFailure::State(error.to_string()))?;
    let snapshot: InvocationToolSnapshot = serde_json::from_slice(&read(&path.absolute)?)
        .map_err(|error| RunFailure::State(format!("{}: {error}", path.relative)))?;
    let theirs = &profile.workspace;
    let view = Arc::new(workspace.narrowed(&theirs.visible_roots, &theirs.writable_roots)?);
    let snapshot = Arc::new(snapshot);
    let inputs = BindInputs {
        run: Some(Arc::clone(loaded)),
        profile: Some(Arc::new(profile.clone())),
        workspace: Some(Arc::new(WorkspaceSession::new(view))),
        snapshot: Some(Arc::clone(&snapshot)),
        agents: Some(Arc::new(agents.callable_by(profile))),
        skill_chars_charged: 0,
        // A replay is the local use.
        grant_profile: Some(Arc::new(profile.version())),
    };
    Ok(Replayed {
        snapshot,
        bound: Arc::new(InvocationBound::bind(&inputs)),
    })
}

/// Each invocation's profile: the run's for the root, the target's for a
/// child or a handoff target, as the journal names them.
fn invocation_profiles(
    events: &[JournalEvent],
    root: &Profile,
    agents: &AgentDirectory,
) -> HashMap<String, Arc<Profile>> {
    let mut profiles = HashMap::new();
    profiles.insert(ROOT_INVOCATION_ID.to_owned(), Arc::new(root.clone()));
    for event in events {
        let (invocation, target) = match event.r#type.as_str() {
            AgentDelegateStarted::TYPE => ("childInvocationId", "targetProfileId"),
            AgentHandoffAccepted::TYPE => ("newInvocationId", "targetProfileId"),
            _ => continue,
        };
        if let (Some(invocation), Some(profile)) = (
            event.payload[invocation].as_str(),
            event.payload[target].as_str().and_then(|id| agents.get(id)),
        ) {
            profiles.insert(invocation.to_owned(), Arc::clone(profile));
        }
    }
    profiles
}

fn stored_result(layout: &RunLayout, call_id: &str) -> Result<AgentToolResult, RunFailure> {
    let path = layout.tool_result(call_id);
    let record: Value = serde_json::from_slice(&read(&path.absolute)?)
        .map_err(|error| RunFailure::State(format!("{}: {error}", path.relative)))?;
    serde_json::from_value(record["result"].clone())
        .map_err(|error| RunFailure::State(format!("{}: {error}", path.relative)))
}

fn stored_arguments(layout: &RunLayout, call_id: &str) -> Result<Value, RunFailure> {
    let path = layout.tool_args(call_id);
    let record: Value = serde_json::from_slice(&read(&path.absolute)?)
        .map_err(|error| RunFailure::State(format!("{}: {error}", path.relative)))?;
    Ok(record["arguments"].clone())
}

fn profile_from(bytes: &[u8]) -> Result<Profile, RunFailure> {
    std::str::from_utf8(bytes)
        .map_err(|error| error.to_string())
        .and_then(|text| Profile::from_json(text).map_err(|error| error.to_string()))
        .map_err(|error| RunFailure::State(format!("the run's profile does not load: {error}")))
}

/// A run file, read whole (run files are the runtime's own, bounded by the
/// limits that wrote them; a file larger than 64 MiB is refused).
fn read(path: &Path) -> Result<Vec<u8>, RunFailure> {
    read_if_present(path)?
        .ok_or_else(|| RunFailure::State(format!("{} is missing", path.display())))
}

fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>, RunFailure> {
    const LIMIT: u64 = 64 << 20;
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.len() > LIMIT => Err(RunFailure::State(format!(
            "{} is larger than {LIMIT} bytes",
            path.display()
        ))),
        Ok(_) => std::fs::read(path)
            .map(Some)
            .map_err(|error| io(path, error)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io(path, error)),
    }
}

fn io(path: &Path, error: std::io::Error) -> RunFailure {
    RunFailure::State(format!("{}: {error}", path.display()))
}
