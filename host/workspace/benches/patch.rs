//! `make bench` (part 5): the two `apply_patch` attacks of the hardening
//! review, host side, timed and with their peak allocation, each against a
//! fresh fully-read file:
//!
//! - `replace_all` over the cap: a 20,000-char file, `old_string: "a"`, a
//!   50,000-char `new_string` (it used to build ~1 GB before refusing);
//! - a 100,000-char `old_string` against a 4 MB file of the same byte (it
//!   used to restart a search after each of ~4M overlapping matches, past
//!   120 s in one host call);
//!
//! and, for scale, a legitimate `replace_all` of 100,000 matches in a 1 MB
//! file. Output is Markdown, ready for docs/benchmarks.md.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use toolhost_workspace::{Workspace, WorkspaceLimits, WorkspaceRoots, WorkspaceSession};

/// Counts live bytes and their peak while `TRACKING` is set (the bench is
/// single-threaded).
struct Counting;

static TRACKING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if TRACKING.load(Ordering::Relaxed) && !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        if TRACKING.load(Ordering::Relaxed) {
            let _ = LIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                Some(live.saturating_sub(layout.size()))
            });
        }
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const RUNS: usize = 9;
const PATH: &str = "output/big.md";

struct Case {
    name: &'static str,
    text: String,
    old: String,
    new: String,
    replace_all: bool,
}

/// One patch of `case` against a fresh, fully read copy: its time and the
/// peak of bytes allocated during it.
fn measure(case: &Case) -> (Duration, usize, String) {
    let temp = tempfile::tempdir().expect("tempdir");
    for dir in ["output", ".tmp"] {
        std::fs::create_dir_all(temp.path().join(dir)).expect("dir");
    }
    std::fs::write(temp.path().join(PATH), &case.text).expect("file");
    let workspace = Workspace::open(
        temp.path(),
        WorkspaceRoots::default_run(),
        WorkspaceLimits::default(),
    )
    .expect("workspace");
    let session = WorkspaceSession::new(Arc::new(workspace));
    let file = session.read_text(PATH).expect("read");
    session
        .record_read(PATH, &file.sha256, None)
        .expect("record");
    drop(file);
    LIVE.store(0, Ordering::SeqCst);
    PEAK.store(0, Ordering::SeqCst);
    TRACKING.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let result = session.patch(PATH, &case.old, &case.new, case.replace_all);
    let elapsed = started.elapsed();
    TRACKING.store(false, Ordering::SeqCst);
    let outcome = match result {
        Ok(patched) => format!("patched, {} replacements", patched.replacements),
        Err(error) => error.code().to_owned(),
    };
    (elapsed, PEAK.load(Ordering::SeqCst), outcome)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    let cases = [
        Case {
            name: "replace_all over the cap: 20k file, old `a`, 50k new",
            text: "a".repeat(20_000),
            old: "a".into(),
            new: "b".repeat(50_000),
            replace_all: true,
        },
        Case {
            name: "100k-char old_string, 4 MB file of the same byte",
            text: "a".repeat(4 * 1024 * 1024),
            old: "a".repeat(100_000),
            new: "b".into(),
            replace_all: false,
        },
        Case {
            name: "replace_all, 100,000 matches in a 1 MB file (legitimate)",
            text: "lantern ".repeat(100_000) + &"x".repeat(1024 * 1024 - 800_000),
            old: "lantern".into(),
            new: "lamp".into(),
            replace_all: true,
        },
    ];
    println!("| case | outcome | median time | peak allocation |");
    println!("|---|---|---|---|");
    for case in &cases {
        let mut times = Vec::new();
        let mut peak = 0;
        let mut outcome = String::new();
        for _ in 0..RUNS {
            let (elapsed, bytes, said) = measure(case);
            times.push(elapsed);
            peak = peak.max(bytes);
            outcome = said;
        }
        println!(
            "| {} | {outcome} | {:.2} ms | {:.2} MiB |",
            case.name,
            median(times).as_secs_f64() * 1e3,
            peak as f64 / (1024.0 * 1024.0)
        );
    }
    eprintln!("({RUNS} runs each; time is the median, allocation the largest peak)");
}
