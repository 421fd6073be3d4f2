//! `toolhost snapshot` and `toolhost journal`: look at what a run is given
//! and what it did.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;
use toolhost_core::{ExitPolicy, Profile, snapshot};
use toolhost_journal::{
    AgentAwaitCompleted, AgentDelegateStarted, AgentHandoffAccepted, AgentLoopFinished,
    AgentTaskEnded, ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested,
    ChildResultsInjected, ContextAssembled, ContextTrimmed, DirectOutputCaptured,
    DriftRecoveryAttempted, Event as _, JournalEvent, ModelCallAttemptFailed, ModelCompleted,
    ModelRequestCreated, PersistentChangesCommitted, RunCompleted, RunFailed, RunLayout,
    RunPartialSuccess, RunResumed, RunStarted, TaskReturnCompleted, ToolCallCompleted,
    ToolCallFailed, ToolCallRequested, ToolCallStarted, ToolCallUnknown, ToolResultStored,
    read_events,
};
use toolhost_runtime::ToolHost;

use crate::table;

/// Compile `profile` against the loaded catalog and print the snapshot
/// (JSON on stdout; what was left out, and why, on stderr).
pub fn print_snapshot(host: &ToolHost, profile: &Profile, child: bool, id: &str) -> Result<()> {
    let exit_policy = if child {
        ExitPolicy::TaskReturnRequired
    } else {
        ExitPolicy::RunFinishAllowed
    };
    let compiled = snapshot::compile(profile, host.snapshot_sources(), id, exit_policy)?;
    println!("{}", compiled.snapshot.to_json_pretty());
    for diagnostic in &compiled.diagnostics {
        eprintln!(
            "omitted {}: {}",
            diagnostic.tool_id,
            crate::terminal::line(&diagnostic.message)
        );
    }
    for decision in compiled.snapshot.decisions() {
        if decision.approval_required {
            eprintln!(
                "approval {}: {}",
                decision.tool_id,
                crate::terminal::line(&decision.reason)
            );
        }
    }
    Ok(())
}

/// Print a run's journal as a table (or its raw events as a JSON array).
pub fn print_journal(run_dir: &Path, json: bool, invocation: Option<&str>) -> Result<()> {
    let path = RunLayout::new(run_dir).journal().absolute;
    let events = read_events(&path).with_context(|| format!("reading {}", path.display()))?;
    let events: Vec<&JournalEvent> = events
        .iter()
        .filter(|event| {
            invocation.is_none_or(|wanted| {
                event
                    .scope()
                    .is_ok_and(|scope| scope.invocation_id == wanted)
            })
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&events)?);
        return Ok(());
    }
    let rows: Vec<[String; 6]> = events
        .iter()
        .map(|event| {
            [
                event.seq.to_string(),
                clock_time(&event.timestamp),
                format!("{:?}", event.level).to_lowercase(),
                event.r#type.clone(),
                event
                    .scope()
                    .map(|scope| scope.invocation_id)
                    .unwrap_or_default(),
                details(&event.r#type, &event.payload),
            ]
        })
        .collect();
    table::print(
        ["SEQ", "TIME", "LEVEL", "TYPE", "INVOCATION", "DETAILS"],
        &rows,
    );
    Ok(())
}

/// `2026-12-03T02:27:09.123Z` → `02:27:09.123`.
fn clock_time(timestamp: &str) -> String {
    timestamp
        .split_once('T')
        .map_or(timestamp, |(_, time)| time.trim_end_matches('Z'))
        .to_owned()
}

