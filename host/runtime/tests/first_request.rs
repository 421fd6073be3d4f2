//! Requests on the wire. The first request of a run given a chat app's
//! prompt snapshot (`examples/prompt-snapshot.json`), as each provider's
//! format carries it: the system prompt, the snapshot's messages in order
//! (CJK byte for byte), then the task; and a later request trimmed to fit a
//! small window, its old results stubs. The runtime's requests go through
//! the adapters and are compared, tools aside, with
//! `tests/fixtures/first_request/*.json` (after an intended change:
//! `TOOLHOST_BLESS_FIRST_REQUEST=1`).

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::recording::{RecordingSource, Seen};
use support::*;
use toolhost_core::{AgentModelRequest, Profile};
use toolhost_providers::{GeminiSchemaMode, Provider};
use toolhost_runtime::{AgentDirectory, RunStatus};

fn example_snapshot() -> Value {
    let path = fixtures().join("../../examples/prompt-snapshot.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("example")).expect("json")
}

/// The default writer's first request, for the example snapshot.
async fn first_request() -> AgentModelRequest {
    first_request_of(Profile::default_writer().expect("default profile")).await
}

/// `profile`'s first request, for the example snapshot.
async fn first_request_of(profile: Profile) -> AgentModelRequest {
    let fixture = Fixture::new().with_prompt_snapshot(&example_snapshot());
    let seen = Arc::new(Seen::default());
    let models = Arc::new(RecordingSource {
        book: book(
            json!([{"toolCalls": [write("w", "Reply."), commit("c"), finish("f")]}]),
            json!({}),
        ),
        seen: Arc::clone(&seen),
    });
    let summary = fixture
        .run_agents(&profile, models, AgentDirectory::default(), config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    seen.of(&profile.id).into_iter().next().expect("a request")
}

fn formats() -> [(&'static str, Provider, &'static str); 4] {
    [
        ("openai_chat", Provider::OpenaiChat, "gpt-4.1"),
        ("openai_responses", Provider::OpenaiResponses, "gpt-4.1"),
        ("anthropic", Provider::Anthropic, "claude-sonnet-4-5"),
        (
            "gemini",
            Provider::Gemini {
                schema: GeminiSchemaMode::JsonSchema,
            },
            "gemini-2.5-flash",
        ),
    ]
}

/// `body` is the fixture `name`, or becomes it when blessing; the
/// difference otherwise.
fn differs(name: &str, body: &str) -> Option<String> {
    let path = fixtures()
        .join("../../host/runtime/tests/fixtures/first_request")
        .join(format!("{name}.json"));
    if std::env::var_os("TOOLHOST_BLESS_FIRST_REQUEST").is_some() {
        std::fs::write(&path, body).expect("bless");
        return None;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    (expected != body).then(|| format!("{name}:\n{body}"))
}

/// `body` without its tool declarations (the providers' own goldens hold
/// those), pretty-printed with the CJK as it is.
fn shown(mut body: Value) -> String {
    if let Some(object) = body.as_object_mut() {
        object.remove("tools");
    }
    serde_json::to_string_pretty(&body).expect("json") + "\n"
}

#[tokio::test]
async fn every_format_carries_the_system_prompt_the_snapshot_in_order_then_the_task() {
    let mut request = first_request().await;
    request.settings.max_output_tokens = Some(1024);
    let mut differing = Vec::new();
    for (name, provider, model) in formats() {
        request.settings.model = model.to_owned();
        let body = shown(provider.encode_request(&request, false).expect(name));
        for text in [
            "米蕾尔：港口的领航员，熟悉每一处暗礁。",
            "灯台へ行こう。",
            "2–4 paragraphs",
        ] {
            assert!(body.contains(text), "{name} keeps {text} as it is: {body}");
        }
        let task = config().task;
        let last_user = body.rfind(&task).expect("the task");
        let last_history = body.rfind("Lead the way.").expect("the history");
        assert!(last_history < last_user, "{name}: the task comes last");
        differing.extend(differs(name, &body));
    }
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}

/// The example's four chat-history messages, oldest first.
const HISTORY: [&str; 4] = [
    "*Mirelle looks up from the chart.* You're late, mage.",
    "The tide was faster than you said. 灯台へ行こう。",
    "Then we go now, before the bells.",
    "*I take her hand.* Lead the way.",
];

/// `initialChatHistoryMessages` 0, 3 and -1 on every wire format: the last
/// N history messages, in order, then the task.
#[tokio::test]
async fn every_format_sends_the_history_the_profile_asks_for() {
    for (count, kept) in [(0, 0), (3, 3), (-1, 4)] {
        let mut profile = Profile::default_writer().expect("default profile");
        profile.context.initial_chat_history_messages = Some(count);
        let mut request = first_request_of(profile).await;
        request.settings.max_output_tokens = Some(1024);
        for (name, provider, model) in formats() {
            request.settings.model = model.to_owned();
            let body = shown(provider.encode_request(&request, false).expect(name));
            // Key order puts Anthropic's `system` after its `messages`: the
            // order checked is the conversation's.
            assert!(body.contains("米蕾尔：港口的领航员"), "{name}: the card");
            let mut at = 0;
            for (index, text) in HISTORY.iter().enumerate() {
                let found = body.find(text);
                if index < 4 - kept {
                    assert!(found.is_none(), "{name}, {count}: {text} is cut: {body}");
                } else {
                    let found = found.unwrap_or_else(|| panic!("{name}, {count}: {text}"));
                    assert!(found > at, "{name}, {count}: {text} in order");
                    at = found;
                }
            }
            // After the history, unless none is left before it: then
            // Anthropic and Gemini lift it into the system prompt.
            assert!(body.contains("[Stay in character."), "{name}: {body}");
            let task = body.rfind(&config().task).expect("the task");
            assert!(at < task, "{name}, {count}: {body}");
        }
    }
}

/// A run whose reads outgrow a 6,000-character window: its last request on
/// OpenAI Chat holds the old results as one-line stubs under their call
/// ids, each still right after its call.
#[tokio::test]
async fn a_trimmed_request_keeps_each_call_with_its_stubbed_result() {
    let fixture = Fixture::new();
    let profile = Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "writer",
            "tools": {"allow": ["workspace.read_file", "workspace.write_file",
                                "workspace.commit", "workspace.finish"], "maxRounds": 8},
            "context": {"initialChatHistoryMessages": 0, "maxInputChars": 6_000}
        })
        .to_string(),
    )
    .expect("profile");
    let page = "The tide climbs the stairs. 潮が満ちる。\n".repeat(40);
    let mut replies = vec![json!({"toolCalls": [call("w0", "workspace_write_file",
        json!({"path": "scratch/tide.md", "content": page}))]})];
    for round in 1..5 {
        replies.push(
            json!({"toolCalls": [call(&format!("r{round}"), "workspace_read_file",
            json!({"path": "scratch/tide.md"}))]}),
        );
    }
    replies.push(json!({"toolCalls": [write("w", "Reply."), commit("c"), finish("f")]}));
    let seen = Arc::new(Seen::default());
    let models = Arc::new(RecordingSource {
        book: book(Value::Array(replies), json!({})),
        seen: Arc::clone(&seen),
    });
    let summary = fixture
        .run_agents(&profile, models, AgentDirectory::default(), config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let mut last = seen.of("writer").pop().expect("requests");
    last.settings.model = "gpt-4.1".into();
    let body = shown(
        Provider::OpenaiChat
            .encode_request(&last, false)
            .expect("encodes"),
    );
    assert!(
        body.contains("left out to fit the context window"),
        "{body}"
    );
    if let Some(difference) = differs("openai_chat_trimmed", &body) {
        panic!("{difference}");
    }
}
