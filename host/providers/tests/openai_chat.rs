//! OpenAI Chat Completions golden tests (fixtures: `fixtures/openai_chat/`).

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_core::{
    AgentModelResponse, Classified, ErrorClass, FinishReason, ModelCallError, TokenUsage,
    ToolChoice,
};
use toolhost_providers::{DecodeError, Provider, SseEvent, openai_chat};

const PROVIDER: &str = "openai_chat";
const CHAT: Provider = Provider::OpenaiChat;

fn chat_meta() -> Value {
    tagged(PROVIDER, json!({}))
}

fn history() -> History {
    History {
        call_ids: ["call_Qm1x7Zr2", "call_Hb8Lw3Ns"],
        call_metadata: [chat_meta(), chat_meta()],
        message_metadata: Value::Null,
    }
}

fn decode(body: &Value) -> Result<AgentModelResponse, DecodeError> {
    openai_chat::decode_response(&turn(), body)
}

fn response_fixture() -> Value {
    fixture(PROVIDER, "response_two_calls.json")
}

fn expected_two_calls(text: Option<&str>, id: &str) -> AgentModelResponse {
    TwoCalls {
        text,
        call_ids: ["call_Z3kq9PZbS1", "call_u7Tn0cXWd2"],
        call_metadata: [chat_meta(), chat_meta()],
        message_metadata: Value::Null,
        usage: TokenUsage {
            input_tokens: 182,
            output_tokens: 51,
        },
    }
    .response(id)
}

#[test]
fn request_with_tools_history_and_results_matches_the_fixture() {
    let request = request("gpt-4.1", history().messages(), turn());
    assert_history_request_matches(CHAT, PROVIDER, &request);
}

/// The app's system messages stay where it put them, after the agent's own.
#[test]
fn prompt_snapshot_keeps_system_messages_in_place() {
    let request = writer_request("gpt-4.1", prompt_snapshot_messages());
    assert_prompt_snapshot_matches(CHAT, PROVIDER, &request);
}

#[test]
fn streaming_request_asks_for_usage() {
    let request = request("gpt-4.1", history().messages(), turn());
    let body = CHAT.encode_request(&request, true).expect("encodes");
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[test]
fn tool_choice_forms() {
    let snapshot = snapshot();
    let cases = [
        (ToolChoice::None, json!("none")),
        (ToolChoice::Required, json!("required")),
        (
            ToolChoice::Specific(forecast()),
            json!({"type": "function", "function": {"name": "mcp__weather__get-forecast"}}),
        ),
    ];
    for (choice, expected) in cases {
        let request = request("gpt-4.1", history().messages(), turn_of(&snapshot, choice));
        let body = encoded(CHAT, &request);
        assert_eq!(body["tool_choice"], expected);
    }
    // No tools: neither `tools` nor `tool_choice` (the API refuses a choice alone).
    let empty = snapshot_of(vec![]);
    let request = request(
        "gpt-4.1",
        vec![toolhost_core::AgentModelMessage::user_text("hi")],
        turn_of(&empty, ToolChoice::Auto),
    );
    let body = encoded(CHAT, &request);
    assert_eq!(body.get("tools"), None);
    assert_eq!(body.get("tool_choice"), None);
}

#[test]
fn response_with_two_calls_decodes() {
    let response = decode(&response_fixture()).expect("decodes");
    assert_eq!(
        response,
        expected_two_calls(None, "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG")
    );
}

#[test]
fn stream_with_split_interleaved_arguments_assembles() {
    assert_eq!(
        assembled_two_calls(CHAT, PROVIDER),
        expected_two_calls(Some("Rolling now."), "chatcmpl-C7Yk2")
    );
}

/// The arguments of one call split at every character boundary, including
/// inside the escaped quote of a JSON text and inside a multi-byte
/// character, still assemble to the same arguments.
#[test]
fn arguments_split_anywhere_assemble() {
    let chunk = |delta: Value| {
        SseEvent::new(
            None,
            json!({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
                .to_string(),
        )
    };
    assert_split_arguments_assemble(CHAT, |first, second| {
        vec![
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "dice_roll", "arguments": first}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": second}}]})),
            SseEvent::new(
                None,
                json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                    .to_string(),
            ),
            SseEvent::new(None, "[DONE]"),
        ]
    });
}

#[test]
fn round_trip_keeps_ids_and_aliases() {
    let body = next_request_body(CHAT, PROVIDER, |messages| {
        request("gpt-4.1", messages, turn())
    });
    assert_eq!(
        body["messages"][2],
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [
                {"id": "call_Z3kq9PZbS1", "type": "function",
                 "function": {"name": "dice_roll", "arguments": "{\"formula\":\"1d20+5\"}"}},
                {"id": "call_u7Tn0cXWd2", "type": "function",
                 "function": {"name": "mcp__weather__get-forecast", "arguments": "{\"city\":\"Paris\",\"days\":2}"}}
            ]
        })
    );
    assert_eq!(
        body["messages"][3],
        json!({"role": "tool", "tool_call_id": "call_Z3kq9PZbS1", "content": "done: call_Z3kq9PZbS1"})
    );
    assert_eq!(
        body["messages"][4]["tool_call_id"],
        json!("call_u7Tn0cXWd2")
    );
}

