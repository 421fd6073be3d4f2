//! `make bench`: per-call latency of `dice.roll` (fresh store from the cached
//! InstancePre, with and without pooling) against the same logic called
//! natively; cold and warm start of every builtin; how fast limits kill.
//!
//! All figures come from one run, so ratios compare like with like on a
//! noisy machine. Output is Markdown, ready for docs/benchmarks.md.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_conformance::{builtin, guest, spec};
use toolhost_sandbox::{
    Allocator, AllocatorChoice, CallEntropy, ComponentSpec, HostPolicy, LimitOverrides, Limits,
    Sandbox, SandboxConfig, SandboxFailure, ToolComponent,
};

const CALLS: usize = 20_000;
const ROUNDS: usize = 20;
const NATIVE_BATCH: usize = 100;

struct Stats {
    median: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    Stats {
        median: at(0.5),
        p99: at(0.99),
    }
}

fn us(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64() * 1e6)
}

fn ms(duration: Duration) -> String {
    format!("{:.1}", duration.as_secs_f64() * 1e3)
}

fn builtin_specs() -> Vec<ComponentSpec<'static>> {
    toolhost_builtins::components().iter().map(spec).collect()
}

fn dice_spec() -> ComponentSpec<'static> {
    spec(builtin("dice-roll"))
}

async fn load(sandbox: &Sandbox, spec: ComponentSpec<'static>) -> ToolComponent {
    sandbox.load(spec, &|_| {}).await.expect("loads")
}

/// The guest's own path, natively: argument text in, output JSON text out.
fn native_call(arguments: &str, state: &mut u64) -> String {
    let args = toolhost_guest::Arguments::parse(arguments).expect("object");
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let output = dice_roll::roll(&args, &mut next).expect("valid");
    format!(
        "{}{}",
        output.content,
        output.structured.unwrap_or_default()
    )
}

/// Per-call samples of the native logic, timed in batches.
fn native_round(arguments: &str, state: &mut u64, calls: usize, samples: &mut Vec<Duration>) {
    for _ in 0..calls / NATIVE_BATCH {
        let started = Instant::now();
        for _ in 0..NATIVE_BATCH {
            std::hint::black_box(native_call(arguments, state));
        }
        samples.push(started.elapsed() / NATIVE_BATCH as u32);
    }
}

/// Per-call samples of sandboxed calls, each timed on its own.
async fn sandboxed_round(
    sandbox: &Sandbox,
    tool: &ToolComponent,
    arguments: &Value,
    calls: usize,
    samples: &mut Vec<Duration>,
) {
    for seed in 0..calls as u64 {
        let started = Instant::now();
        let report = sandbox
            .call(tool, arguments, CallEntropy::seeded(seed))
            .await;
        samples.push(started.elapsed());
        assert!(report.result.is_ok(), "{:?}", report.result);
    }
}

fn config(allocator: AllocatorChoice, cache: Option<&std::path::Path>) -> SandboxConfig {
    SandboxConfig {
        allocator,
        cache_dir: cache.map(ToOwned::to_owned),
        ..toolhost_capabilities::sandbox_config()
    }
}

