//! The agent loop end to end: a scripted model, the real builtin
//! components in the sandbox, a copy of a SillyTavern chat, and the journal
//! and chat file checked afterwards.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use toolhost_capabilities::chat::Role;
use toolhost_journal::{
    AgentLoopFinished, ChatCommitCompleted, ChatCommitFailed, ChatCommitRequested,
    DirectOutputCaptured, DriftRecoveryAttempted, Event as _, ModelCallAttemptFailed,
    ModelCompleted, RunCompleted, RunFailed, RunPartialSuccess, ToolCallStarted, ToolCallUnknown,
};
use toolhost_model::testing::{Canned, serve};
use toolhost_model::{AgentModel, HttpModel, HttpModelConfig, SameModel};
use toolhost_providers::Provider;
use toolhost_runtime::{AgentDirectory, LoopConfig, Run, RunStatus, run_agent_loop};

#[tokio::test]
async fn a_run_reads_writes_commits_and_finishes() {
    let fixture = Fixture::new();
    let before = fixture.chat().message_count();
    let summary = fixture
        .run_to_completion(
            10,
            json!([
                {"text": "Let me read the last message.", "toolCalls": [
                    call("c1", "chat_read_messages", json!({"messages": [{"index": before - 1}]}))
                ]},
                {"toolCalls": [write("c2", REPLY), commit("c3")]},
                {"toolCalls": [finish("c4")]}
            ]),
        )
        .await;
    assert_eq!((summary.rounds, summary.tool_calls), (3, 4));
    assert_eq!(summary.commits.len(), 1);

    let chat = fixture.chat();
    assert_eq!(chat.message_count(), before + 1);
    let message = chat.messages().last().expect("message");
    assert_eq!(message.text(), REPLY);
    assert_eq!(message.role(), Role::Assistant);
    assert_eq!(message.index(), summary.commits[0].message_index);
    fixture.assert_prefix_untouched();

    let types = fixture.types();
    for kind in [
        ModelCompleted::TYPE,
        ChatCommitRequested::TYPE,
        ChatCommitCompleted::TYPE,
        AgentLoopFinished::TYPE,
    ] {
        assert!(types.iter().any(|t| t == kind), "{kind} in {types:?}");
    }
    assert_eq!(types.last().map(String::as_str), Some(RunCompleted::TYPE));
    assert_eq!(fixture.event(AgentLoopFinished::TYPE)["reason"], "done");
    // Every reply is kept as an audit fact.
    for round in 1..=3 {
        let path = fixture
            .run_dir
            .join(format!("model-responses/round-{round:03}.json"));
        let stored: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("reply")).expect("json");
        assert_eq!(stored["round"], round);
    }
    let committed = fixture.tool_result("c3");
    assert_eq!(committed["isError"], false);
    let content = committed["content"].as_str().expect("content");
    assert!(content.contains("Committed output/main.md"), "{content}");
    // The count of commits is for programs, not the model (seed §4).
    assert!(!content.contains("Commits in this run"), "{content}");
    assert_eq!(committed["structured"]["commitCount"], 1);
}

#[tokio::test]
async fn drift_is_captured_and_recovered_from() {
    let fixture = Fixture::new();
    fixture
        .run_to_completion(
            10,
            json!([
                {"text": "Here is my reply, written straight away."},
                {"toolCalls": [write("c1", REPLY), commit("c2"), finish("c3")]}
            ]),
        )
        .await;
    let captured = std::fs::read_to_string(fixture.run_dir.join("output/direct_output.md"))
        .expect("direct output kept");
    assert_eq!(captured, "Here is my reply, written straight away.");
    let drift = fixture.event(DriftRecoveryAttempted::TYPE);
    assert_eq!(drift["attempt"], 1);
    assert_eq!(drift["maxAttempts"], 9);
    assert_eq!(drift["reasonCode"], "model.tool_call_required");
    assert_eq!(
        fixture.event(DirectOutputCaptured::TYPE)["path"],
        "output/direct_output.md"
    );
}

#[tokio::test]
async fn drift_until_the_rounds_run_out_fails_the_run() {
    let fixture = Fixture::new();
    let summary = fixture
        .run(2, json!([{"text": "One."}, {"text": "Two."}]))
        .await;
    assert_eq!(summary.status, RunStatus::Failed);
    assert_eq!(summary.code.as_deref(), Some("model.tool_call_required"));
    assert!(summary.user_retryable);
    let failed = fixture.event(RunFailed::TYPE);
    assert_eq!(failed["code"], "model.tool_call_required");
    assert_eq!(failed["userRetryable"], true);
    assert_eq!(fixture.chat().bytes(), fixture.original.as_slice());
}

