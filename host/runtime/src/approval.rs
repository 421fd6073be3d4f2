//! A person's approval of a call (docs/policy.md, "Approvals").
//!
//! A call of a tool whose snapshot binding requires approval goes
//! `tool_call_requested` → gate (its budget is reserved: a denied call
//! still counts) → `tool_call_approval_requested` → the run's [`Approver`]
//! → `tool_call_approval_decided` → `tool_call_started`, or, denied, a
//! recoverable `agent.tool_denied_by_user` result the model reads, and the
//! tool never runs. A resumed run takes a decision from its journal; a call
//! that was still waiting when the run was interrupted waits again.
//!
//! Where a person decides is the approver's business: a fixed answer
//! ([`Answer`]: `--approvals allow|deny`, `call --approve`, the default,
//! which denies because no one is asked), a terminal (the CLI's), or a
//! decision file in the run directory ([`DecisionFiles`]: written by
//! `toolhost approvals approve|deny` and the HTTP API).

use std::future::Future;
use std::ops::ControlFlow;
use std::path::Path;
use std::pin::Pin;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_core::ToolId;
use toolhost_journal::{Event as _, ToolCallApprovalDecided, ToolCallApprovalRequested};

use crate::answer_file::{self, AnswerFileError};

mod summary;

pub use summary::{ArgumentField, ArgumentsSummary};

/// What a person is shown.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequest {
    pub run_id: String,
    pub invocation_id: String,
    pub call_id: String,
    pub round: u32,
    pub tool_id: ToolId,
    pub title: Option<String>,
    /// The arguments as a person is shown them, deciding fields first.
    pub arguments_shown: ArgumentsSummary,
    /// The same on one line (`arguments_shown`'s text).
    pub arguments_summary: String,
    pub annotations: Value,
    pub source: String,
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// This call may run.
    Approved,
    /// This call and every later call of the same tool in this run.
    ApprovedForRun,
    Denied,
    /// No one decided in time: denied.
    TimedOut,
}

impl Verdict {
    pub fn allows(self) -> bool {
        matches!(self, Self::Approved | Self::ApprovedForRun)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::ApprovedForRun => "approved_for_run",
            Self::Denied => "denied",
            Self::TimedOut => "timed_out",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "approved" => Self::Approved,
            "approved_for_run" => Self::ApprovedForRun,
            "denied" => Self::Denied,
            "timed_out" => Self::TimedOut,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalDecision {
    pub verdict: Verdict,
    /// Who decided, in words.
    pub by: String,
    /// What the person said; the model reads it when the call is denied.
    pub note: Option<String>,
}

pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = ApprovalDecision> + Send + 'a>>;

/// Where a run's approvals are decided.
pub trait Approver: Send + Sync + std::fmt::Debug {
    /// Decide `request`, a call of the run in the directory `run_dir`.
    fn decide<'a>(&'a self, run_dir: &'a Path, request: &'a ApprovalRequest) -> ApprovalFuture<'a>;
}

/// The same answer for every call.
#[derive(Debug, Clone)]
pub struct Answer {
    pub verdict: Verdict,
    pub by: String,
    pub note: Option<String>,
}

impl Answer {
    /// No one is asked: every approval is denied (the default).
    pub fn nobody() -> Self {
        Self {
            verdict: Verdict::Denied,
            by: "no approver".into(),
            note: Some(
                "this tool needs a person's approval and no one was there to give it".into(),
            ),
        }
    }

    pub fn allow(by: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Approved,
            by: by.into(),
            note: None,
        }
    }

    pub fn deny(by: impl Into<String>) -> Self {
        Self {
            verdict: Verdict::Denied,
            by: by.into(),
            note: None,
        }
    }
}

impl Approver for Answer {
    fn decide<'a>(&'a self, _: &'a Path, _: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(async move {
            ApprovalDecision {
                verdict: self.verdict,
                by: self.by.clone(),
                note: self.note.clone(),
            }
        })
    }
}

/// The default time a call waits for a person.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Waits for `approvals/<call stem>.json` in the run directory, written by
/// [`write_decision`] (`toolhost approvals`, the HTTP API), looking every
/// `poll`; past `timeout` the call is denied (`timed_out`).
#[derive(Debug, Clone)]
pub struct DecisionFiles {
    pub poll: Duration,
    pub timeout: Duration,
}

impl Default for DecisionFiles {
    fn default() -> Self {
        Self {
            poll: Duration::from_millis(100),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl Approver for DecisionFiles {
    fn decide<'a>(&'a self, run_dir: &'a Path, request: &'a ApprovalRequest) -> ApprovalFuture<'a> {
        Box::pin(async move {
            let deadline = Instant::now() + self.timeout;
            loop {
                match read_decision(run_dir, &request.call_id) {
                    Ok(Some(file)) => return file.into_decision(),
                    Ok(None) => {}
                    Err(error) => tracing::warn!(
                        call = %request.call_id,
                        "an approval decision file does not read: {error}"
                    ),
                }
                if Instant::now() >= deadline {
                    return ApprovalDecision {
                        verdict: Verdict::TimedOut,
                        by: "timeout".into(),
                        note: Some(format!(
                            "no one decided within {} s",
                            self.timeout.as_secs()
                        )),
                    };
                }
                tokio::time::sleep(self.poll).await;
            }
        })
    }
}

pub const DECISION_KIND: &str = "toolhost.approvalDecision";
/// Where decision files are, in the run directory.
pub const APPROVALS_DIR: &str = "approvals";
/// Largest decision file read.
const MAX_DECISION_BYTES: u64 = 64 * 1024;
/// Longest note kept.
pub const MAX_NOTE_CHARS: usize = 2000;

/// A person's decision, as a file in the run directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DecisionFile {
    pub schema_version: u32,
    pub kind: String,
    pub call_id: String,
    /// `approved`, `approved_for_run` or `denied`.
    pub decision: Verdict,
    pub by: String,
    #[serde(default)]
    pub note: Option<String>,
}

