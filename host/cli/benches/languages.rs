//! `make bench` (languages): what one call of an extension costs in each
//! language an author can write one in. Each is the tool `toolhost ext new
//! --lang L` writes, built by `toolhost ext install` (Rust: `text.repeat`;
//! Python and JavaScript: `text.pick`, the same logic in both), plus the
//! JavaScript one built with the other engine (SpiderMonkey, where the
//! template's default is QuickJS). Every call builds a fresh store,
//! instantiates from the cached `InstancePre` (the pooling allocator's
//! copy-on-write images of the pre-initialized heap), calls and drops it;
//! the languages are interleaved in rounds of one run, so their ratios hold
//! on a noisy machine. Output is Markdown, ready for docs/benchmarks.md.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_core::{ToolOutcome, ToolProvider};
use toolhost_extensions::Manifest;
use toolhost_sandbox::{CallEntropy, ComponentSpec, Sandbox, ToolComponent, Trust};

const ROUNDS: usize = 10;
const CALLS_PER_ROUND: usize = 100;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scratch() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("languages")
}

/// `toolhost` in the scratch directory, with its own extensions.
fn toolhost(dir: &Path, args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .current_dir(dir)
        .args(["--ext-dir"])
        .arg(scratch().join("extensions"))
        .args(args)
        .env(
            "CARGO_TARGET_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("languages-target"),
        )
        .env(
            "COMPONENTIZE_PY",
            repository().join(".venv/bin/componentize-py"),
        )
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run toolhost");
    assert!(
        output.status.success(),
        "toolhost {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One language's tool, built as an author builds it.
struct Built {
    label: &'static str,
    dir: PathBuf,
    arguments: Value,
}

fn new_and_build(label: &'static str, lang: &str, tool: &str, arguments: Value) -> Built {
    let dir = scratch().join(lang);
    let _ = std::fs::remove_dir_all(&dir);
    toolhost(
        &scratch(),
        &[
            "ext",
            "new",
            &format!("bench-{lang}"),
            "--lang",
            lang,
            "--tool",
            tool,
            "--dir",
            lang,
        ],
    );
    if lang == "rust" {
        std::fs::copy(repository().join("Cargo.lock"), dir.join("Cargo.lock")).expect("lock");
    }
    if lang == "js" {
        // The npm packages `make setup` installed for the JS example: the
        // same pinned versions, without a second download.
        std::os::unix::fs::symlink(
            repository().join("examples/extensions/fetch-js/node_modules"),
            dir.join("node_modules"),
        )
        .ok();
    }
    toolhost(&dir, &["ext", "install", "."]);
    Built {
        label,
        dir,
        arguments,
    }
}

/// The JS tool again, built with SpiderMonkey (StarlingMonkey) instead.
fn spidermonkey(js: &Built) -> Built {
    let dir = scratch().join("js-spidermonkey");
    let _ = std::fs::remove_dir_all(&dir);
    let status = Command::new("cp")
        .args(["-r"])
        .arg(&js.dir)
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(status.success());
    let jco = repository().join("examples/extensions/fetch-js/node_modules/.bin/jco");
    let status = Command::new(jco)
        .current_dir(&dir)
        .args([
            "componentize",
            "src/tool.js",
            "--cwd",
            ".",
            "--bundle",
            "-w",
            "wit",
            "-n",
            "extension",
            "--backend",
            "starlingmonkey",
            "-d",
            "stdio",
            "random",
            "clocks",
            "http",
            "fetch-event",
            "-o",
            "build/tool.wasm",
        ])
        .stdout(Stdio::null())
        .status()
        .expect("jco");
    assert!(status.success(), "jco builds with SpiderMonkey");
    Built {
        label: "JavaScript (SpiderMonkey)",
        dir,
        arguments: js.arguments.clone(),
    }
}

async fn load(sandbox: &Sandbox, built: &Built) -> (ToolComponent, u64) {
    let checked = Manifest::load(&built.dir).expect("manifest");
    let bytes = std::fs::read(checked.component_path()).expect("component");
    let label = checked.manifest.id.clone();
    let spec = ComponentSpec {
        label: &label,
        bytes: &bytes,
        expected_sha256: None,
        provider: ToolProvider::parse(&format!("ext/{label}")).expect("provider"),
        grant: checked.requested.clone(),
        limits: checked.manifest.limits.overrides(),
        trust: Trust::Extension,
    };
    let component = sandbox.load(spec, &|_| {}).await.expect("loads");
    (component, bytes.len() as u64)
}

struct Figures {
    samples: Vec<Duration>,
    fuel: u64,
    peak_memory: u64,
}

fn at(samples: &[Duration], q: f64) -> Duration {
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}

#[tokio::main]
async fn main() {
    let jco = repository().join("examples/extensions/fetch-js/node_modules/.bin/jco");
    let componentize = repository().join(".venv/bin/componentize-py");
    if !jco.is_file() || !componentize.is_file() {
        println!("languages: skipped (run `make setup`: jco and componentize-py are missing)");
        return;
    }
    std::fs::create_dir_all(scratch()).expect("scratch");
    let _ = std::fs::remove_dir_all(scratch().join("extensions"));
    let options = json!({"options": ["red", "green", "blue", "yellow"]});
    eprintln!("building the Rust, Python and JavaScript templates ...");
    let rust = new_and_build(
        "Rust",
        "rust",
        "text.repeat",
        json!({"text": "ab", "times": 3}),
    );
    let python = new_and_build(
        "Python (componentize-py)",
        "python",
        "text.pick",
        options.clone(),
    );
    let js = new_and_build(
        "JavaScript (QuickJS, the default)",
        "js",
        "text.pick",
        options,
    );
    let sm = spidermonkey(&js);
    let tools = [rust, python, js, sm];

    let sandbox = Sandbox::new(toolhost_capabilities::sandbox_config()).expect("sandbox");
    let mut loaded = Vec::new();
    for built in &tools {
        let started = Instant::now();
        let (component, size) = load(&sandbox, built).await;
        loaded.push((component, size, started.elapsed()));
    }
    let mut figures: Vec<Figures> = tools
        .iter()
        .map(|_| Figures {
            samples: Vec::new(),
            fuel: 0,
            peak_memory: 0,
        })
        .collect();
    for round in 0..=ROUNDS {
        for ((built, (component, _, _)), figures) in
            tools.iter().zip(&loaded).zip(figures.iter_mut())
        {
            for seed in 0..CALLS_PER_ROUND as u64 {
                let started = Instant::now();
                let report = sandbox
                    .call(component, &built.arguments, CallEntropy::seeded(seed))
                    .await;
                let elapsed = started.elapsed();
                // A tool error is no call to time: the answer must be one.
                assert!(
                    matches!(report.result, Ok(ToolOutcome::Success(_))),
                    "{}: {:?}",
                    built.label,
                    report.result
                );
                // Round 0 only warms up.
                if round > 0 {
                    figures.samples.push(elapsed);
                    figures.fuel = report.fuel_consumed;
                    figures.peak_memory = figures.peak_memory.max(report.peak_memory_bytes);
                }
            }
        }
    }
    let rust_median = {
        let mut samples = figures[0].samples.clone();
        samples.sort();
        at(&samples, 0.5)
    };
    println!("## Per-call cost by language: the `ext new` templates\n");
    println!(
        "{} calls of each in {ROUNDS} interleaved rounds after a warm-up round; a fresh store per \
         call, instantiated from the cached `InstancePre` (pooling allocator), as every extension call. \
         Load = compile (or read the component cache) and pre-instantiate, once.\n",
        ROUNDS * CALLS_PER_ROUND
    );
    println!(
        "| tool | component MB | load ms | median µs | p99 µs | × Rust | fuel per call | peak memory MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for ((built, (_, size, load)), figures) in tools.iter().zip(&loaded).zip(&mut figures) {
        figures.samples.sort();
        let median = at(&figures.samples, 0.5);
        println!(
            "| {} | {:.1} | {:.0} | {:.0} | {:.0} | {:.1} | {} | {:.1} |",
            built.label,
            *size as f64 / 1e6,
            load.as_secs_f64() * 1e3,
            median.as_secs_f64() * 1e6,
            at(&figures.samples, 0.99).as_secs_f64() * 1e6,
            median.as_secs_f64() / rust_median.as_secs_f64(),
            figures.fuel,
            figures.peak_memory as f64 / (1024.0 * 1024.0),
        );
    }
    println!();
}
