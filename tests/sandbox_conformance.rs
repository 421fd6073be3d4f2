//! Sandbox conformance: every hostile guest is stopped with its exact typed
//! failure, the host keeps serving the next call, and kill times are printed
//! (`cargo test -p toolhost-conformance -- --nocapture` shows them).

use std::net::TcpListener;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_conformance::{builtin, guest, spec};
use toolhost_core::ToolOutcome;
use toolhost_sandbox::capability::HOST_VERSION;
use toolhost_sandbox::{
    Allocator, AllocatorChoice, CallEntropy, CallReport, CapabilitySet, ComponentSpec,
    LimitOverrides, LoadError, LoadEvent, LoadedFrom, Sandbox, SandboxConfig, SandboxFailure,
    ToolComponent,
};

/// One cache for the whole suite, so each component compiles once.
fn shared_cache() -> std::path::PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"))
        .path()
        .to_owned()
}

/// Timing-sensitive tests run one at a time so a neighbour's busy loop
/// does not delay the epoch ticker.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const TICK: Duration = Duration::from_millis(5);

fn sandbox() -> Sandbox {
    Sandbox::new(SandboxConfig {
        epoch_tick: TICK,
        cache_dir: Some(shared_cache()),
        ..toolhost_capabilities::sandbox_config()
    })
    .expect("sandbox")
}

async fn load(sandbox: &Sandbox, spec: ComponentSpec<'static>) -> ToolComponent {
    let label = spec.label;
    sandbox
        .load(spec, &|_| {})
        .await
        .unwrap_or_else(|error| panic!("{label} should load: {error}"))
}

async fn load_guest(sandbox: &Sandbox, name: &str, limits: LimitOverrides) -> ToolComponent {
    load(
        sandbox,
        ComponentSpec {
            limits,
            ..spec(guest(name))
        },
    )
    .await
}

fn dice_spec() -> ComponentSpec<'static> {
    spec(builtin("dice-roll"))
}

async fn call(sandbox: &Sandbox, tool: &ToolComponent, arguments: Value) -> CallReport {
    sandbox.call(tool, &arguments, CallEntropy::seeded(7)).await
}

/// The sandbox still answers a well-behaved call after a hostile one.
async fn assert_still_serving(sandbox: &Sandbox) {
    let dice = load(sandbox, dice_spec()).await;
    let report = call(sandbox, &dice, json!({"formula": "3d6+4"})).await;
    match report.result {
        Ok(ToolOutcome::Success(success)) => {
            let total = success.structured["total"].as_i64().expect("total");
            assert!((7..=22).contains(&total), "{total}");
        }
        other => panic!("the host stopped serving: {other:?}"),
    }
}

fn failure(report: &CallReport) -> &SandboxFailure {
    match &report.result {
        Err(failure) => failure,
        Ok(outcome) => panic!("expected a sandbox failure, got {outcome:?}"),
    }
}

/// The failure as the model reads it.
fn model_error(report: &CallReport) -> toolhost_core::ToolFailure {
    match report.outcome() {
        ToolOutcome::Error(error) => error,
        ToolOutcome::Success(success) => panic!("expected an error, got {success:?}"),
    }
}

fn elapsed(report: &CallReport) -> Duration {
    Duration::from_micros(report.elapsed_us)
}

