//! `make bench` (part 3): `workspace.search_files` over 5,000 files / 50 MB,
//! sandboxed against the same tool logic run natively.
//!
//! Both variants read the same files through the same host workspace
//! (`toolhost-workspace`: openat2 beneath the run, UTF-8 check, sha256), so
//! the ratio isolates what the sandbox adds: wasm execution of the scoring,
//! copying each file into guest memory, a fresh store per call. Output is
//! Markdown, ready for docs/benchmarks.md.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_capabilities::{BindInputs, CallGrant, InvocationBound};
use toolhost_core::ToolId;
use toolhost_guest::workspace::{Entry, EntryKind, Listing, Root, TextFile, Workspace};
use toolhost_guest::{Arguments, ToolError};
use toolhost_journal::RootSpec;
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_sandbox::{CallEntropy, LimitOverrides};
use toolhost_workspace::{
    Workspace as HostWorkspace, WorkspaceError, WorkspaceLimits, WorkspaceRoots, WorkspaceSession,
};

const DIRS: usize = 50;
const FILES_PER_DIR: usize = 100;
const FILE_BYTES: usize = 10_000;
const RUNS: usize = 7;

/// Deterministic prose: the same corpus on every machine.
fn corpus(root: &Path) -> u64 {
    const WORDS: [&str; 24] = [
        "the", "river", "stone", "quiet", "lantern", "morning", "of", "and", "a", "village",
        "road", "wind", "silver", "night", "keeper", "bridge", "old", "song", "under", "tower",
        "rain", "garden", "letter", "bell",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut total = 0;
    for dir in 0..DIRS {
        let path = root.join(format!("output/d{dir:02}"));
        std::fs::create_dir_all(&path).expect("dir");
        for file in 0..FILES_PER_DIR {
            let mut text = String::with_capacity(FILE_BYTES + 80);
            while text.len() < FILE_BYTES {
                let words = 6 + next() % 8;
                for n in 0..words {
                    if n > 0 {
                        text.push(' ');
                    }
                    text.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
                }
                text.push_str(".\n");
            }
            total += text.len() as u64;
            std::fs::write(path.join(format!("f{file:03}.md")), text).expect("file");
        }
    }
    total
}

/// The SDK's workspace trait over the host workspace, for the native run.
struct Native(Arc<WorkspaceSession>);

fn tool_error(error: WorkspaceError) -> ToolError {
    ToolError::new(error.code(), error.message())
}

fn listing(listing: toolhost_workspace::Listing) -> Listing {
    Listing {
        entries: listing
            .entries
            .into_iter()
            .map(|entry| Entry {
                path: entry.path,
                kind: match entry.kind {
                    toolhost_workspace::EntryKind::File => EntryKind::File,
                    toolhost_workspace::EntryKind::Directory => EntryKind::Directory,
                },
                bytes: entry.bytes,
            })
            .collect(),
        truncated: listing.truncated,
    }
}

impl Workspace for Native {
    fn roots(&self) -> Vec<Root> {
        Vec::new()
    }

    fn list(&self, path: &str, depth: u32, limit: u32) -> Result<Listing, ToolError> {
        self.0
            .workspace()
            .list(path, depth as usize, limit as usize)
            .map(listing)
            .map_err(tool_error)
    }

    fn walk_files(&self, path: &str, depth: u32, files: u32) -> Result<Listing, ToolError> {
        self.0
            .workspace()
            .walk_files(path, depth as usize, files as usize)
            .map(listing)
            .map_err(tool_error)
    }

    fn read_text(&self, path: &str) -> Result<TextFile, ToolError> {
        self.0
            .read_text(path)
            .map(|file| TextFile {
                path: file.path,
                text: file.text,
                sha256: file.sha256,
            })
            .map_err(tool_error)
    }

    fn record_read(&self, path: &str, sha256: &str, seen: Option<&str>) -> Result<(), ToolError> {
        self.0.record_read(path, sha256, seen).map_err(tool_error)
    }
}

fn ms(duration: Duration) -> String {
    format!("{:.1}", duration.as_secs_f64() * 1e3)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(bench());
}

async fn bench() {
    let dir = tempfile::tempdir_in(".").expect("tempdir beside the build, on the real disk");
    let run = dir.path().join("run");
    for root in [
        "output",
        "scratch",
        "plan",
        "summaries",
        "persist",
        "tool-results",
        ".tmp",
    ] {
        std::fs::create_dir_all(run.join(root)).expect("root");
    }
    let bytes = corpus(&run);
    let mut specs = RootSpec::default_universe();
    specs.push(RootSpec::tool_results());
    let roots = WorkspaceRoots::from_specs(&specs).expect("roots");
    let workspace =
        Arc::new(HostWorkspace::open(&run, roots, WorkspaceLimits::default()).expect("workspace"));
    let session = Arc::new(WorkspaceSession::new(Arc::clone(&workspace)));

    let host = ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins");
    let component = host
        .component(&ToolId::builtin("workspace.search_files").expect("id"))
        .await
        .expect("search loads")
        .expect("search component");
    // Generous limits: the bench measures speed, not where limits cut.
    let (limits, _) = host
        .sandbox()
        .policy()
        .resolve(
            *component.limits(),
            &LimitOverrides {
                fuel: Some(Some(40_000_000_000)),
                deadline: Some(Duration::from_secs(60)),
                memory_bytes: Some(256 * 1024 * 1024),
                ..LimitOverrides::default()
            },
        )
        .expect("limits");
    let arguments = json!({"query": "silver lantern keeper", "limit": 20});
    let native_args = Arguments::from_value(arguments.clone()).expect("object");
    let native = Native(Arc::clone(&session));

    if std::env::var_os("BREAKDOWN").is_some() {
        for _ in 0..3 {
            let started = Instant::now();
            let files = workspace.walk_files("", 8, 5000).expect("walk");
            let walked = started.elapsed();
            let started = Instant::now();
            let mut texts = Vec::new();
            for entry in &files.entries {
                texts.push(session.read_text(&entry.path).expect("read"));
            }
            let read = started.elapsed();
            let started = Instant::now();
            let mut raw = 0;
            for entry in &files.entries {
                raw += std::fs::read(run.join(&entry.path)).expect("raw").len();
            }
            let plain = started.elapsed();
            let prepared =
                toolhost_guest::text::PreparedSearch::new("silver lantern keeper").expect("q");
            let started = Instant::now();
            let mut hits = 0;
            for text in &texts {
                hits += prepared.search_text(&text.text, 2, 20).len();
            }
            let scored = started.elapsed();
            let started = Instant::now();
            for text in &texts {
                std::hint::black_box(sha2_hex(text.text.as_bytes()));
            }
            let hashed = started.elapsed();
            eprintln!(
                "walk {walked:?} read {read:?} (plain fs::read {plain:?}, {raw} B) score {scored:?} ({hits} hits) sha {hashed:?}"
            );
        }
    }
    let mut sandboxed = Vec::new();
    let mut natively = Vec::new();
    let mut fuel = 0;
    let mut hits = Value::Null;
    for round in 0..=RUNS {
        let started = Instant::now();
        let report = host
            .sandbox()
            .call_under(
                component,
                &limits,
                &arguments,
                CallEntropy::seeded(1),
                InvocationBound::bind(&BindInputs {
                    workspace: Some(Arc::clone(&session)),
                    ..BindInputs::default()
                })
                .prepare(&CallGrant::of(component, true))
                .expect("prepared"),
            )
            .await;
        let elapsed = started.elapsed();
        let outcome = report.outcome();
        let toolhost_core::ToolOutcome::Success(success) = outcome else {
            panic!("the sandboxed search failed: {outcome:?}");
        };
        let started = Instant::now();
        let output = workspace_search_files::search_files(&native_args, &native).expect("native");
        let native_elapsed = started.elapsed();
        assert_eq!(
            output.structured_value(),
            Some(success.structured.clone()),
            "both variants find the same hits"
        );
        // Round 0 warms the page cache and the pool.
        if round > 0 {
            sandboxed.push(elapsed);
            natively.push(native_elapsed);
            fuel = report.fuel_consumed;
            hits = success.structured["searchedFiles"].clone();
        }
    }
    let sandboxed = median(sandboxed);
    let natively = median(natively);
    println!("## `workspace.search_files` over a large workspace\n");
    println!(
        "{} files in {DIRS} directories, {:.1} MB of text; query `silver lantern keeper`, limit 20, default context. {RUNS} runs each after a warm-up, alternating; both variants read every file through the same host workspace (openat2, UTF-8 check, sha256) and return identical results.\n",
        DIRS * FILES_PER_DIR,
        bytes as f64 / 1e6
    );
    println!("| variant | median ms |");
    println!("|---|---|");
    println!(
        "| sandboxed component (fresh store, fuel {fuel}) | {} |",
        ms(sandboxed)
    );
    println!("| the same tool logic natively | {} |", ms(natively));
    println!(
        "\nSandboxed / native: {:.2}×; files searched: {hits}.",
        sandboxed.as_secs_f64() / natively.as_secs_f64()
    );
}

fn sha2_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}