#[tokio::test]
async fn drift_after_a_commit_is_a_partial_success_that_keeps_the_commit() {
    let fixture = Fixture::new();
    let summary = fixture
        .run(
            3,
            json!([
                {"toolCalls": [write("c1", REPLY), commit("c2")]},
                {"text": "I think I am done."},
                {"text": "Really done."}
            ]),
        )
        .await;
    assert_eq!(summary.status, RunStatus::PartialSuccess, "{summary:?}");
    assert_eq!(summary.code.as_deref(), Some("model.tool_call_required"));
    let partial = fixture.event(RunPartialSuccess::TYPE);
    assert_eq!(partial["preservedCommitCount"], 1);
    assert_eq!(partial["userRetryable"], false);
    assert_eq!(partial["preservedCommits"][0]["path"], "output/main.md");
    assert_eq!(fixture.last_message(), REPLY);
    fixture.assert_prefix_untouched();
}

#[tokio::test]
async fn a_terminal_call_that_is_not_last_is_refused_and_the_rest_run() {
    let fixture = Fixture::new();
    fixture
        .run_to_completion(
            10,
            json!([
                {"toolCalls": [write("c1", REPLY), commit("c2"), finish("c3"), call("c4", "workspace_read_file", json!({"path": "output/main.md"}))]},
                {"toolCalls": [finish("c5")]}
            ]),
        )
        .await;
    let refused = fixture.tool_result("c3");
    assert_eq!(refused["errorCode"], "agent.tool_after_finish");
    // The call after it ran normally.
    assert_eq!(fixture.tool_result("c4")["isError"], false);
    assert_eq!(fixture.event(AgentLoopFinished::TYPE)["round"], 2);
}

#[tokio::test]
async fn running_out_of_rounds_is_max_tool_rounds_exceeded() {
    let fixture = Fixture::new();
    let summary = fixture
        .run(
            2,
            json!([
                {"toolCalls": [call("c1", "workspace_read_file", json!({"path": "output/none.md"}))]},
                {"toolCalls": [call("c2", "workspace_read_file", json!({"path": "output/none.md"}))]},
                {"toolCalls": [finish("never")]}
            ]),
        )
        .await;
    assert_eq!(summary.status, RunStatus::Failed);
    assert_eq!(
        summary.code.as_deref(),
        Some("agent.max_tool_rounds_exceeded")
    );
    assert!(summary.user_retryable);
    assert_eq!(summary.rounds, 2);
}

#[tokio::test]
async fn finish_needs_an_explicit_commit_and_an_auto_publish_does_not_count() {
    let fixture = Fixture::new();
    let before = fixture.chat().message_count();
    let summary = fixture
        .run_to_completion(
            10,
            json!([
                {"toolCalls": [finish("c1")]},
                {"toolCalls": [write("c2", "First draft.")]},
                {"toolCalls": [finish("c3")]},
                {"toolCalls": [write("c4", REPLY), commit("c5"), finish("c6")]}
            ]),
        )
        .await;
    assert_eq!(
        fixture.tool_result("c1")["errorCode"],
        "agent.foreground_commit_required"
    );
    // The draft was auto-published after round 2 …
    assert_eq!(summary.commits.len(), 2);
    assert!(!summary.commits[0].explicit);
    assert_eq!(summary.commits[0].round, 2);
    // … which did not let round 3 finish.
    assert_eq!(
        fixture.tool_result("c3")["errorCode"],
        "agent.foreground_commit_required"
    );
    // The explicit commit replaced the same message: one new message only.
    let chat = fixture.chat();
    assert_eq!(chat.message_count(), before + 1);
    assert_eq!(chat.messages().last().expect("message").text(), REPLY);
    assert_eq!(
        summary.commits[0].message_index,
        summary.commits[1].message_index
    );
}