#[tokio::test]
async fn infinite_loop_is_stopped_by_fuel() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox();
    let limits = LimitOverrides {
        fuel: Some(Some(100_000_000)),
        ..LimitOverrides::default()
    };
    let spin = load_guest(&sandbox, "spin", limits).await;
    let report = call(&sandbox, &spin, json!({})).await;
    assert_eq!(
        failure(&report),
        &SandboxFailure::OutOfFuel { limit: 100_000_000 }
    );
    assert_eq!(model_error(&report).code, "sandbox.out_of_fuel");
    assert!(
        report.fuel_consumed >= 100_000_000,
        "{}",
        report.fuel_consumed
    );
    eprintln!(
        "kill: 100M fuel stopped the busy loop after {:?}",
        elapsed(&report)
    );
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn infinite_loop_is_stopped_by_the_deadline_with_fuel_off() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox();
    let deadline = Duration::from_millis(200);
    let limits = LimitOverrides {
        fuel: Some(None),
        deadline: Some(deadline),
        ..LimitOverrides::default()
    };
    let mut spin = load_guest(&sandbox, "spin", limits).await;
    // The default policy meters everything; open it up for this tool.
    assert!(
        spin.limits().fuel.is_some(),
        "the policy caps unmetered fuel"
    );
    let open = Sandbox::new(SandboxConfig {
        epoch_tick: TICK,
        cache_dir: Some(shared_cache()),
        policy: toolhost_sandbox::HostPolicy {
            caps: toolhost_sandbox::Limits {
                fuel: None,
                ..toolhost_sandbox::HostPolicy::default().caps
            },
        },
        ..toolhost_capabilities::sandbox_config()
    })
    .expect("sandbox");
    spin = load_guest(&open, "spin", limits).await;
    assert_eq!(spin.limits().fuel, None);

    let report = call(&open, &spin, json!({})).await;
    let took = elapsed(&report);
    match failure(&report) {
        SandboxFailure::DeadlineExceeded { limit, .. } => assert_eq!(*limit, deadline),
        other => panic!("expected the deadline, got {other:?}"),
    }
    eprintln!(
        "kill: deadline {deadline:?} stopped the busy loop after {took:?} (overshoot {:?}, tick {TICK:?})",
        took.saturating_sub(deadline)
    );
    assert!(took >= deadline, "stopped early: {took:?}");
    assert!(
        took <= deadline + 2 * TICK,
        "stopped {took:?} after start: more than 2 ticks late"
    );
    assert_still_serving(&open).await;
}

