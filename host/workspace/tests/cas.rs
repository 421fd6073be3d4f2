//! The read-state and compare-and-swap rules of write and patch (reference
//! §5.5), one rule per test, plus what a refused write leaves behind.

mod common;

use common::Fixture;
use sha2::{Digest, Sha256};
use toolhost_workspace::{
    ReadState, WorkspaceError, WorkspaceLimits, WorkspaceSession, WriteMode, codes,
};

const PATH: &str = "output/a.md";
const TEXT: &str = "alpha\nbeta\ngamma\nbeta\n";

fn sha(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn code<T: std::fmt::Debug>(result: Result<T, WorkspaceError>) -> &'static str {
    let error = result.expect_err("expected an error");
    assert!(error.is_recoverable(), "{error}");
    error.code()
}

fn fixture_with(text: &str) -> Fixture {
    let fixture = Fixture::new();
    fixture.write(PATH, text);
    fixture
}

fn full_read(session: &WorkspaceSession, path: &str) {
    let file = session.read_text(path).unwrap();
    session.record_read(path, &file.sha256, None).unwrap();
}

fn partial_read(session: &WorkspaceSession, path: &str, seen: &str) {
    let file = session.read_text(path).unwrap();
    session.record_read(path, &file.sha256, Some(seen)).unwrap();
}

fn full_state(text: &str) -> ReadState {
    ReadState {
        sha256: sha(text),
        full_read: true,
        observed: vec![],
        patch_requires_full_read: false,
    }
}

// ---- record_read ---------------------------------------------------------

#[test]
fn record_read_full_records_the_current_sha() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    assert_eq!(session.read_state(PATH), Some(full_state(TEXT)));
    // Normalized paths share one state.
    assert_eq!(session.read_state("./output//a.md"), Some(full_state(TEXT)));
}

#[test]
fn record_read_refuses_a_sha_that_is_not_current() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    let file = session.read_text(PATH).unwrap();
    fixture.write(PATH, "changed meanwhile");
    let error = session.record_read(PATH, &file.sha256, None).unwrap_err();
    assert_eq!(error.code(), codes::READ_STALE_FILE);
    assert!(error.message().contains("workspace_read_file"));
    assert_eq!(session.read_state(PATH), None);
}

#[test]
fn record_read_refuses_a_fragment_the_file_does_not_hold() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    let error = session
        .record_read(PATH, &sha(TEXT), Some("delta"))
        .unwrap_err();
    assert_eq!(error.code(), codes::READ_STALE_FILE);
    assert_eq!(session.read_state(PATH), None);
}

#[test]
fn partial_reads_accumulate_without_duplicates() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "alpha\n");
    partial_read(&session, PATH, "gamma\n");
    partial_read(&session, PATH, "alpha\n");
    let state = session.read_state(PATH).unwrap();
    assert!(!state.full_read);
    assert_eq!(state.sha256, sha(TEXT));
    assert_eq!(state.observed, ["alpha\n", "gamma\n"]);
}

#[test]
fn a_partial_read_of_a_fully_read_version_stays_full() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    partial_read(&session, PATH, "beta");
    assert_eq!(session.read_state(PATH), Some(full_state(TEXT)));
}

#[test]
fn a_partial_read_of_another_version_restarts_and_keeps_the_flag() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "beta");
    // Ambiguous old_string: fails and sets the flag.
    assert_eq!(
        code(session.patch(PATH, "beta", "BETA", false)),
        codes::PATCH_OLD_STRING_NOT_UNIQUE
    );
    assert!(session.read_state(PATH).unwrap().patch_requires_full_read);
    fixture.write(PATH, "new version\n");
    partial_read(&session, PATH, "new");
    let state = session.read_state(PATH).unwrap();
    assert_eq!(state.sha256, sha("new version\n"));
    assert_eq!(state.observed, ["new"]);
    assert!(!state.full_read);
    assert!(state.patch_requires_full_read);
}

// ---- write: replace ------------------------------------------------------

