//! The typed event vocabulary. Each struct is one event's payload (without
//! `eventScope`, which [`Journal::record`] injects from [`Event::scope`]).
//! Payload field names are part of the journal format: camelCase, and
//! `Option`s serialize as `null` rather than being left out, except the few
//! marked `skip_serializing_if` (fields added later, absent when empty).

use serde::Serialize;
use serde_json::Value;
use toolhost_core::{AgentToolResult, ToolId};

use crate::journal::{EventScope, Journal, JournalError, Level};
use crate::layout::MANIFEST_FILE;
use crate::manifest::RunManifest;

/// A typed journal event.
pub trait Event: Serialize {
    const TYPE: &'static str;
    fn level(&self) -> Level;
    fn scope(&self) -> EventScope;
}

impl Journal {
    /// Serialize `event` as a payload object, inject its `eventScope` and
    /// append it. Returns the event's seq.
    pub fn record<E: Event>(&mut self, event: &E) -> Result<u64, JournalError> {
        // Serialized once, straight into the line (no intermediate Value).
        let payload = serde_json::to_vec(event).map_err(|source| JournalError::Serialize {
            event_type: E::TYPE.to_owned(),
            source,
        })?;
        self.write_event(event.level(), E::TYPE, &event.scope(), &payload, false)
            .map(|(seq, _, _)| seq)
    }

    /// [`record`](Self::record), written with the next event
    /// ([`Journal::hold_event`]).
    pub fn hold<E: Event>(&mut self, event: &E) -> Result<u64, JournalError> {
        let payload = serde_json::to_vec(event).map_err(|source| JournalError::Serialize {
            event_type: E::TYPE.to_owned(),
            source,
        })?;
        self.hold_event(event.level(), E::TYPE, &event.scope(), &payload)
    }
}

/// Scoped to the invocation named in the payload: its `invocation_id`, or
/// the field given last (`parent_invocation_id`, …).
macro_rules! invocation_scoped {
    ($type:ty, $name:literal, $level:expr) => {
        invocation_scoped!($type, $name, $level, invocation_id);
    };
    ($type:ty, $name:literal, $level:expr, $field:ident) => {
        impl Event for $type {
            const TYPE: &'static str = $name;
            fn level(&self) -> Level {
                $level
            }
            fn scope(&self) -> EventScope {
                EventScope::new(self.$field.clone())
            }
        }
    };
}

/// Scoped to the run as a whole.
macro_rules! run_scoped {
    ($type:ty, $name:literal, $level:expr) => {
        impl Event for $type {
            const TYPE: &'static str = $name;
            fn level(&self) -> Level {
                $level
            }
            fn scope(&self) -> EventScope {
                EventScope::root()
            }
        }
    };
}

mod agent_loop;
pub use agent_loop::{
    AgentAwaitCompleted, AgentDelegateStarted, AgentHandoffAccepted, AgentLoopFinished,
    AgentTaskEnded, ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested,
    ChildResultsInjected, ContextTrimmed, DirectOutputCaptured, DriftRecoveryAttempted,
    ModelCallAttemptFailed, ModelCompleted, PersistentChangesCommitted, PreservedCommit,
    RunCancelled, RunPartialSuccess, TaskReturnCompleted, ToolCallUnknown,
};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunStarted {
    pub run_id: String,
    pub profile_id: String,
    pub manifest_path: String,
    pub toolhost_version: String,
}

impl RunStarted {
    pub fn new(manifest: &RunManifest) -> Self {
        Self {
            run_id: manifest.run_id.clone(),
            profile_id: manifest.profile.id.clone(),
            manifest_path: MANIFEST_FILE.to_owned(),
            toolhost_version: manifest.toolhost_version.clone(),
        }
    }
}