/// One line saying what an event records (the journal table, and the live
/// progress of `toolhost run`).
pub fn details(event_type: &str, payload: &Value) -> String {
    let text = |key: &str| payload.get(key).and_then(Value::as_str).unwrap_or("");
    let number = |key: &str| payload.get(key).and_then(Value::as_u64).unwrap_or(0);
    match event_type {
        RunStarted::TYPE => format!("profile {}", text("profileId")),
        RunResumed::TYPE => match payload.get("tornBytes").and_then(Value::as_u64) {
            Some(torn) => format!(
                "after seq {}; cut a torn line of {torn} bytes",
                number("previousSeq")
            ),
            None => format!("after seq {}", number("previousSeq")),
        },
        ContextAssembled::TYPE => {
            let tools: Vec<&str> = payload["snapshot"]["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|tool| tool["alias"].as_str())
                .collect();
            let omitted = payload["diagnostics"].as_array().map_or(0, Vec::len);
            let prompt = &payload["prompt"];
            // What of the app's prompt the first request carries.
            let read = match prompt["source"].as_str() {
                Some(source) if source != "none" => format!(
                    "; prompt from the {source}: {} message(s), {} of {} history, {} chars",
                    prompt["messages"],
                    prompt["historyKept"],
                    prompt["historyTotal"],
                    prompt["chars"]
                ),
                _ => String::new(),
            };
            format!(
                "snapshot {}: {} tool(s) [{}], {omitted} omitted, budget {}{read}",
                text("snapshotId"),
                tools.len(),
                tools.join(", "),
                payload["snapshot"]["maxCallsPerInvocation"]
            )
        }
        ModelRequestCreated::TYPE => format!(
            "round {}: {} tool(s), choice {}",
            number("round"),
            payload["turnContract"]["tools"]
                .as_array()
                .map_or(0, Vec::len),
            payload["turnContract"]["choice"]
        ),
        ToolCallRequested::TYPE => format!(
            "{} call {} args {}",
            text("toolId"),
            text("callId"),
            text("argumentsRef")
        ),
        ToolCallStarted::TYPE => format!("{} call {}", text("toolId"), text("callId")),
        ToolResultStored::TYPE => text("path").to_owned(),
        ToolCallCompleted::TYPE => {
            let fuel = payload["sandbox"]["fuelConsumed"]
                .as_u64()
                .map(|fuel| format!(", {fuel} fuel"))
                .unwrap_or_default();
            format!("{} ok in {} ms{fuel}", text("toolId"), number("elapsedMs"))
        }
        ToolCallFailed::TYPE => {
            let code = payload
                .get("errorCode")
                .or_else(|| payload.get("code"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let message = text("message");
            if message.starts_with(code) {
                format!("{} {}", text("toolId"), first_line(message))
            } else {
                format!("{} {code}: {}", text("toolId"), first_line(message))
            }
        }
        ToolCallUnknown::TYPE => format!(
            "unknown tool `{}` {}, {} of {} calls used",
            first_line(text("name")),
            if payload["charged"] == true {
                "answered"
            } else {
                "refused"
            },
            number("totalUsed"),
            number("totalLimit")
        ),
        ModelCompleted::TYPE => {
            let calls = number("toolCallCount");
            let text_chars = number("assistantTextChars");
            format!(
                "round {}: {calls} tool call(s), {text_chars} chars of text -> {}",
                number("round"),
                text("modelResponsePath")
            )
        }
        ModelCallAttemptFailed::TYPE => format!(
            "attempt {}: {}{}",
            number("attempt"),
            first_line(text("message")),
            if payload["willRetry"] == true {
                " (retrying)"
            } else {
                ""
            }
        ),
        DirectOutputCaptured::TYPE => {
            format!(
                "{} chars without a tool call -> {}",
                number("chars"),
                text("path")
            )
        }
        DriftRecoveryAttempted::TYPE => format!(
            "no tool call in round {}: reminder {} of {}",
            number("round"),
            number("attempt"),
            number("maxAttempts")
        ),
        ContextTrimmed::TYPE => format!(
            "{} results stubbed, {} history messages and {} rounds dropped, {} -> {} chars (budget {})",
            payload["stubbedCalls"].as_array().map_or(0, Vec::len),
            number("droppedHistory"),
            number("droppedRounds"),
            grouped(number("charsBefore")),
            grouped(number("charsAfter")),
            grouped(number("budget"))
        ),
        ChatCommitRequested::TYPE => format!(
            "{} {} ({} chars){}",
            text("mode"),
            text("path"),
            number("chars"),
            if payload["callId"].is_null() {
                ", auto-publish"
            } else {
                ""
            }
        ),
        ChatCommitCompleted::TYPE => format!(
            "{} -> chat message #{} (commit {})",
            text("path"),
            number("messageIndex"),
            number("commitCount")
        ),
        AgentLoopFinished::TYPE => format!(
            "round {}, {} commit(s)",
            number("round"),
            number("commitCount")
        ),
        PersistentChangesCommitted::TYPE => format!("{} persist/ file(s)", number("changeCount")),
        RunPartialSuccess::TYPE => format!(
            "{}: {} ({} commit(s) kept)",
            text("code"),
            first_line(text("message")),
            number("preservedCommitCount")
        ),
        AgentDelegateStarted::TYPE => format!(
            "{} -> {} as {} ({})",
            text("taskId"),
            text("targetProfileId"),
            text("childInvocationId"),
            text("workspaceKey")
        ),
        AgentTaskEnded::TYPE => {
            let error = payload["error"]
                .as_str()
                .map(|error| format!(": {}", first_line(error)))
                .unwrap_or_default();
            format!(
                "{} ({}) {}{error}",
                text("taskId"),
                text("agentId"),
                text("status")
            )
        }
        TaskReturnCompleted::TYPE => format!(
            "{} {} -> {}, {}",
            text("taskId"),
            text("status"),
            text("resultRef"),
            text("summaryRef")
        ),
        AgentAwaitCompleted::TYPE => format!(
            "{} of {} task(s){}",
            text("mode"),
            payload["taskIds"].as_array().map_or(0, Vec::len),
            if payload["timedOut"] == true {
                ", timed out"
            } else {
                ""
            }
        ),
        ChildResultsInjected::TYPE => format!(
            "round {}: {} task result(s) before the next request",
            number("round"),
            payload["taskIds"].as_array().map_or(0, Vec::len)
        ),
        AgentHandoffAccepted::TYPE => format!(
            "-> {} as {} (handoff {})",
            text("targetProfileId"),
            text("newInvocationId"),
            number("depth")
        ),
        RunFailed::TYPE | ChatCommitFailed::TYPE => {
            let message = text("message");
            if message.starts_with(text("code")) {
                first_line(message)
            } else {
                format!("{}: {}", text("code"), first_line(message))
            }
        }
        RunCompleted::TYPE => String::new(),
        _ => {
            let mut compact = payload.clone();
            if let Some(object) = compact.as_object_mut() {
                object.remove("eventScope");
            }
            first_line(&compact.to_string())
        }
    }
}

/// `412003` → `412,003`.
fn grouped(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The first line, at most 100 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    let mut cut: String = line.chars().take(100).collect();
    if cut.len() < line.len() {
        cut.push('…');
    }
    cut
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unknown_tool_call_reads_as_one_line() {
        let line = details(
            ToolCallUnknown::TYPE,
            &json!({"name": "summon_dragon", "charged": true, "totalUsed": 3, "totalLimit": 80}),
        );
        assert_eq!(
            line,
            "unknown tool `summon_dragon` answered, 3 of 80 calls used"
        );
    }

    #[test]
    fn a_trimmed_context_reads_as_one_line() {
        let line = details(
            ContextTrimmed::TYPE,
            &json!({
                "invocationId": "inv_root", "round": 40,
                "stubbedCalls": ["c1", "c2", "c3"], "droppedHistory": 3, "droppedRounds": 2,
                "charsBefore": 412_003, "charsAfter": 99_870, "budget": 100_000
            }),
        );
        assert_eq!(
            line,
            "3 results stubbed, 3 history messages and 2 rounds dropped, 412,003 -> 99,870 chars (budget 100,000)"
        );
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
    }
}