async fn per_call_latency() {
    let arguments = json!({"formula": "3d6+4"});
    let text = arguments.to_string();

    let pooled = Sandbox::new(config(AllocatorChoice::Pooling, None)).expect("pooling");
    let Allocator::Pooling { slots } = pooled.allocator() else {
        unreachable!("asked for pooling")
    };
    let slots = *slots;
    let dice = load(&pooled, dice_spec()).await;
    // The fixed cost of a call: a tool that does nothing.
    let empty = load(&pooled, spec(guest("stateful"))).await;
    let on_demand_sandbox = Sandbox::new(config(AllocatorChoice::OnDemand, None)).expect("sandbox");
    let on_demand_dice = load(&on_demand_sandbox, dice_spec()).await;

    // This machine's speed drifts by half from one second to the next;
    // interleaving short rounds gives every variant the same mix of phases,
    // so the ratios hold even when the absolute figures move.
    let (mut native, mut pooling, mut fixed, mut on_demand) = (vec![], vec![], vec![], vec![]);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let per_round = CALLS / ROUNDS;
    for round in 0..=ROUNDS {
        // Round 0 only warms up.
        let (mut n, mut p, mut f) = (vec![], vec![], vec![]);
        native_round(&text, &mut state, per_round, &mut n);
        sandboxed_round(&pooled, &dice, &arguments, per_round, &mut p).await;
        sandboxed_round(&pooled, &empty, &json!({}), per_round, &mut f).await;
        if round > 0 {
            native.extend(n);
            pooling.extend(p);
            fixed.extend(f);
        }
    }
    // On-demand allocation unmaps memory on every call; the TLB shootdowns it
    // causes would slow the other variants down, so it runs on its own.
    for round in 0..=ROUNDS / 4 {
        let mut o = vec![];
        sandboxed_round(
            &on_demand_sandbox,
            &on_demand_dice,
            &arguments,
            per_round,
            &mut o,
        )
        .await;
        if round > 0 {
            on_demand.extend(o);
        }
    }
    let (native, pooling, fixed, on_demand) = (
        stats(native),
        stats(pooling),
        stats(fixed),
        stats(on_demand),
    );

    let ratio = |s: &Stats| s.median.as_secs_f64() / native.median.as_secs_f64();
    println!("## Per-call latency: `dice.roll` `{text}`\n");
    println!(
        "{CALLS} calls per variant in {ROUNDS} interleaved rounds after a warm-up round (on-demand: \
         5,000 calls, run apart because its unmapping slows the others down); every \
         sandboxed call builds a fresh `Store` (limits, fuel, deadline, WASI context), instantiates \
         from the cached `InstancePre`, calls, checks the output and drops the store. Native = the \
         same `dice_roll::roll` with the same JSON in and out, timed in batches of {NATIVE_BATCH}.\n"
    );
    println!("| variant | median µs | p99 µs | median × native |");
    println!("|---|---|---|---|");
    println!(
        "| native | {} | {} | 1 |",
        us(native.median),
        us(native.p99)
    );
    println!(
        "| sandboxed, pooling allocator ({slots} slots) | {} | {} | {:.1} |",
        us(pooling.median),
        us(pooling.p99),
        ratio(&pooling)
    );
    println!(
        "| sandboxed, on-demand allocator | {} | {} | {:.1} |",
        us(on_demand.median),
        us(on_demand.p99),
        ratio(&on_demand)
    );
    println!(
        "| sandboxed empty tool (the fixed cost of a call), pooling | {} | {} | – |",
        us(fixed.median),
        us(fixed.p99)
    );
    println!();
}

async fn start_times() {
    let specs = builtin_specs();
    let mut cold_totals = Vec::new();
    let mut warm_totals = Vec::new();
    let mut warm_with_engine = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().expect("tempdir");
        let sandbox =
            Sandbox::new(config(AllocatorChoice::Auto, Some(dir.path()))).expect("sandbox");
        let started = Instant::now();
        for spec in builtin_specs() {
            load(&sandbox, spec).await;
        }
        cold_totals.push(started.elapsed());
        for _ in 0..10 {
            let engine_started = Instant::now();
            let sandbox =
                Sandbox::new(config(AllocatorChoice::Auto, Some(dir.path()))).expect("sandbox");
            let started = Instant::now();
            for spec in builtin_specs() {
                let tool = load(&sandbox, spec).await;
                assert_eq!(tool.loaded_from(), toolhost_sandbox::LoadedFrom::Cache);
            }
            warm_totals.push(started.elapsed());
            warm_with_engine.push(engine_started.elapsed());
        }
    }
    let bytes: usize = specs.iter().map(|spec| spec.bytes.len()).sum();
    println!(
        "## Start-up: all {} builtin component(s), {} KiB of wasm\n",
        specs.len(),
        bytes / 1024
    );
    println!(
        "Load = sha256 check, compile or cache read, capability check, link into an \
         `InstancePre`, one sandboxed `describe()`.\n"
    );
    println!("| start | median ms | max ms |");
    println!("|---|---|---|");
    let row = |name: &str, samples: Vec<Duration>| {
        let max = samples.iter().max().copied().unwrap_or_default();
        println!("| {name} | {} | {} |", ms(stats(samples).median), ms(max));
    };
    row("cold (compile with Cranelift, fill the cache)", cold_totals);
    row("warm (from the cache)", warm_totals);
    row("warm, including engine + pool creation", warm_with_engine);
    println!();
}

