//! `apply_patch` with arguments a hostile model picks: the host's work is
//! linear and it allocates nothing beyond the file cap, asserted with a
//! counting allocator and the call's work meter, never a clock.
//!
//! The review's reproductions: a 20k-char file, `old_string: "a"` and a
//! 50k-char `new_string` with `replace_all` built ~1 GB before refusing it;
//! a 100k-char `old_string` against a 4 MB file restarted a search after
//! each of millions of overlapping matches (over 120 s in one host call).

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Fixture;
use proptest::prelude::*;
use toolhost_core::WorkMeter;
use toolhost_workspace::{WorkspaceError, WorkspaceSession, codes};

/// Counts live bytes and their peak on the thread that set `TRACKING`
/// (other tests run on other threads meanwhile).
struct Counting;

thread_local! {
    static TRACKING: Cell<bool> = const { Cell::new(false) };
}

fn tracking() -> bool {
    TRACKING.try_with(Cell::get).unwrap_or(false)
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if tracking() && !pointer.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        if tracking() {
            let _ = LIVE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |live| {
                Some(live.saturating_sub(layout.size()))
            });
        }
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One measured section at a time (the test harness runs tests on threads).
static MEASURING: Mutex<()> = Mutex::new(());

/// The peak of bytes allocated (and not yet freed) while `f` ran.
fn peak_allocated<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    LIVE.store(0, Ordering::SeqCst);
    PEAK.store(0, Ordering::SeqCst);
    TRACKING.with(|on| on.set(true));
    let result = f();
    TRACKING.with(|on| on.set(false));
    (result, PEAK.load(Ordering::SeqCst))
}

const PATH: &str = "output/big.md";

fn fully_read(fixture: &Fixture, text: &str) -> WorkspaceSession {
    fixture.write(PATH, text);
    let session = fixture.session();
    let file = session.read_text(PATH).unwrap();
    session.record_read(PATH, &file.sha256, None).unwrap();
    session
}

fn recoverable_code<T: std::fmt::Debug>(result: Result<T, WorkspaceError>) -> &'static str {
    let error = result.expect_err("expected an error");
    assert!(error.is_recoverable(), "{error}");
    error.code()
}

#[test]
fn replace_all_over_the_cap_is_refused_before_building_it() {
    let fixture = Fixture::new();
    let text = "a".repeat(20_000);
    let session = fully_read(&fixture, &text);
    let new = "b".repeat(50_000);
    // 20,000 × 50,000 bytes = 1 GB if built.
    let (result, peak) = peak_allocated(|| session.patch(PATH, "a", &new, true));
    assert_eq!(recoverable_code(result), codes::FILE_TOO_LARGE);
    // The file is read once (20 KB) and nothing of the result is built.
    assert!(peak < 1024 * 1024, "peak allocation {peak} bytes");
    assert_eq!(fixture.read(PATH), text, "the file is unchanged");
}

#[test]
fn replace_all_within_the_cap_allocates_about_the_result() {
    let fixture = Fixture::new();
    let text = "ab".repeat(100_000);
    let session = fully_read(&fixture, &text);
    let ((), peak) = peak_allocated(|| {
        let patched = session.patch(PATH, "a", "xyz", true).unwrap();
        assert_eq!(patched.replacements, 100_000);
    });
    let result_len = 100_000 * 4;
    // The file read, the result, the atomic write's copy: a small multiple.
    assert!(peak < 4 * result_len + 256 * 1024, "peak {peak} bytes");
    assert_eq!(fixture.read(PATH), "xyzb".repeat(100_000));
}

#[test]
fn a_long_self_overlapping_old_string_is_decided_in_linear_work() {
    let fixture = Fixture::new();
    let text = "a".repeat(4 * 1024 * 1024);
    let session = fully_read(&fixture, &text);
    let old = "a".repeat(100_000);
    let meter = WorkMeter::unbounded();
    let result = session.patch_metered(PATH, &old, "b", false, &meter);
    assert_eq!(recoverable_code(result), codes::PATCH_OLD_STRING_NOT_UNIQUE);
    let linear = 2 * (text.len() + old.len()) as u64;
    assert!(
        meter.spent() <= linear,
        "{} units of work, more than {linear}",
        meter.spent()
    );
}

#[test]
fn not_unique_names_the_lines_of_the_first_two_occurrences() {
    let fixture = Fixture::new();
    let session = fully_read(&fixture, "one\nbeta\ntwo\nbeta\n");
    let error = session.patch(PATH, "beta", "gamma", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_OLD_STRING_NOT_UNIQUE);
    assert!(error.message().contains("lines 2 and 4"), "{error}");
    let error = session.patch(PATH, "e", "E", false).unwrap_err();
    assert!(error.message().contains("lines 1 and 2"), "{error}");
}

