//! `toolhost mcp serve` when a call ends its run: a raw newline-delimited
//! JSON-RPC client on the server's stdin and stdout, so the test sees every
//! byte and the end of the stream.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_journal::{Event as _, RunCompleted, RunFailed, ToolCallStarted};

mod common;

use common::profile_file;

fn serve(dir: &Path, profile: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .current_dir(dir)
        .arg("--cache-dir")
        .arg(dir)
        .args(["--mcp-dir", "mcp", "mcp", "serve", "--profile"])
        .arg(profile)
        .args(["--run-dir", "served-run"])
        .env("TOOLHOST_EXT_DIR", dir.join("extensions"))
        .env_remove("TOOLHOST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolhost mcp serve")
}

fn send(stdin: &mut impl Write, messages: &[Value]) {
    let mut text = String::new();
    for message in messages {
        text.push_str(&message.to_string());
        text.push('\n');
    }
    stdin.write_all(text.as_bytes()).expect("write");
    stdin.flush().expect("flush");
}

/// Send `initialize` (id 1) and read its answer.
fn initialize(stdin: &mut impl Write, stdout: &mut impl BufRead) -> Value {
    send(
        stdin,
        &[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"}}}),
        ],
    );
    let mut line = String::new();
    stdout.read_line(&mut line).expect("initialize answer");
    serde_json::from_str(&line).expect("json")
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// Wait for the process, killing it after `limit` (a hang is a failure).
fn exit_code(child: &mut Child, limit: Duration) -> Option<i32> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("toolhost mcp serve did not exit within {limit:?} after its run failed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The review saw `mcp serve` keep serving after a run-ending failure and
/// end the journal with `run_completed`.
#[test]
fn a_call_that_fails_the_run_ends_the_server() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let profile = profile_file(
        dir,
        "served",
        json!({"tools":{"allow":["dice.roll","workspace.read_file"]}}),
    );
    std::fs::write(dir.join("outside.txt"), "not the workspace's\n").expect("outside");
    let mut child = serve(dir, &profile);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));

    let answer = initialize(&mut stdin, &mut stdout);
    assert_eq!(answer["id"], 1, "{answer}");

    // The run exists now: plant a symbolic link where the model will read.
    std::os::unix::fs::symlink(
        dir.join("outside.txt"),
        dir.join("served-run/output/link.md"),
    )
    .expect("plant a symlink");
    send(
        &mut stdin,
        &[
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            call(2, "workspace_read_file", json!({"path": "output/link.md"})),
        ],
    );
    // Once the failing call holds the session, a second call can only
    // wait for it or come after it: either way it must be refused.
    let journal = dir.join("served-run/events.jsonl");
    let started = Instant::now();
    while !std::fs::read_to_string(&journal)
        .unwrap_or_default()
        .contains(ToolCallStarted::TYPE)
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the call never started"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // The server may already have closed its stdin: a failed write is fine.
    let _ =
        stdin.write_all(format!("{}\n", call(3, "dice_roll", json!({"formula": "d6"}))).as_bytes());
    let _ = stdin.flush();

    // Read to the end of stdout: the server closes it.
    let mut answers = Vec::new();
    for line in stdout.lines() {
        let line = line.expect("line");
        answers.push(serde_json::from_str::<Value>(&line).expect("json"));
    }
    let code = exit_code(&mut child, Duration::from_secs(60));
    let stderr = {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut text);
        text
    };
    assert_eq!(code, Some(2), "{stderr}");

    let failing = answers
        .iter()
        .find(|answer| answer["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the failing call: {answers:?}"));
    let message = failing["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("run.failed: "), "{failing}");
    assert!(message.contains("workspace.symlink_found"), "{failing}");
    assert_eq!(failing["error"]["data"]["code"], "run.failed");
    // The second call, if the server read it before stopping, is refused
    // the same way; it is never served (no second tool_call_started below).
    for answer in answers.iter().filter(|answer| answer["id"] == 3) {
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("run.failed: "), "{answer}");
    }
    assert!(
        stderr.contains("failed: workspace.symlink_found"),
        "{stderr}"
    );

    let journal = std::fs::read_to_string(dir.join("served-run/events.jsonl")).expect("journal");
    let types: Vec<String> = journal
        .lines()
        .map(|line| {
            let event: Value = serde_json::from_str(line).expect("event");
            event["type"].as_str().expect("type").to_owned()
        })
        .collect();
    assert_eq!(
        types.last().map(String::as_str),
        Some(RunFailed::TYPE),
        "{types:?}"
    );
    assert!(!types.iter().any(|t| t == RunCompleted::TYPE), "{types:?}");
    // The dice were never rolled.
    assert_eq!(
        types.iter().filter(|t| *t == ToolCallStarted::TYPE).count(),
        1,
        "{types:?}"
    );
}