#[test]
fn replacing_an_existing_file_requires_a_read() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    let error = session.write(PATH, "new", WriteMode::Replace).unwrap_err();
    assert_eq!(error.code(), codes::WRITE_REQUIRES_READ);
    assert!(error.message().contains("workspace_read_file"));
    assert_eq!(fixture.read(PATH), TEXT);
}

#[test]
fn replacing_after_a_full_read_succeeds_and_leaves_the_file_fully_known() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    let written = session.write(PATH, "new text", WriteMode::Replace).unwrap();
    assert_eq!(written.path, PATH);
    assert_eq!(written.mode, WriteMode::Replace);
    assert_eq!(written.sha256, sha("new text"));
    assert_eq!(written.previous_sha256, Some(sha(TEXT)));
    assert_eq!((written.chars, written.words), (8, 2));
    assert!(!written.created);
    assert_eq!(fixture.read(PATH), "new text");
    assert_eq!(session.read_state(PATH), Some(full_state("new text")));
    // Fully known: replace again without reading.
    session.write(PATH, "again", WriteMode::Replace).unwrap();
}

#[test]
fn a_partial_read_is_enough_to_replace() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "gamma");
    session
        .write(PATH, "rewritten", WriteMode::Replace)
        .unwrap();
    assert_eq!(fixture.read(PATH), "rewritten");
    assert_eq!(session.read_state(PATH), Some(full_state("rewritten")));
}

#[test]
fn replacing_a_file_changed_since_the_read_is_stale_and_leaves_it_byte_identical() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    fixture.write(PATH, "someone else's\n");
    let before = fixture.snapshot();
    let error = session.write(PATH, "mine", WriteMode::Replace).unwrap_err();
    assert_eq!(error.code(), codes::WRITE_STALE_FILE);
    assert!(error.message().contains("workspace_read_file"));
    assert_eq!(fixture.snapshot(), before);
    assert!(fixture.temp_files().is_empty());
    // A fresh read unlocks it.
    full_read(&session, PATH);
    session.write(PATH, "mine", WriteMode::Replace).unwrap();
    assert_eq!(fixture.read(PATH), "mine");
}

#[test]
fn a_new_file_needs_no_read_and_is_fully_known_afterwards() {
    let fixture = Fixture::new();
    let session = fixture.session();
    let written = session
        .write("output/deep/er/new.md", "fresh words", WriteMode::Replace)
        .unwrap();
    assert!(written.created);
    assert_eq!(written.previous_sha256, None);
    assert_eq!(fixture.read("output/deep/er/new.md"), "fresh words");
    assert_eq!(
        session.read_state("output/deep/er/new.md"),
        Some(full_state("fresh words"))
    );
    // Fully known: replace_all works without a read.
    let patched = session
        .patch("output/deep/er/new.md", "words", "text", true)
        .unwrap();
    assert_eq!(patched.replacements, 1);
}

#[test]
fn another_session_does_not_share_read_states() {
    let fixture = fixture_with(TEXT);
    let reader = fixture.session();
    full_read(&reader, PATH);
    let other = fixture.session();
    assert_eq!(
        code(other.write(PATH, "x", WriteMode::Replace)),
        codes::WRITE_REQUIRES_READ
    );
}

// ---- write: append -------------------------------------------------------

#[test]
fn append_creates_a_missing_file_verbatim_and_knows_it_fully() {
    let fixture = Fixture::new();
    let session = fixture.session();
    let written = session
        .write("scratch/log.md", "first", WriteMode::Append)
        .unwrap();
    assert!(written.created);
    assert_eq!(written.mode, WriteMode::Append);
    assert_eq!(fixture.read("scratch/log.md"), "first");
    assert_eq!(
        session.read_state("scratch/log.md"),
        Some(full_state("first"))
    );
    // Still fully known after appending to what it knows: no newline added.
    let written = session
        .write("scratch/log.md", " second", WriteMode::Append)
        .unwrap();
    assert!(!written.created);
    assert_eq!(written.previous_sha256, Some(sha("first")));
    assert_eq!((written.chars, written.words), (7, 1));
    assert_eq!(fixture.read("scratch/log.md"), "first second");
    assert_eq!(
        session.read_state("scratch/log.md"),
        Some(full_state("first second"))
    );
    session
        .write("scratch/log.md", "replaced", WriteMode::Replace)
        .unwrap();
}

