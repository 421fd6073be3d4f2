//! A run's state as its journal (`events.jsonl`) says, read while the run
//! may be writing it (`toolhost_journal::tail`), and remembered for runs
//! that ended here ([`EndedRuns`]).

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;

use toolhost_journal::tail::{scan_types, tail_has};
use toolhost_journal::{
    ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested, Event as _, ModelRequestCreated,
    ToolCallApprovalDecided, ToolCallApprovalRequested, ToolCallCompleted, ToolCallFailed,
    ToolCallUnknown,
};
use toolhost_runtime::TERMINAL_EVENTS;

/// What a run's journal counts so far: read from the file, or kept live by
/// the server driving the run (told of every event it writes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JournalCounts {
    pub last_seq: u64,
    /// `chat_commit_completed` events.
    pub commits: usize,
    /// Model turns (`model_request_created`) over all invocations: the
    /// foreground agents', delegated children's, one per direct call.
    pub rounds: usize,
    /// Tool calls with a journalled end (`tool_call_completed` or `_failed`)
    /// and calls under a name the request did not offer (`tool_call_unknown`:
    /// answered, nothing ran), as the loop's summary counts them.
    pub tool_calls: usize,
    /// Calls asking for approval minus those decided.
    pub pending_approvals: usize,
    /// Commits asked of the chat host minus those ended.
    pub pending_commits: usize,
    /// The last terminal event's type (`run_completed`, …), if any.
    pub ended_by: Option<&'static str>,
}

impl JournalCounts {
    /// Count event `seq` of type `event_type`.
    pub fn record(&mut self, seq: u64, event_type: &str) {
        self.last_seq = seq;
        match event_type {
            ChatCommitRequested::TYPE => self.pending_commits += 1,
            ChatCommitCompleted::TYPE => {
                self.commits += 1;
                self.pending_commits = self.pending_commits.saturating_sub(1);
            }
            ChatCommitFailed::TYPE => self.pending_commits = self.pending_commits.saturating_sub(1),
            ModelRequestCreated::TYPE => self.rounds += 1,
            ToolCallCompleted::TYPE | ToolCallFailed::TYPE | ToolCallUnknown::TYPE => {
                self.tool_calls += 1
            }
            ToolCallApprovalRequested::TYPE => self.pending_approvals += 1,
            ToolCallApprovalDecided::TYPE => {
                self.pending_approvals = self.pending_approvals.saturating_sub(1)
            }
            _ => {
                if let Some(terminal) = TERMINAL_EVENTS.iter().find(|end| **end == event_type) {
                    self.ended_by = Some(terminal);
                    // An ended run waits for no commit (a cancel drops the wait).
                    self.pending_commits = 0;
                }
            }
        }
    }
}

/// Read the whole journal for its counts.
pub fn state(path: &Path) -> std::io::Result<JournalCounts> {
    let mut counts = JournalCounts::default();
    let mut offset = 0;
    loop {
        let next = scan_types(path, offset, |seq, event_type| {
            counts.record(seq, event_type)
        })?;
        if next == offset {
            return Ok(counts);
        }
        offset = next;
    }
}

/// How much of a journal's end [`has_ended`] looks at before a whole pass.
const END_WINDOW_BYTES: u64 = 64 * 1024;

/// Whether the journal at `path` has a terminal event. Its end is looked
/// at first: an ended run's terminal event is among its last lines unless
/// many direct calls followed it, so a server starting over thousands of
/// runs reads a window of each, and reads whole only the runs that did
/// not end (interrupted: resumed or listed) and the few with a long tail.
pub fn has_ended(path: &Path) -> std::io::Result<bool> {
    if tail_has(path, END_WINDOW_BYTES, |event_type| {
        TERMINAL_EVENTS.contains(&event_type)
    })? {
        return Ok(true);
    }
    Ok(state(path)?.ended_by.is_some())
}

/// How many ended runs [`EndedRuns`] remembers; the oldest goes first.
pub const ENDED_RUNS_KEPT: usize = 4096;

/// The final counts of runs whose loop ended here, each with its journal's
/// length at that moment. A client that polls a run reads its status once
/// more after the end, and `GET /v1/runs` lists ended runs: without this,
/// each such read is a pass over the whole journal. A remembered state is
/// used only while the journal has that length — a terminal run is never
/// resumed, but a direct call (`/calls`, `toolhost call --run-dir`)
/// appends to it — so a changed journal is read again.
#[derive(Debug, Default)]
pub struct EndedRuns {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    order: VecDeque<(String, String)>,
    runs: HashMap<(String, String), (JournalCounts, u64)>,
}

impl EndedRuns {
    /// Remember `counts` of `tenant`'s run `id`, whose journal is
    /// `journal_len` bytes long with them.
    pub fn keep(&self, tenant: &str, id: &str, counts: JournalCounts, journal_len: u64) {
        let key = (tenant.to_owned(), id.to_owned());
        let mut kept = self.lock();
        if kept
            .runs
            .insert(key.clone(), (counts, journal_len))
            .is_none()
        {
            kept.order.push_back(key);
        }
        while kept.runs.len() > ENDED_RUNS_KEPT {
            let Some(oldest) = kept.order.pop_front() else {
                break;
            };
            kept.runs.remove(&oldest);
        }
    }

