//! `make bench` (part 4): `chat.search` over a generated 100,000-message chat
//! (~30 MB), sandboxed against the same tool logic natively, and
//! `chat.read_messages` of 20 messages from it.
//!
//! Both variants read the same bound chat (`toolhost-chat`, parsed once when
//! the run binds it), so the ratio isolates what the sandbox adds: wasm
//! execution of the scoring and copying each batch of messages into guest
//! memory. Output is Markdown, ready for docs/benchmarks.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_capabilities::chat::{BoundChat, generate_chat};
use toolhost_capabilities::{BindInputs, CallGrant, InvocationBound, RunContext};
use toolhost_core::{ToolId, ToolOutcome};
use toolhost_guest::Arguments;
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_sandbox::{CallEntropy, LimitOverrides};

#[path = "../tests/support/native_chat.rs"]
mod native_chat;

use native_chat::NativeChat;

const MESSAGES: u32 = 100_000;
const RUNS: usize = 7;

fn ms(duration: Duration) -> String {
    format!("{:.2}", duration.as_secs_f64() * 1e3)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio")
        .block_on(bench());
}

async fn bench() {
    let dir = tempfile::tempdir_in(".").expect("tempdir beside the build");
    let path = dir.path().join("chat.jsonl");
    let text = generate_chat(MESSAGES, 42);
    std::fs::write(&path, &text).expect("write chat");
    let started = Instant::now();
    let bound = Arc::new(BoundChat::bind(&path, None).expect("bind"));
    let bind_time = started.elapsed();

    let host = ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins");
    let search_id = ToolId::builtin("chat.search").expect("id");
    let read_id = ToolId::builtin("chat.read_messages").expect("id");
    let search = host
        .component(&search_id)
        .await
        .expect("loads")
        .expect("component");
    let read = host
        .component(&read_id)
        .await
        .expect("loads")
        .expect("component");
    let (limits, _) = host
        .sandbox()
        .policy()
        .resolve(
            *search.limits(),
            &LimitOverrides {
                fuel: Some(Some(40_000_000_000)),
                deadline: Some(Duration::from_secs(60)),
                memory_bytes: Some(256 * 1024 * 1024),
                ..LimitOverrides::default()
            },
        )
        .expect("limits");
    let inputs = InvocationBound::bind(&BindInputs {
        run: Some(Arc::new(RunContext::none().with_chat(Arc::clone(&bound)))),
        ..BindInputs::default()
    });
    // Prepared per call, as the runtime does.
    let context = || {
        let grant = CallGrant::of(search, true);
        inputs.prepare(&grant).expect("prepared")
    };
    let native = NativeChat(Arc::clone(&bound));
    let queries = [
        ("two words", json!({"query": "silver river", "limit": 20})),
        (
            "one CJK-style word (bigrams)",
            json!({"query": "lantern", "limit": 20}),
        ),
        // Nothing matches: folding and scanning every byte, with no hit
        // to handle.
        (
            "no match (two words)",
            json!({"query": "zqxjvw kqpz", "limit": 20}),
        ),
        // Every message still crosses into the guest, but only the 1 % that
        // are system notes get scored: what streaming the chat costs.
        (
            "system notes only",
            json!({"query": "silver river", "limit": 20, "role": "system"}),
        ),
    ];
    let read_args =
        json!({"messages": (0..20).map(|n| json!({"index": 50_000 + n * 97})).collect::<Vec<_>>()});

    println!("## `chat.search` over a 100,000-message chat\n");
    println!(
        "A generated SillyTavern chat (`toolhost_capabilities::chat::generate_chat(100000, 42)`), {:.1} MB, bound once ({} ms to read, parse and hash). {RUNS} runs each after a warm-up, alternating; both variants search the same bound chat and return identical results (asserted).\n",
        text.len() as f64 / 1e6,
        bind_time.as_millis()
    );
    println!("| query | sandboxed ms | native ms | sandboxed / native | fuel |");
    println!("|---|---|---|---|---|");
    for (label, arguments) in &queries {
        let native_args = Arguments::from_value(arguments.clone()).expect("object");
        let (mut sandboxed, mut natively, mut fuel) = (Vec::new(), Vec::new(), 0);
        for round in 0..=RUNS {
            let started = Instant::now();
            let report = host
                .sandbox()
                .call_under(
                    search,
                    &limits,
                    arguments,
                    CallEntropy::seeded(1),
                    context(),
                )
                .await;
            let elapsed = started.elapsed();
            let ToolOutcome::Success(success) = report.outcome() else {
                panic!("the sandboxed search failed: {:?}", report.outcome());
            };
            let started = Instant::now();
            let output = chat_search::search_chat(&native_args, &native).expect("native");
            let native_elapsed = started.elapsed();
            assert_eq!(output.structured_value(), Some(success.structured.clone()));
            if round > 0 {
                sandboxed.push(elapsed);
                natively.push(native_elapsed);
                fuel = report.fuel_consumed;
            }
        }
        let (sandboxed, natively) = (median(sandboxed), median(natively));
        println!(
            "| {label}: `{}` | {} | {} | {:.2}× | {:.2} G |",
            arguments["query"].as_str().unwrap_or_default(),
            ms(sandboxed),
            ms(natively),
            sandboxed.as_secs_f64() / natively.as_secs_f64(),
            fuel as f64 / 1e9
        );
    }

    let mut reads = Vec::new();
    let mut chars = Value::Null;
    for round in 0..=RUNS * 3 {
        let started = Instant::now();
        let report = host
            .sandbox()
            .call_under(
                read,
                read.limits(),
                &read_args,
                CallEntropy::seeded(1),
                context(),
            )
            .await;
        let elapsed = started.elapsed();
        let ToolOutcome::Success(success) = report.outcome() else {
            panic!("the read failed: {:?}", report.outcome());
        };
        if round > 0 {
            reads.push(elapsed);
            chars = json!(
                success.structured["messages"]
                    .as_array()
                    .map_or(0, |messages| messages.len())
            );
        }
    }
    println!(
        "\n`chat.read_messages` of 20 messages spread over the chat (default limits): median **{} ms** over {} calls ({chars} messages returned).",
        ms(median(reads)),
        RUNS * 3
    );
}
