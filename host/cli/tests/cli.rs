//! The `toolhost` binary as a user runs it: output, exit codes, caching.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use toolhost_journal::{
    AgentDelegateStarted, ChatCommitCompleted, ContextAssembled, Event as _, ModelCompleted,
    ModelRequestCreated, RunCompleted, RunFailed, RunResumed, RunStarted, TaskReturnCompleted,
    ToolCallApprovalDecided, ToolCallCompleted, ToolCallFailed, ToolCallRequested, ToolCallStarted,
    ToolResultStored,
};

mod common;

use common::serve::copy_fixture_chat;
use common::{profile_file, repo, stderr};

/// Run `toolhost` with its cache in `cache`, working in `cache` too, so the
/// run directories it creates (`runs/…`) stay inside the test's temp dir.
fn toolhost(cache: &Path, args: &[&str]) -> Output {
    common::toolhost_in(cache)
        .args(args)
        .output()
        .expect("run toolhost")
}

/// The run directory a `call` reported on stderr (`run: <dir>`).
fn run_dir(cache: &Path, output: &Output) -> std::path::PathBuf {
    let text = stderr(output);
    let line = text
        .lines()
        .find_map(|line| line.strip_prefix("run: "))
        .unwrap_or_else(|| panic!("no run line in {text}"));
    cache.join(line)
}