/// Arguments the model sent as broken JSON stay that text, so the tool can
/// answer a recoverable `tool.invalid_arguments`; they go back verbatim.
#[test]
fn invalid_argument_json_stays_a_string_and_round_trips() {
    let mut body = response_fixture();
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] =
        json!("{\"formula\": \"1d20");
    let reply = decode(&body).expect("decodes");
    let call = reply.message.tool_calls().next().expect("call");
    assert_eq!(call.arguments, json!("{\"formula\": \"1d20"));
    let request = request("gpt-4.1", next_history(&reply.message), turn());
    let body = encoded(CHAT, &request);
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        json!("{\"formula\": \"1d20")
    );
}

#[test]
fn empty_argument_text_is_no_arguments() {
    let mut body = response_fixture();
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json!("");
    let reply = decode(&body).expect("decodes");
    assert_eq!(
        reply.message.tool_calls().next().expect("call").arguments,
        json!({})
    );
}

fn set_call(body: &mut Value, index: usize, key: &str, value: Value) {
    let call = &mut body["choices"][0]["message"]["tool_calls"][index];
    match key {
        "name" => call["function"]["name"] = value,
        "arguments" => call["function"]["arguments"] = value,
        _ => call[key] = value,
    }
}

#[test]
fn hostile_responses_fail_fast_with_typed_errors() {
    let mutate = |index: usize, key: &str, value: Value| {
        decode_edited(CHAT, PROVIDER, |body| set_call(body, index, key, value))
    };
    assert_call_identity_checked(
        CallSlots {
            first: 0,
            second: 1,
            id_key: "id",
            first_id: "call_Z3kq9PZbS1",
            blank_name: "",
            invented: "get_weather",
            canonical: "builtin:dice.roll",
        },
        mutate,
    );
    let object_arguments = mutate(0, "arguments", json!({"formula": "1d20"})).expect_err("refused");
    assert_eq!(
        object_arguments,
        DecodeError::InvalidToolCall(
            "the arguments of call `call_Z3kq9PZbS1` must be a JSON text, got an object".into()
        )
    );
    assert_eq!(object_arguments.class(), ErrorClass::SystemFailure);
}

#[test]
fn finish_reasons_map_and_unknown_ones_are_kept() {
    assert_finish_reasons(
        CHAT,
        PROVIDER,
        |body, reason| body["choices"][0]["finish_reason"] = reason,
        &[
            ("stop", FinishReason::Stop),
            ("length", FinishReason::Length),
            ("content_filter", FinishReason::ContentFilter),
            ("function_call", FinishReason::Other("function_call".into())),
        ],
    );
}

#[test]
fn error_bodies_and_malformed_bodies() {
    let error = decode(&json!({"error": {"message": "Rate limit reached", "type": "requests"}}))
        .expect_err("error body");
    assert_eq!(
        error,
        DecodeError::ProviderError("Rate limit reached".into())
    );
    assert_eq!(error.code(), "model.provider_error");
    assert_eq!(
        decode(&json!({"id": "x", "choices": []})).expect_err("no choice"),
        DecodeError::InvalidResponse("expected exactly one choice, got 0".into())
    );
    assert_eq!(
        decode(&json!({"id": "x", "choices": [{"index": 0, "message": {"content": "hi"}}]}))
            .expect_err("no finish reason"),
        DecodeError::InvalidResponse("`choices[0].finish_reason` is missing".into())
    );
}

#[test]
fn truncated_streams_are_incomplete() {
    let turn = turn();
    assert_cut_stream_incomplete(CHAT, PROVIDER, "`data: [DONE]`");
    let events = sse_fixture(PROVIDER, "stream_two_calls.sse");
    let cut = &events[..6];
    let error = assemble(CHAT.stream_assembler(&turn), cut).expect_err("cut");
    assert_eq!(error.code(), "model.stream_incomplete");
    // The framer drops a last event that lost its blank line: a body cut
    // inside `data: [DONE]` is incomplete too.
    let body = fixture_text(PROVIDER, "stream_two_calls.sse");
    let cut_body = body.trim_end().trim_end_matches("data: [DONE]");
    let events = toolhost_providers::frame_sse(&format!("{cut_body}data: [DO")).expect("frames");
    assert_eq!(
        assemble(CHAT.stream_assembler(&turn), &events).expect_err("cut"),
        DecodeError::StreamIncomplete("the stream ended without `data: [DONE]`".into())
    );
}

