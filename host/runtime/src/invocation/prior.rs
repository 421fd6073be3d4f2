//! What a resumed run's record says of a call, decided once, in front of
//! the call path ([`Invocation::prior`]): a stored result the model reads
//! again, a call that started and may have acted (in doubt), or a new call.
//! The call path then only asks [`Invocation::answer_from_record`] whether
//! the record answers the call instead of the executor.

use std::sync::Arc;

use serde_json::json;
use toolhost_core::{AgentToolResult, ToolCall, ToolOutcome};

use super::Invocation;
use crate::failure::RunFailure;
use crate::resume::{self, InDoubt};

/// What the record says of one call.
#[derive(Debug)]
pub(crate) enum Prior {
    /// A new call, or one a resumed run never started.
    New,
    /// Its result is stored: what the model reads, whatever a re-run says.
    Stored(AgentToolResult),
    /// It started and has no stored result: it may have acted.
    InDoubt,
}

impl Prior {
    /// The stored result, taken out for the call's store step.
    pub(crate) fn into_stored(self) -> Option<AgentToolResult> {
        match self {
            Self::Stored(result) => Some(result),
            Self::New | Self::InDoubt => None,
        }
    }
}

/// The record's answer to a call, instead of the executor's.
pub(crate) struct Replay {
    pub result: AgentToolResult,
    /// The stored result itself; else a new one (an outcome the resume
    /// worked out, or could not tell), stored like any other.
    pub from_record: bool,
}

impl Invocation {
    /// What the resumed run's record says of `call` (a new run: nothing).
    pub(crate) fn prior(&self, call: &ToolCall) -> Result<Prior, RunFailure> {
        let Some(log) = self.run.resume_log() else {
            return Ok(Prior::New);
        };
        if let Some(stored) = self.stored_result(call)? {
            return Ok(Prior::Stored(stored));
        }
        Ok(if log.was_started(&self.invocation_id, &call.call_id) {
            Prior::InDoubt
        } else {
            Prior::New
        })
    }

    /// Once the call is admitted and started: the record's answer, or
    /// `None` when the executor runs it. A stored result answers, except
    /// for a control tool, which runs again for its effect (the model
    /// still reads the stored result). A write in doubt is looked up in
    /// its recorded intent; another tool in doubt that may have acted is
    /// `tool.outcome_unknown`.
    pub(crate) fn answer_from_record(
        &self,
        call: &ToolCall,
        prior: &Prior,
    ) -> Result<Option<Replay>, RunFailure> {
        let tool = &call.tool_id;
        Ok(match prior {
            Prior::New => None,
            Prior::Stored(result) if !resume::is_effect_tool(tool) => Some(Replay {
                result: result.clone(),
                from_record: true,
            }),
            Prior::Stored(_) => None,
            Prior::InDoubt if resume::is_write_tool(tool) => {
                // `None`: it never landed, so it runs again.
                self.resolve_write(call)?.map(|result| Replay {
                    result,
                    from_record: false,
                })
            }
            Prior::InDoubt if resume::in_doubt(tool) == InDoubt::Unknown => {
                let failure = resume::outcome_unknown(tool);
                let (result, _) = AgentToolResult::from_outcome(call, ToolOutcome::Error(failure));
                Some(Replay {
                    result,
                    from_record: false,
                })
            }
            Prior::InDoubt => None,
        })
    }

    /// Records each write of the call before it lands (create-only), so a
    /// resume can tell whether it did.
    pub(super) fn intent_sink(&self, call_id: &str) -> toolhost_workspace::IntentSink {
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
    fn resolve_write(&self, call: &ToolCall) -> Result<Option<AgentToolResult>, RunFailure> {
        let relative = resume::intent_path(&self.invocation_id, &call.call_id);
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
            ToolOutcome::Error(resume::outcome_unknown(&call.tool_id))
        };
        Ok(Some(AgentToolResult::from_outcome(call, outcome).0))
    }

    /// The stored result of a call of this invocation, if a resumed run's
    /// record has one.
    fn stored_result(&self, call: &ToolCall) -> Result<Option<AgentToolResult>, RunFailure> {
        let path = self.run.manifest_layout().tool_result(&call.call_id);
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
        stored.result.check_identity(call)?;
        Ok(Some(stored.result))
    }
}
