//! `make bench` (part 5): what resuming an interrupted agent run costs.
//!
//! A scripted run of 100 rounds (97 `chat.read_messages` calls, then write,
//! commit, finish) is run once; its directory, cut just before
//! `run_completed`, is an interrupted run with all 100 rounds recorded.
//! Each sample resumes a fresh copy of it — every round replayed from its
//! stored reply and result, the commit found in the chat — side by side with
//! a fresh uninterrupted run of the same script, in interleaved rounds.
//! Output is Markdown, ready for docs/benchmarks.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_core::Profile;
use toolhost_journal::Durability;
use toolhost_model::ScriptBook;
use toolhost_runtime::{
    AgentDirectory, LoopConfig, LoopParts, Run, RunBindings, RunStatus, SillyTavernChatHost,
    ToolHost, ToolHostConfig, run_agent_loop,
};

const ROUNDS: usize = 100;
const SAMPLES: usize = 9;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn profile() -> Profile {
    let text = std::fs::read_to_string(repo().join("profiles/default.json")).expect("profile");
    let mut value: Value = serde_json::from_str(&text).expect("profile json");
    value["tools"]["maxRounds"] = json!(ROUNDS + 10);
    value["tools"]["maxCallsPerRun"] = json!(ROUNDS + 10);
    Profile::from_json(&value.to_string()).expect("profile loads")
}

fn script() -> String {
    let mut replies: Vec<Value> = (1..ROUNDS - 2)
        .map(|round| {
            json!({"toolCalls": [{"id": format!("read_{round}"), "name": "chat_read_messages",
                                  "arguments": {"messages": [{"index": round % 60}]}}]})
        })
        .collect();
    replies.push(
        json!({"toolCalls": [{"id": "write", "name": "workspace_write_file",
        "arguments": {"path": "output/main.md", "content": "A hundred rounds later.\n"}}]}),
    );
    replies.push(
        json!({"toolCalls": [{"id": "commit", "name": "workspace_commit", "arguments": {}}]}),
    );
    replies.push(
        json!({"toolCalls": [{"id": "finish", "name": "workspace_finish", "arguments": {}}]}),
    );
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": replies}).to_string()
}

struct Bench {
    host: Arc<ToolHost>,
    profile: Profile,
    script: String,
    dir: PathBuf,
}

impl Bench {
    fn parts(&self, run: &Arc<Run>) -> LoopParts {
        let chat = run.chat().expect("chat");
        LoopParts {
            host: Arc::clone(&self.host),
            models: Arc::new(ScriptBook::parse(&self.script, "bench").expect("script")),
            chat: Arc::new(SillyTavernChatHost::new(Arc::clone(chat))),
            agents: AgentDirectory::default(),
            policies: None,
            tenant: None,
        }
    }

    /// A whole uninterrupted run in `dir`.
    async fn full_run(&self, dir: &Path) -> Duration {
        std::fs::create_dir_all(dir).expect("dir");
        let chat = dir.join("chat.jsonl");
        std::fs::copy(
            repo().join("tests/fixtures/chats/long_character_chat.jsonl"),
            &chat,
        )
        .expect("chat");
        let bindings = RunBindings {
            chat: Some(chat),
            ..RunBindings::default()
        };
        let started = Instant::now();
        let run = Run::at(&dir.join("run"))
            .durability(Durability::Batched)
            .bindings(&bindings)
            .create(&self.profile)
            .expect("run");
        let config = LoopConfig {
            task: "bench".into(),
            max_rounds: Some(ROUNDS as u32 + 5),
            seed: Some(7),
            ..LoopConfig::default()
        };
        let summary = run_agent_loop(&run, self.parts(&run), &config).await;
        let elapsed = started.elapsed();
        assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
        assert_eq!(summary.rounds as usize, ROUNDS);
        elapsed
    }

    /// Resume a copy of the interrupted template.
    async fn resume(&self, template: &Path, dir: &Path) -> Duration {
        copy_dir(template, dir);
        let started = Instant::now();
        let (run, record) = Run::resume(&dir.join("run")).expect("resume");
        let config = record.config();
        let summary = run_agent_loop(&run, self.parts(&run), &config).await;
        let elapsed = started.elapsed();
        assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
        assert_eq!(summary.rounds as usize, ROUNDS);
        elapsed
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("dir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// The journal without its last event (`run_completed`): interrupted after
/// everything else was recorded.
fn cut_the_end(run_dir: &Path) {
    let journal = run_dir.join("events.jsonl");
    let text = std::fs::read_to_string(&journal).expect("journal");
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.last().expect("events").contains("\"run_completed\""));
    let kept = lines[..lines.len() - 1].join("\n") + "\n";
    std::fs::write(&journal, kept).expect("cut");
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let host = Arc::new(
            ToolHost::with_builtins(ToolHostConfig::default())
                .expect("builtins"),
        );
        let scratch = tempfile::tempdir().expect("tempdir");
        let bench = Bench {
            host,
            profile: profile(),
            script: script(),
            dir: scratch.path().to_owned(),
        };
        let template = bench.dir.join("template");
        bench.full_run(&template).await;
        cut_the_end(&template.join("run"));
        // Warm-up.
        bench.resume(&template, &bench.dir.join("warm")).await;

        let (mut fresh, mut resumed) = (Vec::new(), Vec::new());
        for sample in 0..SAMPLES {
            fresh.push(bench.full_run(&bench.dir.join(format!("fresh-{sample}"))).await);
            resumed.push(
                bench
                    .resume(&template, &bench.dir.join(format!("resumed-{sample}")))
                    .await,
            );
        }
        let (fresh, resumed) = (median(&mut fresh), median(&mut resumed));
        println!("## Resuming an interrupted run ({ROUNDS} rounds recorded, {SAMPLES} samples, interleaved)\n");
        println!("| run | median | per round |");
        println!("|---|---|---|");
        for (name, time) in [
            ("uninterrupted, scripted model", fresh),
            ("resumed: every round replayed from the record", resumed),
        ] {
            println!(
                "| {name} | {:.1} ms | {:.0} µs |",
                time.as_secs_f64() * 1e3,
                time.as_secs_f64() * 1e6 / ROUNDS as f64
            );
        }
        println!(
            "\nresume / uninterrupted: {:.2}×",
            resumed.as_secs_f64() / fresh.as_secs_f64()
        );
    });
}