#[tokio::test]
async fn blocking_host_call_is_stopped_by_the_outer_timeout() {
    let sandbox = sandbox();
    let deadline = Duration::from_millis(150);
    let limits = LimitOverrides {
        deadline: Some(deadline),
        ..LimitOverrides::default()
    };
    let sleeper = load_guest(&sandbox, "sleeper", limits).await;
    let report = call(&sandbox, &sleeper, json!({})).await;
    assert!(matches!(
        failure(&report),
        SandboxFailure::DeadlineExceeded { .. }
    ));
    let took = elapsed(&report);
    eprintln!(
        "kill: a 60 s sleep in a host call was stopped after {took:?} (deadline {deadline:?})"
    );
    assert!(
        took >= deadline && took < deadline + Duration::from_millis(500),
        "{took:?}"
    );
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn memory_bomb_hits_the_total_memory_limit() {
    let _serial = SERIAL.lock().await;
    let sandbox = sandbox();
    let limits = LimitOverrides {
        memory_bytes: Some(32 << 20),
        ..LimitOverrides::default()
    };
    let bomb = load_guest(&sandbox, "membomb", limits).await;
    let report = call(&sandbox, &bomb, json!({})).await;
    match failure(&report) {
        SandboxFailure::MemoryLimit { limit, requested } => {
            assert_eq!(*limit, 32 << 20);
            assert!(*requested > 32 << 20);
        }
        other => panic!("expected the memory limit, got {other:?}"),
    }
    assert!(report.peak_memory_bytes <= 32 << 20);
    eprintln!(
        "kill: the memory bomb was stopped at 32 MiB after {:?}",
        elapsed(&report)
    );
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn deep_recursion_is_a_stack_overflow_trap() {
    let sandbox = sandbox();
    let tool = load_guest(&sandbox, "recursion", LimitOverrides::default()).await;
    // Locals in wasm locals: the engine's stack guard trips.
    let report = call(&sandbox, &tool, json!({"frames": "small"})).await;
    match failure(&report) {
        SandboxFailure::GuestTrap { message } => {
            assert!(message.contains("wasm stack overflow"), "{message}");
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    eprintln!(
        "kill: unbounded recursion trapped after {:?}",
        elapsed(&report)
    );
    // Arrays in every frame: Rust's shadow stack in linear memory runs out
    // first and the guest faults below address 0.
    let report = call(&sandbox, &tool, json!({"frames": "large"})).await;
    match failure(&report) {
        SandboxFailure::GuestTrap { message } => {
            assert!(message.contains("out of bounds memory access"), "{message}");
            assert!(
                message.contains("stack overflow"),
                "the hint names the likely cause: {message}"
            );
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn huge_output_is_refused() {
    let sandbox = sandbox();
    let tool = load_guest(&sandbox, "huge-output", LimitOverrides::default()).await;
    let report = call(&sandbox, &tool, json!({"bytes": 16 << 20})).await;
    assert_eq!(
        failure(&report),
        &SandboxFailure::OutputTooLarge {
            limit: 1 << 20,
            size: 16 << 20
        }
    );
    // Just under the cap passes.
    let report = call(&sandbox, &tool, json!({"bytes": 1 << 20})).await;
    assert!(report.result.is_ok(), "{:?}", report.result);
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn panic_is_a_trap_with_the_panic_message() {
    let sandbox = sandbox();
    let tool = load_guest(&sandbox, "panic", LimitOverrides::default()).await;
    let report = call(&sandbox, &tool, json!({})).await;
    match failure(&report) {
        SandboxFailure::GuestTrap { message } => {
            assert!(message.contains("unreachable"), "{message}");
            assert!(
                message.contains("hostile guest panicked on purpose"),
                "{message}"
            );
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    let error = model_error(&report);
    assert_eq!(error.code, "sandbox.guest_trap");
    assert!(
        error.message.starts_with("the tool crashed"),
        "{}",
        error.message
    );
    assert_still_serving(&sandbox).await;
}

/// Loading the guest `name` under its declared world must fail.
async fn load_error(sandbox: &Sandbox, name: &str) -> LoadError {
    sandbox
        .load(spec(guest(name)), &|_| {})
        .await
        .expect_err("the host must refuse this component")
}

fn refused_imports(error: LoadError) -> Vec<String> {
    match error {
        LoadError::UngrantedImports { imports, .. } => imports,
        other => panic!("expected a capability refusal, got {other}"),
    }
}

#[tokio::test]
async fn ungranted_capability_is_refused_at_load() {
    let sandbox = sandbox();
    let error = load_error(&sandbox, "overreach").await;
    let message = error.to_string();
    assert_eq!(
        refused_imports(error),
        vec![format!("toolhost:host/random@{HOST_VERSION}")]
    );
    assert!(message.contains("grant (log)"), "{message}");

    // Granted the capability, the same bytes load and run.
    let granted = ComponentSpec {
        grant: CapabilitySet::for_world("pure-tool").expect("world"),
        ..spec(guest("overreach"))
    };
    let tool = load(&sandbox, granted).await;
    assert!(call(&sandbox, &tool, json!({})).await.result.is_ok());
}

#[tokio::test]
async fn a_read_only_workspace_tool_that_writes_is_refused_at_load() {
    let sandbox = sandbox();
    let error = load_error(&sandbox, "reader-writes").await;
    assert_eq!(
        refused_imports(error),
        vec![format!("toolhost:host/workspace-write@{HOST_VERSION}")]
    );
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn unknown_interface_is_refused_at_load() {
    let sandbox = sandbox();
    let error = load_error(&sandbox, "foreign-import").await;
    assert_eq!(refused_imports(error), vec!["evil:exfil/upload@1.0.0"]);
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn sockets_are_refused_at_load_and_nothing_connects() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let sandbox = sandbox();
    let error = load_error(&sandbox, "net-probe").await;
    let imports = refused_imports(error);
    assert!(
        imports
            .iter()
            .all(|import| import.starts_with("wasi:sockets/"))
            && !imports.is_empty(),
        "{imports:?}"
    );
    assert!(listener.accept().is_err(), "nothing may have connected");
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn wasi_filesystem_environment_and_arguments_are_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "host secret").expect("write");
    let planted = dir.path().join("planted.txt");
    let sandbox = sandbox();
    let tool = load_guest(&sandbox, "wasi-probe", LimitOverrides::default()).await;
    let report = call(
        &sandbox,
        &tool,
        json!({
            "secret_path": secret.to_string_lossy(),
            "write_path": planted.to_string_lossy(),
        }),
    )
    .await;
    let Ok(ToolOutcome::Success(success)) = &report.result else {
        panic!("the probe should report, got {:?}", report.result);
    };
    let seen = &success.structured;
    // (`current_dir` is wasi-libc's virtual "/", not a capability.)
    for probe in ["read_secret", "write_file", "list_root", "list_cwd"] {
        assert!(
            seen[probe].get("error").is_some(),
            "{probe} was allowed: {}",
            seen[probe]
        );
    }
    assert_eq!(seen["env_vars"], json!([]), "no environment variables");
    assert_eq!(seen["args"], json!([]), "no arguments");
    assert!(!planted.exists(), "the guest created a file on the host");
    assert!(!success.content.contains("host secret"));
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn no_state_survives_a_call() {
    let sandbox = sandbox();
    let tool = load_guest(&sandbox, "stateful", LimitOverrides::default()).await;
    for _ in 0..3 {
        let report = call(&sandbox, &tool, json!({})).await;
        match report.result {
            Ok(ToolOutcome::Success(success)) => assert_eq!(success.content, "1"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn malformed_results_are_typed_failures() {
    let sandbox = sandbox();
    let tool = load_guest(&sandbox, "liar", LimitOverrides::default()).await;
    for mode in ["sandbox-code", "bad-code", "effect"] {
        let report = call(&sandbox, &tool, json!({"mode": mode})).await;
        assert!(
            matches!(failure(&report), SandboxFailure::InvalidOutput { .. }),
            "{mode}: {:?}",
            report.result
        );
    }
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn bad_descriptor_is_refused_at_load() {
    let sandbox = sandbox();
    let error = load_error(&sandbox, "bad-descriptor").await;
    assert!(matches!(error, LoadError::Descriptor { .. }), "{error}");
    assert!(
        error.to_string().contains("\"type\": \"object\""),
        "{error}"
    );
}

/// `describe()` had no size cap: its text reaches every catalog, snapshot,
/// model request and terminal.
#[tokio::test]
async fn an_oversized_descriptor_is_refused_at_load() {
    let sandbox = sandbox();
    let error = load_error(&sandbox, "oversized").await;
    assert!(matches!(error, LoadError::Descriptor { .. }), "{error}");
    assert!(
        error.to_string().contains("the description is") && error.to_string().contains("at most"),
        "{error}"
    );
}

#[tokio::test]
async fn arguments_are_checked_before_the_guest_runs() {
    let sandbox = sandbox();
    let dice = load(&sandbox, dice_spec()).await;
    let big = "1".repeat(300 * 1024);
    let report = call(&sandbox, &dice, json!({ "formula": big })).await;
    assert!(matches!(
        failure(&report),
        SandboxFailure::ArgumentsTooLarge { limit, .. } if *limit == 256 * 1024
    ));
    let report = call(&sandbox, &dice, json!(["d6"])).await;
    match report.result {
        Ok(ToolOutcome::Error(error)) => assert_eq!(error.code, "tool.invalid_arguments"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn tampered_component_is_refused() {
    let sandbox = sandbox();
    let mut bytes = guest("stateful").bytes.to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    let spec = ComponentSpec {
        bytes,
        ..spec(guest("stateful"))
    };
    let error = sandbox.load(spec, &|_| {}).await.expect_err("sha mismatch");
    assert!(
        matches!(error, LoadError::IntegrityMismatch { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn builtins_import_only_their_world() {
    let sandbox = sandbox();
    let dice = load(&sandbox, dice_spec()).await;
    let host_imports: Vec<&str> = dice
        .imports()
        .iter()
        .map(String::as_str)
        .filter(|import| import.starts_with("toolhost:host/"))
        .collect();
    assert_eq!(
        host_imports,
        vec![format!("toolhost:host/random@{HOST_VERSION}")]
    );
    // Every builtin loads under exactly its declared world (the load would
    // refuse anything more), and no read-only workspace tool imports write.
    for builtin in toolhost_builtins::components() {
        let tool = load(&sandbox, spec(builtin)).await;
        assert!(
            tool.imports()
                .iter()
                .all(|import| !import.starts_with("wasi:sockets")),
            "{}",
            builtin.package
        );
        if builtin.world != "workspace-writer" {
            assert!(
                tool.imports()
                    .iter()
                    .all(|import| !import.starts_with("toolhost:host/workspace-write")),
                "{} imports workspace-write",
                builtin.package
            );
        }
    }
}

/// Load `dice.roll`, keeping the reasons of every cache entry rejected.
async fn load_noting_rejections(sandbox: &Sandbox) -> (ToolComponent, Vec<String>) {
    let rejected = std::sync::Mutex::new(Vec::new());
    let observe = |event: LoadEvent<'_>| {
        if let LoadEvent::CacheRejected { reason, .. } = event {
            rejected.lock().expect("lock").push(reason);
        }
    };
    let dice = sandbox.load(dice_spec(), &observe).await.expect("rebuilt");
    (dice, rejected.into_inner().expect("lock"))
}

#[tokio::test]
async fn cache_is_used_and_a_corrupt_entry_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = || SandboxConfig {
        cache_dir: Some(dir.path().to_owned()),
        ..toolhost_capabilities::sandbox_config()
    };
    let first = Sandbox::new(config()).expect("sandbox");
    assert_eq!(
        load(&first, dice_spec()).await.loaded_from(),
        LoadedFrom::Compiled
    );
    let second = Sandbox::new(config()).expect("sandbox");
    assert_eq!(
        load(&second, dice_spec()).await.loaded_from(),
        LoadedFrom::Cache
    );

    for entry in std::fs::read_dir(dir.path()).expect("cache dir") {
        let path = entry.expect("entry").path();
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("truncate");
    }
    let third = Sandbox::new(config()).expect("sandbox");
    let (dice, rejected) = load_noting_rejections(&third).await;
    assert_eq!(dice.loaded_from(), LoadedFrom::Compiled);
    assert_eq!(rejected.len(), 1);
    assert!(
        call(&third, &dice, json!({"formula": "d6"}))
            .await
            .result
            .is_ok()
    );
    let fourth = Sandbox::new(config()).expect("sandbox");
    assert_eq!(
        load(&fourth, dice_spec()).await.loaded_from(),
        LoadedFrom::Cache
    );
}

/// The review's swap: one valid cache entry copied over another
/// component's name used to load (another component's native code ran).
/// Now the header names its key: the entry is refused, the right component
/// compiled again.
#[tokio::test]
async fn a_cache_entry_copied_over_another_components_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = || SandboxConfig {
        cache_dir: Some(dir.path().to_owned()),
        ..toolhost_capabilities::sandbox_config()
    };
    let first = Sandbox::new(config()).expect("sandbox");
    let dice_sha = load(&first, dice_spec()).await.sha256_hex().to_owned();
    let other = load(&first, spec(builtin("workspace-list-files"))).await;
    let entry_of = |sha: &str| {
        std::fs::read_dir(dir.path())
            .expect("cache dir")
            .map(|entry| entry.expect("entry").path())
            .find(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with(sha))
            })
            .expect("a cache entry")
    };
    std::fs::copy(entry_of(other.sha256_hex()), entry_of(&dice_sha)).expect("swap");

    let second = Sandbox::new(config()).expect("sandbox");
    let (dice, reasons) = load_noting_rejections(&second).await;
    assert_eq!(dice.loaded_from(), LoadedFrom::Compiled);
    assert_eq!(dice.id().as_str(), "builtin:dice.roll");
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(reasons[0].contains("another component"), "{reasons:?}");
    assert!(
        call(&second, &dice, json!({"formula": "d6"}))
            .await
            .result
            .is_ok()
    );
}

#[tokio::test]
async fn pooling_falls_back_cleanly_when_address_space_is_short() {
    // Millions of 4 GiB memory slots cannot be reserved on any machine.
    let impossible = |allocator| SandboxConfig {
        allocator,
        max_concurrent_calls: 50_000_000,
        ..toolhost_capabilities::sandbox_config()
    };
    let sandbox = Sandbox::new(impossible(AllocatorChoice::Auto)).expect("falls back");
    assert!(matches!(
        sandbox.allocator(),
        Allocator::OnDemand {
            fallback_reason: Some(_)
        }
    ));
    assert_still_serving(&sandbox).await;
    assert!(Sandbox::new(impossible(AllocatorChoice::Pooling)).is_err());

    let pooled = Sandbox::new(toolhost_capabilities::sandbox_config()).expect("sandbox");
    assert!(matches!(pooled.allocator(), Allocator::Pooling { .. }));
}

#[tokio::test]
async fn randomness_replays_from_the_recorded_seed() {
    let sandbox = sandbox();
    let dice = load(&sandbox, dice_spec()).await;
    let args = json!({"formula": "100d1000000"});
    let roll = |seed| {
        let sandbox = &sandbox;
        let dice = &dice;
        let args = &args;
        async move {
            let report = sandbox.call(dice, args, CallEntropy::seeded(seed)).await;
            assert_eq!(report.entropy.seed, seed, "the report records the seed");
            match report.result {
                Ok(ToolOutcome::Success(success)) => success.structured["rolls"].clone(),
                other => panic!("{other:?}"),
            }
        }
    };
    assert_eq!(roll(42).await, roll(42).await);
    assert_ne!(roll(42).await, roll(43).await);
}

#[tokio::test]
async fn many_calls_reuse_the_same_component() {
    let sandbox = sandbox();
    let dice = load(&sandbox, dice_spec()).await;
    let started = Instant::now();
    for seed in 0..200 {
        let report = sandbox
            .call(&dice, &json!({"formula": "2d6"}), CallEntropy::seeded(seed))
            .await;
        assert!(report.result.is_ok());
    }
    eprintln!("200 fresh-store calls in {:?}", started.elapsed());
}

/// One component built against each published `toolhost:host` version
/// after 0.1.0 (which has its own test above; the builtins are built
/// against the newest), written straight against that version's WIT, each
/// calling the capability its version added: all load under their grant and
/// run against the newest host's capability layer.
#[tokio::test]
async fn components_built_against_every_published_host_version_load_and_run() {
    use std::sync::Arc;
    use toolhost_capabilities::{
        BindInputs, CallGrant, CallableAgent, InvocationBound, RunContext,
    };

    let run = tempfile::tempdir().expect("run dir");
    for root in ["output", "scratch"] {
        std::fs::create_dir_all(run.path().join(root)).expect("root");
    }
    let workspace = toolhost_workspace::Workspace::open(
        run.path(),
        toolhost_workspace::WorkspaceRoots::default_run(),
        toolhost_workspace::WorkspaceLimits::default(),
    )
    .expect("workspace");
    let chat =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/chats/group_chat.jsonl");
    let bound = toolhost_chat::BoundChat::bind(&chat, None).expect("chat");
    let messages = bound.info().message_count;
    let agent = CallableAgent {
        profile_id: "researcher".into(),
        display_name: None,
        description: None,
        delegate: true,
        handoff: false,
        result_budget_tokens: 1_000,
        max_invocations_per_run: 1,
        max_concurrent_invocations: 1,
        max_handoff_depth: 1,
    };
    let inputs = InvocationBound::bind(&BindInputs {
        workspace: Some(Arc::new(toolhost_workspace::WorkspaceSession::new(
            Arc::new(workspace),
        ))),
        run: Some(Arc::new(RunContext::none().with_chat(Arc::new(bound)))),
        agents: Some(Arc::new(vec![agent])),
        ..BindInputs::default()
    });
    let sandbox = sandbox();
    for (name, version, answer) in [
        (
            "legacy-v011",
            "0.1.1",
            "roots: output (writable)".to_owned(),
        ),
        ("legacy-v012", "0.1.2", format!("messages: {messages}")),
        ("legacy-v013", "0.1.3", "agents: researcher".to_owned()),
    ] {
        let tool = load_guest(&sandbox, name, LimitOverrides::default()).await;
        assert!(
            tool.imports()
                .iter()
                .any(|import| import.starts_with("toolhost:host/")
                    && import.ends_with(&format!("@{version}"))),
            "{name}: {:?}",
            tool.imports()
        );
        let grant = CallGrant::of(&tool, true);
        let capabilities = inputs.prepare(&grant).expect("prepared");
        let report = sandbox
            .call_under(
                &tool,
                tool.limits(),
                &json!({}),
                CallEntropy::seeded(1),
                capabilities,
            )
            .await;
        match &report.result {
            Ok(ToolOutcome::Success(success)) => {
                assert!(
                    success.content.starts_with(&answer),
                    "{name}: {}",
                    success.content
                )
            }
            other => panic!("{name} failed: {other:?}"),
        }
    }
    assert_still_serving(&sandbox).await;
}

#[tokio::test]
async fn a_component_built_against_host_0_1_0_still_loads_and_runs() {
    let sandbox = sandbox();
    let legacy = guest("legacy-v010");
    let tool = load_guest(&sandbox, "legacy-v010", LimitOverrides::default()).await;
    // It imports the frozen 0.1.0 interfaces; the host's newest is 0.1.1.
    assert!(
        tool.imports()
            .iter()
            .any(|import| import == "toolhost:host/random@0.1.0"),
        "{:?}",
        tool.imports()
    );
    assert!(legacy.world == "pure-tool");
    let first = call(&sandbox, &tool, json!({})).await;
    let second = call(&sandbox, &tool, json!({})).await;
    match (&first.result, &second.result) {
        (Ok(ToolOutcome::Success(a)), Ok(ToolOutcome::Success(b))) => {
            assert!(a.content.starts_with("drew "), "{}", a.content);
            assert_eq!(a.content, b.content, "the same seed draws the same number");
        }
        other => panic!("the 0.1.0 component failed: {other:?}"),
    }
    assert_eq!(first.logs.len(), 1, "its 0.1.0 log import reached the host");
    assert_still_serving(&sandbox).await;
}

/// A finished call's store is torn down after its answer on a current-thread
/// runtime (`mcp serve`) and at once on a multi-threaded one; either way its
/// slot comes back, so more calls than the pool has slots all finish, one
/// after another or all at once.
async fn calls_beyond_the_pool_all_finish() {
    let sandbox = Sandbox::new(SandboxConfig {
        max_concurrent_calls: 2,
        epoch_tick: TICK,
        cache_dir: Some(shared_cache()),
        ..toolhost_capabilities::sandbox_config()
    })
    .expect("sandbox");
    let dice = load(&sandbox, dice_spec()).await;
    let within = Duration::from_secs(60);
    for _ in 0..12 {
        let report = tokio::time::timeout(within, call(&sandbox, &dice, json!({"formula": "2d6"})))
            .await
            .expect("a slot came back");
        assert!(report.result.is_ok(), "{:?}", report.result);
    }
    let together = (0..12).map(|_| call(&sandbox, &dice, json!({"formula": "2d6"})));
    let reports = tokio::time::timeout(within, futures_util::future::join_all(together))
        .await
        .expect("slots came back");
    assert!(reports.iter().all(|report| report.result.is_ok()));
}

#[tokio::test(flavor = "current_thread")]
async fn calls_beyond_the_pool_finish_on_a_current_thread_runtime() {
    calls_beyond_the_pool_all_finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_beyond_the_pool_finish_on_a_multi_threaded_runtime() {
    calls_beyond_the_pool_all_finish().await;
}
