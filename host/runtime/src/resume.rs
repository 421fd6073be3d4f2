//! What a resumed run finds in its journal, and the cursor that keeps the
//! loop from journalling a step twice.
//!
//! A resumed agent run drives its loop again from the first round, the way
//! a durable-execution engine replays its oplog: a round whose model reply
//! is stored takes it from `model-responses/`, a call whose result is stored
//! takes it from `tool-results/`. Everything the loop journals on the way
//! was journalled before, so each invocation has a queue of its recorded
//! events: an event the loop makes again is taken off the front of its
//! invocation's queue instead of being appended. An invocation's order is
//! fixed by its stored replies and results, whatever its children did
//! meanwhile; where the two part (a run resumed with different inputs), the
//! rest of that queue is dropped with a warning and the invocation goes on
//! live.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;
use serde_json::Value;
use toolhost_core::builtin;
/// How a run ended, when it did: a terminal run is never resumed.
pub use toolhost_journal::TERMINAL_EVENTS;
use toolhost_journal::{
    AgentTaskEnded, ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested, Event as _,
    JournalEvent, ModelCompleted, RunResumed, RunStarted, ToolCallCompleted, ToolCallFailed,
    ToolCallStarted,
};

/// Events of a run that a resume never makes again.
const RUN_LEVEL: [&str; 2] = [RunStarted::TYPE, RunResumed::TYPE];

#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub kind: String,
    pub seq: u64,
    pub payload: Value,
}

#[derive(Debug, Clone)]
pub(crate) struct RecordedCommit {
    /// The path it published (`chat_commit_requested`).
    pub path: String,
    /// The message index, when `chat_commit_completed` was journalled.
    pub completed: Option<u32>,
    /// Its code and message, when `chat_commit_failed` was journalled.
    pub failed: Option<(String, String)>,
}

/// What the journal showed when the run was resumed (`run_resumed`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResumeFound {
    /// Model replies journalled (`model_completed`): not requested again.
    pub rounds_replayed: u32,
    /// Calls whose result was journalled: not executed again.
    pub calls_replayed: u32,
    /// Calls that started and have no journalled result, by id.
    pub calls_in_doubt: Vec<String>,
    /// Of those, the ones run again: read-only builtins and the control
    /// tools but `workspace.commit`.
    pub calls_rerun: u32,
    /// The others, whose outcome is settled first: a commit asks the chat,
    /// a write checks its intent, anything else is `tool.outcome_unknown`.
    pub outcomes_resolved: u32,
    pub invocations: u32,
}

#[derive(Debug, Default)]
pub(crate) struct ResumeLog {
    pending: Mutex<HashMap<String, VecDeque<Recorded>>>,
    /// (invocation, call id) of every `tool_call_started`.
    started: BTreeSet<(String, String)>,
    /// Skill characters each invocation's calls were charged.
    skill_chars: HashMap<String, u64>,
    /// Every commit the journal shows, by id, whatever became of the queues.
    commits: HashMap<String, RecordedCommit>,
    /// The calls that asked for a commit: (invocation, call id).
    commit_calls: HashSet<(String, String)>,
    /// Each task's recorded end: (seq, task id, status, error).
    task_ends: Vec<(u64, String, String, Option<String>)>,
    /// The seq of each call's `tool_call_started`, by (invocation, call id).
    started_seq: HashMap<(String, String), u64>,
    pub found: ResumeFound,
}

