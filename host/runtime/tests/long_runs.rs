//! A long run fits the model's window: 200 rounds that each read a 20 KB
//! file, under a 100,000-character budget. Every request the model is sent
//! stays under it, each trimming is journalled, and every call id a request
//! carries still pairs with its result (each request encodes in the wire
//! formats, which refuse a call without its result).

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::recording::{RecordingSource, Seen};
use support::*;
use toolhost_core::{AgentModelContentPart, AgentModelRequest, Profile};
use toolhost_journal::{ContextTrimmed, Event as _};
use toolhost_providers::Provider;
use toolhost_runtime::{AgentDirectory, RunStatus};

const BUDGET: usize = 100_000;
const ROUNDS: u32 = 200;

fn long_writer() -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "writer",
            "tools": {
                "allow": ["workspace.read_file", "workspace.write_file",
                          "workspace.commit", "workspace.finish"],
                "maxRounds": ROUNDS,
                "maxCallsPerRun": ROUNDS + 10
            },
            "context": {"maxInputChars": BUDGET}
        })
        .to_string(),
    )
    .expect("profile")
}

/// The request's size as the model reads it, counted here on its own: the
/// system prompt, the tools offered, every text, call and result.
fn chars(request: &AgentModelRequest) -> usize {
    let count = |text: &str| text.chars().count();
    let system = request.system.as_deref().map_or(0, count);
    let tools: usize = request
        .turn
        .tools()
        .iter()
        .map(|tool| {
            count(&tool.model_alias)
                + count(&tool.description)
                + count(&tool.input_schema.to_string())
        })
        .sum();
    let messages: usize = request
        .messages
        .iter()
        .flat_map(|message| &message.parts)
        .map(|part| match part {
            AgentModelContentPart::Text { text } => count(text),
            AgentModelContentPart::ToolCall { call } => {
                count(call.tool_id.as_str()) + count(&call.arguments.to_string())
            }
            AgentModelContentPart::ToolResult { result } => count(&result.model_text()),
            AgentModelContentPart::UnknownToolCall { call } => {
                count(&call.name) + count(&call.arguments.to_string())
            }
            AgentModelContentPart::UnknownToolResult { result } => count(&result.model_text()),
        })
        .sum();
    system + tools + messages
}

#[tokio::test]
async fn two_hundred_rounds_of_large_results_never_send_a_request_over_the_window() {
    let fixture = Fixture::new();
    let page: String = (0..400)
        .map(|line| format!("{line:03} The tide climbs the stairs of Saltmere; 潮が満ちる。\n"))
        .collect();
    assert!(page.len() > 20_000, "{}", page.len());
    let mut replies = vec![json!({"toolCalls": [call("w0", "workspace_write_file",
        json!({"path": "scratch/tide.md", "content": page}))]})];
    for round in 1..ROUNDS - 1 {
        replies.push(
            json!({"toolCalls": [call(&format!("r{round}"), "workspace_read_file",
            json!({"path": "scratch/tide.md"}))]}),
        );
    }
    replies.push(json!({"toolCalls": [write("w", REPLY), commit("c"), finish("f")]}));
    let seen = Arc::new(Seen::default());
    let models = Arc::new(RecordingSource {
        book: book(Value::Array(replies), json!({})),
        seen: Arc::clone(&seen),
    });
    let summary = fixture
        .run_agents(&long_writer(), models, AgentDirectory::default(), config())
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");

    let requests = seen.of("writer");
    assert_eq!(requests.len(), ROUNDS as usize);
    for (index, request) in requests.iter().enumerate() {
        let size = chars(request);
        assert!(size <= BUDGET, "request {index} holds {size} characters");
        // Gemini would also want its thoughtSignature on each call, which a
        // scripted reply does not carry; the pairing check is shared.
        for provider in [
            Provider::OpenaiChat,
            Provider::OpenaiResponses,
            Provider::Anthropic,
        ] {
            let mut request = request.clone();
            request.settings.model = "m".into();
            request.settings.max_output_tokens = Some(1024);
            if let Err(error) = provider.encode_request(&request, false) {
                panic!("request {index} does not encode: {error}");
            }
        }
    }
    // The last request still holds the task and the last rounds whole.
    let last = requests.last().expect("requests");
    assert!(
        last.messages
            .iter()
            .any(|message| message.text() == config().task)
    );
    let trimmed = fixture.payloads(ContextTrimmed::TYPE);
    assert!(trimmed.len() > 10, "{} trimmings", trimmed.len());
    for event in &trimmed {
        let after = event["charsAfter"].as_u64().expect("after");
        let before = event["charsBefore"].as_u64().expect("before");
        assert!(after <= BUDGET as u64 && before > BUDGET as u64, "{event}");
        assert_eq!(event["budget"], BUDGET, "{event}");
    }
    let stubbed: usize = trimmed
        .iter()
        .map(|event| event["stubbedCalls"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(stubbed > 0, "old results were stubbed");
}