#[tokio::test]
async fn append_adds_to_the_runs_message_and_bad_commits_are_recoverable() {
    let fixture = Fixture::new();
    let summary = fixture
        .run_to_completion(
            10,
            json!([
                {"toolCalls": [
                    call("c1", "workspace_commit", json!({"path": "output/missing.md"})),
                    call("c2", "workspace_write_file", json!({"path": "output/empty.md", "content": "  \n"})),
                    call("c3", "workspace_commit", json!({"path": "output/empty.md"})),
                    call("c4", "workspace_commit", json!({"mode": "sideways"}))
                ]},
                {"toolCalls": [
                    write("c5", "Part one."),
                    commit("c6"),
                    call("c7", "workspace_write_file", json!({"path": "output/more.md", "content": " Part two."})),
                    call("c8", "workspace_commit", json!({"path": "output/more.md", "mode": "append"})),
                    finish("c9")
                ]}
            ]),
        )
        .await;
    fixture.assert_results(&[
        ("c1", Some("workspace.file_not_found")),
        ("c3", Some("workspace.required_artifact_empty")),
        ("c4", Some("workspace.commit_mode_invalid")),
    ]);
    assert_eq!(fixture.last_message(), "Part one. Part two.");
    assert_eq!(summary.commits.len(), 2);
    fixture.assert_prefix_untouched();
}

#[tokio::test]
async fn a_chat_changed_under_the_run_fails_the_commit_fast() {
    let fixture = Fixture::new();
    let profile = profile(10, "foreground");
    let run = fixture.create_run(&profile);
    // Someone edits an old message after the run froze its input.
    let edited = String::from_utf8(fixture.original.clone())
        .expect("utf-8")
        .replacen("three days", "four days", 1);
    std::fs::write(&fixture.chat, &edited).expect("edit");
    let model: Arc<dyn AgentModel> = Arc::new(script(
        json!([{"toolCalls": [write("c1", REPLY), commit("c2"), finish("c3")]}]),
    ));
    let summary = run_agent_loop(
        &run,
        parts(&run, Arc::new(SameModel(model)), AgentDirectory::default()),
        &config(),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Failed);
    assert_eq!(summary.code.as_deref(), Some("agent.chat_commit_failed"));
    assert!(
        summary
            .message
            .as_deref()
            .is_some_and(|m| m.contains("agent.input_history_conflict")),
        "{summary:?}"
    );
    assert_eq!(fixture.event(ChatCommitFailed::TYPE)["callId"], "c2");
    // Nothing was written over the edited chat.
    assert_eq!(
        std::fs::read_to_string(&fixture.chat).expect("read"),
        edited
    );
}

/// Fails the first `failures` calls with a retryable error, then answers
/// from the script.

#[tokio::test]
async fn retryable_model_failures_are_retried_then_give_up() {
    let fixture = Fixture::new();
    let flaky = Flaky::new(
        2,
        script(json!([{"toolCalls": [write("c1", REPLY), commit("c2"), finish("c3")]}])),
    );
    let summary = fixture
        .run_with(&profile(5, "foreground"), flaky, config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let attempts: Vec<Value> = fixture.payloads(ModelCallAttemptFailed::TYPE);
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["code"], "model.upstream_failed");
    assert_eq!(attempts[0]["willRetry"], true);

    let hopeless = Fixture::new();
    let down = Flaky::new(100, script(json!([])));
    let summary = hopeless
        .run_with(&profile(5, "foreground"), down.clone(), config())
        .await;
    assert_eq!(summary.status, RunStatus::Failed);
    assert_eq!(summary.code.as_deref(), Some("model.upstream_failed"));
    assert_eq!(
        down.seen.load(Ordering::SeqCst),
        3,
        "one try and two retries"
    );
    let failed = hopeless.event(RunFailed::TYPE);
    assert_eq!(failed["retryable"], true);
    assert_eq!(failed["userRetryable"], true);
}

/// Issue 37: a spent total budget must not keep the run from ending. Forty
/// rounds of two calls spend the default 80; the commit and the finish of
/// round 41 still pass, so the run completes instead of burning its rounds.
#[tokio::test]
async fn a_spent_call_budget_still_lets_the_run_commit_and_finish() {
    let fixture = Fixture::new();
    let mut replies = vec![json!({"toolCalls": [
        write("w1", REPLY),
        call("r1", "workspace_read_file", json!({"path": "output/main.md"})),
    ]})];
    for round in 2..=40 {
        replies.push(json!({"toolCalls": [
            call(&format!("a{round}"), "workspace_read_file", json!({"path": "output/main.md"})),
            call(&format!("b{round}"), "workspace_read_file", json!({"path": "output/main.md"})),
        ]}));
    }
    replies.push(json!({"toolCalls": [commit("commit"), finish("finish")]}));
    let summary = fixture.run(45, Value::Array(replies)).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(summary.rounds, 41);
    assert_eq!(fixture.tool_result("commit")["isError"], false);
    assert_eq!(fixture.tool_result("finish")["isError"], false);
    let chat = fixture.chat();
    assert_eq!(chat.messages().last().expect("message").text(), REPLY);
    assert_eq!(
        fixture.types().last().map(String::as_str),
        Some(RunCompleted::TYPE)
    );
}

