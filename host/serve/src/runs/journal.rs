//! A run's state as its journal (`events.jsonl`) says, read while the run
//! may be writing it (`toolhost_journal::tail`).

use std::path::Path;

use toolhost_journal::tail::read_from;
use toolhost_runtime::TERMINAL_EVENTS;

/// What a run's journal counts so far: read from the file, or kept live by
/// the server driving the run (told of every event it writes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalCounts {
    pub last_seq: u64,
    /// `chat_commit_completed` events.
    pub commits: usize,
    /// Model requests, over all invocations.
    pub rounds: usize,
    /// Tool calls with a journalled end (`tool_call_completed` or `_failed`).
    pub tool_calls: usize,
    /// Calls asking for approval minus those decided.
    pub pending_approvals: usize,
}

impl JournalCounts {
    /// Count event `seq` of type `event_type`.
    pub fn record(&mut self, seq: u64, event_type: &str) {
        self.last_seq = seq;
        match event_type {
            "chat_commit_completed" => self.commits += 1,
            "model_request_created" => self.rounds += 1,
            "tool_call_completed" | "tool_call_failed" => self.tool_calls += 1,
            "tool_call_approval_requested" => self.pending_approvals += 1,
            "tool_call_approval_decided" => {
                self.pending_approvals = self.pending_approvals.saturating_sub(1)
            }
            _ => {}
        }
    }
}

/// How a run's journal says it is now.
#[derive(Debug, Clone, Default)]
pub struct JournalState {
    pub counts: JournalCounts,
    /// The last terminal event's type (`run_completed`, …), if any.
    pub ended_by: Option<String>,
}

/// Read the whole journal for its state.
pub fn state(path: &Path) -> std::io::Result<JournalState> {
    let mut state = JournalState::default();
    let mut offset = 0;
    loop {
        let read = read_from(path, offset)?;
        if read.lines.is_empty() {
            return Ok(state);
        }
        for line in &read.lines {
            if TERMINAL_EVENTS.contains(&line.event_type.as_str()) {
                state.ended_by = Some(line.event_type.clone());
            }
            state.counts.record(line.seq, &line.event_type);
        }
        offset = read.offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_state_counts_what_the_journal_says() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut file = std::fs::File::create(&path).expect("create");
        for (seq, kind) in [
            (1, "run_started"),
            (2, "model_request_created"),
            (3, "tool_call_approval_requested"),
            (4, "tool_call_completed"),
            (5, "run_completed"),
        ] {
            writeln!(file, r#"{{"seq":{seq},"type":"{kind}","payload":{{}}}}"#).expect("write");
        }
        let state = state(&path).expect("state");
        assert_eq!(state.counts.last_seq, 5);
        assert_eq!(state.ended_by.as_deref(), Some("run_completed"));
        let counts = state.counts;
        assert_eq!(
            (counts.rounds, counts.tool_calls, counts.pending_approvals),
            (1, 1, 1)
        );
    }
}
