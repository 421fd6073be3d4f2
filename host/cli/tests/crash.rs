//! Crash and resume: `toolhost run` killed with SIGKILL and resumed with
//! `--resume` must end exactly where an uninterrupted run of the same
//! script and `--seed` ends — same `output/`, same stored results, the same
//! chat with the reply committed once, the same `persist/` promotion, a
//! valid journal with `run_resumed`, no model reply requested twice.
//!
//! Kills land through `TOOLHOST_CRASH_AT` (see `toolhost_core::crash_point`):
//! right after a journal event picked at random (inside the delegated child
//! too), between a commit's chat write and its journal event, between a
//! write's recorded intent and the write, and half-way through the
//! `persist/` projection and promotion; every third case is killed a second
//! time while it resumes. `TOOLHOST_CRASH_POINTS` (default 30) and
//! `TOOLHOST_CRASH_SEED` choose how many and which; `make crash-test` runs
//! 300.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

use serde_json::{Value, json};
use toolhost_journal::{
    ChatCommitCompleted, Event as _, ModelCompleted, RunCompleted, RunResumed, ToolResultStored,
};

const SEED: &str = "42";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The demo's script, with two more files written into `persist/` so the
/// run promotes two files when it finishes.
fn script() -> Value {
    let text = std::fs::read_to_string(repo().join("examples/demo/script.json")).unwrap();
    let mut script: Value = serde_json::from_str(&text).unwrap();
    let calls = script["replies"][3]["toolCalls"].as_array_mut().unwrap();
    for (index, (id, path)) in [
        ("persist_a", "persist/lantern.md"),
        ("persist_b", "persist/stairs.md"),
    ]
    .into_iter()
    .enumerate()
    {
        calls.insert(
            index,
            json!({"id": id, "name": "workspace_write_file",
                   "arguments": {"path": path, "content": format!("{path}: kept for the next run\n")}}),
        );
    }
    script
}

/// A fresh case directory: its chat, persist directory and script.
fn case(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("persist")).unwrap();
    std::fs::copy(
        repo().join("tests/fixtures/chats/long_character_chat.jsonl"),
        dir.join("chat.jsonl"),
    )
    .unwrap();
    std::fs::write(dir.join("persist/keep.md"), "already there\n").unwrap();
    std::fs::write(dir.join("persist/older.md"), "from an earlier run\n").unwrap();
    std::fs::write(
        dir.join("script.json"),
        serde_json::to_vec_pretty(&script()).unwrap(),
    )
    .unwrap();
    dir
}

fn toolhost(dir: &Path, args: &[String], crash_at: Option<&str>) -> ExitStatus {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command
        .current_dir(repo())
        .arg("--cache-dir")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("crash-cache"))
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .env_remove("TOOLHOST_CRASH_AT")
        .stdout(std::fs::File::create(dir.join("stdout.log")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap());
    if let Some(point) = crash_at {
        command.env("TOOLHOST_CRASH_AT", point);
    }
    command.status().expect("run toolhost")
}