async fn kill_latency() {
    let open_policy = HostPolicy {
        caps: Limits {
            fuel: None,
            ..HostPolicy::default().caps
        },
    };
    let sandbox = Sandbox::new(SandboxConfig {
        policy: open_policy,
        ..toolhost_capabilities::sandbox_config()
    })
    .expect("sandbox");
    let tick = sandbox.epoch_tick();
    let deadline = Duration::from_millis(50);
    let spin = load(
        &sandbox,
        ComponentSpec {
            limits: LimitOverrides {
                fuel: Some(None),
                deadline: Some(deadline),
                ..LimitOverrides::default()
            },
            ..spec(guest("spin"))
        },
    )
    .await;
    let mut overshoot = Vec::new();
    for seed in 0..20 {
        let report = sandbox
            .call(&spin, &json!({}), CallEntropy::seeded(seed))
            .await;
        assert!(matches!(
            report.result,
            Err(SandboxFailure::DeadlineExceeded { .. })
        ));
        overshoot.push(Duration::from_micros(report.elapsed_us).saturating_sub(deadline));
    }
    let max = overshoot.iter().max().copied().unwrap_or_default();
    let overshoot = stats(overshoot);

    let fuel_spin = load(
        &sandbox,
        ComponentSpec {
            limits: LimitOverrides {
                fuel: Some(Some(1_000_000_000)),
                ..LimitOverrides::default()
            },
            ..spec(guest("spin"))
        },
    )
    .await;
    let fuel_kill: Vec<Duration> = futures_elapsed(&sandbox, &fuel_spin, 10).await;

    let bomb = load(&sandbox, spec(guest("membomb"))).await;
    let bomb_kill: Vec<Duration> = futures_elapsed(&sandbox, &bomb, 10).await;

    println!("## Kill latency\n");
    println!("| limit | median | worst |");
    println!("|---|---|---|");
    println!(
        "| deadline {} ms, fuel off, epoch tick {} ms: overshoot past the deadline | {} ms | {} ms ({:.2} ticks) |",
        deadline.as_millis(),
        tick.as_millis(),
        ms(overshoot.median),
        ms(max),
        max.as_secs_f64() / tick.as_secs_f64()
    );
    let worst = |samples: &[Duration]| ms(samples.iter().max().copied().unwrap_or_default());
    println!(
        "| fuel 1,000,000,000: time until the busy loop stops | {} ms | {} ms |",
        ms(stats(fuel_kill.clone()).median),
        worst(&fuel_kill)
    );
    println!(
        "| memory 64 MiB: time until the memory bomb stops | {} ms | {} ms |",
        ms(stats(bomb_kill.clone()).median),
        worst(&bomb_kill)
    );
    println!();
}

async fn futures_elapsed(sandbox: &Sandbox, tool: &ToolComponent, runs: u64) -> Vec<Duration> {
    let mut samples = Vec::new();
    for seed in 0..runs {
        let report = sandbox
            .call(tool, &json!({}), CallEntropy::seeded(seed))
            .await;
        assert!(report.result.is_err());
        samples.push(Duration::from_micros(report.elapsed_us));
    }
    samples
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not supported.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // TOOLHOST_BENCH=latency|start|kill runs one section (for profiling).
    let only = std::env::var("TOOLHOST_BENCH").unwrap_or_default();
    let wants = |section: &str| only.is_empty() || only == section;
    runtime.block_on(async {
        if wants("latency") {
            per_call_latency().await;
        }
        if wants("start") {
            start_times().await;
        }
        if wants("kill") {
            kill_latency().await;
        }
    });
}
