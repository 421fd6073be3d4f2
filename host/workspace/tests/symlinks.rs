//! Symlinks planted in the workspace: every read, write, list and walk
//! through one is the System error `workspace.symlink_found`, and nothing
//! outside (or anything else) changes.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::Fixture;
use toolhost_workspace::{WorkspaceError, WriteGuard, WriteMode, codes};

fn expect_symlink<T: std::fmt::Debug>(result: Result<T, WorkspaceError>, what: &str) {
    match result {
        Ok(value) => panic!("{what}: expected workspace.symlink_found, got Ok({value:?})"),
        Err(error) => {
            assert_eq!(error.code(), codes::SYMLINK_FOUND, "{what}: {error}");
            assert!(error.is_system(), "{what}: {error}");
        }
    }
}

/// Plant `link` → `target`, then try everything through `through` (a file
/// path whose resolution meets the link) and listing `listed`.
fn assert_all_refused(plant: impl FnOnce(&Fixture), through: &str, listed: &str) {
    let fixture = Fixture::new();
    plant(&fixture);
    let before = fixture.snapshot();
    let session = fixture.session();
    let what = |op: &str| format!("{op} {through}");
    expect_symlink(fixture.workspace.read_text(through), &what("read"));
    expect_symlink(
        session.record_read(through, &"0".repeat(64), None),
        &what("record_read"),
    );
    expect_symlink(
        session.write(through, "pwned", WriteMode::Replace),
        &what("replace"),
    );
    expect_symlink(
        session.write(through, "pwned", WriteMode::Append),
        &what("append"),
    );
    expect_symlink(
        fixture
            .workspace
            .write_text(through, "pwned", WriteGuard::Unchecked),
        &what("write_text"),
    );
    for path in [listed, "", "."] {
        expect_symlink(
            fixture.workspace.list(path, 4, 200),
            &format!("list {path:?}"),
        );
        expect_symlink(
            fixture.workspace.walk_files(path, 8, 5000),
            &format!("walk {path:?}"),
        );
    }
    // A patch needs a read-state first, which no read through a link gives.
    let error = session.patch(through, "a", "b", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_REQUIRES_READ);
    assert_eq!(fixture.snapshot(), before, "something changed");
    assert!(fixture.temp_files().is_empty());
    assert_eq!(
        fs::read_to_string(fixture.outside.join("sentinel.txt")).unwrap(),
        "sentinel\n"
    );
}

#[test]
fn a_link_to_a_file_outside() {
    assert_all_refused(
        |f| symlink(f.outside.join("sentinel.txt"), f.path("output/link.md")).unwrap(),
        "output/link.md",
        "output",
    );
}

#[test]
fn a_relative_link_climbing_out() {
    assert_all_refused(
        |f| symlink("../../outside/sentinel.txt", f.path("output/link.md")).unwrap(),
        "output/link.md",
        "output",
    );
}

#[test]
fn a_link_to_a_directory_outside() {
    assert_all_refused(
        |f| symlink(f.outside.join("dir"), f.path("output/linkdir")).unwrap(),
        "output/linkdir/inner.txt",
        "output/linkdir",
    );
}

#[test]
fn a_new_file_under_a_linked_directory() {
    assert_all_refused(
        |f| symlink(f.outside.join("dir"), f.path("output/linkdir")).unwrap(),
        "output/linkdir/new.md",
        "output",
    );
}

#[test]
fn a_link_to_a_file_inside() {
    assert_all_refused(
        |f| {
            f.write("output/real.md", "real");
            symlink(f.path("output/real.md"), f.path("output/alias.md")).unwrap();
        },
        "output/alias.md",
        "output",
    );
}

#[test]
fn a_link_to_a_hidden_file_inside() {
    assert_all_refused(
        |f| symlink("../run.json", f.path("output/manifest.json")).unwrap(),
        "output/manifest.json",
        "output",
    );
}

#[test]
fn a_symlink_loop() {
    assert_all_refused(
        |f| {
            symlink("loop_b", f.path("output/loop_a")).unwrap();
            symlink("loop_a", f.path("output/loop_b")).unwrap();
        },
        "output/loop_a",
        "output",
    );
}

#[test]
fn a_dangling_link() {
    assert_all_refused(
        |f| symlink(f.outside.join("missing.md"), f.path("output/dangling.md")).unwrap(),
        "output/dangling.md",
        "output",
    );
}