#[test]
fn append_needs_no_read_but_does_not_authorize_a_replace() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    session.write(PATH, "tail", WriteMode::Append).unwrap();
    assert_eq!(fixture.read(PATH), format!("{TEXT}tail"));
    assert_eq!(session.read_state(PATH), None);
    assert_eq!(
        code(session.write(PATH, "x", WriteMode::Replace)),
        codes::WRITE_REQUIRES_READ
    );
}

#[test]
fn append_after_a_full_read_keeps_the_file_fully_known() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    session.write(PATH, "tail", WriteMode::Append).unwrap();
    let expected = format!("{TEXT}tail");
    assert_eq!(session.read_state(PATH), Some(full_state(&expected)));
    session.write(PATH, "replaced", WriteMode::Replace).unwrap();
}

#[test]
fn append_to_a_partially_read_file_does_not_authorize_a_later_replace() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "alpha");
    let before = session.read_state(PATH).unwrap();
    session.write(PATH, "tail", WriteMode::Append).unwrap();
    // The old state stays, about the version before the append.
    assert_eq!(session.read_state(PATH), Some(before));
    let error = session.write(PATH, "x", WriteMode::Replace).unwrap_err();
    assert_eq!(error.code(), codes::WRITE_STALE_FILE);
    assert_eq!(fixture.read(PATH), format!("{TEXT}tail"));
}

#[test]
fn append_after_a_stale_full_read_does_not_refresh_it() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    fixture.write(PATH, "changed\n");
    session.write(PATH, "tail", WriteMode::Append).unwrap();
    assert_eq!(session.read_state(PATH), Some(full_state(TEXT)));
    assert_eq!(
        code(session.write(PATH, "x", WriteMode::Replace)),
        codes::WRITE_STALE_FILE
    );
    assert_eq!(fixture.read(PATH), "changed\ntail");
}

// ---- patch ---------------------------------------------------------------

#[test]
fn patch_refuses_an_empty_old_string_first() {
    let fixture = Fixture::new();
    let session = fixture.session();
    // Checked before the path, which is invalid here.
    assert_eq!(
        code(session.patch("../x", "", "new", false)),
        codes::PATCH_EMPTY_OLD_STRING
    );
}

#[test]
fn patch_refuses_old_equal_to_new() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    assert_eq!(
        code(session.patch(PATH, "beta", "beta", true)),
        codes::PATCH_NO_CHANGE
    );
    assert_eq!(fixture.read(PATH), TEXT);
}

#[test]
fn patch_checks_paths_before_read_states() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    assert_eq!(
        code(session.patch("tool-results/call_1.json", "1", "2", false)),
        codes::PATH_NOT_WRITABLE
    );
    assert_eq!(
        code(session.patch("run.json", "1", "2", false)),
        codes::PATH_NOT_VISIBLE
    );
}

#[test]
fn patch_requires_a_read() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    let error = session.patch(PATH, "alpha", "ALPHA", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_REQUIRES_READ);
    assert!(error.message().contains("workspace_read_file"));
    assert_eq!(fixture.read(PATH), TEXT);
}

#[test]
fn patch_after_a_full_read_keeps_the_file_fully_known() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    let patched = session.patch(PATH, "alpha", "ALPHA", false).unwrap();
    let expected = TEXT.replacen("alpha", "ALPHA", 1);
    assert_eq!(fixture.read(PATH), expected);
    assert_eq!(patched.replacements, 1);
    assert_eq!(patched.old_sha256, sha(TEXT));
    assert_eq!(patched.sha256, sha(&expected));
    assert_eq!(patched.chars, expected.chars().count() as u64);
    assert_eq!(patched.words, 4);
    assert_eq!(session.read_state(PATH), Some(full_state(&expected)));
    // And again, without reading.
    session.patch(PATH, "gamma", "GAMMA", false).unwrap();
}

