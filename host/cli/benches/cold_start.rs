//! `make bench` (cold start): the wall time of a `toolhost call dice.roll`
//! with an empty component cache, beside a `toolhost tools load` with an
//! empty cache (which compiles every builtin, as every command did before
//! builtins were loaded at first use), in interleaved rounds of one bench
//! run. Also shown, for scale: the same call with the cache filled, and a
//! `tools list`, which compiles nothing. Output is Markdown, ready for
//! docs/benchmarks.md.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROUNDS: usize = 7;

fn scratch() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("cold-start")
}

/// One `toolhost` process with its own cache, timed from spawn to exit.
fn timed(cache: &Path, args: &[&str]) -> Duration {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .current_dir(scratch())
        .arg("--cache-dir")
        .arg(cache)
        .args(["--mcp-dir", "none", "--ext-dir", "none"])
        .args(args)
        .env_remove("TOOLHOST_LOG")
        .env_remove("TOOLHOST_RUNS_DIR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run toolhost");
    let elapsed = started.elapsed();
    assert!(
        output.status.success(),
        "toolhost {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    elapsed
}

fn empty_cache(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
}

fn main() {
    let _ = std::fs::remove_dir_all(scratch());
    std::fs::create_dir_all(scratch()).expect("scratch directory");
    let dice = ["call", "dice.roll", r#"{"formula":"3d6+4"}"#];
    let warm_cache = empty_cache("warm");
    timed(&warm_cache, &["tools", "load"]);

    let (mut cold_call, mut cold_load, mut warm_call, mut list) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        cold_call.push(timed(&empty_cache("call"), &dice));
        cold_load.push(timed(&empty_cache("load"), &["tools", "load"]));
        warm_call.push(timed(&warm_cache, &dice));
        list.push(timed(&empty_cache("list"), &["tools", "list"]));
        eprintln!(
            "round {round}/{ROUNDS}: cold call {}, cold tools load {}",
            ms(cold_call[round - 1]),
            ms(cold_load[round - 1])
        );
    }
    let _ = std::fs::remove_dir_all(scratch());

    let (cold_call, cold_load) = (median(&mut cold_call), median(&mut cold_load));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("\n## Cold start ({ROUNDS} interleaved rounds, {cores} cores, medians)\n");
    println!("| command | cache | wall time |");
    println!("|---|---|---|");
    println!("| `toolhost call dice.roll` | empty | {} |", ms(cold_call));
    println!(
        "| `toolhost tools load` (compiles every builtin) | empty | {} |",
        ms(cold_load)
    );
    println!(
        "| `toolhost call dice.roll` | filled | {} |",
        ms(median(&mut warm_call))
    );
    println!(
        "| `toolhost tools list` (compiles nothing) | empty | {} |",
        ms(median(&mut list))
    );
    println!(
        "\nCold call / cold load of everything: **{:.2}×** (target ≤ 0.2×).",
        cold_call.as_secs_f64() / cold_load.as_secs_f64()
    );
}
