//! `make bench` (part 2): what the control plane adds to a tool call — the
//! gate, the journal and the audit files — with each durability setting, and
//! a whole `toolhost call` path against a bare sandbox call of `dice.roll`;
//! then the same direct call under a 1-tool profile and under one that
//! allows every builtin, side by side (issue 38: a call's cost must not grow
//! with the snapshot).
//!
//! Variants run in interleaved rounds so their ratios compare like with like
//! on a noisy machine. Output is Markdown, ready for docs/benchmarks.md.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_core::{
    AgentToolResult, ExitPolicy, ModelTurn, Profile, ProviderToolCall, SnapshotSources, ToolCall,
    ToolCatalog, ToolChoice, ToolDescriptor, ToolId, ToolOutcome, ToolRequestGate, ToolSuccess,
    ToolTurnContract,
};
use toolhost_journal::{
    Durability, ToolCallCompleted, ToolCallOutcome, ToolCallRequested, ToolCallStarted,
    ToolResultStored,
};
use toolhost_runtime::{DirectCaller, Invocation, Run, ToolExecutor, ToolHost, ToolHostConfig};
use toolhost_sandbox::CallEntropy;

#[path = "../../../bench/fresh_disk.rs"]
mod fresh_disk;

const ROUNDS: usize = 10;
const CALLS_PER_ROUND: usize = 1_000;
#[path = "../tests/support/answering.rs"]
mod answering;
use answering::Answering;

/// fsync costs milliseconds on a VM disk: fewer calls keep the bench short.
const FSYNC_CALLS_PER_ROUND: usize = 40;

fn dice() -> ToolId {
    ToolId::builtin("dice.roll").expect("id")
}

fn profile() -> Profile {
    profile_of("bench", vec![dice()])
}

/// Every builtin a profile may list (`task.return` is the runtime's to add),
/// with the delegation flags the agent tools need.
fn all_builtins_profile(host: &ToolHost) -> Profile {
    let every = host
        .builtin_ids()
        .into_iter()
        .filter(|tool| tool.native_name() != "task.return")
        .collect();
    profile_of("bench-all-builtins", every)
}

fn profile_of(id: &str, tools: Vec<ToolId>) -> Profile {
    let mut profile = Profile::for_tools(id, tools);
    profile.tools.max_calls_per_run = u32::MAX;
    profile
}

fn catalog() -> ToolCatalog {
    ToolCatalog::from_descriptors([ToolDescriptor {
        id: dice(),
        title: None,
        description: Some("Roll dice.".into()),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: json!({}),
    }])
    .expect("catalog")
}

struct Bench {
    run: Arc<Run>,
    session: Invocation,
    turn: ModelTurn,
    next: u64,
}

fn bench(dir: &Path, name: &str, durability: Durability, sources: SnapshotSources<'_>) -> Bench {
    bench_of(dir, name, durability, sources, &profile())
}

fn bench_of(
    dir: &Path,
    name: &str,
    durability: Durability,
    sources: SnapshotSources<'_>,
    profile: &Profile,
) -> Bench {
    let run = Run::create(&dir.join(name), profile, durability).expect("run");
    let mut session = run
        .start_invocation(profile, sources, "inv_root", ExitPolicy::RunFinishAllowed)
        .expect("session");
    let turn = session.begin_turn(ToolChoice::Auto, "bench").expect("turn");
    Bench {
        run,
        session,
        turn,
        next: 0,
    }
}

impl Bench {
    /// One call through the whole path, decoded before the clock starts.
    async fn timed_call(&mut self, executor: &impl ToolExecutor) -> Duration {
        let invocation = self.invocation();
        let started = Instant::now();
        self.session
            .call(executor, &self.turn, invocation, CallEntropy::seeded(1))
            .await
            .expect("call");
        started.elapsed()
    }

    /// One `dice.roll` as `toolhost call`, MCP and the API make it: its own
    /// turn, decoded, then the whole path; all of it timed.
    async fn timed_direct_call(&mut self, executor: &impl ToolExecutor) -> Duration {
        let caller = DirectCaller {
            requester: "bench",
            call_id_prefix: "bench",
        };
        let arguments = Some(json!({"formula": "3d6+4"}));
        let started = Instant::now();
        self.session
            .call_directly(executor, caller, &dice(), arguments, CallEntropy::seeded(1))
            .await
            .expect("direct call");
        started.elapsed()
    }

    fn invocation(&mut self) -> ToolCall {
        self.next += 1;
        self.turn
            .decode_call(ProviderToolCall {
                call_id: Some(format!("call_{}", self.next)),
                name: Some("dice_roll".into()),
                arguments: Some(json!({"formula": "3d6+4"})),
                provider_metadata: Value::Null,
            })
            .expect("decodes")
    }

