//! The chat's persistent directory: projected into a run, promoted back only
//! by `promote`, refused when another run promoted meanwhile.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use common::{Fixture, snapshot};
use sha2::{Digest, Sha256};
use toolhost_workspace::{
    ChangeKind, PersistBase, PersistChange, WriteMode, codes, project, project_again, promote,
};

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

struct Chat {
    _temp: tempfile::TempDir,
    dir: PathBuf,
}

fn chat() -> Chat {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("chat_0123/persist");
    fs::create_dir_all(dir.join("notes")).unwrap();
    fs::write(dir.join("memory.md"), "remember this\n").unwrap();
    fs::write(dir.join("notes/a.md"), "note a\n").unwrap();
    fs::write(dir.join("notes/b.md"), "note b\n").unwrap();
    Chat { _temp: temp, dir }
}

#[test]
fn project_copies_the_chat_directory_and_records_the_base() {
    let chat = chat();
    let fixture = Fixture::new();
    let base = project(&chat.dir, &fixture.workspace).unwrap();
    assert_eq!(
        base.files.keys().collect::<Vec<_>>(),
        ["memory.md", "notes/a.md", "notes/b.md"]
    );
    assert_eq!(base.files["notes/a.md"], sha(b"note a\n"));
    assert_eq!(fixture.read("persist/memory.md"), "remember this\n");
    assert_eq!(fixture.read("persist/notes/b.md"), "note b\n");
    let recorded: serde_json::Value =
        serde_json::from_str(&fixture.read("input/persist_snapshot.json")).unwrap();
    assert_eq!(
        recorded,
        serde_json::json!({"files": {
            "memory.md": sha(b"remember this\n"),
            "notes/a.md": sha(b"note a\n"),
            "notes/b.md": sha(b"note b\n"),
        }})
    );
    assert_eq!(PersistBase::load(&fixture.workspace).unwrap(), base);
    // The model reads them like any other file; the snapshot stays hidden.
    let text = fixture.workspace.read_text("persist/notes/a.md").unwrap();
    assert_eq!(text.text, "note a\n");
    assert_eq!(
        fixture
            .workspace
            .read_text("input/persist_snapshot.json")
            .unwrap_err()
            .code(),
        codes::PATH_NOT_VISIBLE
    );
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn project_edit_promote_copies_the_changes_back() {
    let chat = chat();
    let fixture = Fixture::new();
    let base = project(&chat.dir, &fixture.workspace).unwrap();
    let session = fixture.session();
    let file = session.read_text("persist/notes/a.md").unwrap();
    session
        .record_read("persist/notes/a.md", &file.sha256, None)
        .unwrap();
    session
        .patch("persist/notes/a.md", "note a", "note A, edited", false)
        .unwrap();
    session
        .write(
            "persist/new/deep.md",
            "added by the run\n",
            WriteMode::Replace,
        )
        .unwrap();
    let untouched = fs::metadata(chat.dir.join("notes/b.md"))
        .unwrap()
        .modified()
        .unwrap();

    let changes = promote(&fixture.workspace, &chat.dir, &base).unwrap();
    assert_eq!(
        changes.changes,
        [
            PersistChange {
                path: "new/deep.md".into(),
                kind: ChangeKind::Added,
                sha256: sha(b"added by the run\n"),
                bytes: 17,
            },
            PersistChange {
                path: "notes/a.md".into(),
                kind: ChangeKind::Modified,
                sha256: sha(b"note A, edited\n"),
                bytes: 15,
            },
        ]
    );
    assert_eq!(
        fs::read_to_string(chat.dir.join("notes/a.md")).unwrap(),
        "note A, edited\n"
    );
    assert_eq!(
        fs::read_to_string(chat.dir.join("new/deep.md")).unwrap(),
        "added by the run\n"
    );
    assert_eq!(
        fs::metadata(chat.dir.join("notes/b.md"))
            .unwrap()
            .modified()
            .unwrap(),
        untouched
    );
    let json = serde_json::to_value(&changes).unwrap();
    assert_eq!(json["changes"][0]["kind"], "added");
    assert_eq!(json["changes"][1]["kind"], "modified");
    // No temp file left beside the promoted files.
    for dir in [
        chat.dir.clone(),
        chat.dir.join("notes"),
        chat.dir.join("new"),
    ] {
        for entry in fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name();
            assert!(
                !name
                    .to_string_lossy()
                    .starts_with(toolhost_workspace::TEMP_PREFIX),
                "{name:?}"
            );
        }
    }

    // The next run starts from the promoted state.
    let next = Fixture::new();
    let next_base = project(&chat.dir, &next.workspace).unwrap();
    assert_eq!(next_base.files["notes/a.md"], sha(b"note A, edited\n"));
    assert_eq!(next.read("persist/new/deep.md"), "added by the run\n");
}

