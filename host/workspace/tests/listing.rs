//! `list` and `walk_files`: order, depth, limits, and what is never shown.

mod common;

use std::fs;
use std::os::unix::ffi::OsStrExt;

use common::{Fixture, listed_paths, roots_then};
use toolhost_workspace::{EntryKind, WorkspaceLimits, codes};

fn tree() -> Fixture {
    let fixture = Fixture::new();
    fixture.write("output/main.md", "main");
    fixture.write("output/b/one.md", "1");
    fixture.write("output/a/two.md", "22");
    fixture.write("output/a/deep/er/three.md", "333");
    fixture.write("output/a/deep/er/est/four.md", "4444");
    fixture
}

#[test]
fn directories_first_then_by_path_with_depth() {
    let fixture = tree();
    let listing = fixture.workspace.list("output", 1, 200).unwrap();
    assert_eq!(
        listed_paths(&listing),
        ["output/a", "output/b", "output/main.md"]
    );
    assert!(!listing.truncated);
    let main = &listing.entries[2];
    assert_eq!((main.kind, main.bytes), (EntryKind::File, 4));
    assert_eq!(listing.entries[0].kind, EntryKind::Directory);

    let listing = fixture.workspace.list("output/", 2, 200).unwrap();
    assert_eq!(
        listed_paths(&listing),
        [
            "output/a",
            "output/a/deep",
            "output/b",
            "output/a/two.md",
            "output/b/one.md",
            "output/main.md"
        ]
    );
    // Depth is clamped to 4.
    let four = fixture.workspace.list("output", 4, 200).unwrap();
    let nine = fixture.workspace.list("output", 9, 200).unwrap();
    assert_eq!(four, nine);
    assert!(listed_paths(&four).contains(&"output/a/deep/er/three.md"));
    assert!(!listed_paths(&four).contains(&"output/a/deep/er/est/four.md"));
    // Depth 0 is clamped to 1.
    assert_eq!(
        fixture.workspace.list("output", 0, 200).unwrap(),
        fixture.workspace.list("output", 1, 200).unwrap()
    );
}

#[test]
fn the_limit_truncates_after_sorting() {
    let fixture = tree();
    let listing = fixture.workspace.list("output", 2, 2).unwrap();
    assert_eq!(listed_paths(&listing), ["output/a", "output/a/deep"]);
    assert!(listing.truncated);
    let exact = fixture.workspace.list("output", 1, 3).unwrap();
    assert!(!exact.truncated);
}

#[test]
fn hidden_entries_never_take_a_place_under_the_limit() {
    let fixture = Fixture::new();
    for index in 0..300 {
        fixture.write(&format!("tool-args/call_{index:03}.json"), "{}");
        fixture.write(&format!("input/x{index:03}"), "{}");
    }
    fs::remove_file(fixture.path("tool-results/call_1.json")).unwrap();
    fixture.write("output/a.md", "a");
    fixture.write("scratch/b.md", "b");
    let listing = fixture.workspace.list("", 2, 8).unwrap();
    assert_eq!(
        listed_paths(&listing),
        roots_then(&["output/a.md", "scratch/b.md"])
    );
    assert!(!listing.truncated);
}

#[test]
fn a_file_path_lists_the_file_and_missing_roots_are_skipped() {
    let fixture = tree();
    let listing = fixture.workspace.list("output/main.md", 2, 10).unwrap();
    assert_eq!(listed_paths(&listing), ["output/main.md"]);
    fs::remove_dir(fixture.path("plan")).unwrap();
    let listing = fixture.workspace.list("", 1, 200).unwrap();
    assert!(!listed_paths(&listing).contains(&"plan"));
    assert_eq!(
        fixture.workspace.list("plan", 1, 10).unwrap_err().code(),
        codes::PATH_NOT_FOUND
    );
}

#[test]
fn walk_files_lists_files_only_with_depth_and_count_limits() {
    let fixture = tree();
    let walked = fixture.workspace.walk_files("output", 8, 5000).unwrap();
    assert_eq!(
        listed_paths(&walked),
        [
            "output/a/deep/er/est/four.md",
            "output/a/deep/er/three.md",
            "output/a/two.md",
            "output/b/one.md",
            "output/main.md"
        ]
    );
    assert!(!walked.truncated);
    let shallow = fixture.workspace.walk_files("output", 2, 5000).unwrap();
    assert_eq!(
        listed_paths(&shallow),
        ["output/a/two.md", "output/b/one.md", "output/main.md"]
    );
    let few = fixture.workspace.walk_files("output", 8, 2).unwrap();
    assert_eq!(few.entries.len(), 2);
    assert!(few.truncated);
    let exact = fixture.workspace.walk_files("output", 8, 5).unwrap();
    assert!(!exact.truncated);
    let root = fixture.workspace.walk_files("", 8, 5000).unwrap();
    assert_eq!(root.entries.len(), 6, "{:?}", listed_paths(&root));
}

#[test]
fn the_scan_limit_bounds_a_huge_listing() {
    let fixture = Fixture::with_limits(WorkspaceLimits {
        max_list_scan: 10,
        ..WorkspaceLimits::default()
    });
    for index in 0..30 {
        fixture.write(&format!("output/f{index:02}.md"), "x");
    }
    let listing = fixture.workspace.list("output", 1, 200).unwrap();
    assert_eq!(listing.entries.len(), 10);
    assert!(listing.truncated);
}

#[test]
fn names_the_workspace_cannot_address_are_skipped() {
    let fixture = Fixture::new();
    fixture.write("output/ok.md", "ok");
    let bad = std::ffi::OsStr::from_bytes(b"bad\xff.md");
    fs::write(fixture.path("output").join(bad), "x").unwrap();
    fs::write(fixture.path("output/back\\slash.md"), "x").unwrap();
    fs::write(fixture.path("output/new\nline.md"), "x").unwrap();
    let listing = fixture.workspace.list("output", 1, 200).unwrap();
    assert_eq!(listed_paths(&listing), ["output/ok.md"]);
}