impl ResumeLog {
    pub fn from_events(events: &[JournalEvent]) -> Self {
        let mut pending: HashMap<String, VecDeque<Recorded>> = HashMap::new();
        let mut started = BTreeSet::new();
        let mut finished = BTreeSet::new();
        let mut found = ResumeFound::default();
        let mut skill_chars: HashMap<String, u64> = HashMap::new();
        let mut commits: HashMap<String, RecordedCommit> = HashMap::new();
        let mut commit_calls = HashSet::new();
        let mut task_ends = Vec::new();
        let mut started_seq = HashMap::new();
        let mut started_tools: HashMap<(String, String), String> = HashMap::new();
        for event in events {
            if RUN_LEVEL.contains(&event.r#type.as_str()) {
                continue;
            }
            let Ok(scope) = event.scope() else { continue };
            let call = || {
                let call = event.payload.get("callId").and_then(Value::as_str);
                (scope.invocation_id.clone(), call.unwrap_or("").to_owned())
            };
            match event.r#type.as_str() {
                ModelCompleted::TYPE => found.rounds_replayed += 1,
                ToolCallStarted::TYPE => {
                    started.insert(call());
                    started_seq.insert(call(), event.seq);
                    if let Some(tool) = event.payload["toolId"].as_str() {
                        started_tools.insert(call(), tool.to_owned());
                    }
                }
                ChatCommitRequested::TYPE | ChatCommitCompleted::TYPE | ChatCommitFailed::TYPE => {
                    if event.r#type == ChatCommitRequested::TYPE
                        && let Some(call_id) = event.payload["callId"].as_str()
                    {
                        commit_calls.insert((scope.invocation_id.clone(), call_id.to_owned()));
                    }
                    let id = event.payload["commitId"].as_str().unwrap_or("").to_owned();
                    let entry = commits.entry(id).or_insert_with(|| RecordedCommit {
                        path: String::new(),
                        completed: None,
                        failed: None,
                    });
                    if let Some(path) = event.payload["path"].as_str() {
                        entry.path = path.to_owned();
                    }
                    if event.r#type == ChatCommitFailed::TYPE {
                        let text =
                            |key: &str| event.payload[key].as_str().unwrap_or_default().to_owned();
                        entry.failed = Some((text("code"), text("message")));
                    }
                    if event.r#type == ChatCommitCompleted::TYPE {
                        entry.completed = event.payload["messageIndex"]
                            .as_u64()
                            .and_then(|index| u32::try_from(index).ok());
                    }
                }
                AgentTaskEnded::TYPE => {
                    let task = event.payload["taskId"].as_str().unwrap_or("").to_owned();
                    let status = event.payload["status"].as_str().unwrap_or("").to_owned();
                    let error = event.payload["error"].as_str().map(str::to_owned);
                    task_ends.push((event.seq, task, status, error));
                }
                ToolCallCompleted::TYPE | ToolCallFailed::TYPE => {
                    finished.insert(call());
                    let charged = event.payload.get("skillReadChars").and_then(Value::as_u64);
                    let sum = skill_chars.entry(scope.invocation_id.clone()).or_default();
                    *sum = sum.saturating_add(charged.unwrap_or(0));
                }
                _ => {}
            }
            pending
                .entry(scope.invocation_id.clone())
                .or_default()
                .push_back(Recorded {
                    kind: event.r#type.clone(),
                    seq: event.seq,
                    payload: event.payload.clone(),
                });
        }
        found.calls_replayed = finished.len() as u32;
        for key in started.difference(&finished) {
            found.calls_in_doubt.push(key.1.clone());
            let tool = started_tools
                .get(key)
                .and_then(|tool| toolhost_core::ToolId::parse(tool).ok());
            let rerun = tool.is_some_and(|tool| {
                in_doubt(&tool) == InDoubt::RunAgain
                    && !(tool.is_builtin() && tool.native_name() == "workspace.commit")
            });
            if rerun {
                found.calls_rerun += 1;
            } else {
                found.outcomes_resolved += 1;
            }
        }
        found.invocations = pending.len() as u32;
        Self {
            pending: Mutex::new(pending),
            started,
            skill_chars,
            commits,
            commit_calls,
            task_ends,
            started_seq,
            found,
        }
    }

    /// The commit `commit_id` as the journal shows it, anywhere in it.
    pub fn recorded_commit(&self, commit_id: &str) -> Option<RecordedCommit> {
        self.commits.get(commit_id).cloned()
    }

    /// Whether `call_id` of `invocation_id` asked the chat host for a
    /// commit (`chat_commit_requested`), however it ended.
    pub fn commit_requested_by(&self, invocation_id: &str, call_id: &str) -> bool {
        self.commit_calls
            .contains(&(invocation_id.to_owned(), call_id.to_owned()))
    }

    /// How the task ended in the record, if it did: its status
    /// (`completed`, `failed`, `cancelled`) and error.
    pub fn task_end(&self, task_id: &str) -> Option<(String, Option<String>)> {
        self.task_ends
            .iter()
            .find(|end| end.1 == task_id)
            .map(|end| (end.2.clone(), end.3.clone()))
    }

    /// Tasks whose end the journal shows before the call started: a
    /// replayed control effect waits for them to end again first, so it
    /// sees the task board it saw then.
    pub fn tasks_ended_before(&self, invocation: &str, call_id: &str) -> Vec<String> {
        let Some(seq) = self
            .started_seq
            .get(&(invocation.to_owned(), call_id.to_owned()))
        else {
            return Vec::new();
        };
        self.task_ends
            .iter()
            .filter(|end| end.0 < *seq)
            .map(|end| end.1.clone())
            .collect()
    }

    /// Take the recorded events of `invocation` that come before its next
    /// `kind` (a replayed step that made them live: failed model attempts
    /// before a stored reply, a task's steps before its recorded end).
    pub fn skip_to(&self, invocation: &str, kind: &str) {
        let mut pending = self.pending();
        if let Some(queue) = pending.get_mut(invocation)
            && queue.iter().any(|event| event.kind == kind)
        {
            while queue.front().is_some_and(|event| event.kind != kind) {
                queue.pop_front();
            }
        }
    }

    /// Take the leading recorded `kind` events of `invocation`.
    pub fn skip_while(&self, invocation: &str, kind: &str) {
        let mut pending = self.pending();
        if let Some(queue) = pending.get_mut(invocation) {
            while queue.front().is_some_and(|event| event.kind == kind) {
                queue.pop_front();
            }
        }
    }

    /// Skill characters `invocation`'s journalled calls were charged.
    pub fn skill_chars(&self, invocation: &str) -> u64 {
        self.skill_chars.get(invocation).copied().unwrap_or(0)
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<String, VecDeque<Recorded>>> {
        self.pending
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The recorded event `kind` of `invocation`, when it is the next one
    /// the journal holds for it: the loop made it again, so it is not
    /// appended. Another kind next means the loop went another way: the
    /// invocation's queue is dropped and it goes on live.
    pub fn take(&self, invocation: &str, kind: &str) -> Option<Recorded> {
        let mut pending = self.pending();
        let queue = pending.get_mut(invocation)?;
        match queue.front() {
            Some(next) if next.kind == kind => queue.pop_front(),
            Some(next) => {
                tracing::warn!(
                    invocation,
                    recorded = %next.kind,
                    seq = next.seq,
                    now = kind,
                    "the resumed run went another way than its journal; going on live"
                );
                queue.clear();
                None
            }
            None => None,
        }
    }

    /// The next recorded event of `invocation`, if the loop has not made
    /// it again yet.
    pub fn peek(&self, invocation: &str) -> Option<Recorded> {
        self.pending()
            .get(invocation)
            .and_then(|queue| queue.front().cloned())
    }

    /// Whether `invocation` still has recorded events ahead of it.
    pub fn replaying(&self, invocation: &str) -> bool {
        self.pending()
            .get(invocation)
            .is_some_and(|queue| !queue.is_empty())
    }

    /// Whether the call was started before the run was interrupted.
    pub fn was_started(&self, invocation: &str, call_id: &str) -> bool {
        self.started
            .contains(&(invocation.to_owned(), call_id.to_owned()))
    }
}

/// A builtin that changes the workspace: a call of one that started and
/// left no result may have landed.
pub(crate) fn is_write_tool(tool: &toolhost_core::ToolId) -> bool {
    builtin::of(tool).is_some_and(|builtin| builtin.writes_workspace)
}

/// Where a write records its [`toolhost_workspace::WriteIntent`] before it
/// lands.
pub(crate) fn intent_path(invocation_id: &str, call_id: &str) -> String {
    format!(
        "input/invocations/{invocation_id}/intents/{}.json",
        toolhost_journal::audit_stem(call_id)
    )
}

/// A builtin whose effect only the run loop applies. A replayed call of
/// one runs its guest again — it only reads its arguments — so the loop
/// gets the effect back and rebuilds its own state (ledger, task board);
/// the model still reads the stored result.
pub(crate) fn is_effect_tool(tool: &toolhost_core::ToolId) -> bool {
    builtin::of(tool).is_some_and(|builtin| builtin.control)
}

/// What a resumed run does with a call that started and left no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InDoubt {
    /// Running it again is safe: a builtin that only reads, or a control
    /// tool (a commit asks the chat whether it landed first).
    RunAgain,
    /// Whether it did something cannot be told: the model is told so.
    Unknown,
}

