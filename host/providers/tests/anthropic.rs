//! Anthropic Messages golden tests (fixtures: `fixtures/anthropic/`).

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_core::{
    AgentModelMessage, AgentModelResponse, Classified, FinishReason, TokenUsage, ToolChoice,
};
use toolhost_providers::{DecodeError, EncodeError, Provider, SseEvent, anthropic};

const PROVIDER: &str = "anthropic";
const ANTHROPIC: Provider = Provider::Anthropic;
const MODEL: &str = "claude-sonnet-4-5";

fn call_meta() -> Value {
    tagged(PROVIDER, json!({}))
}

fn thinking_meta(thinking: &str, signature: &str) -> Value {
    tagged(
        PROVIDER,
        json!({"thinking": [{"type": "thinking", "thinking": thinking, "signature": signature}]}),
    )
}

fn history() -> History {
    History {
        call_ids: [
            "toolu_01A09q90qw90lq917835lq9",
            "toolu_01B7zHn3kKq2Tt5RxVpW4m8c",
        ],
        call_metadata: [call_meta(), call_meta()],
        message_metadata: thinking_meta(
            "A roll and a file read; both are independent.",
            "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        ),
    }
}

fn decode(body: &Value) -> Result<AgentModelResponse, DecodeError> {
    anthropic::decode_response(&turn(), body)
}

fn response_fixture() -> Value {
    fixture(PROVIDER, "response_two_calls.json")
}

fn expected_two_calls(id: &str) -> AgentModelResponse {
    TwoCalls {
        text: Some("I'll roll and check the weather."),
        call_ids: [
            "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "toolu_01Lm5Pq7Rs9Tu1Vw3Xy5Za7B",
        ],
        call_metadata: [call_meta(), call_meta()],
        message_metadata: thinking_meta("Two independent calls.", "ErUBCkYIBxgCIkBq3xT4"),
        // Cached input counts as input.
        usage: TokenUsage {
            input_tokens: 472,
            output_tokens: 91,
        },
    }
    .response(id)
}

#[test]
fn request_with_tools_history_and_results_matches_the_fixture() {
    let request = request(MODEL, history().messages(), turn());
    assert_history_request_matches(ANTHROPIC, PROVIDER, &request);
}

/// The leading system messages join `system` as text blocks after the
/// agent's prompt; the later one is user text merged with its neighbours,
/// so `messages` holds only alternating user and assistant turns.
#[test]
fn prompt_snapshot_lifts_leading_system_messages_and_merges_later_ones() {
    let request = writer_request(MODEL, prompt_snapshot_messages());
    let body = assert_prompt_snapshot_matches(ANTHROPIC, PROVIDER, &request);
    assert_roles_alternate(&body, "messages", ["user", "assistant"]);
    // The snapshot opens with the character's greeting; the API takes only
    // a conversation that opens with the user.
    assert_eq!(body["messages"][0]["role"], "user", "{body}");
    assert_eq!(
        body["messages"][0]["content"][0]["text"],
        anthropic::OPENING_USER_TEXT
    );
}

/// A chat app's prompt may hold whitespace-only texts; the API refuses a
/// text block without non-whitespace, so none is sent.
#[test]
fn whitespace_only_texts_are_left_out() {
    let mut request = writer_request(
        MODEL,
        vec![
            AgentModelMessage::system_text(" \n"),
            AgentModelMessage::user_text("\t"),
            AgentModelMessage::user_text("Task."),
        ],
    );
    request.system = Some("  ".into());
    let body = encoded(ANTHROPIC, &request);
    assert!(body.get("system").is_none(), "{body}");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Task."}]}])
    );
}

#[test]
fn tool_choice_forms_stream_flag_and_required_max_tokens() {
    let snapshot = snapshot();
    let cases = [
        (ToolChoice::None, json!({"type": "none"})),
        (ToolChoice::Required, json!({"type": "any"})),
        (
            ToolChoice::Specific(read_file()),
            json!({"type": "tool", "name": "workspace_read_file"}),
        ),
    ];
    for (choice, expected) in cases {
        let request = request(MODEL, history().messages(), turn_of(&snapshot, choice));
        let body = ANTHROPIC.encode_request(&request, true).expect("encodes");
        assert_eq!(body["tool_choice"], expected);
        assert_eq!(body["stream"], json!(true));
    }
    let mut request = request(MODEL, history().messages(), turn());
    request.settings.max_output_tokens = None;
    let error = ANTHROPIC
        .encode_request(&request, false)
        .expect_err("no max_tokens");
    assert_eq!(error.code(), "provider.setting_missing");
    assert_eq!(
        error.to_string(),
        "provider.setting_missing: anthropic requires settings.maxOutputTokens (the API's required max_tokens)"
    );
}