    /// The counts of the journal at `path` (`tenant`'s run `id`): the
    /// remembered ones while the file has their length, else read whole.
    /// A remembered run whose journal grew (a direct call after its end) is
    /// read whole once and remembered again with its new length, when
    /// nothing was appended during the read.
    pub fn state(&self, tenant: &str, id: &str, path: &Path) -> std::io::Result<JournalCounts> {
        let remembered = self
            .lock()
            .runs
            .get(&(tenant.to_owned(), id.to_owned()))
            .copied();
        let Some((counts, journal_len)) = remembered else {
            return state(path);
        };
        let length = || std::fs::metadata(path).map(|meta| meta.len());
        let before = length()?;
        if before == journal_len {
            return Ok(counts);
        }
        let counts = state(path)?;
        if counts.ended_by.is_some() && length().is_ok_and(|after| after == before) {
            self.keep(tenant, id, counts, before);
        }
        Ok(counts)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // Each change leaves the maps whole: a panic elsewhere cannot have
        // left them half-written.
        self.kept
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use toolhost_journal::{RunCompleted, RunResumed, RunStarted, ToolCallRequested};

    #[test]
    fn the_state_counts_what_the_journal_says() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut file = std::fs::File::create(&path).expect("create");
        for (seq, kind) in [
            (1, RunStarted::TYPE),
            (2, ModelRequestCreated::TYPE),
            (3, ToolCallApprovalRequested::TYPE),
            (4, ToolCallCompleted::TYPE),
            // An invented name counts as the summary counts it.
            (5, ToolCallUnknown::TYPE),
            (6, RunCompleted::TYPE),
        ] {
            writeln!(file, r#"{{"seq":{seq},"type":"{kind}","payload":{{}}}}"#).expect("write");
        }
        let counts = state(&path).expect("state");
        assert_eq!(counts.last_seq, 6);
        assert_eq!(counts.ended_by, Some(RunCompleted::TYPE));
        assert_eq!(
            (counts.rounds, counts.tool_calls, counts.pending_approvals),
            (1, 2, 1)
        );
    }

    /// The remembered counts stand for the file only while it has their
    /// length: an appended line makes the next read read it.
    #[test]
    fn an_ended_run_is_remembered_while_its_journal_keeps_its_length() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let line =
            |seq: u64, kind: &str| format!(r#"{{"seq":{seq},"type":"{kind}","payload":{{}}}}"#);
        let ended = format!(
            "{}\n{}\n",
            line(1, RunStarted::TYPE),
            line(2, RunCompleted::TYPE)
        );
        std::fs::write(&path, &ended).expect("write");
        let read = state(&path).expect("state");
        let ended_runs = EndedRuns::default();
        // Remembered with a count the file does not have: what answers
        // shows which was used.
        let remembered = JournalCounts { commits: 7, ..read };
        ended_runs.keep("acme", "run_1", remembered, ended.len() as u64);
        assert_eq!(
            ended_runs.state("acme", "run_1", &path).expect("state"),
            remembered
        );
        assert_eq!(
            ended_runs.state("globex", "run_1", &path).expect("state"),
            read
        );
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        writeln!(file, "{}", line(3, ToolCallCompleted::TYPE)).expect("append");
        let after = ended_runs.state("acme", "run_1", &path).expect("state");
        assert_eq!((after.commits, after.tool_calls, after.last_seq), (0, 1, 3));
        // Remembered again at the new length: the same length with other
        // lines still answers the counts read then.
        let grown = std::fs::read_to_string(&path).expect("read");
        std::fs::write(
            &path,
            grown.replace(ToolCallCompleted::TYPE, ToolCallRequested::TYPE),
        )
        .expect("rewrite");
        assert_eq!(
            std::fs::metadata(&path).expect("meta").len(),
            grown.len() as u64
        );
        assert_eq!(
            ended_runs.state("acme", "run_1", &path).expect("state"),
            after
        );
    }

    #[test]
    fn the_ended_runs_kept_are_bounded_oldest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, "").expect("write");
        let ended_runs = EndedRuns::default();
        let marked = JournalCounts {
            commits: 1,
            ..JournalCounts::default()
        };
        for index in 0..=ENDED_RUNS_KEPT {
            ended_runs.keep("acme", &format!("run_{index}"), marked, 0);
        }
        assert_eq!(ended_runs.lock().runs.len(), ENDED_RUNS_KEPT);
        assert_eq!(
            ended_runs.state("acme", "run_0", &path).expect("state"),
            JournalCounts::default()
        );
        assert_eq!(
            ended_runs
                .state("acme", &format!("run_{ENDED_RUNS_KEPT}"), &path)
                .expect("state"),
            marked
        );
    }

    /// Ended is ended however far back the terminal event is; a run
    /// resumed and not ended again is not.
    #[test]
    fn has_ended_looks_at_the_end_first_and_reads_whole_when_it_must() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        fn push(text: &mut String, seq: u64, kind: &str) {
            text.push_str(&format!(
                r#"{{"seq":{seq},"type":"{kind}","payload":{{}}}}"#
            ));
            text.push('\n');
        }
        let mut text = String::new();
        push(&mut text, 1, RunStarted::TYPE);
        push(&mut text, 2, ToolCallCompleted::TYPE);
        std::fs::write(&path, &text).expect("write");
        assert!(!has_ended(&path).expect("ended"));
        push(&mut text, 3, RunCompleted::TYPE);
        // Direct calls after the end: far more than the window.
        push(&mut text, 4, RunResumed::TYPE);
        let mut seq = 5;
        while text.len() <= 2 * END_WINDOW_BYTES as usize {
            push(&mut text, seq, ToolCallCompleted::TYPE);
            seq += 1;
        }
        std::fs::write(&path, &text).expect("write");
        assert!(has_ended(&path).expect("ended"));
    }
}