#[test]
fn patch_after_a_partial_read_of_the_old_string_succeeds_and_patches_what_was_seen() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "alpha\nbeta\n");
    partial_read(&session, PATH, "gamma\n");
    session.patch(PATH, "alpha", "ALPHA", false).unwrap();
    let expected = TEXT.replacen("alpha", "ALPHA", 1);
    assert_eq!(fixture.read(PATH), expected);
    let state = session.read_state(PATH).unwrap();
    assert_eq!(state.sha256, sha(&expected));
    assert!(!state.full_read);
    assert!(!state.patch_requires_full_read);
    assert_eq!(state.observed, ["ALPHA\nbeta\n", "gamma\n"]);
    // The patched observation authorizes the next patch.
    session.patch(PATH, "ALPHA\nbeta", "A\nB", false).unwrap();
}

#[test]
fn a_partial_read_that_did_not_show_the_old_string_forces_a_full_read() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "alpha");
    let error = session.patch(PATH, "gamma", "GAMMA", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_REQUIRES_FULL_READ);
    assert!(error.message().contains("workspace_read_file"));
    assert!(session.read_state(PATH).unwrap().patch_requires_full_read);
    // Even an old string that was seen now needs the full read.
    assert_eq!(
        code(session.patch(PATH, "alpha", "ALPHA", false)),
        codes::PATCH_REQUIRES_FULL_READ
    );
    assert_eq!(fixture.read(PATH), TEXT);
    full_read(&session, PATH);
    session.patch(PATH, "gamma", "GAMMA", false).unwrap();
}

#[test]
fn a_failed_patch_after_a_partial_read_forces_a_full_read() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "beta");
    // "beta" was seen but occurs twice: ambiguous.
    let error = session.patch(PATH, "beta", "BETA", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_OLD_STRING_NOT_UNIQUE);
    assert!(error.message().contains("more than once"), "{error}");
    assert!(session.read_state(PATH).unwrap().patch_requires_full_read);
    // A patch that would otherwise be fine is refused until a full read.
    partial_read(&session, PATH, "gamma");
    assert_eq!(
        code(session.patch(PATH, "gamma", "GAMMA", false)),
        codes::PATCH_REQUIRES_FULL_READ
    );
    assert_eq!(fixture.read(PATH), TEXT);
    full_read(&session, PATH);
    assert!(!session.read_state(PATH).unwrap().patch_requires_full_read);
    session.patch(PATH, "gamma", "GAMMA", false).unwrap();
}

#[test]
fn replace_all_needs_a_full_read_and_a_full_read_unlocks_it() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "beta");
    let error = session.patch(PATH, "beta", "BETA", true).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_REQUIRES_FULL_READ);
    assert!(error.message().contains("replace_all"));
    assert!(session.read_state(PATH).unwrap().patch_requires_full_read);
    assert_eq!(fixture.read(PATH), TEXT);
    full_read(&session, PATH);
    let patched = session.patch(PATH, "beta", "BETA", true).unwrap();
    assert_eq!(patched.replacements, 2);
    assert_eq!(fixture.read(PATH), TEXT.replace("beta", "BETA"));
}

#[test]
fn patching_a_file_changed_since_a_full_read_is_stale() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    fixture.write(PATH, "alpha changed\n");
    let before = fixture.snapshot();
    let error = session.patch(PATH, "alpha", "ALPHA", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_STALE_FILE);
    assert_eq!(fixture.snapshot(), before);
    // After a full read no flag is set.
    assert!(!session.read_state(PATH).unwrap().patch_requires_full_read);
}

#[test]
fn patching_a_file_changed_since_a_partial_read_is_stale_and_sets_the_flag() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    partial_read(&session, PATH, "alpha");
    fixture.write(PATH, "alpha changed\n");
    assert_eq!(
        code(session.patch(PATH, "alpha", "ALPHA", false)),
        codes::PATCH_STALE_FILE
    );
    assert!(session.read_state(PATH).unwrap().patch_requires_full_read);
}