pub(crate) fn in_doubt(tool: &toolhost_core::ToolId) -> InDoubt {
    if builtin::of(tool).is_some_and(|builtin| !builtin.writes_workspace) {
        InDoubt::RunAgain
    } else {
        InDoubt::Unknown
    }
}

/// The recoverable answer for a call whose outcome a resume cannot tell.
pub(crate) fn outcome_unknown(tool: &toolhost_core::ToolId) -> toolhost_core::ToolFailure {
    let what = if tool.is_builtin() {
        "Read the file it was to change to see whether the change is there before you try again."
    } else {
        "It may or may not have acted (an MCP server or an extension); check its effect before you call it again."
    };
    toolhost_core::ToolFailure::new(
        "tool.outcome_unknown",
        format!(
            "The run was interrupted while {} was running, and its result was not recorded. {what}",
            tool.native_name()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_journal::{EventScope, Level, ModelRequestCreated};

    fn event(seq: u64, kind: &str, invocation: &str, payload: Value) -> JournalEvent {
        let mut payload = payload.as_object().cloned().unwrap_or_default();
        payload.insert(
            "eventScope".into(),
            serde_json::to_value(EventScope::new(invocation)).unwrap(),
        );
        JournalEvent {
            seq,
            id: format!("evt_{seq}"),
            run_id: "run_x".into(),
            timestamp: "2026-12-04T00:00:00.000Z".into(),
            level: Level::Info,
            r#type: kind.into(),
            payload: Value::Object(payload),
        }
    }

    fn journal() -> Vec<JournalEvent> {
        use serde_json::json;
        vec![
            event(1, RunStarted::TYPE, "inv_root", json!({})),
            event(
                2,
                ModelRequestCreated::TYPE,
                "inv_root",
                json!({"round": 1}),
            ),
            event(3, ModelCompleted::TYPE, "inv_root", json!({"round": 1})),
            event(4, ToolCallStarted::TYPE, "inv_root", json!({"callId": "a"})),
            event(
                5,
                AgentTaskEnded::TYPE,
                "inv_child",
                json!({"taskId": "t1", "status": "failed", "error": "boom"}),
            ),
            event(
                6,
                ToolCallCompleted::TYPE,
                "inv_root",
                json!({"callId": "a", "skillReadChars": 7}),
            ),
            event(7, ToolCallStarted::TYPE, "inv_root", json!({"callId": "b"})),
            event(
                8,
                ChatCommitRequested::TYPE,
                "inv_root",
                json!({"commitId": "r:commit_001", "path": "output/main.md"}),
            ),
            event(
                9,
                ChatCommitCompleted::TYPE,
                "inv_root",
                json!({"commitId": "r:commit_001", "messageIndex": 65}),
            ),
            event(
                10,
                ChatCommitRequested::TYPE,
                "inv_root",
                json!({"commitId": "r:commit_002", "path": "output/main.md"}),
            ),
            event(11, RunResumed::TYPE, "inv_root", json!({})),
        ]
    }

    #[test]
    fn the_journal_is_read_into_queues_commits_and_task_ends() {
        let log = ResumeLog::from_events(&journal());
        assert_eq!(log.found.rounds_replayed, 1);
        assert_eq!(log.found.calls_replayed, 1);
        assert_eq!(log.found.calls_in_doubt, vec!["b".to_owned()]);
        // b has no toolId in this journal: it is not run blindly.
        assert_eq!((log.found.calls_rerun, log.found.outcomes_resolved), (0, 1));
        assert!(log.was_started("inv_root", "b") && !log.was_started("inv_root", "c"));
        assert_eq!(log.skill_chars("inv_root"), 7);
        let landed = log.recorded_commit("r:commit_001").unwrap();
        assert_eq!(
            (landed.path.as_str(), landed.completed),
            ("output/main.md", Some(65))
        );
        assert_eq!(log.recorded_commit("r:commit_002").unwrap().completed, None);
        assert!(log.recorded_commit("r:commit_003").is_none());
        assert_eq!(
            log.task_end("t1"),
            Some(("failed".into(), Some("boom".into())))
        );
        // t1 ended (seq 5) before b started (seq 7), not before a (seq 4).
        assert_eq!(
            log.tasks_ended_before("inv_root", "b"),
            vec!["t1".to_owned()]
        );
        assert!(log.tasks_ended_before("inv_root", "a").is_empty());
    }

    #[test]
    fn events_made_again_are_taken_and_a_divergence_goes_live() {
        let log = ResumeLog::from_events(&journal());
        // run_started and run_resumed are never made again, so not queued.
        assert_eq!(
            log.take("inv_root", ModelRequestCreated::TYPE)
                .map(|r| r.seq),
            Some(2)
        );
        assert_eq!(
            log.take("inv_root", ModelCompleted::TYPE).map(|r| r.seq),
            Some(3)
        );
        assert!(log.replaying("inv_root"));
        // Another kind than the next recorded one: the queue is dropped.
        assert!(log.take("inv_root", ModelCompleted::TYPE).is_none());
        assert!(!log.replaying("inv_root"));
        assert!(log.take("inv_root", ToolCallStarted::TYPE).is_none());
        // Other invocations keep theirs.
        assert!(log.replaying("inv_child"));
        log.skip_to("inv_child", AgentTaskEnded::TYPE);
        assert_eq!(
            log.take("inv_child", AgentTaskEnded::TYPE).map(|r| r.seq),
            Some(5)
        );
    }

    #[test]
    fn calls_in_doubt_run_again_only_when_that_is_safe() {
        let builtin = |name: &str| toolhost_core::ToolId::builtin(name).unwrap();
        for read_only in [
            "chat.search",
            "workspace.read_file",
            "dice.roll",
            "skill.read",
        ] {
            assert_eq!(
                in_doubt(&builtin(read_only)),
                InDoubt::RunAgain,
                "{read_only}"
            );
        }
        for write in ["workspace.write_file", "workspace.apply_patch"] {
            assert!(is_write_tool(&builtin(write)));
        }
        let mcp =
            toolhost_core::ToolId::parse("mcp/6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f:echo").unwrap();
        assert_eq!(in_doubt(&mcp), InDoubt::Unknown);
        assert_eq!(outcome_unknown(&mcp).code, "tool.outcome_unknown");
        let extension = toolhost_core::ToolId::parse("ext/acme-weather:forecast").unwrap();
        assert_eq!(in_doubt(&extension), InDoubt::Unknown);
    }
}