impl DecisionFile {
    pub fn new(call_id: &str, decision: Verdict, by: &str, note: Option<&str>) -> Self {
        Self {
            schema_version: 1,
            kind: DECISION_KIND.into(),
            call_id: call_id.to_owned(),
            decision,
            by: by.chars().take(200).collect(),
            note: note.map(|note| note.chars().take(MAX_NOTE_CHARS).collect()),
        }
    }

    fn into_decision(self) -> ApprovalDecision {
        ApprovalDecision {
            // A file cannot time a call out.
            verdict: match self.decision {
                Verdict::TimedOut => Verdict::Denied,
                other => other,
            },
            by: self.by,
            note: self.note,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("approval.already_decided: call `{0}` has a decision already")]
    AlreadyDecided(String),
    #[error("approval.not_pending: no call `{0}` of this run waits for a decision")]
    NotPending(String),
    #[error("approval.invalid: {0}")]
    Invalid(String),
    #[error("approval.io_error: {0}")]
    Io(#[from] std::io::Error),
}

/// Record a person's decision on `call_id` for the run at `run_root`:
/// create-only (a call is decided once), beneath the run directory, never
/// through a symbolic link, and whole: written under a temporary name and
/// only then given its own, without replacing one already there, so a
/// failed write leaves no half decision to block the call.
pub fn write_decision(run_root: &Path, file: &DecisionFile) -> Result<(), DecisionError> {
    let mut bytes =
        serde_json::to_vec_pretty(file).map_err(|e| DecisionError::Invalid(e.to_string()))?;
    bytes.push(b'\n');
    answer_file::write_once(run_root, APPROVALS_DIR, &file.call_id, &bytes).map_err(|error| {
        match error {
            AnswerFileError::Exists => DecisionError::AlreadyDecided(file.call_id.clone()),
            other => decision_error(other),
        }
    })
}

fn decision_error(error: AnswerFileError) -> DecisionError {
    match error {
        AnswerFileError::Io(error) => DecisionError::Io(error),
        other => DecisionError::Invalid(other.to_string()),
    }
}

/// Decide `call_id`, a call of the run at `run_root` that waits for a
/// decision ([`pending`]): what `toolhost approvals` and the HTTP API do.
pub fn decide_waiting(run_root: &Path, file: &DecisionFile) -> Result<(), DecisionError> {
    let waiting = pending(run_root)?
        .iter()
        .any(|call| call.request["callId"] == file.call_id.as_str());
    if !waiting {
        return Err(DecisionError::NotPending(file.call_id.clone()));
    }
    write_decision(run_root, file)
}

/// The decision on `call_id`, if one was written. Bounded, beneath the run
/// directory, never through a link; a file for another call is refused.
pub fn read_decision(
    run_root: &Path,
    call_id: &str,
) -> Result<Option<DecisionFile>, DecisionError> {
    answer_file::read_answer(run_root, APPROVALS_DIR, call_id, MAX_DECISION_BYTES)
        .map_err(decision_error)
}

impl answer_file::Answer for DecisionFile {
    const KIND: &'static str = DECISION_KIND;

    fn kind(&self) -> &str {
        &self.kind
    }

    fn schema_version(&self) -> u32 {
        self.schema_version
    }

    fn key(&self) -> &str {
        &self.call_id
    }
}

/// A call waiting for a decision, as the journal shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub seq: u64,
    /// When it was asked for.
    pub timestamp: String,
    /// The `tool_call_approval_requested` payload: call, tool, arguments
    /// summary, annotations, source, reason.
    pub request: Value,
    /// A decision file is written and the run has not read it yet.
    pub decided: bool,
}

/// The calls of the run at `run_root` asking for approval and not decided
/// in its journal, oldest first. The journal may be growing: only whole
/// lines are read, and only the approval events are kept in memory.
pub fn pending(run_root: &Path) -> Result<Vec<PendingApproval>, DecisionError> {
    let journal = toolhost_journal::RunLayout::new(run_root)
        .journal()
        .absolute;
    let key = |payload: &Value| {
        (
            payload["invocationId"].as_str().unwrap_or("").to_owned(),
            payload["callId"].as_str().unwrap_or("").to_owned(),
        )
    };
    let mut requested = Vec::new();
    let mut decided = std::collections::HashSet::new();
    let wanted = |kind: &str| {
        matches!(
            kind,
            ToolCallApprovalRequested::TYPE | ToolCallApprovalDecided::TYPE
        )
    };
    toolhost_journal::tail::each_event(&journal, wanted, |kind, event| {
        if kind == ToolCallApprovalRequested::TYPE {
            requested.push(event);
        } else {
            decided.insert(key(&event["payload"]));
        }
        ControlFlow::Continue(())
    })?;
    let mut waiting = Vec::new();
    for event in requested {
        let payload = &event["payload"];
        if decided.contains(&key(payload)) {
            continue;
        }
        let call_id = payload["callId"].as_str().unwrap_or("");
        waiting.push(PendingApproval {
            seq: event["seq"].as_u64().unwrap_or(0),
            timestamp: event["timestamp"].as_str().unwrap_or("").to_owned(),
            decided: matches!(read_decision(run_root, call_id), Ok(Some(_))),
            request: payload.clone(),
        });
    }
    Ok(waiting)
}