#[test]
fn a_run_that_never_promotes_leaves_the_chat_unchanged() {
    let chat = chat();
    let before = snapshot(&chat.dir);
    {
        let fixture = Fixture::new();
        project(&chat.dir, &fixture.workspace).unwrap();
        let session = fixture.session();
        session
            .write("persist/memory.md", "appended", WriteMode::Append)
            .unwrap();
        session
            .write("persist/fresh.md", "new", WriteMode::Replace)
            .unwrap();
        // The run fails or is cancelled here: dropped without promote.
    }
    assert_eq!(snapshot(&chat.dir), before);
}

#[test]
fn promoting_over_another_runs_promotion_is_a_conflict_and_writes_nothing() {
    let chat = chat();
    let first = Fixture::new();
    let second = Fixture::new();
    let first_base = project(&chat.dir, &first.workspace).unwrap();
    let second_base = project(&chat.dir, &second.workspace).unwrap();
    assert_eq!(first_base, second_base);

    first.write("persist/memory.md", "first run\n");
    promote(&first.workspace, &chat.dir, &first_base).unwrap();
    let after_first = snapshot(&chat.dir);

    second.write("persist/notes/b.md", "second run\n");
    second.write("persist/second-only.md", "second\n");
    let error = promote(&second.workspace, &chat.dir, &second_base).unwrap_err();
    assert_eq!(error.code(), codes::PERSIST_CONFLICT);
    assert!(error.is_system());
    assert!(error.message().contains("memory.md"), "{error}");
    assert_eq!(
        snapshot(&chat.dir),
        after_first,
        "a refused promotion wrote"
    );
}

#[test]
fn a_file_added_or_removed_in_the_chat_meanwhile_is_a_conflict() {
    for edit in [
        |dir: &std::path::Path| fs::write(dir.join("other.md"), "x").unwrap(),
        |dir: &std::path::Path| fs::remove_file(dir.join("notes/b.md")).unwrap(),
    ] {
        let chat = chat();
        let fixture = Fixture::new();
        let base = project(&chat.dir, &fixture.workspace).unwrap();
        fixture.write("persist/memory.md", "edited\n");
        edit(&chat.dir);
        let before = snapshot(&chat.dir);
        let error = promote(&fixture.workspace, &chat.dir, &base).unwrap_err();
        assert_eq!(error.code(), codes::PERSIST_CONFLICT);
        assert_eq!(snapshot(&chat.dir), before);
    }
}

#[test]
fn a_missing_chat_directory_projects_empty_and_is_created_on_promote() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("chat_new/persist");
    let fixture = Fixture::new();
    let base = project(&dir, &fixture.workspace).unwrap();
    assert!(base.files.is_empty());
    assert!(!dir.exists());
    let unchanged = promote(&fixture.workspace, &dir, &base).unwrap();
    assert!(unchanged.changes.is_empty());
    fixture.write("persist/first.md", "hello\n");
    let changes = promote(&fixture.workspace, &dir, &base).unwrap();
    assert_eq!(changes.changes.len(), 1);
    assert_eq!(fs::read_to_string(dir.join("first.md")).unwrap(), "hello\n");
}

