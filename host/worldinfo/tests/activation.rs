//! The activation snapshot against `tests/fixtures/worldinfo/` and against
//! run directories made in temp dirs.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tempfile::TempDir;
use toolhost_worldinfo::{Activation, PROMPT_SNAPSHOT_FILE, WorldInfoError, codes};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/worldinfo/prompt_snapshot.json")
}

/// A run directory whose `input/prompt_snapshot.json` holds `bytes`.
fn run_with(bytes: &[u8]) -> TempDir {
    let run = TempDir::new().unwrap();
    fs::create_dir_all(run.path().join("input")).unwrap();
    fs::write(run.path().join(PROMPT_SNAPSHOT_FILE), bytes).unwrap();
    run
}

fn run_with_fixture() -> TempDir {
    run_with(&fs::read(fixture()).unwrap())
}

fn activation(value: Value) -> Result<Activation, WorldInfoError> {
    Activation::from_json(&value)
}

fn entry(content: &str) -> Value {
    json!({"world": "W", "uid": 1, "content": content})
}

#[test]
fn the_fixture_loads() {
    let run = run_with_fixture();
    let activation = Activation::load(run.path())
        .unwrap()
        .expect("an activation");
    assert_eq!(activation.timestamp_ms(), Some(1_760_010_203_040));
    assert_eq!(activation.trigger(), Some("normal"));
    let entries = activation.entries();
    assert_eq!(entries.len(), 6);
    let refs: Vec<_> = entries.iter().map(|e| e.reference.as_str()).collect();
    assert_eq!(
        refs,
        [
            "worldinfo:Eldoria#0",
            "worldinfo:Eldoria#12",
            "worldinfo:activated#2",
            "worldinfo:Eldoria#37",
            "worldinfo:Mara (character lore)#mara-lantern",
            "worldinfo:Mara (character lore)#3",
        ]
    );
    for (index, entry) in entries.iter().enumerate() {
        assert_eq!(entry.index, index);
    }
    // Number uids are kept as text; the empty one stays empty.
    let uids: Vec<_> = entries.iter().map(|e| e.uid.as_str()).collect();
    assert_eq!(uids, ["0", "12", "", "37", "mara-lantern", "3"]);
    assert!(entries[0].constant);
    assert!(
        entries[1..].iter().all(|e| !e.constant),
        "missing constant is false"
    );
    assert_eq!(entries[0].position.as_deref(), Some("before"));
    assert_eq!(
        entries[3].position.as_deref(),
        Some("4"),
        "a number position"
    );
    assert_eq!(entries[5].display_name.as_deref(), Some("灯笼集市"));
    assert!(entries[5].content.contains("玛拉常在这里买灯油"));
    let long = entries[3].content.chars().count();
    assert!((8_000..10_000).contains(&long), "{long}");
    assert_eq!(entries[4].world, "Mara (character lore)");
}

#[test]
fn entries_are_found_by_either_reference() {
    let run = run_with_fixture();
    let activation = Activation::load(run.path()).unwrap().unwrap();
    let uid = |reference: &str| activation.entry(reference).map(|e| e.index);
    assert_eq!(uid("worldinfo:Eldoria#12"), Some(1));
    assert_eq!(uid("worldinfo:Mara (character lore)#3"), Some(5));
    assert_eq!(uid("  worldinfo:Eldoria#37 "), Some(3));
    assert_eq!(uid("worldinfo:activated#2"), Some(2));
    // The index form reaches every entry, also those with their own ref.
    assert_eq!(uid("worldinfo:activated#0"), Some(0));
    assert_eq!(uid("worldinfo:activated#5"), Some(5));
    for missing in [
        "worldinfo:activated#6",
        "worldinfo:activated#02",
        "worldinfo:activated#+1",
        "worldinfo:activated#",
        "worldinfo:activated#-1",
        "worldinfo:Eldoria#2",
        "worldinfo:Eldoria#",
        "Eldoria#12",
        "worldinfo:eldoria#12",
        "",
    ] {
        assert_eq!(uid(missing), None, "{missing}");
    }
}