run_scoped!(RunStarted, "run_started", Level::Info);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAssembled {
    pub invocation_id: String,
    pub snapshot_id: String,
    /// Run-relative, e.g. `input/invocations/inv_root/tool_snapshot.json`.
    pub snapshot_path: String,
    /// A compact summary; the full snapshot is the file.
    pub snapshot: Value,
    pub turn_contract: Value,
    pub diagnostics: Vec<Value>,
    /// What of the chat app's prompt an agent's first request carries
    /// (`source`, `messages`, `historyKept`, `historyTotal`, `worldInfo`,
    /// `chars`); absent for a direct call's invocation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Value>,
}
invocation_scoped!(ContextAssembled, "context_assembled", Level::Info);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequestCreated {
    pub round: u32,
    pub invocation_id: String,
    pub turn_contract: Value,
    /// A summary of the provider request.
    pub request: Value,
}
invocation_scoped!(ModelRequestCreated, "model_request_created", Level::Info);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRequested {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    pub snapshot_id: String,
    /// The tool's native name.
    pub name: String,
    /// Run-relative ref to the stored arguments (`tool-args/call_<hex>.json`).
    pub arguments_ref: String,
}
invocation_scoped!(ToolCallRequested, "tool_call_requested", Level::Info);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallStarted {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    pub snapshot_id: String,
    pub name: String,
}
invocation_scoped!(ToolCallStarted, "tool_call_started", Level::Info);

/// A call whose tool needs a person's approval waits for one
/// (docs/policy.md): what the person is shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallApprovalRequested {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    pub name: String,
    pub title: Option<String>,
    /// The arguments as a person is shown them: `{fields: [{name, value,
    /// size?, deciding}], omitted}`, the fields that decide the effect
    /// (path, URL, host, command, mode…) first, long values cut with their
    /// size (`toolhost_runtime::approval::ArgumentsSummary`).
    pub arguments_shown: serde_json::Value,
    /// The same on one line, bounded.
    pub arguments_summary: String,
    /// The tool's side-effect annotations.
    pub annotations: serde_json::Value,
    /// Where the tool comes from (`builtin`, the MCP server's name, the
    /// extension's id).
    pub source: String,
    /// Why approval is required (the snapshot's decision).
    pub reason: String,
}
invocation_scoped!(
    ToolCallApprovalRequested,
    "tool_call_approval_requested",
    Level::Warn
);

/// The person's decision on a call waiting for approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallApprovalDecided {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    /// `approved`, `approved_for_run`, `denied` or `timed_out`.
    pub decision: String,
    /// Who decided (`terminal`, `--approvals allow`, a token's tenant, …).
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    pub note: Option<String>,
}
invocation_scoped!(
    ToolCallApprovalDecided,
    "tool_call_approval_decided",
    Level::Info
);

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultStored {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    /// Run-relative (`tool-results/call_<hex>.json`).
    pub path: String,
}
invocation_scoped!(ToolResultStored, "tool_result_stored", Level::Debug);

/// The fields of `tool_call_completed` and of a recoverable
/// `tool_call_failed`; wrapped by [`ToolCallCompleted`] / [`ToolCallFailed`]
/// so each has its own type and level.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallOutcome {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    pub snapshot_id: String,
    pub name: String,
    pub is_error: bool,
    pub error_code: Option<String>,
    /// The result content for an error; `null` for a success (its content
    /// is in the stored result file).
    pub message: Option<String>,
    pub elapsed_ms: u64,
    /// The same, in microseconds: the whole control-plane path (arguments
    /// stored, gate, executor, result stored), for latency figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_us: Option<u64>,
    pub resource_refs: Vec<String>,
    pub sandbox: Option<Value>,
    /// Characters this call charged to the invocation's skill read budget;
    /// summed again when the run is reopened, so the budget holds across
    /// sessions. Absent when the call charged nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_read_chars: Option<u64>,
    /// What the call's capabilities read from outside its recorded entropy
    /// (the clock's readings), each under its capability's key; a replay
    /// hands it back. Absent when nothing was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<serde_json::Map<String, Value>>,
}