#[test]
fn an_old_string_not_in_the_file_is_not_found() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    let error = session.patch(PATH, "delta", "DELTA", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_OLD_STRING_NOT_FOUND);
    assert!(error.message().contains("line-number"));
    assert!(!session.read_state(PATH).unwrap().patch_requires_full_read);
    assert_eq!(fixture.read(PATH), TEXT);
}

#[test]
fn an_ambiguous_old_string_after_a_full_read_is_not_unique_without_a_flag() {
    let fixture = fixture_with(TEXT);
    let session = fixture.session();
    full_read(&session, PATH);
    assert_eq!(
        code(session.patch(PATH, "beta", "BETA", false)),
        codes::PATCH_OLD_STRING_NOT_UNIQUE
    );
    assert!(!session.read_state(PATH).unwrap().patch_requires_full_read);
    // Overlapping occurrences are ambiguous too.
    fixture.write("output/b.md", "aaa");
    full_read(&session, "output/b.md");
    assert_eq!(
        code(session.patch("output/b.md", "aa", "b", false)),
        codes::PATCH_OLD_STRING_NOT_UNIQUE
    );
}

// ---- limits and file kinds ------------------------------------------------

#[test]
fn files_over_the_limit_are_refused_everywhere() {
    let fixture = Fixture::with_limits(WorkspaceLimits {
        max_file_bytes: 16,
        ..WorkspaceLimits::default()
    });
    fixture.write("output/big.md", &"x".repeat(17));
    fixture.write(PATH, "0123456789");
    let session = fixture.session();
    assert_eq!(
        code(fixture.workspace.read_text("output/big.md")),
        codes::FILE_TOO_LARGE
    );
    assert_eq!(
        code(session.write("output/new.md", &"y".repeat(17), WriteMode::Replace)),
        codes::FILE_TOO_LARGE
    );
    assert_eq!(
        code(session.write(PATH, "0123456", WriteMode::Append)),
        codes::FILE_TOO_LARGE
    );
    full_read(&session, PATH);
    assert_eq!(
        code(session.patch(PATH, "0", "0123456789", false)),
        codes::FILE_TOO_LARGE
    );
    assert_eq!(fixture.read(PATH), "0123456789");
    assert!(!fixture.path("output/new.md").exists());
    assert!(fixture.temp_files().is_empty());
    // Exactly at the limit is fine.
    session.write(PATH, "012345", WriteMode::Append).unwrap();
}

#[test]
fn directories_missing_files_and_binary_files() {
    let fixture = Fixture::new();
    std::fs::create_dir_all(fixture.path("output/dir")).unwrap();
    std::fs::write(fixture.path("output/bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
    let session = fixture.session();
    let error = fixture.workspace.read_text("output/dir").unwrap_err();
    assert_eq!(error.code(), codes::PATH_IS_DIRECTORY);
    assert_eq!(
        error.message(),
        "workspace path `output/dir` is a directory; call workspace_list_files to list its contents and re-target a specific file."
    );
    assert_eq!(
        code(session.write("output/dir", "x", WriteMode::Replace)),
        codes::PATH_IS_DIRECTORY
    );
    assert_eq!(
        code(session.write("output/dir", "x", WriteMode::Append)),
        codes::PATH_IS_DIRECTORY
    );
    assert_eq!(
        code(fixture.workspace.read_text("output/missing.md")),
        codes::FILE_NOT_FOUND
    );
    assert_eq!(
        code(fixture.workspace.list("output/missing", 2, 10)),
        codes::PATH_NOT_FOUND
    );
    assert_eq!(
        code(fixture.workspace.read_text("output/bin.dat")),
        codes::FILE_NOT_TEXT
    );
    assert_eq!(
        code(session.write("output/bin.dat", "x", WriteMode::Append)),
        codes::FILE_NOT_TEXT
    );
    // A file used as a directory.
    fixture.write("output/file.md", "x");
    assert_eq!(
        code(fixture.workspace.read_text("output/file.md/inner.md")),
        codes::FILE_NOT_FOUND
    );
    assert_eq!(
        code(session.write("output/file.md/inner.md", "x", WriteMode::Replace)),
        codes::INVALID_PATH
    );
    assert!(fixture.temp_files().is_empty());
}