/// Issue 37: a name the model invented is a recoverable error, not the end
/// of the run. A canonical name is unknown too, with the hint.
#[tokio::test]
async fn a_model_calling_an_unknown_tool_reads_an_error_and_goes_on() {
    let fixture = Fixture::new();
    let summary = fixture
        .run_to_completion(
            5,
            json!([
                {"toolCalls": [call("c1", "workspace.write_file", json!({}))]},
                {"toolCalls": [write("c2", REPLY), commit("c3"), finish("c4")]}
            ]),
        )
        .await;
    assert_eq!(summary.tool_calls, 4);
    let unknown = fixture.event(ToolCallUnknown::TYPE);
    assert_eq!(unknown["callId"], "c1");
    assert_eq!(unknown["name"], "workspace.write_file");
    assert_eq!(unknown["code"], "model.unknown_tool_call");
    assert_eq!(unknown["charged"], true);
    assert_eq!(unknown["totalUsed"], 1);
    let message = unknown["message"].as_str().expect("message");
    assert!(
        message.contains("this request calls it `workspace_write_file`"),
        "{message}"
    );
    // Nothing ran under the unknown name: three calls started, not four.
    assert_eq!(
        fixture
            .events()
            .iter()
            .filter(|event| event.r#type == ToolCallStarted::TYPE)
            .count(),
        3
    );
}

/// A profile of `support::profile` with its total call budget.
fn profile_with_budget(max_rounds: u32, total: u32) -> toolhost_core::Profile {
    let mut profile = profile(max_rounds, "foreground");
    profile.tools.max_calls_per_run = total;
    profile
}

/// The model's next request carries the error for the invented name, under
/// its call id, listing this request's aliases; the call used one call of
/// the budget; the journal has its own event.
#[tokio::test]
async fn an_invented_name_is_answered_in_the_next_request_and_charged() {
    let fixture = Fixture::new();
    let fake = serve(vec![
        openai_reply(
            "chatcmpl-1",
            &[
                ("call_x", "summon_dragon", json!({"size": "large"})),
                (
                    "call_w",
                    "workspace_write_file",
                    json!({"path": "output/main.md", "content": REPLY}),
                ),
            ],
        ),
        openai_reply(
            "chatcmpl-2",
            &[
                ("call_c", "workspace_commit", json!({})),
                ("call_f", "workspace_finish", json!({})),
            ],
        ),
    ])
    .await;
    let model = loopback_model(Provider::OpenaiChat, &fake.base_url);
    let config = LoopConfig {
        model_name: Some("gpt-test".into()),
        ..config()
    };
    let summary = fixture
        .run_with(&profile_with_budget(5, 10), model, config)
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");

    let seen = fake.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2);
    let history = seen[1].body["messages"].as_array().expect("messages");
    let assistant = history
        .iter()
        // The chat's own assistant messages come first, without calls.
        .find(|message| message["role"] == "assistant" && message.get("tool_calls").is_some())
        .expect("the first reply");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["name"], "summon_dragon",
        "sent back under the model's own name"
    );
    let answer = history
        .iter()
        .find(|message| message["role"] == "tool" && message["tool_call_id"] == "call_x")
        .expect("an answer for the invented call");
    let text = answer["content"].as_str().expect("text");
    assert!(text.starts_with("## Tool error"), "{text}");
    assert!(text.contains("model.unknown_tool_call"), "{text}");
    for alias in [
        "`chat_read_messages`",
        "`workspace_read_file`",
        "`workspace_write_file`",
        "`workspace_commit`",
        "`workspace_finish`",
    ] {
        assert!(text.contains(alias), "{alias} in {text}");
    }
    // The write after it ran.
    assert!(
        history
            .iter()
            .any(|message| message["role"] == "tool" && message["tool_call_id"] == "call_w")
    );

    let unknown = fixture.event(ToolCallUnknown::TYPE);
    assert_eq!(unknown["name"], "summon_dragon");
    assert_eq!(unknown["charged"], true);
    assert_eq!(
        (
            unknown["totalUsed"].as_u64(),
            unknown["totalLimit"].as_u64()
        ),
        (Some(1), Some(10))
    );
}