impl ToolCallOutcome {
    pub fn from_result(
        round: u32,
        invocation_id: impl Into<String>,
        snapshot_id: impl Into<String>,
        result: &AgentToolResult,
        elapsed_ms: u64,
        sandbox: Option<Value>,
    ) -> Self {
        Self {
            round,
            invocation_id: invocation_id.into(),
            call_id: result.call_id.clone(),
            tool_id: result.tool_id.clone(),
            snapshot_id: snapshot_id.into(),
            name: result.tool_id.native_name().to_owned(),
            is_error: result.is_error,
            error_code: result.error_code.clone(),
            message: result.is_error.then(|| result.content.clone()),
            elapsed_ms,
            elapsed_us: None,
            resource_refs: result.resource_refs.clone(),
            sandbox,
            skill_read_chars: None,
            recorded: None,
        }
    }

    /// Records the path's duration in microseconds too.
    pub fn with_elapsed_us(mut self, micros: u64) -> Self {
        self.elapsed_us = Some(micros);
        self
    }

    /// Records that the call charged `chars` to the skill read budget.
    pub fn with_skill_read_chars(mut self, chars: u64) -> Self {
        self.skill_read_chars = (chars > 0).then_some(chars);
        self
    }

    /// With what the call's capabilities recorded (nothing: absent).
    pub fn with_recorded(mut self, recorded: serde_json::Map<String, Value>) -> Self {
        self.recorded = (!recorded.is_empty()).then_some(recorded);
        self
    }

    /// Record as `tool_call_completed` (info) or, for an error result, as a
    /// recoverable `tool_call_failed` (warn).
    pub fn record(self, journal: &mut Journal) -> Result<u64, JournalError> {
        if self.is_error {
            journal.record(&ToolCallFailed(self))
        } else {
            journal.record(&ToolCallCompleted(self))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ToolCallCompleted(pub ToolCallOutcome);

impl Event for ToolCallCompleted {
    const TYPE: &'static str = "tool_call_completed";
    fn level(&self) -> Level {
        Level::Info
    }
    fn scope(&self) -> EventScope {
        EventScope::new(self.0.invocation_id.clone())
    }
}

/// A recoverable failure: the model reads the error and the run goes on.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(transparent)]
pub struct ToolCallFailed(pub ToolCallOutcome);

impl Event for ToolCallFailed {
    const TYPE: &'static str = "tool_call_failed";
    fn level(&self) -> Level {
        Level::Warn
    }
    fn scope(&self) -> EventScope {
        EventScope::new(self.0.invocation_id.clone())
    }
}

/// A system failure (no executor, identity mismatch, audit write failed…):
/// the run fails.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallSystemFailed {
    pub round: u32,
    pub invocation_id: String,
    pub call_id: String,
    pub tool_id: ToolId,
    pub snapshot_id: String,
    pub name: String,
    pub code: String,
    pub message: String,
}
invocation_scoped!(ToolCallSystemFailed, "tool_call_failed", Level::Error);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct RunCompleted {}

run_scoped!(RunCompleted, "run_completed", Level::Info);

/// A run reopened to go on (a later `toolhost call --run-dir`, a restart
/// after a crash). Its events continue the same journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResumed {
    pub run_id: String,
    /// The last whole event before this one.
    pub previous_seq: u64,
    /// Bytes of a torn last line that were cut off (and kept aside), if any.
    pub torn_bytes: Option<u64>,
    /// An agent run resumed (`toolhost run --resume`): what its journal
    /// held (a `toolhost_runtime` `ResumeFound`). Absent when a run is
    /// only reopened for more calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume: Option<Value>,
}

run_scoped!(RunResumed, "run_resumed", Level::Info);

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunFailed {
    pub code: String,
    pub message: String,
    /// The same run could succeed if tried again as is.
    pub retryable: bool,
    /// The user could retry (e.g. after fixing a profile or a key).
    pub user_retryable: bool,
}

run_scoped!(RunFailed, "run_failed", Level::Error);

/// The events that end a run, one of which is its last word: a run with one
/// is never resumed, and its status is read from which one it is. The one
/// list of them, for the runtime, the service and the tests.
pub const TERMINAL_EVENTS: [&str; 4] = [
    RunCompleted::TYPE,
    RunFailed::TYPE,
    RunPartialSuccess::TYPE,
    RunCancelled::TYPE,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Durability, read_events};
    use serde_json::json;
    use toolhost_core::{ToolCall, ToolFailure, ToolOutcome, ToolSuccess};

