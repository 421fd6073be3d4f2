//! Crash points for the crash tests: with `TOOLHOST_CRASH_AT=POINT` (or
//! `POINT#N`, its N-th hit) in the environment the process kills itself
//! with `SIGKILL` there — no destructor, no flush, exactly what a crash or
//! `kill -9` leaves. Points: `event:SEQ` (right after journal event SEQ was
//! appended), `chat_committed` (a commit's chat write done, its journal
//! event not yet), `write_intent` (a write's intent recorded, the file not
//! changed yet), `persist_projected` (one file of the chat's persist
//! directory copied into the run, the others not), `persist_promoted` (half-way through a promotion: one
//! file renamed into the chat's directory, the others not), `chat_commit`
//! (a commit requested in the journal, the chat host not yet asked). With
//! `stop:POINT` the process stops itself there (`SIGSTOP`) instead, as a
//! node stalled at the worst moment would, until a `SIGCONT`. Without the
//! variable a hit is one atomic load.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable the crash tests set.
pub const CRASH_AT_VARIABLE: &str = "TOOLHOST_CRASH_AT";

struct Target {
    point: String,
    nth: u64,
    hits: AtomicU64,
    /// Stop (`SIGSTOP`) rather than die.
    stop: bool,
}

fn target() -> Option<&'static Target> {
    static TARGET: OnceLock<Option<Target>> = OnceLock::new();
    TARGET
        .get_or_init(|| {
            let value = std::env::var(CRASH_AT_VARIABLE).ok()?;
            let (value, stop) = match value.strip_prefix("stop:") {
                Some(point) => (point.to_owned(), true),
                None => (value, false),
            };
            let (point, nth) = match value.split_once('#') {
                Some((point, nth)) => (point.to_owned(), nth.parse().ok()?),
                None => (value, 1),
            };
            Some(Target {
                point,
                nth,
                hits: AtomicU64::new(0),
                stop,
            })
        })
        .as_ref()
}

/// Die here if this is the point the environment names.
pub fn hit(point: &str) {
    if let Some(target) = target()
        && target.point == point
        && target.hits.fetch_add(1, Ordering::SeqCst) + 1 == target.nth
    {
        if target.stop {
            stop_here();
        } else {
            die();
        }
    }
}

/// Die here if journal event `seq` is the one the environment names.
pub fn hit_event(seq: u64) {
    if let Some(target) = target()
        && target.point.strip_prefix("event:") == Some(seq.to_string().as_str())
    {
        die();
    }
}

/// Stop the whole process with this thread stopped right here; it goes on
/// when someone sends SIGCONT. `kill(getpid(), SIGSTOP)` is not enough: a
/// process-directed signal may be taken by another thread, and this one runs
/// on for a moment — far enough, once in a few runs, to take the chat's lock
/// it was to stop before. A thread-directed signal is taken by this thread
/// on its way back from the call, before it runs another instruction.
fn stop_here() {
    // SAFETY: raise(3) only sends a signal to the calling thread (tgkill);
    // it touches no memory of ours.
    let _ = unsafe { libc::raise(libc::SIGSTOP) };
}

fn die() {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    // SIGKILL cannot be caught; should it not arrive, abort is the next best.
    std::process::abort();
}