fn start_args(dir: &Path) -> Vec<String> {
    let path = |p: &Path| p.to_str().unwrap().to_owned();
    let mut args: Vec<String> = [
        "run",
        "--profile",
        "profiles/default.json",
        "--agents",
        "examples/demo/agents",
        "--worldinfo",
        "tests/fixtures/worldinfo/prompt_snapshot.json",
        "--skills",
        "global:tests/fixtures/skills/global",
        "--seed",
        SEED,
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend([
        "--model".into(),
        format!("script:{}", path(&dir.join("script.json"))),
        "--chat".into(),
        path(&dir.join("chat.jsonl")),
        "--persist".into(),
        path(&dir.join("persist")),
        "--run-dir".into(),
        path(&dir.join("run")),
    ]);
    args
}

fn resume_args(dir: &Path) -> Vec<String> {
    vec![
        "run".into(),
        "--resume".into(),
        dir.join("run").to_str().unwrap().to_owned(),
        // The run promotes there: a resume confirms it.
        "--persist".into(),
        dir.join("persist").to_str().unwrap().to_owned(),
    ]
}

fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("run/events.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(next) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).unwrap().to_str().unwrap().to_owned();
                found.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// A tiny deterministic generator: the points are reproducible from the seed.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn check_same_end(reference: &Path, dir: &Path, label: &str) {
    // The same output/, results and model replies (ids and entropy derive
    // from the seed, so they are byte for byte the same).
    for sub in ["run/output", "run/tool-results", "run/summaries", "persist"] {
        let (want, got) = (files(&reference.join(sub)), files(&dir.join(sub)));
        // A write found landed after a crash says so instead of repeating
        // its result; everything else is byte for byte the same.
        let resolved = |name: &String| {
            got.get(name).is_some_and(|bytes| {
                String::from_utf8_lossy(bytes).contains("\"resumedAfterInterruption\": true")
            })
        };
        let differing: Vec<&String> = want
            .keys()
            .chain(got.keys())
            .filter(|name| want.get(*name) != got.get(*name) && !resolved(name))
            .collect();
        assert!(
            differing.is_empty(),
            "{label}: {sub} differs from the uninterrupted run: {differing:?}"
        );
    }
    // Model replies: the same replies (the record names the script's path,
    // which is the case's own).
    let replies = |d: &Path| -> BTreeMap<String, Value> {
        files(&d.join("run/model-responses"))
            .into_iter()
            .map(|(name, bytes)| {
                let record: Value = serde_json::from_slice(&bytes).unwrap();
                (name, record["response"].clone())
            })
            .collect()
    };
    assert!(
        replies(reference) == replies(dir),
        "{label}: model replies differ"
    );
    // The chat: every line the run did not write is the same; the reply is
    // committed once, with the same text.
    let chat = |d: &Path| std::fs::read_to_string(d.join("chat.jsonl")).unwrap();
    let (want, got) = (chat(reference), chat(dir));
    let (want, got): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    assert_eq!(
        want.len(),
        got.len(),
        "{label}: the chat has another number of lines"
    );
    assert_eq!(
        want[..want.len() - 1],
        got[..got.len() - 1],
        "{label}: chat lines differ"
    );
    let reply = |line: &str| serde_json::from_str::<Value>(line).unwrap()["mes"].clone();
    assert_eq!(
        reply(want[want.len() - 1]),
        reply(got[got.len() - 1]),
        "{label}"
    );
    // The journal: consecutive, resumed, completed once; each round asked
    // for once.
    let events = events(dir);
    for (index, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], json!(index + 1), "{label}: journal seq");
    }
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == RunCompleted::TYPE).count(),
        1,
        "{label}"
    );
    assert_eq!(kinds.last(), Some(&RunCompleted::TYPE), "{label}");
    let mut asked = BTreeMap::new();
    for event in &events {
        if event["type"] == ModelCompleted::TYPE {
            let key = (
                event["payload"]["invocationId"].to_string(),
                event["payload"]["round"].to_string(),
            );
            *asked.entry(key).or_insert(0) += 1;
        }
    }
    assert!(
        asked.values().all(|count| *count == 1),
        "{label}: a round twice: {asked:?}"
    );
    let reference_rounds = events_of(reference, ModelCompleted::TYPE);
    assert_eq!(asked.len(), reference_rounds, "{label}: rounds");
    assert_eq!(
        events_of(dir, ChatCommitCompleted::TYPE),
        1,
        "{label}: the commit is journalled once"
    );
}