    fn tool() -> ToolId {
        ToolId::builtin("dice.roll").expect("id")
    }

    fn result(outcome: ToolOutcome) -> AgentToolResult {
        let invocation = ToolCall {
            call_id: "call_1".into(),
            tool_id: tool(),
            arguments: json!({}),
            provider_metadata: Value::Null,
        };
        AgentToolResult::from_outcome(&invocation, outcome).0
    }

    fn keys(value: &Value) -> Vec<&str> {
        let mut keys: Vec<&str> = value
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        keys
    }

    #[test]
    fn each_event_writes_its_type_level_scope_and_exact_fields() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut journal = Journal::create(&path, "run_x", Durability::Batched).expect("create");
        journal
            .record(&RunStarted {
                run_id: "run_x".into(),
                profile_id: "default-writer".into(),
                manifest_path: "run.json".into(),
                toolhost_version: "0.1.0".into(),
            })
            .expect("run_started");
        journal
            .record(&ContextAssembled {
                invocation_id: "inv_root".into(),
                snapshot_id: "snap_1".into(),
                snapshot_path: "input/invocations/inv_root/tool_snapshot.json".into(),
                snapshot: json!({"tools": 1}),
                turn_contract: json!({}),
                diagnostics: vec![],
                prompt: None,
            })
            .expect("context_assembled");
        journal
            .record(&ModelRequestCreated {
                round: 1,
                invocation_id: "inv_root".into(),
                turn_contract: json!({}),
                request: json!({"messages": 2}),
            })
            .expect("model_request_created");
        journal
            .record(&ToolCallRequested {
                round: 1,
                invocation_id: "inv_root".into(),
                call_id: "call_1".into(),
                tool_id: tool(),
                snapshot_id: "snap_1".into(),
                name: "dice.roll".into(),
                arguments_ref: "tool-args/call_x.json".into(),
            })
            .expect("tool_call_requested");
        journal
            .record(&ToolCallStarted {
                round: 1,
                invocation_id: "inv_root".into(),
                call_id: "call_1".into(),
                tool_id: tool(),
                snapshot_id: "snap_1".into(),
                name: "dice.roll".into(),
            })
            .expect("tool_call_started");
        journal
            .record(&ToolResultStored {
                round: 1,
                invocation_id: "inv_root".into(),
                call_id: "call_1".into(),
                tool_id: tool(),
                path: "tool-results/call_x.json".into(),
            })
            .expect("tool_result_stored");
        let success = result(ToolOutcome::Success(ToolSuccess {
            content: "Rolled 4".into(),
            ..ToolSuccess::default()
        }));
        ToolCallOutcome::from_result(1, "inv_root", "snap_1", &success, 12, None)
            .record(&mut journal)
            .expect("completed");
        let failure = result(ToolOutcome::Error(ToolFailure::new("dice.bad", "use NdS")));
        ToolCallOutcome::from_result(
            1,
            "inv_child",
            "snap_1",
            &failure,
            3,
            Some(json!({"fuel": 9})),
        )
        .record(&mut journal)
        .expect("failed");
        journal
            .record(&ToolCallSystemFailed {
                round: 1,
                invocation_id: "inv_root".into(),
                call_id: "call_2".into(),
                tool_id: tool(),
                snapshot_id: "snap_1".into(),
                name: "dice.roll".into(),
                code: "runtime.no_executor".into(),
                message: "no executor".into(),
            })
            .expect("system failure");
        journal
            .record(&RunFailed {
                code: "runtime.no_executor".into(),
                message: "no executor".into(),
                retryable: false,
                user_retryable: true,
            })
            .expect("run_failed");
        let seq = journal.record(&RunCompleted {}).expect("run_completed");
        assert_eq!(seq, 11);
        drop(journal);