fn journal_types(cache: &Path, run: &Path) -> Vec<String> {
    let output = toolhost(cache, &["journal", run.to_str().expect("utf-8"), "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let events: Value = serde_json::from_slice(&output.stdout).expect("json");
    events
        .as_array()
        .expect("array")
        .iter()
        .map(|event| event["type"].as_str().expect("type").to_owned())
        .collect()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Parse `Rolled 3d6+4: 2 + 5 + 6 + 4 = 17.` into (rolls, total).
fn parse_roll(line: &str) -> (Vec<i64>, i64) {
    let expression = line
        .trim()
        .strip_prefix("Rolled 3d6+4: ")
        .and_then(|rest| rest.strip_suffix('.'))
        .unwrap_or_else(|| panic!("unexpected output: {line}"));
    let (sum, total) = expression.split_once(" = ").expect("a total");
    let terms: Vec<i64> = sum
        .split(" + ")
        .map(|term| term.parse().expect("a number"))
        .collect();
    (
        terms[..terms.len() - 1].to_vec(),
        total.parse().expect("a total"),
    )
}

#[test]
fn call_rolls_dice_and_prints_the_rolls_and_total() {
    let cache = tempfile::tempdir().expect("tempdir");
    for tool in ["dice.roll", "builtin:dice.roll"] {
        let output = toolhost(cache.path(), &["call", tool, r#"{"formula":"3d6+4"}"#]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let (rolls, total) = parse_roll(&stdout(&output));
        assert_eq!(rolls.len(), 3);
        assert!(rolls.iter().all(|roll| (1..=6).contains(roll)), "{rolls:?}");
        assert_eq!(total, rolls.iter().sum::<i64>() + 4);
        assert!((7..=22).contains(&total));
    }
}

#[test]
fn recoverable_tool_error_exits_1_with_the_model_text() {
    let cache = tempfile::tempdir().expect("tempdir");
    let output = toolhost(
        cache.path(),
        &["call", "dice.roll", r#"{"formula":"1d20++4"}"#],
    );
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.starts_with("## Tool error\n\ndice.invalid_formula: "),
        "{text}"
    );

    let output = toolhost(cache.path(), &["call", "dice.roll", "not json"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("tool.invalid_arguments"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn system_failures_and_bad_usage_exit_2() {
    let cache = tempfile::tempdir().expect("tempdir");
    let output = toolhost(cache.path(), &["call", "no.such_tool", "{}"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no tool `no.such_tool`"),
        "{}",
        stderr(&output)
    );

    let output = toolhost(cache.path(), &["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn tools_list_shows_id_alias_title_annotations_and_source() {
    let cache = tempfile::tempdir().expect("tempdir");
    let output = toolhost(cache.path(), &["tools", "list"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let header = text.lines().next().expect("header");
    for column in ["ID", "ALIAS", "TITLE", "ANNOTATIONS", "SOURCE"] {
        assert!(header.contains(column), "{header}");
    }
    let dice = text
        .lines()
        .find(|line| line.starts_with("builtin:dice.roll"))
        .expect("dice row");
    for cell in [
        "dice_roll",
        "Roll dice",
        "readOnly",
        "sourceKind=random",
        "builtin dice-roll",
    ] {
        assert!(dice.contains(cell), "{dice}");
    }

    let output = toolhost(cache.path(), &["tools", "list", "--json"]);
    let rows: Value = serde_json::from_slice(&output.stdout).expect("json");
    let dice = rows
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["id"] == "builtin:dice.roll"))
        .expect("dice entry");
    assert_eq!(dice["alias"], "dice_roll");
    assert_eq!(dice["annotations"]["readOnly"], true);
    assert_eq!(dice["source"]["kind"], "builtin");
    assert_eq!(dice["inputSchema"]["type"], "object");
}

#[test]
fn json_output_records_the_seed_and_replays() {
    let cache = tempfile::tempdir().expect("tempdir");
    let run = |extra: &[&str]| -> Value {
        let mut args = vec!["call", "dice.roll", r#"{"formula":"10d100"}"#, "--json"];
        args.extend_from_slice(extra);
        let output = toolhost(cache.path(), &args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        serde_json::from_slice(&output.stdout).expect("json")
    };
    let first = run(&[]);
    let seed = first["report"]["entropy"]["seed"].as_u64().expect("seed");
    let replay = run(&["--seed", &seed.to_string()]);
    assert_eq!(
        replay["result"]["structured"],
        first["result"]["structured"]
    );
    assert_eq!(first["result"]["toolId"], "builtin:dice.roll");
    assert!(
        first["result"]["callId"]
            .as_str()
            .is_some_and(|id| id.starts_with("cli_"))
    );
}

/// The builtins are listed from the generated table and each compiled at
/// its first use: listing compiles nothing, a cold call compiles its one
/// tool, `tools load` the rest, and later commands read the cache.
#[test]
fn a_call_compiles_only_its_tool_and_tools_load_compiles_the_rest_once() {
    use std::os::unix::fs::MetadataExt;

    let cache = tempfile::tempdir().expect("tempdir");
    let entries = || -> Vec<(std::path::PathBuf, u64)> {
        let mut entries: Vec<_> = std::fs::read_dir(cache.path())
            .expect("cache dir")
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
            .map(|path| {
                let inode = std::fs::metadata(&path).expect("metadata").ino();
                (path, inode)
            })
            .collect();
        entries.sort();
        entries
    };
    let output = toolhost(cache.path(), &["tools", "list", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let tools = serde_json::from_slice::<Value>(&output.stdout).expect("json");
    let builtins = tools.as_array().map_or(0, Vec::len);
    assert!(builtins > 10, "{tools}");
    assert_eq!(entries(), [], "listing compiles nothing");

    let output = toolhost(cache.path(), &["call", "dice.roll", r#"{"formula":"d6"}"#]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let after_call = entries();
    assert_eq!(
        after_call.len(),
        1,
        "only dice-roll compiled: {after_call:?}"
    );

    let output = toolhost(cache.path(), &["tools", "load"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let table = stdout(&output);
    let from = |id: &str| -> String {
        let row = table
            .lines()
            .find(|line| line.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("no row for {id} in {table}"));
        row.split_whitespace().nth(1).unwrap_or_default().to_owned()
    };
    assert_eq!(from("builtin:dice.roll"), "cache", "{table}");
    assert_eq!(from("builtin:workspace.read_file"), "compiled", "{table}");
    let loaded = entries();
    assert_eq!(loaded.len(), builtins, "one entry per builtin");
    assert!(after_call.iter().all(|entry| loaded.contains(entry)));

    // Later commands read the entries; a recompile would replace the files.
    let output = toolhost(cache.path(), &["tools", "load"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stdout(&output)
            .lines()
            .skip(1)
            .all(|row| row.split_whitespace().nth(1) == Some("cache")),
        "{}",
        stdout(&output)
    );
    let output = toolhost(cache.path(), &["call", "dice.roll", r#"{"formula":"d6"}"#]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(entries(), loaded);
}

#[test]
fn a_call_is_journalled_and_audited_in_its_run_directory() {
    let cache = tempfile::tempdir().expect("tempdir");
    let output = toolhost(cache.path(), &["call", "dice.roll", r#"{"formula":"2d4"}"#]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let run = run_dir(cache.path(), &output);
    assert!(
        run.starts_with(cache.path().join("runs")),
        "{}",
        run.display()
    );
    assert_eq!(
        journal_types(cache.path(), &run),
        [
            RunStarted::TYPE,
            ContextAssembled::TYPE,
            ModelRequestCreated::TYPE,
            ToolCallRequested::TYPE,
            ToolCallStarted::TYPE,
            ToolResultStored::TYPE,
            ToolCallCompleted::TYPE,
            RunCompleted::TYPE
        ]
    );
    let args = std::fs::read_dir(run.join("tool-args"))
        .expect("tool-args")
        .count();
    let results = std::fs::read_dir(run.join("tool-results"))
        .expect("tool-results")
        .count();
    assert_eq!((args, results), (1, 1));
    assert!(
        run.join("input/invocations/inv_root/tool_snapshot.json")
            .is_file()
    );

    // The readable table shows the same events.
    let output = toolhost(cache.path(), &["journal", run.to_str().expect("utf-8")]);
    let table = stdout(&output);
    assert!(table.starts_with("SEQ"), "{table}");
    assert!(table.contains(ToolCallCompleted::TYPE), "{table}");
    assert!(table.contains("builtin:dice.roll ok in"), "{table}");
}

#[test]
fn budgets_hold_across_calls_in_one_run_directory() {
    let cache = tempfile::tempdir().expect("tempdir");
    let profile = profile_file(
        cache.path(),
        "roller",
        json!({"tools":{"allow":["dice.roll"],"maxCallsPerRun":3,"maxCallsPerTool":{"dice.roll":2}}}),
    );
    let profile = profile.to_str().expect("utf-8");
    let call = |extra: &[&str]| {
        let mut args = vec!["call", "--run-dir", "r", "dice.roll", r#"{"formula":"d6"}"#];
        args.extend_from_slice(extra);
        toolhost(cache.path(), &args)
    };
    assert_eq!(call(&["--profile", profile]).status.code(), Some(0));
    assert_eq!(call(&[]).status.code(), Some(0), "continues the run");
    let third = call(&[]);
    assert_eq!(third.status.code(), Some(1), "{}", stderr(&third));
    assert!(
        stdout(&third).starts_with("## Tool error\n\nagent.tool_budget_exhausted: `dice_roll`"),
        "{}",
        stdout(&third)
    );
    let types = journal_types(cache.path(), &cache.path().join("r"));
    assert_eq!(
        types.iter().filter(|t| *t == ToolCallStarted::TYPE).count(),
        2
    );
    assert_eq!(types.iter().filter(|t| *t == RunResumed::TYPE).count(), 2);
    assert_eq!(
        types.iter().filter(|t| *t == ToolCallFailed::TYPE).count(),
        1
    );

    // A continued run keeps its frozen profile: another one is refused.
    let other = profile_file(
        cache.path(),
        "other",
        json!({"tools":{"allow":["dice.roll"]}}),
    );
    let refused = call(&["--profile", other.to_str().expect("utf-8")]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("was created with profile `roller`"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn a_tool_the_profile_does_not_offer_is_a_policy_denial() {
    let cache = tempfile::tempdir().expect("tempdir");
    let default = concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/default.json");
    let output = toolhost(
        cache.path(),
        &[
            "call",
            "--profile",
            default,
            "dice.roll",
            r#"{"formula":"d6"}"#,
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.contains("agent.tool_policy_denied"), "{text}");
    assert!(text.contains("not in tools.allow"), "{text}");
    let run = run_dir(cache.path(), &output);
    let types = journal_types(cache.path(), &run);
    assert_eq!(types.last().map(String::as_str), Some(RunFailed::TYPE));
    assert!(!types.iter().any(|t| t == ToolCallStarted::TYPE));

    let profile = profile_file(
        cache.path(),
        "denied",
        json!({"tools":{"allow":["dice.roll"],"deny":["builtin:dice.roll"]}}),
    );
    let output = toolhost(
        cache.path(),
        &[
            "call",
            "--profile",
            profile.to_str().expect("utf-8"),
            "dice.roll",
            "{}",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("denied by tools.deny"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_bad_profile_is_refused_naming_the_field() {
    let cache = tempfile::tempdir().expect("tempdir");
    let profile = profile_file(
        cache.path(),
        "bad",
        json!({"tools":{"allow":["dice.roll","dice.rol"]}}),
    );
    let output = toolhost(
        cache.path(),
        &["snapshot", "--profile", profile.to_str().expect("utf-8")],
    );
    assert_eq!(output.status.code(), Some(2));
    let text = stderr(&output);
    assert!(text.contains("`tools.allow[1]`"), "{text}");
    assert!(text.contains("dice.rol"), "{text}");
}

#[test]
fn snapshot_prints_the_compiled_snapshot_and_what_was_left_out() {
    let cache = tempfile::tempdir().expect("tempdir");
    let profile = profile_file(
        cache.path(),
        "p",
        json!({"tools":{"allow":["dice.roll","workspace.finish","mcp/3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b:get-forecast"],"maxCallsPerRun":7,"maxCallsPerTool":{"dice.roll":2}}, "sandbox":{"limits":{"dice.roll":{"deadlineMs":250}}}}),
    );
    let profile = profile.to_str().expect("utf-8");
    let output = toolhost(cache.path(), &["snapshot", "--profile", profile]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let snapshot: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(snapshot["id"], "inv_root");
    assert_eq!(snapshot["maxCallsPerInvocation"], 7);
    assert_eq!(snapshot["bindings"][0]["modelAlias"], "dice_roll");
    assert_eq!(snapshot["bindings"][0]["maxCalls"], 2);
    assert_eq!(
        snapshot["bindings"][0]["limits"],
        serde_json::json!({"deadlineMs": 250})
    );
    // No MCP server is registered: nothing provides that tool.
    assert!(
        stderr(&output).contains("omitted mcp/3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b:get-forecast"),
        "{}",
        stderr(&output)
    );
    assert_eq!(snapshot["bindings"][1]["modelAlias"], "workspace_finish");

    let child = toolhost(cache.path(), &["snapshot", "--profile", profile, "--child"]);
    assert_eq!(child.status.code(), Some(0));
    let text = stderr(&child);
    assert!(
        text.contains("omitted builtin:workspace.finish: a return-mode child"),
        "{text}"
    );
    // The runtime gives a child task.return instead.
    let child_snapshot: Value = serde_json::from_slice(&child.stdout).expect("json");
    assert!(
        child_snapshot.to_string().contains("\"task_return\""),
        "{child_snapshot}"
    );

    // Without --profile: the built-in default, where dice are off.
    let default = toolhost(cache.path(), &["snapshot"]);
    assert_eq!(default.status.code(), Some(0));
    let snapshot: Value = serde_json::from_slice(&default.stdout).expect("json");
    assert!(!snapshot.to_string().contains("dice_roll"));
}

fn fixture(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
        .to_str()
        .expect("utf-8")
        .to_owned()
}

#[test]
fn a_run_bound_to_a_chat_world_info_and_skills_serves_their_tools() {
    let cache = tempfile::tempdir().expect("tempdir");
    let chat = fixture("chats/long_character_chat.jsonl");
    let global = format!("global:{}", fixture("skills/global"));
    let character = format!("character:{}", fixture("skills/character"));
    let snapshot = fixture("worldinfo/prompt_snapshot.json");
    let bound = toolhost(
        cache.path(),
        &[
            "call",
            "--run-dir",
            "k",
            "--chat",
            &chat,
            "--skills",
            &global,
            "--skills",
            &character,
            "--worldinfo",
            &snapshot,
            "chat.search",
            r#"{"query":"Drowned Library","limit":2}"#,
        ],
    );
    assert_eq!(bound.status.code(), Some(0), "{}", stderr(&bound));
    let text = stdout(&bound);
    assert!(text.contains("matched 2 message(s) (65 searched"), "{text}");
    assert!(text.contains("ref chat:current#1\n"), "{text}");
    // The broken fixture skill is skipped with a warning, not fatal.
    assert!(
        stderr(&bound).contains("broken-notes"),
        "{}",
        stderr(&bound)
    );

    // Later calls continue the run with what it was bound to.
    let listed = toolhost(
        cache.path(),
        &["call", "--run-dir", "k", "skill.list", "{}"],
    );
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert!(
        stdout(&listed).starts_with("2 skill(s) available."),
        "{}",
        stdout(&listed)
    );
    assert!(
        stdout(&listed).contains("`prose-style`"),
        "{}",
        stdout(&listed)
    );
    let activated = toolhost(
        cache.path(),
        &["call", "--run-dir", "k", "worldinfo.read_activated", "{}"],
    );
    assert_eq!(activated.status.code(), Some(0), "{}", stderr(&activated));
    assert!(
        stdout(&activated).starts_with("6 world-info entries activated"),
        "{}",
        stdout(&activated)
    );
    let read = toolhost(
        cache.path(),
        &[
            "call",
            "--run-dir",
            "k",
            "chat.read_messages",
            r#"{"messages":[{"index":1}]}"#,
            "--json",
        ],
    );
    assert_eq!(read.status.code(), Some(0), "{}", stderr(&read));
    let report: Value = serde_json::from_slice(&read.stdout).expect("json");
    let message = &report["result"]["structured"]["messages"][0];
    assert_eq!(message["index"], 1, "{report}");
    assert!(
        message["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Drowned Library of Vessane"),
        "{report}"
    );

    // A run keeps its bindings: rebinding it to another chat is refused.
    let rebound = toolhost(
        cache.path(),
        &[
            "call",
            "--run-dir",
            "k",
            "--chat",
            &fixture("chats/cjk_chat.jsonl"),
            "chat.search",
            r#"{"query":"x"}"#,
        ],
    );
    assert_eq!(rebound.status.code(), Some(2));
    assert!(
        stderr(&rebound).contains("keeps the chat, world info and skills it was created with"),
        "{}",
        stderr(&rebound)
    );

    // A run without a chat: the tool's typed error, exit 1.
    let unbound = toolhost(
        cache.path(),
        &[
            "call",
            "chat.read_messages",
            r#"{"messages":[{"index":0}]}"#,
        ],
    );
    assert_eq!(unbound.status.code(), Some(1), "{}", stderr(&unbound));
    assert!(
        stdout(&unbound).starts_with("## Tool error\n\nchat.not_found:"),
        "{}",
        stdout(&unbound)
    );
}

/// `--prompt-snapshot`: a bad one is refused naming the field, before any
/// run directory exists; a good one is what the run's prompt comes from,
/// stored whole; with `--worldinfo` too it is refused.
#[test]
fn run_takes_a_prompt_snapshot_and_refuses_a_bad_one_before_anything_is_made() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    copy_fixture_chat(&dir.join("chat.jsonl"));
    let script = repo("examples/demo/script.json");
    let example = repo("examples/prompt-snapshot.json");
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        json!({"schemaVersion": 1, "messages": [
            {"role": "system", "content": "preset"},
            {"role": "tool", "content": "x"}
        ]})
        .to_string(),
    )
    .expect("bad");
    let model = format!("script:{}", script.display());
    let agents = repo("examples/demo/agents");
    let run = |snapshot: &Path, run_dir: &str, extra: &[&str]| {
        let mut args = vec![
            "run",
            "--model",
            &model,
            "--agents",
            agents.to_str().expect("utf-8"),
            "--chat",
            "chat.jsonl",
            "--prompt-snapshot",
            snapshot.to_str().expect("utf-8"),
            "--run-dir",
            run_dir,
            "--json",
        ];
        args.extend_from_slice(extra);
        toolhost(dir, &args)
    };
    let refused = run(&bad, "bad-run", &[]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    let said = stderr(&refused);
    assert!(
        said.contains("agent.invalid_prompt_snapshot_file") && said.contains("messages[1].role"),
        "{said}"
    );
    assert!(!dir.join("bad-run").exists(), "nothing is made");
    let both = run(
        &example,
        "both-run",
        &["--worldinfo", &fixture("worldinfo/prompt_snapshot.json")],
    );
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
    assert!(!dir.join("both-run").exists());

    let output = run(&example, "good-run", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("good-run/run.json")).expect("run.json"),
    )
    .expect("json");
    assert_eq!(manifest["inputs"]["prompt"], "snapshot", "{manifest}");
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("good-run/input/prompt_snapshot.json")).expect("stored"),
    )
    .expect("json");
    let given: Value =
        serde_json::from_str(&std::fs::read_to_string(&example).expect("example")).expect("json");
    assert_eq!(stored, given);
    // The progress line says what the model read first.
    assert!(
        stderr(&output).contains("prompt from the snapshot: 9 message(s), 4 of 4 history"),
        "{}",
        stderr(&output)
    );
}

/// `toolhost run --commit host`: the run waits for another program (the
/// chat app) to save its reply and answer with `toolhost commits answer`;
/// the chat file is never written.
#[test]
fn a_host_commit_run_waits_for_the_apps_answer_and_leaves_the_chat_alone() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    copy_fixture_chat(&dir.join("chat.jsonl"));
    let before = std::fs::read(dir.join("chat.jsonl")).expect("chat");
    let script = repo("examples/demo/script.json");
    let running = common::toolhost_in(dir)
        .args([
            "run",
            "--model",
            &format!("script:{}", script.display()),
            "--agents",
            repo("examples/demo/agents").to_str().expect("utf-8"),
            "--chat",
            "chat.jsonl",
            "--run-dir",
            "host-run",
            "--commit",
            "host",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let run_dir = dir.join("host-run");
    let mut pending = Value::Null;
    for _ in 0..1200 {
        if run_dir.join("run.json").exists() {
            let listed = toolhost(dir, &["commits", "list", "host-run", "--json"]);
            if listed.status.success() {
                pending = serde_json::from_slice(&listed.stdout).expect("json");
                if pending.as_array().is_some_and(|list| !list.is_empty()) {
                    break;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let commit = pending[0]["request"]["commitId"]
        .as_str()
        .unwrap_or_else(|| panic!("no commit waited: {pending}"))
        .to_owned();
    assert!(
        pending[0]["request"]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("*Mirelle hauls you up"))
    );
    let answered = toolhost(
        dir,
        &[
            "commits",
            "answer",
            "host-run",
            &commit,
            "--committed",
            "65",
        ],
    );
    assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
    let again = toolhost(
        dir,
        &[
            "commits",
            "answer",
            "host-run",
            &commit,
            "--committed",
            "65",
        ],
    );
    assert_ne!(again.status.code(), Some(0), "answered once");
    let output = running.wait_with_output().expect("the run ends");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary json");
    assert_eq!(summary["commits"][0]["messageIndex"], 65);
    assert_eq!(std::fs::read(dir.join("chat.jsonl")).expect("chat"), before);
}

#[test]
fn run_drives_a_scripted_agent_to_a_committed_reply() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let chat = dir.join("chat.jsonl");
    copy_fixture_chat(&chat);
    let before = std::fs::read_to_string(&chat).expect("read");
    let script = repo("examples/demo/script.json");
    let output = toolhost(
        dir,
        &[
            "run",
            "--profile",
            repo("profiles/default.json").to_str().expect("utf-8"),
            "--model",
            &format!("script:{}", script.display()),
            "--agents",
            repo("examples/demo/agents").to_str().expect("utf-8"),
            "--chat",
            "chat.jsonl",
            "--worldinfo",
            &fixture("worldinfo/prompt_snapshot.json"),
            "--skills",
            &format!("global:{}", fixture("skills/global")),
            "--run-dir",
            "agent-run",
            "--json",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary json");
    assert_eq!(summary["status"], "completed");
    assert_eq!(summary["foregroundRounds"], 5);
    assert_eq!(summary["toolCalls"], 13);
    assert_eq!(summary["tasks"][0]["agentId"], "researcher");
    assert_eq!(summary["tasks"][0]["status"], "completed");
    assert_eq!(summary["commits"][0]["messageIndex"], 65);
    // A live line per event on stderr.
    let progress = stderr(&output);
    for kind in [
        ModelCompleted::TYPE,
        AgentDelegateStarted::TYPE,
        TaskReturnCompleted::TYPE,
        ChatCommitCompleted::TYPE,
        RunCompleted::TYPE,
    ] {
        assert!(progress.contains(kind), "{kind} missing from:\n{progress}");
    }
    // The chat gained exactly the committed reply, after the untouched original.
    let after = std::fs::read_to_string(&chat).expect("read");
    assert!(after.starts_with(&before));
    let added: Vec<&str> = after[before.len()..]
        .lines()
        .filter(|line| !line.is_empty())
        .collect();
    assert_eq!(added.len(), 1);
    let message: Value = serde_json::from_str(added[0]).expect("a JSON message line");
    assert!(
        message["mes"]
            .as_str()
            .expect("mes")
            .starts_with("*Mirelle hauls you up")
    );
    assert_eq!(message["is_user"], false);
    // As SillyTavern writes a reply: its model, its generation times, swipes.
    assert!(
        message["extra"]["model"]
            .as_str()
            .is_some_and(|model| model.contains("script")),
        "{message}"
    );
    assert!(message["gen_started"].is_string() && message["gen_finished"].is_string());
    assert_eq!(message["swipes"][0], message["mes"]);
    let types = journal_types(dir, &dir.join("agent-run"));
    assert_eq!(types.last().map(String::as_str), Some(RunCompleted::TYPE));
}

#[test]
fn run_exit_codes_say_failed_and_bad_usage() {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    copy_fixture_chat(&dir.join("chat.jsonl"));
    // A model that only talks: drift until the rounds run out.
    std::fs::write(
        dir.join("talk.json"),
        r#"{"schemaVersion":1,"kind":"toolhost.modelScript","replies":[{"text":"Hi."},{"text":"Hello?"}]}"#,
    )
    .expect("script");
    let output = toolhost(
        dir,
        &[
            "run",
            "--model",
            "script:talk.json",
            "--chat",
            "chat.jsonl",
            "--max-rounds",
            "2",
        ],
    );
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("status:   failed"), "{text}");
    assert!(text.contains("model.tool_call_required"), "{text}");
    assert!(text.contains("(you may retry)"), "{text}");

    let no_chat = toolhost(dir, &["run", "--model", "script:talk.json"]);
    assert_eq!(no_chat.status.code(), Some(2));
    assert!(stderr(&no_chat).contains("--chat"), "{}", stderr(&no_chat));
    let bad_model = toolhost(dir, &["run", "--model", "gpt-4o", "--chat", "chat.jsonl"]);
    assert_eq!(bad_model.status.code(), Some(2));
    assert!(
        stderr(&bad_model).contains("model.configuration_invalid"),
        "{}",
        stderr(&bad_model)
    );
}

#[test]
fn mcp_commands_register_refresh_grant_pause_and_remove_a_real_server() {
    let script =
        repo("tests/peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|output| output.status.success()) {
        eprintln!("SKIPPED: node is not installed");
        return;
    }
    assert!(
        script.exists(),
        "run `make setup` to install server-everything"
    );
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let mcp = |args: &[&str]| {
        let mut all = vec!["mcp", "--mcp-dir", "mcp"];
        all.extend_from_slice(args);
        toolhost(dir, &all)
    };
    let script = script.to_str().expect("utf-8");
    let added = mcp(&["add", "everything", "--", "node", script, "stdio"]);
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    let listed = mcp(&["list"]);
    assert!(stdout(&listed).contains("tools: none offered"));
    assert!(stderr(&listed).contains("mcp.no_tool_cache"));

    let refreshed = mcp(&["refresh"]);
    assert_eq!(refreshed.status.code(), Some(0), "{}", stderr(&refreshed));
    assert!(stdout(&refreshed).contains("everything: 13 tool(s) cached"));

    // Listed, yet off until allowed: nothing offered, each one saying so.
    let listed = mcp(&["list"]);
    assert!(
        stdout(&listed).contains("tools: none offered"),
        "{}",
        stdout(&listed)
    );
    assert!(
        stderr(&listed).contains("mcp.tool_not_allowed"),
        "{}",
        stderr(&listed)
    );
    mcp(&["grant", "everything", "echo", "allow"]);

    let ask = mcp(&["grant", "everything", "get-env", "ask"]);
    assert!(stdout(&ask).contains("waits for a person's approval"));
    mcp(&["grant", "everything", "get-env", "deny"]);
    let listed = mcp(&["list", "--json"]);
    let value: Value = serde_json::from_slice(&listed.stdout).expect("json");
    let tools = value["servers"][0]["tools"].as_array().expect("tools");
    // Only what was allowed by name.
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert!(
        tools
            .iter()
            .any(|tool| tool.as_str().is_some_and(|t| t.ends_with(":echo")))
    );
    assert!(
        !tools
            .iter()
            .any(|tool| tool.as_str().is_some_and(|t| t.ends_with(":get-env")))
    );

    // `--allow-all`: every listed tool but those denied by name.
    let added = mcp(&["add", "all", "--allow-all", "--", "node", script, "stdio"]);
    assert_eq!(added.status.code(), Some(0), "{}", stderr(&added));
    assert_eq!(mcp(&["refresh", "all"]).status.code(), Some(0));
    let listed = mcp(&["list", "--json"]);
    let value: Value = serde_json::from_slice(&listed.stdout).expect("json");
    assert_eq!(
        value["servers"][1]["tools"].as_array().map(Vec::len),
        Some(13),
        "{value}"
    );
    assert_eq!(mcp(&["remove", "all"]).status.code(), Some(0));

    mcp(&["pause", "everything"]);
    assert!(stderr(&mcp(&["list"])).contains("mcp.server_paused"));
    assert_eq!(mcp(&["remove", "everything"]).status.code(), Some(0));
    let missing = mcp(&["pause", "everything"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("mcp.not_registered"));
}

#[test]
fn mcp_serve_answers_the_official_python_client_through_the_gate() {
    let Some(python) = common::python(&["mcp"]) else {
        return;
    };
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let profile = profile_file(
        dir,
        "served",
        json!({"tools":{"allow":["dice.roll","workspace.write_file","workspace.read_file","workspace.commit","workspace.finish","agent.list"], "maxCallsPerTool":{"dice.roll":2}}, "delegation":{"canDelegate":true}}),
    );
    let output = Command::new(&python)
        .current_dir(dir)
        .arg(repo("tests/peers/python/mcp_client.py"))
        .arg(env!("CARGO_BIN_EXE_toolhost"))
        .args(["--cache-dir", dir.to_str().expect("utf-8")])
        .args(["--mcp-dir", "mcp", "mcp", "serve", "--profile"])
        .arg(&profile)
        .args(["--run-dir", "served-run"])
        .output()
        .expect("run the python client");
    assert!(output.status.success(), "{}", stderr(&output));
    // A client's pipes are polled by the server's one thread, not handed
    // to blocking threads (src/stdio.rs).
    assert!(
        stderr(&output).contains("tool(s) over stdio (pipes)"),
        "{}",
        stderr(&output)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).expect("client json");
    // Control tools (the table's `control` builtins) need an agent loop:
    // not served; `agent.list` only reads, so it is.
    assert_eq!(
        answer["tools"],
        serde_json::json!([
            "dice_roll",
            "workspace_write_file",
            "workspace_read_file",
            "agent_list"
        ])
    );
    let calls = &answer["calls"];
    assert_eq!(calls["roll"]["isError"], false);
    assert!(
        calls["roll"]["text"][0]
            .as_str()
            .expect("text")
            .starts_with("Rolled 2d6: ")
    );
    assert_eq!(calls["badRoll"]["isError"], true);
    assert!(
        calls["badRoll"]["text"][0]
            .as_str()
            .expect("text")
            .contains("dice.invalid_formula")
    );
    assert_eq!(calls["read"]["isError"], false);
    assert!(
        calls["read"]["text"][0]
            .as_str()
            .expect("text")
            .contains("1 | hello")
    );
    // The profile's budget holds: the third roll is refused by the gate.
    assert!(
        calls["overBudget"]["text"][0]
            .as_str()
            .expect("text")
            .contains("agent.tool_budget_exhausted")
    );
    let types = journal_types(dir, &dir.join("served-run"));
    assert_eq!(
        types.iter().filter(|t| *t == ToolCallStarted::TYPE).count(),
        4
    );
    assert_eq!(types.last().map(String::as_str), Some(RunCompleted::TYPE));
}

fn write_policy(path: &Path, deny: &[&str], ask: &[&str]) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    let policy = serde_json::json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
                                    "deny": deny, "requireApproval": ask});
    std::fs::write(path, policy.to_string()).expect("policy");
}

/// The user's policy (from the config directory, or `--policy`) and the
/// platform's (`--platform-policy`) reach every snapshot: what they deny
/// is left out with their reason and cannot be called, what needs
/// approval is marked, and a policy that does not read stops the command.
#[test]
fn the_users_and_the_platforms_policies_decide_the_snapshot() {
    let cache = tempfile::tempdir().expect("tempdir");
    let user = cache.path().join("config/toolhost/policy.json");
    write_policy(
        &user,
        &["dice.roll", "chat.read_messages"],
        &["workspace.commit"],
    );
    let platform = cache.path().join("platform.json");
    write_policy(&platform, &["chat.search"], &[]);
    let platform_arg = platform.to_str().expect("utf-8");

    let output = toolhost(
        cache.path(),
        &["--platform-policy", platform_arg, "snapshot"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let snapshot: Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(snapshot["schemaVersion"], 2);
    let decision = |tool: &str| -> Value {
        snapshot["decisions"]
            .as_array()
            .and_then(|all| all.iter().find(|d| d["toolId"] == tool))
            .cloned()
            .unwrap_or_else(|| panic!("no decision for {tool}: {snapshot}"))
    };
    assert_eq!(decision("builtin:chat.read_messages")["visible"], false);
    assert_eq!(decision("builtin:chat.search")["visible"], false);
    assert_eq!(
        decision("builtin:workspace.commit")["approvalRequired"],
        true
    );
    assert_eq!(
        decision("builtin:workspace.read_file")["approvalRequired"],
        false
    );
    let bound: Vec<&str> = snapshot["bindings"]
        .as_array()
        .expect("bindings")
        .iter()
        .filter_map(|binding| binding["descriptor"]["id"].as_str())
        .collect();
    assert!(!bound.contains(&"builtin:chat.read_messages"));
    assert!(!bound.contains(&"builtin:chat.search"));
    let text = stderr(&output);
    assert!(
        text.contains("omitted builtin:chat.read_messages: denied by the user's policy"),
        "{text}"
    );
    assert!(
        text.contains("omitted builtin:chat.search: denied by the platform policy"),
        "{text}"
    );
    assert!(
        text.contains("approval builtin:workspace.commit:"),
        "{text}"
    );

    // A denied tool cannot be called either.
    let output = toolhost(cache.path(), &["call", "dice.roll", r#"{"formula":"d6"}"#]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));

    // --policy names another file; one that does not read stops the command.
    let other = cache.path().join("other-policy.json");
    write_policy(&other, &[], &[]);
    let output = toolhost(
        cache.path(),
        &[
            "--policy",
            other.to_str().expect("utf-8"),
            "call",
            "dice.roll",
            r#"{"formula":"d6"}"#,
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    std::fs::write(
        &user,
        r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","deny":["dice.*"]}"#,
    )
    .expect("write");
    let output = toolhost(cache.path(), &["tools", "list"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("policy.pattern_invalid"),
        "{}",
        stderr(&output)
    );
    let missing = cache.path().join("missing.json");
    let output = toolhost(
        cache.path(),
        &[
            "--policy",
            missing.to_str().expect("utf-8"),
            "tools",
            "list",
        ],
    );
    assert_eq!(output.status.code(), Some(2));
}

/// Calls needing approval from the CLI: `call` denies them unless
/// `--approve`; `run --approvals wait` waits until `toolhost approvals
/// approve` decides, and a call is decided once.
#[test]
fn approvals_from_the_command_line() {
    let cache = tempfile::tempdir().expect("tempdir");
    let dir = cache.path();
    write_policy(
        &dir.join("config/toolhost/policy.json"),
        &[],
        &["dice.roll", "workspace.commit"],
    );
    let denied = toolhost(dir, &["call", "dice.roll", r#"{"formula":"d6"}"#]);
    assert_eq!(denied.status.code(), Some(1), "{}", stderr(&denied));
    assert!(
        stdout(&denied).contains("agent.tool_denied_by_user"),
        "{}",
        stdout(&denied)
    );
    let approved = toolhost(
        dir,
        &["call", "dice.roll", r#"{"formula":"d6"}"#, "--approve"],
    );
    assert_eq!(approved.status.code(), Some(0), "{}", stderr(&approved));
    let run = run_dir(dir, &approved);
    let decided: Vec<Value> = toolhost_journal::read_events(run.join("events.jsonl"))
        .expect("journal")
        .into_iter()
        .filter(|event| event.r#type == ToolCallApprovalDecided::TYPE)
        .map(|event| event.payload)
        .collect();
    assert_eq!(decided.len(), 1);
    assert_eq!(decided[0]["by"], "toolhost call --approve");

    copy_fixture_chat(&dir.join("chat.jsonl"));
    let script = serde_json::json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"toolCalls": [
            {"id": "w", "name": "workspace_write_file", "arguments": {"path": "output/main.md", "content": "Waited for."}},
            {"id": "c", "name": "workspace_commit", "arguments": {}}
        ]},
        {"toolCalls": [{"id": "f", "name": "workspace_finish", "arguments": {"reason": "done"}}]}
    ]});
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    let waiting = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .current_dir(dir)
        .arg("--cache-dir")
        .arg(dir)
        .args([
            "run",
            "--model",
            "script:script.json",
            "--chat",
            "chat.jsonl",
        ])
        .args(["--run-dir", "waiting-run", "--approvals", "wait", "--json"])
        .env("TOOLHOST_EXT_DIR", dir.join("extensions"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("TOOLHOST_POLICY")
        .env_remove("TOOLHOST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("toolhost run");
    let started = std::time::Instant::now();
    let pending = loop {
        let listed = toolhost(dir, &["approvals", "list", "waiting-run", "--json"]);
        if listed.status.success()
            && let Ok(Value::Array(pending)) = serde_json::from_slice::<Value>(&listed.stdout)
            && !pending.is_empty()
        {
            break pending;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the run never asked"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(pending[0]["request"]["callId"], "c");
    assert_eq!(pending[0]["request"]["toolId"], "builtin:workspace.commit");
    let listed = toolhost(dir, &["approvals", "list", "waiting-run"]);
    assert!(
        stdout(&listed).contains("builtin:workspace.commit"),
        "{}",
        stdout(&listed)
    );
    let approve = toolhost(
        dir,
        &["approvals", "approve", "waiting-run", "c", "--note", "ok"],
    );
    assert_eq!(approve.status.code(), Some(0), "{}", stderr(&approve));
    let output = waiting.wait_with_output().expect("run ends");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let summary: Value = serde_json::from_slice(&output.stdout).expect("summary");
    assert_eq!(summary["status"], "completed");
    let again = toolhost(dir, &["approvals", "deny", "waiting-run", "c"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        stderr(&again).contains("approval.not_pending"),
        "{}",
        stderr(&again)
    );
}

/// On a terminal `toolhost run` asks, showing the call, and takes y, n or
/// always. The terminal is util-linux `script`'s pseudo-terminal, whose
/// input is the answer (skipped, loudly, without `script`).
#[test]
fn run_asks_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed, so no terminal to ask on");
        return;
    }
    let cache = tempfile::tempdir().expect("tempdir");
    let dir = cache.path();
    write_policy(
        &dir.join("config/toolhost/policy.json"),
        &[],
        &["workspace.commit"],
    );
    let script = serde_json::json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"toolCalls": [
            {"id": "w", "name": "workspace_write_file", "arguments": {"path": "output/main.md", "content": "Asked."}},
            {"id": "c", "name": "workspace_commit", "arguments": {}}
        ]},
        {"toolCalls": [{"id": "f", "name": "workspace_finish", "arguments": {"reason": "done"}}]}
    ]});
    std::fs::write(dir.join("script.json"), script.to_string()).expect("script");
    for (answer, decision) in [
        ("y", "approved"),
        ("n", "denied"),
        ("always", "approved_for_run"),
    ] {
        let chat = format!("chat-{answer}.jsonl");
        copy_fixture_chat(&dir.join(&chat));
        let command = format!(
            "{} --cache-dir {} run --model script:script.json --chat {chat} --run-dir run-{answer}",
            env!("CARGO_BIN_EXE_toolhost"),
            dir.display()
        );
        let mut child = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(dir)
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("TOOLHOST_EXT_DIR", dir.join("extensions"))
            .env_remove("TOOLHOST_POLICY")
            .env_remove("TOOLHOST_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("script");
        use std::io::Write as _;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(format!("{answer}\n").as_bytes())
            .expect("answer");
        let output = child.wait_with_output().expect("ends");
        let shown = stdout(&output);
        assert!(
            shown.contains("approval needed: builtin:workspace.commit"),
            "{shown}"
        );
        let decided: Vec<Value> =
            toolhost_journal::read_events(dir.join(format!("run-{answer}/events.jsonl")))
                .expect("journal")
                .into_iter()
                .filter(|event| event.r#type == ToolCallApprovalDecided::TYPE)
                .map(|event| event.payload)
                .collect();
        assert_eq!(decided.len(), 1, "{answer}");
        assert_eq!(decided[0]["decision"], decision, "{answer}");
        assert_eq!(decided[0]["by"], "terminal");
    }
}