/// `toolhost replay` of the case's run: every call it executes again gives
/// its stored result.
fn check_replays_identically(dir: &Path, label: &str) {
    let args: Vec<String> = vec![
        "replay".into(),
        dir.join("run").to_str().unwrap().into(),
        "--json".into(),
    ];
    let status = toolhost(dir, &args, None);
    let stdout = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert!(status.success(), "{label}: replay: {stdout}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["different"], 0, "{label}: {stdout}");
    assert!(
        report["identical"].as_u64().unwrap() >= 6,
        "{label}: {stdout}"
    );
}

fn events_of(dir: &Path, kind: &str) -> usize {
    events(dir).iter().filter(|e| e["type"] == kind).count()
}

#[test]
fn a_killed_run_resumes_to_the_end_an_uninterrupted_run_reaches() {
    let root = tempfile::tempdir().unwrap();
    let reference = case(root.path(), "reference");
    assert!(toolhost(&reference, &start_args(&reference), None).success());
    let total = events(&reference).len() as u64;
    assert!(total > 60, "the reference run journalled {total} events");
    check_replays_identically(&reference, "the uninterrupted run");

    let points: usize = std::env::var("TOOLHOST_CRASH_POINTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(30);
    let mut state: u64 = std::env::var("TOOLHOST_CRASH_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x5eed_c4a5);
    eprintln!("{points} crash points, TOOLHOST_CRASH_SEED={state}");
    // An event of the delegated child, in the middle of its work.
    let child_events: Vec<u64> = events(&reference)
        .iter()
        .filter(|e| e["payload"]["eventScope"]["invocationId"] != "inv_root")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let child_event = child_events[child_events.len() / 2];
    let mut killed = 0;
    for index in 0..points {
        let first = match index {
            0 => "chat_committed".to_owned(),
            1 => "persist_promoted".to_owned(),
            // The child's write, then the root's second: recorded, not landed.
            2 => "write_intent".to_owned(),
            3 => "write_intent#3".to_owned(),
            // One of the chat's two persist files copied in, not the other.
            4 => "persist_projected".to_owned(),
            5 => format!("event:{child_event}"),
            _ => format!("event:{}", 2 + next(&mut state) % (total - 2)),
        };
        let dir = case(root.path(), &format!("case-{index}"));
        let label = format!("case {index} ({first})");
        let status = toolhost(&dir, &start_args(&dir), Some(&first));
        if status.success() {
            // The point was past the end of this run.
            check_same_end(&reference, &dir, &label);
            continue;
        }
        assert_eq!(
            status.code(),
            None,
            "{label}: not killed but exited {status}"
        );
        killed += 1;
        // Every third case is killed again while it resumes.
        if index % 3 == 2 {
            let last = events(&dir).len() as u64;
            let again = format!("event:{}", last + 2 + next(&mut state) % 20);
            let status = toolhost(&dir, &resume_args(&dir), Some(&again));
            if !status.success() {
                assert_eq!(status.code(), None, "{label}: resume exited {status}");
            }
        }
        // Killed again right after `run_completed`: the run is over.
        let completed = events_of(&dir, RunCompleted::TYPE) == 1
            || toolhost(&dir, &resume_args(&dir), None).success();
        let log = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            completed,
            "{label}: the resume failed: {}\n{}",
            log("stdout.log"),
            log("stderr.log")
        );
        assert!(events_of(&dir, RunResumed::TYPE) >= 1, "{label}");
        if first.starts_with("write_intent") {
            // The write cut off after its intent is settled, not re-run.
            let resumed = events(&dir)
                .into_iter()
                .find(|e| e["type"] == RunResumed::TYPE)
                .unwrap();
            let found = &resumed["payload"]["resume"];
            let count = |key: &str| found[key].as_u64().unwrap_or(0);
            let in_doubt = found["callsInDoubt"].as_array().map_or(0, Vec::len) as u64;
            assert!(count("outcomesResolved") >= 1, "{label}: {found}");
            assert_eq!(
                in_doubt,
                count("callsRerun") + count("outcomesResolved"),
                "{label}: {found}"
            );
        }
        check_same_end(&reference, &dir, &label);
        check_replays_identically(&dir, &label);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(
        killed * 2 >= points,
        "only {killed} of {points} points killed the run"
    );
}

#[test]
fn an_ended_run_is_not_resumed_and_contradicting_flags_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = case(root.path(), "ended");
    assert!(toolhost(&dir, &start_args(&dir), None).success());
    let journal = std::fs::read(dir.join("run/events.jsonl")).unwrap();
    let status = toolhost(&dir, &resume_args(&dir), None);
    assert_eq!(status.code(), Some(2), "{status}");
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(stderr.contains("run.already_ended"), "{stderr}");
    assert_eq!(
        std::fs::read(dir.join("run/events.jsonl")).unwrap(),
        journal
    );

    let dir = case(root.path(), "interrupted");
    let status = toolhost(&dir, &start_args(&dir), Some("event:20"));
    assert_eq!(status.code(), None);
    let journal = std::fs::read(dir.join("run/events.jsonl")).unwrap();
    let mut task = resume_args(&dir);
    task.extend(["--task".into(), "something else".into()]);
    let status = toolhost(&dir, &task, None);
    assert_eq!(status.code(), Some(2), "{status}");
    let stdout = std::fs::read_to_string(dir.join("stdout.log")).unwrap();
    assert!(
        stdout.contains("run.not_resumable") && stdout.contains("task"),
        "{stdout}"
    );
    let mut model = resume_args(&dir);
    model.extend(["--model".into(), "script:elsewhere.json".into()]);
    assert_eq!(toolhost(&dir, &model, None).code(), Some(2));
    // Refusals leave the run resumable: nothing but run_resumed was added.
    let now = events(&dir);
    let before = journal.iter().filter(|b| **b == b'\n').count();
    assert!(now[before..].iter().all(|e| e["type"] == RunResumed::TYPE));
    assert!(toolhost(&dir, &resume_args(&dir), None).success());
}

#[test]
fn a_run_cut_off_before_its_loop_started_says_so() {
    let root = tempfile::tempdir().unwrap();
    let dir = case(root.path(), "early");
    assert_eq!(
        toolhost(&dir, &start_args(&dir), Some("event:1")).code(),
        None
    );
    assert_eq!(toolhost(&dir, &resume_args(&dir), None).code(), Some(2));
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(stderr.contains("before its loop started"), "{stderr}");
    // Nothing reached the chat or the persist directory.
    let fresh = case(root.path(), "fresh");
    assert_eq!(
        std::fs::read(dir.join("chat.jsonl")).unwrap(),
        std::fs::read(fresh.join("chat.jsonl")).unwrap()
    );
    assert_eq!(files(&dir.join("persist")), files(&fresh.join("persist")));
}

#[test]
fn two_processes_never_resume_one_run() {
    let root = tempfile::tempdir().unwrap();
    let dir = case(root.path(), "locked");
    let status = toolhost(&dir, &start_args(&dir), Some("event:20"));
    assert_eq!(status.code(), None);
    // Hold the run the way a resuming process does, then try a second.
    let _held = hold_journal(&dir.join("run/events.jsonl"));
    let status = toolhost(&dir, &resume_args(&dir), None);
    assert_eq!(status.code(), Some(2), "{status}");
    let stderr = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(stderr.contains("in use"), "{stderr}");
}

/// The journal's lock, as the process that has the run open holds it.
fn hold_journal(path: &Path) -> std::fs::File {
    let file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.try_lock().expect("the journal is free");
    file
}

#[test]
fn replay_reports_a_stored_result_the_call_does_not_give() {
    let root = tempfile::tempdir().unwrap();
    let dir = case(root.path(), "tampered");
    assert!(toolhost(&dir, &start_args(&dir), None).success());
    // The stored result of the first chat.search, changed by one word.
    let events = events(&dir);
    let search = events
        .iter()
        .find(|e| {
            e["type"] == ToolResultStored::TYPE && e["payload"]["toolId"] == "builtin:chat.search"
        })
        .unwrap();
    let path = dir
        .join("run")
        .join(search["payload"]["path"].as_str().unwrap());
    let mut record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let content =
        record["result"]["content"]
            .as_str()
            .unwrap()
            .replacen("Library", "Lighthouse", 1);
    record["result"]["content"] = Value::String(content);
    std::fs::write(&path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
    let args: Vec<String> = vec![
        "replay".into(),
        dir.join("run").to_str().unwrap().into(),
        "--json".into(),
    ];
    let status = toolhost(&dir, &args, None);
    assert_eq!(status.code(), Some(1), "{status}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stdout.log")).unwrap()).unwrap();
    assert_eq!(report["different"], 1);
    let different: Vec<&Value> = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|call| call["verdict"] == "different")
        .collect();
    assert_eq!(different[0]["toolId"], "builtin:chat.search");
    // A run that has not ended is not replayed.
    let dir = case(root.path(), "unfinished");
    assert_eq!(
        toolhost(&dir, &start_args(&dir), Some("event:20")).code(),
        None
    );
    let args: Vec<String> = vec!["replay".into(), dir.join("run").to_str().unwrap().into()];
    assert_eq!(toolhost(&dir, &args, None).code(), Some(2));
}
