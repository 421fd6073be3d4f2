//! The control plane around every call: profile → snapshot → turn → gate →
//! executor → audit files → journal, and what ends a run.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolhost_core::{
    AgentToolResult, Classified, ErrorClass, ExitPolicy, Profile, ProviderToolCall, ToolBinding,
    ToolCall, ToolCatalog, ToolChoice, ToolDescriptor, ToolId, ToolOutcome, ToolSuccess,
};
use toolhost_journal::{
    AuditError, ContextAssembled, Durability, Event as _, JournalEvent, Level, ModelRequestCreated,
    RunCompleted, RunResumed, RunStarted, ToolCallCompleted, ToolCallFailed, ToolCallRequested,
    ToolCallStarted, ToolResultStored, read_events,
};
use toolhost_runtime::{
    CallOutcome, ExecuteError, Execution, Invocation, Run, RunFailure, ToolExecutor, ToolHost,
    ToolHostConfig,
};
use toolhost_sandbox::{CallEntropy, CallReport};

use support::plain_sources;

fn id(text: &str) -> ToolId {
    ToolId::parse(text).expect("tool id")
}

fn descriptor(tool: &ToolId) -> ToolDescriptor {
    support::described(tool.clone(), "A test tool.")
}

fn profile(tools: Value) -> Profile {
    Profile::from_json(
        &json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "tester", "tools": tools})
            .to_string(),
    )
    .expect("profile")
}

type Answer = dyn Fn(&ToolCall) -> Result<AgentToolResult, ExecuteError> + Send + Sync;

/// An executor that answers every call from a closure, so tests can make it
/// misbehave in ways a real sandbox never would.
struct Scripted {
    answer: Box<Answer>,
    calls: Mutex<u32>,
}

impl Scripted {
    fn new(
        answer: impl Fn(&ToolCall) -> Result<AgentToolResult, ExecuteError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            answer: Box::new(answer),
            calls: Mutex::new(0),
        }
    }

    fn echo() -> Self {
        Self::new(|invocation| {
            Ok(AgentToolResult::from_outcome(
                invocation,
                ToolOutcome::Success(ToolSuccess {
                    content: format!("echo {}", invocation.arguments),
                    ..ToolSuccess::default()
                }),
            )
            .0)
        })
    }

    fn calls(&self) -> u32 {
        *self.calls.lock().expect("lock")
    }
}

impl ToolExecutor for Scripted {
    async fn execute(
        &self,
        invocation: &ToolCall,
        _binding: &ToolBinding,
        entropy: CallEntropy,
        _context: toolhost_runtime::CallContext,
    ) -> Result<Execution, ExecuteError> {
        *self.calls.lock().expect("lock") += 1;
        let result = (self.answer)(invocation)?;
        Ok(Execution {
            result,
            effect: None,
            report: Some(CallReport::not_run(
                entropy,
                Ok(ToolOutcome::Success(ToolSuccess::default())),
            )),
        })
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    run: Arc<Run>,
    session: Invocation,
}

fn fixture(profile: &Profile, catalog: &ToolCatalog) -> Fixture {
    fixture_with(profile, catalog, Durability::Batched)
}

fn fixture_with(profile: &Profile, catalog: &ToolCatalog, durability: Durability) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("run");
    let run = Run::create(&root, profile, durability).expect("run");
    let names = BTreeMap::new();
    let sources = plain_sources(catalog, &names);
    let session = run
        .start_invocation(profile, sources, "inv_root", ExitPolicy::RunFinishAllowed)
        .expect("session");
    Fixture {
        _dir: dir,
        root,
        run,
        session,
    }
}

fn catalog(tools: &[&str]) -> ToolCatalog {
    ToolCatalog::from_descriptors(tools.iter().map(|tool| descriptor(&id(tool)))).expect("catalog")
}

fn call(session: &mut Invocation, call_id: &str, alias: &str, arguments: Value) -> ToolCall {
    let turn = session.begin_turn(ToolChoice::Auto, "test").expect("turn");
    turn.decode_call(ProviderToolCall {
        call_id: Some(call_id.into()),
        name: Some(alias.into()),
        arguments: Some(arguments),
        provider_metadata: Value::Null,
    })
    .expect("decodes")
}