#[test]
fn projecting_twice_is_refused() {
    let chat = chat();
    let fixture = Fixture::new();
    project(&chat.dir, &fixture.workspace).unwrap();
    let error = project(&chat.dir, &fixture.workspace).unwrap_err();
    assert_eq!(error.code(), codes::PERSIST_ALREADY_PROJECTED);
    assert!(error.is_system());
}

#[test]
fn projecting_again_after_a_cut_off_projection_starts_it_over() {
    let chat = chat();
    let fixture = Fixture::new();
    // What a crash half-way through leaves: one file copied, its base kept,
    // a base of a file the chat has since lost, no snapshot.
    fixture.write("persist/memory.md", "remember this\n");
    fixture.write("input/persist_base/memory.md", "remember this\n");
    fixture.write(
        "input/persist_base/gone.md",
        "removed from the chat since\n",
    );
    let base = project_again(&chat.dir, &fixture.workspace).unwrap();
    assert_eq!(base.files.len(), 3);
    assert_eq!(fixture.read("persist/notes/b.md"), "note b\n");
    assert!(!fixture.path("input/persist_base/gone.md").exists());
    assert_eq!(PersistBase::load(&fixture.workspace).unwrap(), base);
    // Once recorded, the projection is loaded, never made again: a change
    // in the chat meanwhile does not leak into the run.
    fs::write(chat.dir.join("memory.md"), "changed by another run\n").unwrap();
    assert_eq!(project_again(&chat.dir, &fixture.workspace).unwrap(), base);
    assert_eq!(fixture.read("persist/memory.md"), "remember this\n");
}

#[test]
fn symlinks_in_the_chat_directory_are_refused_and_nothing_is_projected() {
    let chat = chat();
    let outside = chat.dir.parent().unwrap().join("secret.txt");
    fs::write(&outside, "secret").unwrap();
    symlink(&outside, chat.dir.join("notes/link.md")).unwrap();
    let fixture = Fixture::new();
    let error = project(&chat.dir, &fixture.workspace).unwrap_err();
    assert_eq!(error.code(), codes::SYMLINK_FOUND);
    assert!(error.is_system());
    assert!(error.message().contains("chat"), "{error}");
    assert_eq!(fs::read_dir(fixture.path("persist")).unwrap().count(), 0);
    assert!(!fixture.path("input/persist_snapshot.json").exists());
}

#[test]
fn a_symlink_planted_in_the_run_persist_stops_promotion() {
    let chat = chat();
    let fixture = Fixture::new();
    let base = project(&chat.dir, &fixture.workspace).unwrap();
    symlink(
        fixture.outside.join("sentinel.txt"),
        fixture.path("persist/leak.md"),
    )
    .unwrap();
    let before = snapshot(&chat.dir);
    let error = promote(&fixture.workspace, &chat.dir, &base).unwrap_err();
    assert_eq!(error.code(), codes::SYMLINK_FOUND);
    assert_eq!(snapshot(&chat.dir), before);
}

#[test]
fn leftover_temp_files_in_the_chat_directory_are_ignored() {
    let chat = chat();
    let leftover = format!("{}123-0-0", toolhost_workspace::TEMP_PREFIX);
    fs::write(chat.dir.join(&leftover), "half").unwrap();
    let fixture = Fixture::new();
    let base = project(&chat.dir, &fixture.workspace).unwrap();
    assert!(!base.files.contains_key(&leftover));
    fixture.write("persist/memory.md", "changed\n");
    promote(&fixture.workspace, &chat.dir, &base).unwrap();
    assert_eq!(
        fs::read_to_string(chat.dir.join("memory.md")).unwrap(),
        "changed\n"
    );
}