/// Invented names are never free: they spend the total like any call, and
/// once it is spent they (and every other tool) are refused; the end tools
/// still end the run.
#[tokio::test]
async fn repeated_invented_names_exhaust_the_budget() {
    let fixture = Fixture::new();
    let model = Arc::new(script(json!([
        {"toolCalls": [
            write("w1", REPLY),
            call("x1", "make_coffee", json!({})),
            call("x2", "make_coffee", json!({})),
        ]},
        {"toolCalls": [
            call("x3", "make_coffee", json!({})),
            call("r1", "workspace_read_file", json!({"path": "output/main.md"})),
        ]},
        {"toolCalls": [commit("c1"), finish("f1")]}
    ])));
    let summary = fixture
        .run_with(&profile_with_budget(5, 3), model, config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let unknown: Vec<Value> = fixture.payloads(ToolCallUnknown::TYPE);
    assert_eq!(unknown.len(), 3);
    assert_eq!(unknown[0]["totalUsed"], 2);
    assert_eq!(unknown[1]["totalUsed"], 3);
    assert_eq!(unknown[2]["charged"], false);
    assert_eq!(unknown[2]["code"], "agent.tool_budget_exhausted");
    assert_eq!(unknown[2]["totalUsed"], 3);
    let message = unknown[2]["message"].as_str().expect("message");
    assert!(
        message.contains("only `workspace_commit`, `workspace_finish` can still be called"),
        "{message}"
    );
    let read = fixture.tool_result("r1");
    assert_eq!(read["isError"], true);
    assert_eq!(read["errorCode"], "agent.tool_budget_exhausted");
    // Reopened (a later direct call), the gate counts the charged names
    // and not the end tools: the write and two invented names.
    let (run, _) = Run::open(&fixture.run_dir).expect("reopen");
    let session = run
        .resume_invocation("inv_root", None)
        .expect("resume")
        .expect("the root invocation");
    assert_eq!(session.gate().total_used(), 3);
}

#[tokio::test]
async fn a_background_run_may_finish_without_committing() {
    let fixture = Fixture::new();
    let model = Arc::new(script(
        json!([{"toolCalls": [write("c1", REPLY), finish("c2")]}]),
    ));
    let summary = fixture
        .run_with(&profile(5, "background"), model, config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    // Nothing reaches the chat: no commit, and no auto-publish either.
    assert!(summary.commits.is_empty());
    assert_eq!(fixture.chat().bytes(), fixture.original.as_slice());
}

/// A client of `provider` for a fake server on loopback.
fn loopback_model(provider: Provider, base_url: &str) -> Arc<HttpModel> {
    Arc::new(
        HttpModel::new(HttpModelConfig {
            provider,
            base_url: base_url.to_owned(),
            api_key: Some("sk-loopback".into()),
            stream: false,
            timeout: Duration::from_secs(10),
        })
        .expect("client"),
    )
}

/// An OpenAI Chat Completions reply calling `calls` (alias, arguments).
fn openai_reply(id: &str, calls: &[(&str, &str, Value)]) -> Canned {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(call_id, name, arguments)| {
            json!({"id": call_id, "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
        .collect();
    Canned::json(
        json!({
            "id": id,
            "object": "chat.completion",
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": null, "tool_calls": tool_calls}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        })
        .to_string(),
    )
}

#[tokio::test]
async fn a_whole_run_against_an_openai_compatible_server_on_loopback() {
    let fixture = Fixture::new();
    let fake = serve(vec![
        openai_reply(
            "chatcmpl-1",
            &[
                (
                    "call_w",
                    "workspace_write_file",
                    json!({"path": "output/main.md", "content": REPLY}),
                ),
                ("call_c", "workspace_commit", json!({})),
            ],
        ),
        openai_reply("chatcmpl-2", &[("call_f", "workspace_finish", json!({}))]),
    ])
    .await;
    let model = loopback_model(Provider::OpenaiChat, &fake.base_url);
    let config = LoopConfig {
        model_name: Some("gpt-test".into()),
        ..config()
    };
    let summary = fixture
        .run_with(&profile(5, "foreground"), model, config)
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!(fixture.last_message(), REPLY);

    let seen = fake.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2);
    let first = &seen[0].body;
    assert_eq!(first["model"], "gpt-test");
    assert_eq!(first["messages"][0]["role"], "system");
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"workspace_commit"), "{offered:?}");
    // The second request carries the first round back: the assistant's
    // calls and one tool message per call, under the same call ids.
    let history = seen[1].body["messages"].as_array().expect("messages");
    let tool_messages: Vec<&Value> = history.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_messages.len(), 2);
    assert_eq!(tool_messages[0]["tool_call_id"], "call_w");
    assert_eq!(tool_messages[1]["tool_call_id"], "call_c");
    assert!(
        tool_messages[1]["content"]
            .as_str()
            .expect("text")
            .contains("Committed output/main.md")
    );
    let stored = fixture.event(ModelCompleted::TYPE);
    assert_eq!(stored["responseId"], "chatcmpl-1");
    assert_eq!(stored["inputTokens"], 100);
}

/// A reply calling `calls` (call id, alias, arguments) in `provider`'s
/// wire format.
fn provider_reply(provider: Provider, round: usize, calls: &[(&str, &str, Value)]) -> Canned {
    let body = match provider {
        Provider::OpenaiChat => return openai_reply(&format!("chatcmpl-{round}"), calls),
        Provider::OpenaiResponses => json!({
            "id": format!("resp_{round}"),
            "object": "response",
            "status": "completed",
            "output": calls.iter().enumerate().map(|(i, (id, name, arguments))| json!({
                "id": format!("fc_{round}_{i}"), "type": "function_call", "status": "completed",
                "call_id": id, "name": name, "arguments": arguments.to_string()
            })).collect::<Vec<_>>(),
            "usage": {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
        }),
        Provider::Anthropic => json!({
            "id": format!("msg_{round}"),
            "type": "message",
            "role": "assistant",
            "content": calls.iter().map(|(id, name, arguments)| json!({
                "type": "tool_use", "id": id, "name": name, "input": arguments
            })).collect::<Vec<_>>(),
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 100, "output_tokens": 20}
        }),
        Provider::Gemini { .. } => json!({
            "candidates": [{
                "content": {"role": "model", "parts": calls.iter().map(|(id, name, arguments)| json!({
                    "functionCall": {"id": id, "name": name, "args": arguments}
                })).collect::<Vec<_>>()},
                "finishReason": "STOP",
                "index": 0
            }],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
            "responseId": format!("gemini-{round}")
        }),
    };
    Canned::json(body.to_string())
}

#[tokio::test]
async fn the_loop_round_trips_tool_calls_with_every_provider_format_on_loopback() {
    use toolhost_providers::GeminiSchemaMode;
    for provider in [
        Provider::OpenaiChat,
        Provider::OpenaiResponses,
        Provider::Anthropic,
        Provider::Gemini {
            schema: GeminiSchemaMode::JsonSchema,
        },
    ] {
        let fixture = Fixture::new();
        let fake = serve(vec![
            provider_reply(
                provider,
                1,
                &[
                    (
                        "call_w",
                        "workspace_write_file",
                        json!({"path": "output/main.md", "content": REPLY}),
                    ),
                    ("call_c", "workspace_commit", json!({})),
                ],
            ),
            provider_reply(provider, 2, &[("call_f", "workspace_finish", json!({}))]),
        ])
        .await;
        let model = loopback_model(provider, &fake.base_url);
        let config = LoopConfig {
            model_name: Some("test-model".into()),
            // Anthropic requires max_tokens.
            max_output_tokens: Some(1024),
            ..config()
        };
        let summary = fixture
            .run_with(&profile(5, "foreground"), model, config)
            .await;
        let name = provider.name();
        assert_eq!(summary.status, RunStatus::Completed, "{name}: {summary:?}");
        assert_eq!(fixture.last_message(), REPLY, "{name}");
        // The second request carries both results back under their call ids.
        let seen = fake.seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 2, "{name}");
        let second = seen[1].body.to_string();
        for id in ["call_w", "call_c"] {
            assert!(second.contains(id), "{name}: {id} missing from {second}");
        }
        assert!(second.contains("Committed output/main.md"), "{name}");
    }
}