#[test]
fn a_passed_deadline_stops_the_patch_and_leaves_the_file() {
    let fixture = Fixture::new();
    let text = "ab".repeat(1024 * 1024);
    let session = fully_read(&fixture, &text);
    let meter = WorkMeter::until(Instant::now() - Duration::from_millis(1));
    let error = session
        .patch_metered(PATH, "a", "c", true, &meter)
        .unwrap_err();
    assert!(
        matches!(error, WorkspaceError::DeadlinePassed(_)),
        "{error}"
    );
    assert_eq!(fixture.read(PATH), text);
}

// ---- generated patches ---------------------------------------------------

/// What a patch should do, computed the obvious (quadratic) way.
#[derive(Debug, PartialEq)]
enum Expected {
    Refused(&'static str),
    Patched { text: String, replacements: u64 },
}

fn reference(text: &str, old: &str, new: &str, replace_all: bool, cap: usize) -> Expected {
    if old.is_empty() {
        return Expected::Refused(codes::PATCH_EMPTY_OLD_STRING);
    }
    if old == new {
        return Expected::Refused(codes::PATCH_NO_CHANGE);
    }
    let (patched, replacements) = if replace_all {
        let found = text.matches(old).count() as u64;
        if found == 0 {
            return Expected::Refused(codes::PATCH_OLD_STRING_NOT_FOUND);
        }
        (text.replace(old, new), found)
    } else {
        // Overlapping occurrences count: every char boundary is a start.
        let starts = text
            .char_indices()
            .filter(|(at, _)| text[*at..].starts_with(old))
            .count();
        match starts {
            0 => return Expected::Refused(codes::PATCH_OLD_STRING_NOT_FOUND),
            1 => (text.replacen(old, new, 1), 1),
            _ => return Expected::Refused(codes::PATCH_OLD_STRING_NOT_UNIQUE),
        }
    };
    if patched.len() > cap {
        return Expected::Refused(codes::FILE_TOO_LARGE);
    }
    Expected::Patched {
        text: patched,
        replacements,
    }
}

/// Few distinct characters (ASCII, a newline, a CJK and a combining one),
/// so matches and overlaps are common.
fn small_text(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec!['a', 'b', '\n', '日', 'é']),
        0..max,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    /// Over random files and strings: the same answer as the reference, the
    /// file changed only when patched, work linear in the file and the
    /// strings (the meter), memory a small multiple of file and result.
    #[test]
    fn patches_match_the_reference_in_bounded_work_and_memory(
        text in small_text(300),
        old in small_text(5),
        new in small_text(5),
        replace_all in any::<bool>(),
        cap in prop_oneof![Just(8 * 1024 * 1024_usize), 0..400_usize],
    ) {
        let limits = toolhost_workspace::WorkspaceLimits {
            max_file_bytes: cap.max(text.len()) as u64,
            ..toolhost_workspace::WorkspaceLimits::default()
        };
        let fixture = Fixture::with_limits(limits.clone());
        let session = fully_read(&fixture, &text);
        let meter = WorkMeter::unbounded();
        let (result, peak) = peak_allocated(|| {
            session.patch_metered(PATH, &old, &new, replace_all, &meter)
        });
        let expected = reference(&text, &old, &new, replace_all, limits.max_file_bytes as usize);
        let on_disk = fixture.read(PATH);
        match (&expected, result) {
            (Expected::Refused(code), Err(error)) => {
                prop_assert_eq!(error.code(), *code, "{}", error);
                prop_assert_eq!(&on_disk, &text);
            }
            (Expected::Patched { text: patched, replacements }, Ok(done)) => {
                prop_assert_eq!(&on_disk, patched);
                prop_assert_eq!(done.replacements, *replacements);
            }
            (expected, got) => prop_assert!(false, "expected {:?}, got {:?}", expected, got),
        }
        let result_len = match &expected {
            Expected::Patched { text, .. } => text.len(),
            Expected::Refused(_) => 0,
        };
        let linear = 2 * (text.len() + old.len()) + result_len + new.len();
        prop_assert!(meter.spent() <= linear as u64, "{} units > {}", meter.spent(), linear);
        prop_assert!(
            peak <= 4 * (text.len() + result_len) + 64 * 1024,
            "peak {} bytes for a {}-byte file", peak, text.len()
        );
    }
}