#[test]
fn a_link_as_an_intermediate_directory() {
    assert_all_refused(
        |f| {
            fs::create_dir_all(f.outside.join("dir/deeper")).unwrap();
            fs::write(f.outside.join("dir/deeper/x.md"), "x").unwrap();
            fs::create_dir_all(f.path("scratch/a")).unwrap();
            symlink(f.outside.join("dir"), f.path("scratch/a/mid")).unwrap();
        },
        "scratch/a/mid/deeper/x.md",
        "scratch",
    );
}

#[test]
fn a_root_that_is_a_link() {
    assert_all_refused(
        |f| {
            fs::remove_dir(f.path("persist")).unwrap();
            symlink(f.outside.join("dir"), f.path("persist")).unwrap();
        },
        "persist/inner.txt",
        "persist",
    );
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let fixture = Fixture::new();
    let fifo = fixture.path("output/pipe");
    let status = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !status.is_ok_and(|status| status.success()) {
        eprintln!("mkfifo unavailable; skipping");
        return;
    }
    expect_symlink(fixture.workspace.read_text("output/pipe"), "read fifo");
    expect_symlink(fixture.workspace.list("output", 2, 10), "list fifo");
    expect_symlink(
        fixture
            .session()
            .write("output/pipe", "x", WriteMode::Append),
        "append fifo",
    );
}

#[test]
fn a_linked_tmp_dir_is_refused() {
    let fixture = Fixture::new();
    fs::remove_dir(fixture.path(".tmp")).unwrap();
    symlink(fixture.outside.join("dir"), fixture.path(".tmp")).unwrap();
    let before = common::snapshot(&fixture.outside);
    expect_symlink(
        fixture
            .session()
            .write("output/new.md", "x", WriteMode::Replace),
        "write with a linked .tmp",
    );
    assert_eq!(common::snapshot(&fixture.outside), before);
    assert!(!fixture.path("output/new.md").exists());
}

#[test]
fn a_link_swapped_in_after_a_read_stops_the_patch() {
    let fixture = Fixture::new();
    fixture.write("output/a.md", "hello world");
    let session = fixture.session();
    let file = session.read_text("output/a.md").unwrap();
    session
        .record_read("output/a.md", &file.sha256, None)
        .unwrap();
    fs::remove_file(fixture.path("output/a.md")).unwrap();
    symlink(
        fixture.outside.join("sentinel.txt"),
        fixture.path("output/a.md"),
    )
    .unwrap();
    expect_symlink(session.patch("output/a.md", "hello", "bye", false), "patch");
    expect_symlink(
        session.write("output/a.md", "bye", WriteMode::Replace),
        "replace",
    );
    assert_eq!(
        fs::read_to_string(fixture.outside.join("sentinel.txt")).unwrap(),
        "sentinel\n"
    );
}

/// A directory swapped for a symlink to the outside, over and over, while
/// files are written into it: every write lands inside the run or fails
/// with `workspace.symlink_found`; nothing is ever written outside.
#[test]
fn a_directory_swapped_for_a_link_while_writing_never_leaks() {
    let fixture = Fixture::new();
    fs::create_dir_all(fixture.path("output/d")).unwrap();
    let target = fixture.outside.join("dir");
    let before = common::snapshot(&fixture.outside);
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let d = fixture.path("output/d");
        let real = fixture.path("output/d_real");
        let target = target.clone();
        thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if fs::rename(&d, &real).is_ok() {
                    if symlink(&target, &d).is_ok() {
                        swaps += 1;
                        thread::yield_now();
                        let _ = fs::remove_file(&d);
                    }
                    // Fails when a writer re-created `d` meanwhile: keep both.
                    let _ = fs::rename(&real, &d);
                }
                // Leave the real directory in place a little, so that writes
                // both succeed and get refused.
                thread::sleep(std::time::Duration::from_micros(200));
            }
            swaps
        })
    };
    let mut written = 0;
    let mut refused = 0;
    for index in 0..400 {
        thread::sleep(std::time::Duration::from_micros(50));
        let path = format!("output/d/f{index}.md");
        match fixture
            .workspace
            .write_text(&path, "payload", WriteGuard::Unchecked)
        {
            Ok(_) => written += 1,
            Err(error) => {
                assert_eq!(error.code(), codes::SYMLINK_FOUND, "{error}");
                assert!(error.is_system());
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    eprintln!("{written} written, {refused} refused, {swaps} swaps");
    assert_eq!(common::snapshot(&fixture.outside), before, "wrote outside");
    assert!(fixture.temp_files().is_empty());
    // Whatever was acknowledged is inside the run.
    let inside = count_files(&fixture.path("output"));
    assert!(inside >= written, "{inside} < {written}");
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                count_files(&entry.path())
            } else {
                usize::from(kind.is_file())
            }
        })
        .sum()
}