#[test]
fn uids_empty_worlds_and_duplicates() {
    let activation = activation(json!({"entries": [
        {"world": "A", "uid": 7, "content": "seven"},
        {"world": "A", "uid": "7", "content": "seven again"},
        {"world": "", "uid": 1, "content": "no world"},
        {"uid": 2, "content": "world missing"},
        {"world": "B", "uid": null, "content": "uid null"},
        {"world": "B", "uid": 1.5, "content": "float uid"},
        {"world": "B", "uid": -3, "content": "negative uid"},
    ]}))
    .unwrap();
    let refs: Vec<_> = activation
        .entries()
        .iter()
        .map(|e| e.reference.as_str())
        .collect();
    assert_eq!(
        refs,
        [
            "worldinfo:A#7",
            "worldinfo:activated#1",
            "worldinfo:activated#2",
            "worldinfo:activated#3",
            "worldinfo:activated#4",
            "worldinfo:B#1.5",
            "worldinfo:B#-3",
        ]
    );
    assert_eq!(activation.entry("worldinfo:A#7").unwrap().content, "seven");
    assert_eq!(
        activation.entry("worldinfo:activated#1").unwrap().content,
        "seven again"
    );
    assert_eq!(activation.timestamp_ms(), None);
    assert_eq!(activation.trigger(), None);
}