#[test]
fn hostile_streams() {
    let turn = turn();
    // Anything after [DONE].
    assert_event_after_end_refused(CHAT, PROVIDER, 1, "`[DONE]`");
    let events = sse_fixture(PROVIDER, "stream_two_calls.sse");
    // An unknown alias streams to the end and is kept typed.
    let unknown = [
        SseEvent::new(
            None,
            json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": ""}}
            ]}}]})
            .to_string(),
        ),
        SseEvent::new(
            None,
            json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                .to_string(),
        ),
        SseEvent::new(None, "[DONE]"),
    ];
    let reply = assemble(CHAT.stream_assembler(&turn), &unknown).expect("kept");
    assert_eq!(only_unknown(&reply).name, "get_weather");
    // A call whose id changes mid-stream.
    let mut changed = events.clone();
    changed.insert(
        5,
        SseEvent::new(
            None,
            json!({"id": "chatcmpl-C7Yk2", "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_other"}
            ]}}]})
            .to_string(),
        ),
    );
    assert_eq!(
        assemble(CHAT.stream_assembler(&turn), &changed).expect_err("changed id"),
        DecodeError::InvalidResponse(
            "the id of tool call 0 changed from `call_Z3kq9PZbS1` to `call_other` mid-stream"
                .into()
        )
    );
    // Two stream indexes claiming one call id.
    let duplicate: Vec<SseEvent> = events
        .iter()
        .map(|event| {
            SseEvent::new(
                None,
                event.data.replace("call_u7Tn0cXWd2", "call_Z3kq9PZbS1"),
            )
        })
        .collect();
    assert_eq!(
        assemble(CHAT.stream_assembler(&turn), &duplicate).expect_err("duplicate"),
        DecodeError::DuplicateCallId("call_Z3kq9PZbS1".into())
    );
    // A call id that never came.
    let no_id: Vec<SseEvent> = events
        .iter()
        .map(|event| SseEvent::new(None, event.data.replace("\"id\":\"call_u7Tn0cXWd2\",", "")))
        .collect();
    assert_eq!(
        assemble(CHAT.stream_assembler(&turn), &no_id).expect_err("no id"),
        DecodeError::ToolCall(ModelCallError::InvalidToolCall(
            "a tool call has no call id".into()
        ))
    );
    // A mid-stream error object.
    let mut assembler = CHAT.stream_assembler(&turn);
    assert_eq!(
        assembler
            .push(&SseEvent::new(
                None,
                r#"{"error":{"message":"overloaded"}}"#
            ))
            .expect_err("error"),
        DecodeError::ProviderError("overloaded".into())
    );
}

#[test]
fn an_unknown_call_goes_back_under_its_own_name_with_its_error() {
    let messages = unknown_exchange("call_9", "get_weather", Value::Null);
    let body = encoded(CHAT, &request("gpt-4.1", messages, turn()));
    let sent = &body["messages"];
    let call = &sent[2]["tool_calls"][0];
    assert_eq!(call["id"], "call_9");
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(call["function"]["arguments"], r#"{"city":"Paris"}"#);
    assert_eq!(sent[3]["role"], "tool");
    assert_eq!(sent[3]["tool_call_id"], "call_9");
    assert!(
        sent[3]["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("## Tool error")
                && text.contains("`get_weather` is not a tool")),
        "{sent}"
    );
}

/// A name the model invented goes back in the history, and OpenAI refuses a
/// request whose history names a function outside `^[a-zA-Z0-9_-]+$`
/// (`messages[i].tool_calls[j].function.name`, 400): such a name goes back
/// under one the wire takes — never one of this turn's aliases, so no real
/// tool is shown answering "unknown" — while the answer quotes it as sent.
#[test]
fn an_invented_name_the_wire_refuses_goes_back_under_one_it_takes() {
    let turn = turn();
    let aliases: Vec<&str> = turn
        .tools()
        .iter()
        .map(|tool| tool.model_alias.as_str())
        .collect();
    let long = "x".repeat(300);
    for invented in [
        "builtin:dice.roll",
        "dice.roll",
        "read the file",
        "ünïcode_tool",
        "3d_roll",
        "-x",
        "multi_tool_use.parallel",
        long.as_str(),
        "",
    ] {
        let messages = unknown_exchange("call_9", invented, Value::Null);
        let body = encoded(CHAT, &request("gpt-4.1", messages, turn.clone()));
        let sent = &body["messages"];
        let name = sent[2]["tool_calls"][0]["function"]["name"]
            .as_str()
            .expect("a name");
        assert!(
            (1..=64).contains(&name.len())
                && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "`{invented}` went out as `{name}`"
        );
        assert!(
            !aliases.contains(&name),
            "`{invented}` went out as the alias `{name}`"
        );
        let answer = sent[3]["content"].as_str().expect("text");
        assert!(answer.contains(&format!("`{invented}`")), "{answer}");
    }
    // A name the wire takes goes back as it was.
    let messages = unknown_exchange("call_9", "get-weather_2", Value::Null);
    let body = encoded(CHAT, &request("gpt-4.1", messages, turn));
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["name"],
        "get-weather_2"
    );
}