        let events = read_events(&path).expect("read");
        let summary: Vec<(&str, Level, &str)> = events
            .iter()
            .map(|event| {
                (
                    event.r#type.as_str(),
                    event.level,
                    event.payload["eventScope"]["invocationId"]
                        .as_str()
                        .expect("scope"),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("run_started", Level::Info, "inv_root"),
                ("context_assembled", Level::Info, "inv_root"),
                ("model_request_created", Level::Info, "inv_root"),
                ("tool_call_requested", Level::Info, "inv_root"),
                ("tool_call_started", Level::Info, "inv_root"),
                ("tool_result_stored", Level::Debug, "inv_root"),
                ("tool_call_completed", Level::Info, "inv_root"),
                ("tool_call_failed", Level::Warn, "inv_child"),
                ("tool_call_failed", Level::Error, "inv_root"),
                ("run_failed", Level::Error, "inv_root"),
                ("run_completed", Level::Info, "inv_root"),
            ]
        );
        let payload = |index: usize| &events[index].payload;
        assert_eq!(
            keys(payload(0)),
            [
                "eventScope",
                "manifestPath",
                "profileId",
                "runId",
                "toolhostVersion"
            ]
        );
        assert_eq!(
            keys(payload(1)),
            [
                "diagnostics",
                "eventScope",
                "invocationId",
                "snapshot",
                "snapshotId",
                "snapshotPath",
                "turnContract"
            ]
        );
        assert_eq!(
            keys(payload(2)),
            [
                "eventScope",
                "invocationId",
                "request",
                "round",
                "turnContract"
            ]
        );
        assert_eq!(
            keys(payload(3)),
            [
                "argumentsRef",
                "callId",
                "eventScope",
                "invocationId",
                "name",
                "round",
                "snapshotId",
                "toolId"
            ]
        );
        assert_eq!(
            keys(payload(4)),
            [
                "callId",
                "eventScope",
                "invocationId",
                "name",
                "round",
                "snapshotId",
                "toolId"
            ]
        );
        assert_eq!(
            keys(payload(5)),
            [
                "callId",
                "eventScope",
                "invocationId",
                "path",
                "round",
                "toolId"
            ]
        );
        let outcome_keys = [
            "callId",
            "elapsedMs",
            "errorCode",
            "eventScope",
            "invocationId",
            "isError",
            "message",
            "name",
            "resourceRefs",
            "round",
            "sandbox",
            "snapshotId",
            "toolId",
        ];
        assert_eq!(keys(payload(6)), outcome_keys);
        assert_eq!(keys(payload(7)), outcome_keys);
        assert_eq!(payload(6)["errorCode"], Value::Null, "null, not omitted");
        assert_eq!(payload(6)["message"], Value::Null);
        assert_eq!(payload(6)["sandbox"], Value::Null);
        assert_eq!(payload(6)["toolId"], "builtin:dice.roll");
        assert_eq!(payload(6)["name"], "dice.roll");
        assert_eq!(payload(7)["isError"], true);
        assert_eq!(payload(7)["errorCode"], "dice.bad");
        assert_eq!(payload(7)["message"], "dice.bad: use NdS");
        assert_eq!(payload(7)["sandbox"], json!({"fuel": 9}));
        assert_eq!(
            keys(payload(8)),
            [
                "callId",
                "code",
                "eventScope",
                "invocationId",
                "message",
                "name",
                "round",
                "snapshotId",
                "toolId"
            ]
        );
        assert_eq!(
            keys(payload(9)),
            [
                "code",
                "eventScope",
                "message",
                "retryable",
                "userRetryable"
            ]
        );
        assert_eq!(
            *payload(10),
            json!({"eventScope": {"invocationId": "inv_root"}})
        );
    }

    #[test]
    fn run_started_comes_from_the_manifest() {
        let manifest = RunManifest::new("run_a", "default-writer", b"{}", vec![]);
        let event = RunStarted::new(&manifest);
        assert_eq!(event.run_id, "run_a");
        assert_eq!(event.profile_id, "default-writer");
        assert_eq!(event.manifest_path, "run.json");
        assert_eq!(event.toolhost_version, "0.1.0");
    }
}
