//! The `toolhost` binary as a user runs it: output, exit codes, caching.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn toolhost(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("run toolhost")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
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

#[test]
fn compiled_components_are_cached_between_runs() {
    use std::os::unix::fs::MetadataExt;

    let cache = tempfile::tempdir().expect("tempdir");
    let output = toolhost(cache.path(), &["tools", "list", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let tools = serde_json::from_slice::<Value>(&output.stdout).expect("json");
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
    let first = entries();
    assert_eq!(
        first.len(),
        tools.as_array().map_or(0, Vec::len),
        "one entry per builtin"
    );
    // A second run reads the entries; a recompile would replace the files.
    let output = toolhost(cache.path(), &["call", "dice.roll", r#"{"formula":"d6"}"#]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(entries(), first);
}