#[test]
fn results_come_first_in_the_user_message_that_follows() {
    let [roll, read] = history().calls();
    let mut messages = history().messages();
    messages.push(AgentModelMessage::user_text("Also, what day is it?"));
    let body = encoded(ANTHROPIC, &request(MODEL, messages, turn()));
    let content = &body["messages"][2]["content"];
    assert_eq!(content.as_array().map(Vec::len), Some(3));
    assert_eq!(content[0]["tool_use_id"], json!(roll.call_id));
    assert_eq!(content[1]["tool_use_id"], json!(read.call_id));
    assert_eq!(
        content[2],
        json!({"type": "text", "text": "Also, what day is it?"})
    );
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
}

#[test]
fn response_with_two_calls_decodes() {
    assert_eq!(
        decode(&response_fixture()).expect("decodes"),
        expected_two_calls("msg_01Aq9w938a90dw8q")
    );
}

#[test]
fn stream_with_split_input_assembles() {
    assert_eq!(
        assembled_two_calls(ANTHROPIC, PROVIDER),
        expected_two_calls("msg_014p7gG3wDgGV9EUtLvnow3U")
    );
}

fn event(data: Value) -> SseEvent {
    let kind = data["type"].as_str().map(str::to_owned);
    SseEvent::new(kind.as_deref(), data.to_string())
}

fn message_start() -> SseEvent {
    event(
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "content": [], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    )
}

fn tool_use_start(index: u64, id: &str, name: &str) -> SseEvent {
    event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}))
}

fn input_delta(index: u64, fragment: &str) -> SseEvent {
    event(json!({"type": "content_block_delta", "index": index,
        "delta": {"type": "input_json_delta", "partial_json": fragment}}))
}

fn stop(reason: &str) -> [SseEvent; 2] {
    [
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 5}}),
        ),
        event(json!({"type": "message_stop"})),
    ]
}

#[test]
fn input_split_anywhere_assembles() {
    assert_split_arguments_assemble(ANTHROPIC, |first, second| {
        let mut events = vec![
            message_start(),
            tool_use_start(0, "toolu_1", "dice_roll"),
            input_delta(0, first),
            input_delta(0, second),
        ];
        events.extend(stop("tool_use"));
        events
    });
}

#[test]
fn round_trip_keeps_tool_use_ids_and_thinking() {
    let body = next_request_body(ANTHROPIC, PROVIDER, |messages| {
        request(MODEL, messages, turn())
    });
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two independent calls.", "signature": "ErUBCkYIBxgCIkBq3xT4"},
            {"type": "text", "text": "I'll roll and check the weather."},
            {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "dice_roll", "input": {"formula": "1d20+5"}},
            {"type": "tool_use", "id": "toolu_01Lm5Pq7Rs9Tu1Vw3Xy5Za7B", "name": "mcp__weather__get-forecast", "input": {"city": "Paris", "days": 2}}
        ]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "content": "done: toolu_01T1x1fJ34qAmk2tNTrN7Up6"},
            {"type": "tool_result", "tool_use_id": "toolu_01Lm5Pq7Rs9Tu1Vw3Xy5Za7B", "content": "done: toolu_01Lm5Pq7Rs9Tu1Vw3Xy5Za7B"}
        ]})
    );
}

#[test]
fn hostile_responses_fail_fast_with_typed_errors() {
    let mutate = |index: usize, key: &str, value: Value| {
        decode_edited(ANTHROPIC, PROVIDER, |body| match value {
            Value::Null => {
                body["content"][index]
                    .as_object_mut()
                    .expect("block")
                    .remove(key);
            }
            value => body["content"][index][key] = value,
        })
    };
    assert_call_identity_checked(
        CallSlots {
            first: 2,
            second: 3,
            id_key: "id",
            first_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            blank_name: "",
            invented: "mcp__other__get-forecast",
            canonical: "dice.roll",
        },
        mutate,
    );
    // `input` must be an object: a JSON text, an array or nothing is refused.
    for (input, found) in [
        (json!("{\"formula\":\"1d20\"}"), "a string"),
        (json!(["1d20"]), "an array"),
    ] {
        assert_eq!(
            mutate(2, "input", input).expect_err("refused"),
            DecodeError::InvalidToolCall(format!(
                "the arguments of call `toolu_01T1x1fJ34qAmk2tNTrN7Up6` must be a JSON object, got {found}"
            ))
        );
    }
    assert_eq!(
        mutate(2, "input", Value::Null).expect_err("refused"),
        DecodeError::InvalidToolCall(
            "the arguments of call `toolu_01T1x1fJ34qAmk2tNTrN7Up6` must be a JSON object, got nothing".into()
        )
    );
    assert_eq!(
        mutate(1, "type", json!("server_tool_use")).expect_err("refused"),
        DecodeError::InvalidResponse(
            "`content[1]` is a `server_tool_use` block, which toolhost never asks for".into()
        )
    );
}