/// `alias` called as `call_id` with `arguments` and run by `executor`
/// (entropy seeded with `seed`): decoded in one turn, run in the next.
async fn run_call<E: ToolExecutor>(
    session: &mut Invocation,
    executor: &E,
    call_id: &str,
    alias: &str,
    arguments: Value,
    seed: u64,
) -> Result<CallOutcome, RunFailure> {
    let invocation = call(session, call_id, alias, arguments);
    let turn = session.begin_turn(ToolChoice::Auto, "test").expect("turn");
    session
        .call(executor, &turn, invocation, CallEntropy::seeded(seed))
        .await
}

fn events(root: &Path) -> Vec<JournalEvent> {
    read_events(root.join("events.jsonl")).expect("journal")
}

fn types(root: &Path) -> Vec<String> {
    events(root).into_iter().map(|event| event.r#type).collect()
}

#[tokio::test]
async fn a_call_walks_the_whole_path_and_leaves_its_audit_trail() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let mut f = fixture(&profile, &catalog(&["builtin:dice.roll"]));
    let executor = Scripted::echo();
    let turn = f
        .session
        .begin_turn(ToolChoice::Auto, "test")
        .expect("turn");
    let invocation = turn
        .decode_call(ProviderToolCall {
            call_id: Some("call_1".into()),
            name: Some("dice_roll".into()),
            arguments: Some(json!(r#"{"formula":"d6"}"#)),
            provider_metadata: Value::Null,
        })
        .expect("decodes");
    let outcome = f
        .session
        .call(&executor, &turn, invocation, CallEntropy::seeded(7))
        .await
        .expect("call");
    assert_eq!(outcome.model_text(), r#"echo {"formula":"d6"}"#);
    f.run.complete().expect("complete");

    assert_eq!(
        types(&f.root),
        [
            RunStarted::TYPE,
            ContextAssembled::TYPE,
            ModelRequestCreated::TYPE,
            ToolCallRequested::TYPE,
            ToolCallStarted::TYPE,
            ToolResultStored::TYPE,
            ToolCallCompleted::TYPE,
            RunCompleted::TYPE
        ]
    );
    let events = events(&f.root);
    let completed = &events[6].payload;
    assert_eq!(completed["callId"], "call_1");
    assert_eq!(completed["toolId"], "builtin:dice.roll");
    assert_eq!(completed["snapshotId"], "inv_root");
    assert_eq!(completed["round"], 1);
    assert_eq!(completed["sandbox"]["seed"], 7);
    assert_eq!(completed["eventScope"]["invocationId"], "inv_root");
    let requested = &events[3].payload;
    let args_ref = requested["argumentsRef"].as_str().expect("ref");
    let stored: Value =
        serde_json::from_slice(&std::fs::read(f.root.join(args_ref)).expect("args")).expect("json");
    assert_eq!(stored["arguments"], json!({"formula": "d6"}));
    assert_eq!(stored["callId"], "call_1");
    let result: Value =
        serde_json::from_slice(&std::fs::read(f.root.join(&outcome.result_ref)).expect("result"))
            .expect("json");
    assert_eq!(result["result"]["content"], r#"echo {"formula":"d6"}"#);
}

/// Sync calls made by `calls` tool calls through the whole path, and then
/// by the run's end.
async fn sync_calls_of(durability: Durability, calls: usize) -> (u64, u64) {
    let profile = profile(json!({"allow": ["dice.roll"], "maxCallsPerRun": 100}));
    let mut f = fixture_with(&profile, &catalog(&["builtin:dice.roll"]), durability);
    let executor = Scripted::echo();
    let before = f.run.sync_calls();
    for n in 0..calls {
        run_call(
            &mut f.session,
            &executor,
            &format!("call_{n}"),
            "dice_roll",
            json!({"formula": "d6"}),
            7,
        )
        .await
        .expect("call");
    }
    let during = f.run.sync_calls() - before;
    let ended = f.run.sync_calls();
    f.run.complete().expect("complete");
    (during, f.run.sync_calls() - ended)
}

#[tokio::test]
async fn batched_calls_make_no_sync_call_and_the_run_end_a_bounded_number() {
    for calls in [2, 30] {
        let (during, at_end) = sync_calls_of(Durability::Batched, calls).await;
        assert_eq!(during, 0, "{calls} calls in batched mode");
        assert!(at_end >= 1, "the run's end makes it durable");
        // However many calls came before: a few fsyncs, or one syncfs.
        assert!(
            at_end <= 10,
            "{calls} calls: {at_end} sync calls at the end"
        );
    }
    let (during, _) = sync_calls_of(Durability::Fsync, 5).await;
    // Each call: two audit files and their directories, five events.
    assert!(during >= 5 * 9, "fsync mode syncs every call: {during}");
}

#[tokio::test]
async fn a_result_for_another_call_is_a_system_failure_and_is_never_stored() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let mut f = fixture(&profile, &catalog(&["builtin:dice.roll"]));
    let liar = Scripted::new(|invocation| {
        let mut other = invocation.clone();
        other.call_id = "call_someone_else".into();
        Ok(AgentToolResult::from_outcome(&other, ToolOutcome::Success(ToolSuccess::default())).0)
    });
    let failure = run_call(&mut f.session, &liar, "call_1", "dice_roll", json!({}), 1)
        .await
        .expect_err("identity mismatch");
    assert!(matches!(failure, RunFailure::Identity(_)), "{failure}");
    assert_eq!(failure.code(), "tool.result_identity_mismatch");
    assert_eq!(failure.class(), ErrorClass::SystemFailure);

    let last = events(&f.root).pop().expect("event");
    assert_eq!(last.r#type, ToolCallFailed::TYPE);
    assert_eq!(last.level, Level::Error);
    assert_eq!(last.payload["code"], "tool.result_identity_mismatch");
    let results = std::fs::read_dir(f.root.join("tool-results"))
        .expect("dir")
        .count();
    assert_eq!(results, 0, "nothing stored for a mismatched result");
}

#[tokio::test]
async fn a_duplicate_call_id_fails_before_anything_is_overwritten() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let mut f = fixture(&profile, &catalog(&["builtin:dice.roll"]));
    let executor = Scripted::echo();
    let first = call(&mut f.session, "call_same", "dice_roll", json!({"n": 1}));
    let turn = f
        .session
        .begin_turn(ToolChoice::Auto, "test")
        .expect("turn");
    let outcome = f
        .session
        .call(&executor, &turn, first, CallEntropy::seeded(1))
        .await
        .expect("first call");
    let args_path = f.root.join("tool-args").join(
        Path::new(&outcome.result_ref)
            .file_name()
            .expect("file name"),
    );
    let args_before = std::fs::read(&args_path).expect("args");
    let result_before = std::fs::read(f.root.join(&outcome.result_ref)).expect("result");

    let second = call(&mut f.session, "call_same", "dice_roll", json!({"n": 2}));
    let failure = f
        .session
        .call(&executor, &turn, second, CallEntropy::seeded(2))
        .await
        .expect_err("duplicate");
    assert!(
        matches!(
            failure,
            RunFailure::Audit(AuditError::DuplicateCallId { .. })
        ),
        "{failure}"
    );
    assert_eq!(failure.code(), "audit.duplicate_call_id");
    assert_eq!(executor.calls(), 1, "the duplicate never ran");
    assert_eq!(std::fs::read(&args_path).expect("args"), args_before);
    assert_eq!(
        std::fs::read(f.root.join(&outcome.result_ref)).expect("result"),
        result_before
    );
}

#[tokio::test]
async fn budget_exhaustion_is_a_result_the_model_reads_and_no_call_runs() {
    let profile = profile(json!({
        "allow": ["dice.roll", "chat.search"],
        "maxCallsPerRun": 3,
        "maxCallsPerTool": {"dice.roll": 1}
    }));
    let mut f = fixture(
        &profile,
        &catalog(&["builtin:dice.roll", "builtin:chat.search"]),
    );
    let executor = Scripted::echo();
    let turn = f
        .session
        .begin_turn(ToolChoice::Auto, "test")
        .expect("turn");
    let mut outcomes = Vec::new();
    for (n, alias) in [
        "dice_roll",
        "dice_roll",
        "chat_search",
        "chat_search",
        "chat_search",
    ]
    .iter()
    .enumerate()
    {
        let invocation = turn
            .decode_call(ProviderToolCall {
                call_id: Some(format!("call_{n}")),
                name: Some((*alias).into()),
                arguments: None,
                provider_metadata: Value::Null,
            })
            .expect("decodes");
        outcomes.push(
            f.session
                .call(&executor, &turn, invocation, CallEntropy::seeded(1))
                .await
                .expect("the run goes on"),
        );
    }
    let codes: Vec<Option<&str>> = outcomes
        .iter()
        .map(|outcome| outcome.result.error_code.as_deref())
        .collect();
    // dice once (its own limit), then the total of 3 runs out on the 4th call.
    assert_eq!(
        codes,
        [
            None,
            Some("agent.tool_budget_exhausted"),
            None,
            None,
            Some("agent.tool_budget_exhausted")
        ]
    );
    assert_eq!(executor.calls(), 3);
    assert!(
        outcomes[1]
            .model_text()
            .starts_with("## Tool error\n\nagent.tool_budget_exhausted: `dice_roll`")
    );
    assert_eq!(f.session.gate().total_used(), 3);

    // A rejected call: requested → result stored → failed, never started.
    let rejected: Vec<(String, Level)> = events(&f.root)
        .into_iter()
        .filter(|event| event.payload["callId"] == "call_1")
        .map(|event| (event.r#type, event.level))
        .collect();
    assert_eq!(
        rejected,
        [
            (ToolCallRequested::TYPE.to_owned(), Level::Info),
            (ToolResultStored::TYPE.to_owned(), Level::Debug),
            (ToolCallFailed::TYPE.to_owned(), Level::Warn)
        ]
    );
}

/// A tool outside the snapshot reaching the gate is answered, not fatal
/// (the reference's later version): charged to the total, never run, and
/// the model reads this invocation's tools.
#[tokio::test]
async fn a_tool_outside_the_snapshot_is_charged_and_answered() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let mut f = fixture(
        &profile,
        &catalog(&["builtin:dice.roll", "builtin:chat.search"]),
    );
    let executor = Scripted::echo();
    let turn = f
        .session
        .begin_turn(ToolChoice::Auto, "test")
        .expect("turn");
    // A provider adapter never produces this (the decoder keeps an unknown
    // name as an `UnknownToolCall`); an invocation built by hand still
    // meets the gate.
    let smuggled = ToolCall {
        call_id: "call_x".into(),
        tool_id: id("builtin:chat.search"),
        arguments: json!({}),
        provider_metadata: Value::Null,
    };
    let outcome = f
        .session
        .call(&executor, &turn, smuggled, CallEntropy::seeded(1))
        .await
        .expect("the run goes on");
    assert!(outcome.result.is_error);
    assert_eq!(
        outcome.result.error_code.as_deref(),
        Some("model.unknown_tool_call")
    );
    assert!(
        outcome
            .model_text()
            .contains("the tools you can call are `dice_roll`"),
        "{}",
        outcome.model_text()
    );
    assert_eq!(executor.calls(), 0);
    assert_eq!(f.session.gate().total_used(), 1, "charged");
    let events = events(&f.root);
    let last = events.last().expect("event");
    assert_eq!(last.r#type, ToolCallFailed::TYPE);
    assert_eq!(last.payload["errorCode"], "model.unknown_tool_call");
}

#[tokio::test]
async fn an_executor_failure_ends_the_run() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let mut f = fixture(&profile, &catalog(&["builtin:dice.roll"]));
    let broken =
        Scripted::new(|invocation| Err(ExecuteError::UnknownTool(invocation.tool_id.clone())));
    let failure = run_call(&mut f.session, &broken, "call_1", "dice_roll", json!({}), 1)
        .await
        .expect_err("system failure");
    assert_eq!(failure.code(), "tool.executor_missing");
    let last = events(&f.root).pop().expect("event");
    assert_eq!(
        (last.r#type.as_str(), last.level),
        (ToolCallFailed::TYPE, Level::Error)
    );
}

#[tokio::test]
async fn a_snapshot_is_written_once_per_invocation() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let catalog = catalog(&["builtin:dice.roll"]);
    let f = fixture(&profile, &catalog);
    let path = f.root.join("input/invocations/inv_root/tool_snapshot.json");
    let before = std::fs::read(&path).expect("snapshot");
    let names = BTreeMap::new();
    let other = self::profile(json!({"allow": ["dice.roll"], "maxCallsPerRun": 1}));
    let failure = f
        .run
        .start_invocation(
            &other,
            plain_sources(&catalog, &names),
            "inv_root",
            ExitPolicy::RunFinishAllowed,
        )
        .expect_err("second snapshot of the same id");
    assert!(matches!(failure, RunFailure::Audit(_)), "{failure}");
    assert_eq!(std::fs::read(&path).expect("snapshot"), before);
}

#[tokio::test]
async fn a_reopened_run_keeps_its_snapshot_and_spent_budget() {
    let profile = profile(json!({"allow": ["dice.roll"], "maxCallsPerTool": {"dice.roll": 2}}));
    let f = fixture(&profile, &catalog(&["builtin:dice.roll"]));
    let executor = Scripted::echo();
    let mut session = f.session;
    for n in 0..2 {
        run_call(
            &mut session,
            &executor,
            &format!("call_{n}"),
            "dice_roll",
            json!({}),
            1,
        )
        .await
        .expect("call");
    }
    drop(session);
    drop(f.run);

    let (run, recovery) = Run::open(&f.root).expect("reopen");
    assert_eq!(recovery.torn_bytes, None);
    let mut session = run
        .resume_invocation("inv_root", None)
        .expect("resume")
        .expect("root invocation");
    assert_eq!(session.gate().total_used(), 2);
    assert_eq!(session.round(), 4);
    let outcome = run_call(&mut session, &executor, "call_2", "dice_roll", json!({}), 1)
        .await
        .expect("call");
    assert_eq!(
        outcome.result.error_code.as_deref(),
        Some("agent.tool_budget_exhausted")
    );
    assert!(
        run.resume_invocation("inv_other", None)
            .expect("resume")
            .is_none()
    );
}

#[tokio::test]
async fn a_journal_torn_mid_line_reopens_at_the_last_whole_event() {
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let f = fixture(&profile, &catalog(&["builtin:dice.roll"]));
    let executor = Scripted::echo();
    let mut session = f.session;
    run_call(&mut session, &executor, "call_1", "dice_roll", json!({}), 1)
        .await
        .expect("call");
    drop(session);
    drop(f.run);

    // A crash in the middle of the last append.
    let journal = f.root.join("events.jsonl");
    let bytes = std::fs::read(&journal).expect("journal");
    let whole = bytes.len();
    std::fs::write(&journal, &bytes[..whole - 25]).expect("tear");
    let last_whole_seq = events_before_tear(&bytes[..whole - 25]);

    let (run, recovery) = Run::open(&f.root).expect("reopen");
    assert_eq!(recovery.last_seq, last_whole_seq);
    assert!(recovery.torn_bytes.is_some_and(|torn| torn > 0));
    run.complete().expect("append after the repair");
    let events = events(&f.root);
    assert_eq!(events[events.len() - 2].r#type, RunResumed::TYPE);
    assert_eq!(
        events[events.len() - 2].payload["tornBytes"],
        json!(recovery.torn_bytes)
    );
    assert_eq!(
        events.last().map(|event| event.seq),
        Some(last_whole_seq + 2)
    );
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=last_whole_seq + 2).collect::<Vec<_>>());
}

fn events_before_tear(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|byte| **byte == b'\n').count() as u64
}

#[tokio::test]
async fn profile_limits_reach_the_sandbox() {
    let host = ToolHost::with_builtins(ToolHostConfig::default()).expect("host");
    // A fuel budget far too small for any call: the profile's override must
    // be what stops it.
    let profile = profile(json!({"allow": ["dice.roll"]}));
    let mut starved = profile.clone();
    starved.sandbox.limits.insert(
        id("builtin:dice.roll"),
        serde_json::from_value(json!({"fuel": 1000})).expect("overrides"),
    );
    for (profile, expected) in [(profile, None), (starved, Some("sandbox.out_of_fuel"))] {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = Run::create(&dir.path().join("run"), &profile, Durability::Batched).expect("run");
        let mut session = run
            .start_invocation(
                &profile,
                host.snapshot_sources(),
                "inv_root",
                ExitPolicy::RunFinishAllowed,
            )
            .expect("session");
        let outcome = run_call(
            &mut session,
            &host,
            "call_1",
            "dice_roll",
            json!({"formula": "2d6"}),
            3,
        )
        .await
        .expect("the run goes on");
        assert_eq!(
            outcome.result.error_code.as_deref(),
            expected,
            "{}",
            outcome.model_text()
        );
    }
}