    /// Gate and the four journal events of a call, without audit files.
    fn gate_and_journal(&mut self, gate: &mut ToolRequestGate) {
        let invocation = self.invocation();
        let tool_id = invocation.tool_id.clone();
        let common = |round| (round, "inv_root".to_owned(), invocation.call_id.clone());
        let (round, invocation_id, call_id) = common(1u32);
        self.run
            .record(&ToolCallRequested {
                round,
                invocation_id: invocation_id.clone(),
                call_id: call_id.clone(),
                tool_id: tool_id.clone(),
                snapshot_id: "inv_root".into(),
                name: "dice.roll".into(),
                arguments_ref: "tool-args/call_0000000000000000.json".into(),
            })
            .expect("requested");
        gate.authorize_and_reserve(self.turn.contract(), &tool_id)
            .expect("reserved");
        self.run
            .record(&ToolCallStarted {
                round,
                invocation_id: invocation_id.clone(),
                call_id: call_id.clone(),
                tool_id: tool_id.clone(),
                snapshot_id: "inv_root".into(),
                name: "dice.roll".into(),
            })
            .expect("started");
        let (result, _) = AgentToolResult::from_outcome(
            &invocation,
            ToolOutcome::Success(ToolSuccess {
                content: "Rolled 1d6: 4.".into(),
                ..ToolSuccess::default()
            }),
        );
        self.run
            .record(&ToolResultStored {
                round,
                invocation_id: invocation_id.clone(),
                call_id,
                tool_id,
                path: "tool-results/call_0000000000000000.json".into(),
            })
            .expect("stored");
        let outcome =
            ToolCallOutcome::from_result(round, invocation_id, "inv_root", &result, 0, None);
        self.run
            .record(&ToolCallCompleted(outcome))
            .expect("completed");
    }
}

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

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(run_benches());
}

async fn run_benches() {
    let disk =
        fresh_disk::fresh_disk_dir(&fresh_disk::base(Path::new(env!("CARGO_TARGET_TMPDIR"))));
    let dir = disk.dir.as_path();
    let names = BTreeMap::new();
    let catalog = catalog();
    let fake = SnapshotSources::of(&catalog, &names);
    let host = ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins");

    let gate_only = bench(dir, "gate", Durability::Batched, fake);
    let mut gate = ToolRequestGate::new(Arc::clone(gate_only.session.snapshot()));
    let mut journal_batched = bench(dir, "journal-batched", Durability::Batched, fake);
    let mut journal_gate = ToolRequestGate::new(Arc::clone(journal_batched.session.snapshot()));
    let mut journal_fsync = bench(dir, "journal-fsync", Durability::Fsync, fake);
    let mut journal_fsync_gate = ToolRequestGate::new(Arc::clone(journal_fsync.session.snapshot()));
    let mut full_batched = bench(dir, "full-batched", Durability::Batched, fake);
    let mut full_fsync = bench(dir, "full-fsync", Durability::Fsync, fake);
    let mut dice_full = bench(dir, "dice", Durability::Batched, host.snapshot_sources());
    // As `mcp serve` calls: the audit files' unnamed files made between
    // calls, outside the timed call (the server does it after an answer).
    let mut full_ahead = bench(dir, "full-ahead", Durability::Batched, fake);
    let mut dice_ahead = bench(
        dir,
        "dice-ahead",
        Durability::Batched,
        host.snapshot_sources(),
    );
    let component = host
        .component(&dice())
        .await
        .expect("dice loads")
        .expect("dice component");
    let contract =
        ToolTurnContract::all(gate_only.session.snapshot(), ToolChoice::Auto).expect("contract");

    let mut samples: [Vec<Duration>; 9] = Default::default();
    let arguments = json!({"formula": "3d6+4"});
    for _ in 0..ROUNDS {
        for _ in 0..CALLS_PER_ROUND {
            let tool = dice();
            let started = Instant::now();
            std::hint::black_box(gate.authorize_and_reserve(&contract, &tool).expect("gate"));
            samples[0].push(started.elapsed());

            let started = Instant::now();
            journal_batched.gate_and_journal(&mut journal_gate);
            samples[1].push(started.elapsed());

            samples[3].push(full_batched.timed_call(&Answering).await);

            let started = Instant::now();
            std::hint::black_box(
                host.sandbox()
                    .call(component, &arguments, CallEntropy::seeded(1))
                    .await,
            );
            samples[5].push(started.elapsed());

            samples[6].push(dice_full.timed_call(&host).await);

            full_ahead.run.make_files_ahead();
            samples[7].push(full_ahead.timed_call(&Answering).await);

            dice_ahead.run.make_files_ahead();
            samples[8].push(dice_ahead.timed_call(&host).await);
        }
        for _ in 0..FSYNC_CALLS_PER_ROUND {
            let started = Instant::now();
            journal_fsync.gate_and_journal(&mut journal_fsync_gate);
            samples[2].push(started.elapsed());

            samples[4].push(full_fsync.timed_call(&Answering).await);
        }
    }
    let [
        gate_s,
        journal_b,
        journal_f,
        full_b,
        full_f,
        sandbox,
        dice_path,
        full_ahead_s,
        dice_ahead_s,
    ] = samples.map(stats);

    println!("## Control plane overhead per call\n");
    println!("Sandbox allocator: {:?}.\n", host.sandbox().allocator());
    println!(
        "{ROUNDS} interleaved rounds of {CALLS_PER_ROUND} calls ({FSYNC_CALLS_PER_ROUND} per round for the fsync variants); run directories on the build's disk (below). \"Journal\" = the four events of a call (`tool_call_requested`, `tool_call_started`, `tool_result_stored`, `tool_call_completed`). \"Whole path\" = `Invocation::call` with an executor that answers at once: decode, arguments audit file, four events, gate, identity check, result audit file.\n"
    );
    println!("| what | durability | median µs | p99 µs |");
    println!("|---|---|---|---|");
    let row = |what: &str, durability: &str, stats: &Stats| {
        println!(
            "| {what} | {durability} | {} | {} |",
            us(stats.median),
            us(stats.p99)
        );
    };
    row("gate: authorize and reserve", "–", &gate_s);
    row("gate + journal", "batched", &journal_b);
    row("gate + journal", "fsync", &journal_f);
    row(
        "whole path (gate + journal + 2 audit files)",
        "batched",
        &full_b,
    );
    row(
        "whole path (gate + journal + 2 audit files)",
        "fsync",
        &full_f,
    );
    row("`dice.roll` in the sandbox alone", "–", &sandbox);
    row("`dice.roll` through the whole path", "batched", &dice_path);
    row(
        "whole path, files made ahead between calls (as `mcp serve`)",
        "batched",
        &full_ahead_s,
    );
    row(
        "`dice.roll` through the whole path, files made ahead",
        "batched",
        &dice_ahead_s,
    );
    let share = |whole: &Stats| {
        let share = whole.median.saturating_sub(sandbox.median);
        format!(
            "{} µs of {} µs (median difference), {:.2}× the bare call",
            us(share),
            us(whole.median),
            share.as_secs_f64() / sandbox.median.as_secs_f64()
        )
    };
    println!(
        "\nControl plane share of a `dice.roll` call: {}; with its files made ahead: {}.",
        share(&dice_path),
        share(&dice_ahead_s)
    );
    println!("\n{}", disk.describe("Run directories"));
    for bench in [
        gate_only,
        journal_batched,
        journal_fsync,
        full_batched,
        full_fsync,
        dice_full,
        full_ahead,
        dice_ahead,
    ] {
        bench.run.complete().expect("complete");
    }
    profile_sizes(dir, &host).await;
}

