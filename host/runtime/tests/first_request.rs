//! The first request of a run given a chat app's prompt snapshot
//! (`examples/prompt-snapshot.json`), as each provider's wire format carries
//! it: the system prompt, the snapshot's messages in order (CJK byte for
//! byte), then the task. The runtime's request goes through each adapter and
//! is compared, tools aside, with `tests/fixtures/first_request/<format>.json`
//! (after an intended change: `TOOLHOST_BLESS_FIRST_REQUEST=1`).

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
    let fixture = Fixture::new().with_prompt_snapshot(&example_snapshot());
    let profile = Profile::default_writer().expect("default profile");
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
        let path = fixtures()
            .join("../../host/runtime/tests/fixtures/first_request")
            .join(format!("{name}.json"));
        if std::env::var_os("TOOLHOST_BLESS_FIRST_REQUEST").is_some() {
            std::fs::write(&path, &body).expect("bless");
            continue;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        if expected != body {
            differing.push(format!("{name}:\n{body}"));
        }
    }
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}