/// A tool whose calls need a person's approval is not served over MCP (an
/// MCP client has no one to ask) unless `--approve-all`, which approves
/// every call and says so in the journal.
#[test]
fn tools_needing_approval_are_served_only_with_approve_all() {
    for approve_all in [false, true] {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path();
        let profile = profile_file(
            dir,
            "served",
            json!({"tools":{"allow":["dice.roll","workspace.read_file"]}}),
        );
        std::fs::create_dir_all(dir.join("config/toolhost")).expect("config");
        std::fs::write(
            dir.join("config/toolhost/policy.json"),
            r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","requireApproval":["dice.roll"]}"#,
        )
        .expect("policy");
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
        command
            .current_dir(dir)
            .arg("--cache-dir")
            .arg(dir)
            .args(["--mcp-dir", "mcp", "mcp", "serve", "--profile"])
            .arg(&profile)
            .args(["--run-dir", "served-run"])
            .env("TOOLHOST_EXT_DIR", dir.join("extensions"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env_remove("TOOLHOST_POLICY")
            .env_remove("TOOLHOST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if approve_all {
            command.arg("--approve-all");
        }
        let mut child = command.spawn().expect("start toolhost mcp serve");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut answer = |messages: &[Value]| -> Value {
            send(&mut stdin, messages);
            let mut line = String::new();
            stdout.read_line(&mut line).expect("answer");
            serde_json::from_str(&line).expect("json")
        };
        answer(&[
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1"}}}),
        ]);
        let listed = answer(&[
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        ]);
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        assert!(names.contains(&"workspace_read_file"), "{names:?}");
        assert_eq!(names.contains(&"dice_roll"), approve_all, "{names:?}");
        if approve_all {
            let called = answer(&[call(3, "dice_roll", json!({"formula": "d6"}))]);
            assert_eq!(called["result"]["isError"], false, "{called}");
            let journal =
                std::fs::read_to_string(dir.join("served-run/events.jsonl")).expect("journal");
            assert!(
                journal.contains(r#""by":"mcp serve --approve-all""#),
                "{journal}"
            );
        }
        drop(stdin);
        assert_eq!(exit_code(&mut child, Duration::from_secs(60)), Some(0));
    }
}

/// The server's descriptors that are unnamed files in `dir`: a file made
/// with `O_TMPFILE` shows in `/proc` as `<dir>/#<inode> (deleted)`. Their
/// inodes.
fn unnamed_files_in(pid: u32, dir: &Path) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let prefix = format!("{}/#", dir.display());
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                target.starts_with(&prefix) && target.ends_with(" (deleted)")
            })
        })
        .filter_map(|entry| std::fs::metadata(entry.path()).ok())
        .map(|meta| meta.ino())
        .collect()
}

fn names_in(dir: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether this file system makes unnamed files (`O_TMPFILE`).
fn makes_unnamed_files(dir: &Path) -> bool {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    openat(
        CWD,
        dir,
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .is_ok()
}

/// Between a client's requests the server makes the unnamed files of the
/// next call's audit files, so a call only writes and links them (issue
/// 21): from the second answer on (a directory written once gets none)
/// one waits in `tool-args/` and one in `tool-results/`, the next call's
/// files are those very inodes, and the ones made ahead for a call that
/// never comes leave nothing behind.
#[test]
fn between_calls_the_next_calls_files_wait_unnamed() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path().canonicalize().expect("canonical");
    if !makes_unnamed_files(&dir) {
        eprintln!("skipped: no O_TMPFILE on this file system");
        return;
    }
    let profile = profile_file(&dir, "served", json!({"tools":{"allow":["dice.roll"]}}));
    let mut child = serve(&dir, &profile);
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    initialize(&mut stdin, &mut stdout);
    let mut line = String::new();
    send(
        &mut stdin,
        &[json!({"jsonrpc": "2.0", "method": "notifications/initialized"})],
    );

    let args_dir = dir.join("served-run/tool-args");
    let results_dir = dir.join("served-run/tool-results");
    let mut waiting: Option<(u64, u64)> = None;
    for id in 2..6 {
        let (args_before, results_before) = (names_in(&args_dir), names_in(&results_dir));
        send(
            &mut stdin,
            &[call(id, "dice_roll", json!({"formula": "d6"}))],
        );
        line.clear();
        stdout.read_line(&mut line).expect("answer");
        let answer: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(answer["id"], id, "{line}");
        assert_eq!(answer["result"]["isError"], false, "{line}");

        // The call made exactly one file in each directory.
        let new_in = |dir: &Path, before: &std::collections::BTreeSet<String>| {
            let added: Vec<String> = names_in(dir).difference(before).cloned().collect();
            assert_eq!(added.len(), 1, "{}: {added:?}", dir.display());
            dir.join(&added[0])
        };
        let args_file = new_in(&args_dir, &args_before);
        let result_file = new_in(&results_dir, &results_before);
        let record: Value =
            serde_json::from_slice(&std::fs::read(&args_file).expect("read")).expect("json");
        assert_eq!(record["arguments"], json!({"formula": "d6"}));
        if let Some((args_inode, result_inode)) = waiting {
            use std::os::unix::fs::MetadataExt as _;
            let inode = |path: &Path| std::fs::metadata(path).expect("stat").ino();
            assert_eq!(inode(&args_file), args_inode, "made ahead, then named");
            assert_eq!(inode(&result_file), result_inode, "made ahead, then named");
        }

        if id == 2 {
            continue;
        }
        // After the answer: one unnamed file waits in each directory.
        let started = Instant::now();
        waiting = loop {
            let (args, results) = (
                unnamed_files_in(pid, &args_dir),
                unnamed_files_in(pid, &results_dir),
            );
            assert!(
                args.len() <= 1 && results.len() <= 1,
                "{args:?} {results:?}"
            );
            if let ([args], [result]) = (args.as_slice(), results.as_slice()) {
                break Some((*args, *result));
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "no file was made ahead after call {id}"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
    }
    drop(stdin);
    assert_eq!(exit_code(&mut child, Duration::from_secs(60)), Some(0));
    assert_eq!(
        names_in(&args_dir).len(),
        4,
        "the four calls' files, no more"
    );
    assert_eq!(names_in(&results_dir).len(), 4);
    assert!(names_in(&dir.join("served-run/.tmp")).is_empty());
}