#[test]
fn stop_reasons_map_and_unknown_ones_are_kept() {
    assert_finish_reasons(
        ANTHROPIC,
        PROVIDER,
        |body, reason| body["stop_reason"] = reason,
        &[
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("max_tokens", FinishReason::Length),
            ("refusal", FinishReason::ContentFilter),
            ("pause_turn", FinishReason::Other("pause_turn".into())),
        ],
    );
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert_eq!(
        decode(&overloaded).expect_err("error"),
        DecodeError::ProviderError("Overloaded".into())
    );
}

#[test]
fn truncated_and_hostile_streams() {
    let turn = turn();
    assert_cut_stream_incomplete(ANTHROPIC, PROVIDER, "`message_stop`");
    assert_event_after_end_refused(ANTHROPIC, PROVIDER, 0, "`message_stop`");
    // Input that never becomes JSON.
    let mut broken = vec![
        message_start(),
        tool_use_start(0, "toolu_1", "dice_roll"),
        input_delta(0, "{\"formula\": "),
    ];
    broken.extend(stop("tool_use"));
    let error = assemble(ANTHROPIC.stream_assembler(&turn), &broken).expect_err("broken");
    assert_eq!(error.code(), "model.invalid_tool_call");
    // Input that is JSON but not an object.
    let mut array = vec![
        message_start(),
        tool_use_start(0, "toolu_1", "dice_roll"),
        input_delta(0, "[1]"),
    ];
    array.extend(stop("tool_use"));
    assert_eq!(
        assemble(ANTHROPIC.stream_assembler(&turn), &array).expect_err("array"),
        DecodeError::InvalidToolCall(
            "the arguments of call `toolu_1` must be a JSON object, got an array".into()
        )
    );
    // A delta for a block never started.
    let mut assembler = ANTHROPIC.stream_assembler(&turn);
    assembler.push(&message_start()).expect("start");
    assert_eq!(
        assembler.push(&input_delta(5, "{")).expect_err("orphan"),
        DecodeError::InvalidResponse("a delta for content block 5, which was never started".into())
    );
    // An unknown alias is not refused at its block start: the whole call
    // is kept typed for the run loop.
    let mut assembler = ANTHROPIC.stream_assembler(&turn);
    assembler.push(&message_start()).expect("start");
    assembler
        .push(&tool_use_start(0, "toolu_1", "get_weather"))
        .expect("kept");
    // A mid-stream error event.
    let mut assembler = ANTHROPIC.stream_assembler(&turn);
    assert_eq!(
        assembler
            .push(&event(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
            .expect_err("error"),
        DecodeError::ProviderError("Overloaded".into())
    );
    // Unknown stop reason streamed.
    let mut events = vec![
        message_start(),
        tool_use_start(0, "toolu_1", "dice_roll"),
        input_delta(0, "{}"),
    ];
    events.extend(stop("model_context_window_exceeded"));
    assert_eq!(
        assemble(ANTHROPIC.stream_assembler(&turn), &events)
            .expect("ok")
            .finish_reason,
        FinishReason::Other("model_context_window_exceeded".into())
    );
}

#[test]
fn history_arguments_must_be_objects() {
    let mut history = history();
    history.call_metadata = [call_meta(), call_meta()];
    let mut messages = history.messages();
    if let toolhost_core::AgentModelContentPart::ToolCall { call } = &mut messages[1].parts[1] {
        call.arguments = json!("{\"formula\": 2d6");
    }
    assert_eq!(
        ANTHROPIC
            .encode_request(&request(MODEL, messages, turn()), false)
            .expect_err("string arguments"),
        EncodeError::ArgumentsNotObject {
            provider: PROVIDER,
            call_id: "toolu_01A09q90qw90lq917835lq9".into(),
            found: "a string",
        }
    );
}

#[test]
fn an_unknown_call_goes_back_under_its_own_name_with_its_error() {
    let messages = unknown_exchange("toolu_9", "get_weather", Value::Null);
    let body = encoded(ANTHROPIC, &request(MODEL, messages, turn()));
    let sent = &body["messages"];
    let call = &sent[1]["content"][0];
    assert_eq!(call["type"], "tool_use");
    assert_eq!(call["id"], "toolu_9");
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["input"], json!({"city": "Paris"}));
    let answer = &sent[2]["content"][0];
    assert_eq!(answer["type"], "tool_result");
    assert_eq!(answer["tool_use_id"], "toolu_9");
    assert_eq!(answer["is_error"], true);
}
