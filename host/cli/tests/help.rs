//! `toolhost <command> --help` as a user reads it, against the text kept in
//! `tests/help/`: a flag's name, default, env var or help text changes only
//! when its snapshot is changed with it. So do the refusals of bad usage,
//! which show what `--help` does not: which flags require or exclude each
//! other, and the values each takes. The commands' flags are clap structs
//! flattened into each other; these snapshots are what prove that moving a
//! flag between them left the interface as it was.
//!
//! After an intended change: `TOOLHOST_BLESS_HELP=1 cargo test -p
//! toolhost-cli --test help` writes the snapshots anew (review the diff).

use std::path::PathBuf;
use std::process::Command;

/// Each snapshot's file name and the command whose help it holds.
const COMMANDS: &[(&str, &[&str])] = &[
    ("run", &["run"]),
    ("serve", &["serve"]),
    ("cluster-status", &["cluster", "status"]),
    ("call", &["call"]),
    ("mcp-serve", &["mcp", "serve"]),
];

/// Usage clap refuses before anything runs, one kind of relation or value
/// each: a flag required unless another is given, flags that exclude each
/// other, one that requires another (within a command's own flags and
/// across a flattened group), a value outside a range or a set.
const REFUSED: &[&[&str]] = &[
    &["run", "--chat", "c.jsonl"],
    &["run", "--resume", "a", "--run-dir", "b"],
    &["run", "--model", "script:s.json", "--approvals", "maybe"],
    &["run", "--model", "script:s.json", "--durability", "never"],
    &["call", "dice.roll", "--clock-ms", "5"],
    &["serve", "--tls-cert", "a.pem"],
    &["serve", "--node", "n1"],
    &["serve", "--request-head-timeout", "0"],
    &["serve", "--max-runs", "many"],
    &["mcp", "serve", "--chat"],
    &[
        "cluster",
        "status",
        "--cluster",
        "nats://127.0.0.1:4222",
        "--cluster-nkey",
        "a",
        "--cluster-creds",
        "b",
    ],
];

/// `toolhost` with no environment of the machine in what it prints: clap
/// shows an `env` flag's value when the variable is set.
fn toolhost(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .args(args)
        .env_remove("TOOLHOST_RUNS_DIR")
        .env_remove("TOOLHOST_CLUSTER")
        .env_remove("TOOLHOST_LOG")
        .output()
        .expect("run toolhost")
}

fn help(command: &[&str]) -> String {
    let output = toolhost(&[command, &["--help"]].concat());
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("utf-8 help")
}

fn snapshot(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/help")
        .join(format!("{name}.txt"))
}

/// The first line where two texts part, for a failure a person can read.
fn first_difference(expected: &str, actual: &str) -> String {
    let mut expected_lines = expected.lines();
    let mut actual_lines = actual.lines();
    for number in 1.. {
        match (expected_lines.next(), actual_lines.next()) {
            (None, None) => break,
            (want, got) if want == got => continue,
            (want, got) => {
                return format!("line {number}:\n  snapshot: {want:?}\n  now:      {got:?}");
            }
        }
    }
    "a difference in line endings".to_owned()
}

/// `actual` against the snapshot `name`, or written as it (blessing);
/// a difference is described rather than asserted, so one run names all.
fn compare(name: &str, what: &str, actual: &str) -> Option<String> {
    let path = snapshot(name);
    if std::env::var_os("TOOLHOST_BLESS_HELP").is_some() {
        std::fs::write(&path, actual).expect("write snapshot");
        return None;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    (expected != actual).then(|| {
        format!(
            "{what} differs from {}: {}",
            path.display(),
            first_difference(&expected, actual)
        )
    })
}

#[test]
fn every_commands_help_is_its_snapshot() {
    let differing: Vec<String> = COMMANDS
        .iter()
        .filter_map(|(name, command)| {
            let what = format!("toolhost {} --help", command.join(" "));
            compare(name, &what, &help(command))
        })
        .collect();
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}

#[test]
fn bad_usage_is_refused_as_its_snapshot_says() {
    let mut transcript = String::new();
    for args in REFUSED {
        let output = toolhost(args);
        // Refused by clap, before any tool loads: the usage exit status.
        assert_eq!(output.status.code(), Some(2), "toolhost {args:?}");
        transcript.push_str(&format!(
            "$ toolhost {}\n{}exit 2\n\n",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let differing = compare("refusals", "what bad usage prints", &transcript);
    assert!(differing.is_none(), "{}", differing.unwrap_or_default());
}