/// The same direct call of `dice.roll` under a 1-tool profile and under an
/// all-builtins one, in the same rounds, each order taken as often: with an
/// executor that answers at once (the control plane alone) and through the
/// sandbox. Issue 38 asks the all-builtins median within 5 % of the 1-tool
/// one.
async fn profile_sizes(dir: &Path, host: &ToolHost) {
    let one = profile();
    let all = all_builtins_profile(host);
    let sources = || host.snapshot_sources();
    let mut benches = [
        bench_of(dir, "size-1-plane", Durability::Batched, sources(), &one),
        bench_of(dir, "size-all-plane", Durability::Batched, sources(), &all),
        bench_of(dir, "size-1-dice", Durability::Batched, sources(), &one),
        bench_of(dir, "size-all-dice", Durability::Batched, sources(), &all),
    ];
    let bound = |bench: &Bench| bench.session.snapshot().bindings().len();
    let (one_bound, all_bound) = (bound(&benches[0]), bound(&benches[1]));
    let mut samples: [Vec<Duration>; 4] = Default::default();
    for round in 0..ROUNDS {
        for call in 0..CALLS_PER_ROUND {
            // 1-tool first in half the calls, all-builtins first in the rest.
            let order = if (round + call) % 2 == 0 {
                [0, 1]
            } else {
                [1, 0]
            };
            for index in order {
                samples[index].push(benches[index].timed_direct_call(&Answering).await);
            }
            for index in order.map(|index| index + 2) {
                samples[index].push(benches[index].timed_direct_call(host).await);
            }
        }
    }
    let [plane_one, plane_all, dice_one, dice_all] = samples.map(stats);
    println!("\n## A call's cost by the profile's size\n");
    println!(
        "`Invocation::call_directly` of `dice.roll` (as `toolhost call`, MCP and the API call: the call's own turn, decode, gate, audit files, journal), {ROUNDS} rounds of {CALLS_PER_ROUND} calls, the two profiles alternated call by call: a 1-tool profile ({one_bound} tool bound) and one allowing every builtin ({all_bound} tools bound).\n"
    );
    println!(
        "| executor | 1-tool median µs | p99 µs | all-builtins median µs | p99 µs | all ÷ 1 |"
    );
    println!("|---|---|---|---|---|---|");
    let row = |what: &str, one: &Stats, all: &Stats| {
        println!(
            "| {what} | {} | {} | {} | {} | {:.3} |",
            us(one.median),
            us(one.p99),
            us(all.median),
            us(all.p99),
            all.median.as_secs_f64() / one.median.as_secs_f64()
        );
    };
    row(
        "answers at once (control plane alone)",
        &plane_one,
        &plane_all,
    );
    row("`dice.roll` in the sandbox", &dice_one, &dice_all);
    for bench in benches {
        bench.run.complete().expect("complete");
    }
}