#[test]
fn missing_snapshots_are_none() {
    let run = TempDir::new().unwrap();
    assert_eq!(Activation::load(run.path()).unwrap(), None, "no input/");
    fs::create_dir_all(run.path().join("input")).unwrap();
    assert_eq!(Activation::load(run.path()).unwrap(), None, "no file");
    let without = run_with(br#"{"messages": []}"#);
    assert_eq!(Activation::load(without.path()).unwrap(), None, "no key");
    let null = run_with(br#"{"worldInfoActivation": null}"#);
    assert_eq!(Activation::load(null.path()).unwrap(), None, "null");
    let empty = run_with(br#"{"worldInfoActivation": {"entries": []}}"#);
    let empty = Activation::load(empty.path()).unwrap().unwrap();
    assert!(
        empty.entries().is_empty(),
        "an empty activation is still one"
    );
}

#[test]
fn malformed_activations_name_the_field() {
    for (value, field) in [
        (json!([]), "`worldInfoActivation` is an array"),
        (json!({}), "`entries` is missing"),
        (json!({"entries": {}}), "`entries` is an object"),
        (json!({"entries": [1]}), "`entries[0]` is a number"),
        (
            json!({"entries": [entry("ok"), {"world": "W", "uid": 1}]}),
            "`entries[1].content` is missing",
        ),
        (
            json!({"entries": [{"content": 5}]}),
            "`entries[0].content` is a number",
        ),
        (
            json!({"entries": [{"content": "x", "uid": true}]}),
            "`entries[0].uid` is a boolean",
        ),
        (
            json!({"entries": [{"content": "x", "world": 3}]}),
            "`entries[0].world` is a number",
        ),
        (
            json!({"entries": [{"content": "x", "constant": "yes"}]}),
            "`entries[0].constant` is a string",
        ),
        (
            json!({"entries": [{"content": "x", "position": []}]}),
            "`entries[0].position` is an array",
        ),
        (
            json!({"entries": [{"content": "x", "displayName": {}}]}),
            "`entries[0].displayName` is an object",
        ),
        (
            json!({"entries": [], "timestampMs": -1}),
            "`timestampMs` is not a non-negative integer",
        ),
        (
            json!({"entries": [], "timestampMs": "now"}),
            "`timestampMs` is not",
        ),
        (
            json!({"entries": [], "trigger": 1}),
            "`trigger` is a number",
        ),
    ] {
        let error = activation(value.clone()).expect_err(&value.to_string());
        assert_eq!(error.code(), codes::INVALID_ACTIVATION, "{value}");
        assert!(error.message().contains(field), "{value}: {error}");
    }
    // The same through a run directory.
    let run = run_with(br#"{"worldInfoActivation": {"entries": [{"world": "W"}]}}"#);
    let error = Activation::load(run.path()).unwrap_err();
    assert_eq!(error.code(), codes::INVALID_ACTIVATION);
    assert!(error.message().contains("entries[0].content"), "{error}");
}

#[test]
fn tolerated_shapes() {
    let activation = activation(json!({
        "entries": [{"content": "x", "extra": {"ignored": true}, "constant": null, "position": null}],
        "timestampMs": 1.7e12,
        "unknown": "ignored",
    }))
    .unwrap();
    assert_eq!(activation.timestamp_ms(), Some(1_700_000_000_000));
    assert!(!activation.entries()[0].constant);
    assert_eq!(activation.entries()[0].position, None);
}

#[test]
fn unusable_files_are_invalid_prompt_snapshot_files() {
    for bytes in [&b"{not json"[..], b"[]", b"\"text\"", b""] {
        let run = run_with(bytes);
        let error = Activation::load(run.path()).unwrap_err();
        assert_eq!(
            error.code(),
            codes::INVALID_PROMPT_SNAPSHOT_FILE,
            "{bytes:?}"
        );
    }
    // A directory in its place.
    let run = TempDir::new().unwrap();
    fs::create_dir_all(run.path().join(PROMPT_SNAPSHOT_FILE)).unwrap();
    let error = Activation::load(run.path()).unwrap_err();
    assert_eq!(error.code(), codes::INVALID_PROMPT_SNAPSHOT_FILE);
}

#[test]
fn symlinked_snapshots_are_never_followed() {
    let outside = TempDir::new().unwrap();
    let target = outside.path().join("snapshot.json");
    fs::copy(fixture(), &target).unwrap();

    let run = TempDir::new().unwrap();
    fs::create_dir_all(run.path().join("input")).unwrap();
    symlink(&target, run.path().join(PROMPT_SNAPSHOT_FILE)).unwrap();
    let error = Activation::load(run.path()).unwrap_err();
    assert_eq!(error.code(), codes::INVALID_PROMPT_SNAPSHOT_FILE);
    assert!(error.message().contains("symbolic link"), "{error}");

    // A relative link inside the run directory is refused all the same.
    let run = TempDir::new().unwrap();
    fs::create_dir_all(run.path().join("input")).unwrap();
    fs::copy(fixture(), run.path().join("input/real.json")).unwrap();
    symlink("real.json", run.path().join(PROMPT_SNAPSHOT_FILE)).unwrap();
    let error = Activation::load(run.path()).unwrap_err();
    assert_eq!(error.code(), codes::INVALID_PROMPT_SNAPSHOT_FILE);

    let run = TempDir::new().unwrap();
    symlink(outside.path(), run.path().join("input")).unwrap();
    fs::rename(&target, outside.path().join("prompt_snapshot.json")).unwrap();
    let error = Activation::load(run.path()).unwrap_err();
    assert_eq!(error.code(), codes::INVALID_PROMPT_SNAPSHOT_FILE);
}

#[test]
fn store_is_create_only_and_round_trips() {
    let run = TempDir::new().unwrap();
    let value = json!({
        "entries": [{"world": "Eldoria", "uid": 4, "displayName": "Varn", "content": "The capital."}],
        "timestampMs": 42,
        "trigger": "continue",
    });
    let stored = Activation::store(run.path(), &value).unwrap();
    let loaded = Activation::load(run.path()).unwrap().unwrap();
    assert_eq!(stored, loaded);
    assert_eq!(loaded.entries()[0].reference, "worldinfo:Eldoria#4");
    let on_disk = fs::read(run.path().join(PROMPT_SNAPSHOT_FILE)).unwrap();

    let error = Activation::store(run.path(), &json!({"entries": []})).unwrap_err();
    assert_eq!(error.code(), codes::PROMPT_SNAPSHOT_EXISTS);
    assert_eq!(
        fs::read(run.path().join(PROMPT_SNAPSHOT_FILE)).unwrap(),
        on_disk,
        "unchanged"
    );
    // No temp file is left behind.
    assert_eq!(fs::read_dir(run.path().join(".tmp")).unwrap().count(), 0);
}

#[test]
fn store_checks_before_writing() {
    let run = TempDir::new().unwrap();
    let error = Activation::store(run.path(), &json!({"entries": [{"world": "W"}]})).unwrap_err();
    assert_eq!(error.code(), codes::INVALID_ACTIVATION);
    assert!(!run.path().join(PROMPT_SNAPSHOT_FILE).exists());
}

#[test]
fn a_whole_prompt_snapshot_can_be_stored() {
    let run = TempDir::new().unwrap();
    let snapshot: Value = serde_json::from_slice(&fs::read(fixture()).unwrap()).unwrap();
    let stored = Activation::store_prompt_snapshot(run.path(), &snapshot)
        .unwrap()
        .unwrap();
    assert_eq!(stored.entries().len(), 6);
    let written: Value =
        serde_json::from_slice(&fs::read(run.path().join(PROMPT_SNAPSHOT_FILE)).unwrap()).unwrap();
    assert_eq!(
        written, snapshot,
        "the whole snapshot, not only the activation"
    );
    let bad = json!({"worldInfoActivation": {"entries": "no"}});
    let other = TempDir::new().unwrap();
    assert_eq!(
        Activation::store_prompt_snapshot(other.path(), &bad)
            .unwrap_err()
            .code(),
        codes::INVALID_ACTIVATION
    );
}
