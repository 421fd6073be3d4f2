//! OpenAI Responses golden tests (fixtures: `fixtures/openai_responses/`).

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_core::{
    AgentModelRequest, AgentModelResponse, Classified, FinishReason, TokenUsage, ToolChoice,
};
use toolhost_providers::{DecodeError, EncodeError, Provider, SseEvent, openai_responses};

const PROVIDER: &str = "openai_responses";
const RESPONSES: Provider = Provider::OpenaiResponses;

fn item_meta(item_id: &str) -> Value {
    tagged(PROVIDER, json!({"itemId": item_id}))
}

fn reasoning_meta(id: &str) -> Value {
    tagged(
        PROVIDER,
        json!({"reasoning": [{"id": id, "type": "reasoning", "summary": []}]}),
    )
}

fn history() -> History {
    History {
        call_ids: ["call_Rr1ollA9", "call_Rr2eadB7"],
        call_metadata: [item_meta("fc_68a1c0de02"), item_meta("fc_68a1c0de03")],
        message_metadata: reasoning_meta("rs_68a1c0de01"),
    }
}

/// Reasoning models take no temperature.
fn responses_request(messages: Vec<toolhost_core::AgentModelMessage>) -> AgentModelRequest {
    let mut request = request("o4-mini", messages, turn());
    request.settings.temperature = None;
    request
}

fn decode(body: &Value) -> Result<AgentModelResponse, DecodeError> {
    openai_responses::decode_response(&turn(), body)
}

fn response_fixture() -> Value {
    fixture(PROVIDER, "response_two_calls.json")
}

fn expected_two_calls(
    text: Option<&str>,
    id: &str,
    reasoning_id: &str,
    item_ids: [&str; 2],
) -> AgentModelResponse {
    TwoCalls {
        text,
        call_ids: ["call_Vx81Lw0d", "call_Kp27Qm4e"],
        call_metadata: [item_meta(item_ids[0]), item_meta(item_ids[1])],
        message_metadata: reasoning_meta(reasoning_id),
        usage: TokenUsage {
            input_tokens: 210,
            output_tokens: 96,
        },
    }
    .response(id)
}

#[test]
fn request_with_tools_history_and_results_matches_the_fixture() {
    assert_history_request_matches(
        RESPONSES,
        PROVIDER,
        &responses_request(history().messages()),
    );
}

/// `instructions` is the agent's own prompt; the app's system messages are
/// input messages with role `system`, in place.
#[test]
fn prompt_snapshot_keeps_system_messages_in_place() {
    let request = writer_request("gpt-4.1", prompt_snapshot_messages());
    assert_prompt_snapshot_matches(RESPONSES, PROVIDER, &request);
}

#[test]
fn tool_choice_forms_and_stream_flag() {
    let snapshot = snapshot();
    let mut request = responses_request(history().messages());
    request.turn = turn_of(&snapshot, ToolChoice::Specific(dice()));
    let body = RESPONSES.encode_request(&request, true).expect("encodes");
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "dice_roll"})
    );
    assert_eq!(body["stream"], json!(true));
    request.turn = turn_of(&snapshot, ToolChoice::Required);
    let body = encoded(RESPONSES, &request);
    assert_eq!(body["tool_choice"], json!("required"));
    assert_eq!(body.get("stream"), None);
}

#[test]
fn response_with_two_calls_decodes() {
    assert_eq!(
        decode(&response_fixture()).expect("decodes"),
        expected_two_calls(
            None,
            "resp_68a1c0de5f2c8190a1b2c3d4e5f60718",
            "rs_68a1c0de6a",
            ["fc_68a1c0de7b", "fc_68a1c0de8c"]
        )
    );
}

#[test]
fn stream_with_split_interleaved_arguments_assembles() {
    assert_eq!(
        assembled_two_calls(RESPONSES, PROVIDER),
        expected_two_calls(
            Some("Rolling now."),
            "resp_68a1d2",
            "rs_68a1d3",
            ["fc_68a1d5", "fc_68a1d6"]
        )
    );
}

fn event(data: Value) -> SseEvent {
    let kind = data["type"].as_str().map(str::to_owned);
    SseEvent::new(kind.as_deref(), data.to_string())
}

fn completed() -> SseEvent {
    event(json!({"type": "response.completed", "response": {
        "id": "resp_1", "status": "completed", "output": [], "usage": null}}))
}

#[test]
fn arguments_split_anywhere_assemble() {
    assert_split_arguments_assemble(RESPONSES, |first, second| {
        vec![
            event(
                json!({"type": "response.output_item.added", "output_index": 0, "item": {
                "id": "fc_1", "type": "function_call", "arguments": "", "call_id": "call_1", "name": "dice_roll"}}),
            ),
            event(
                json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": first}),
            ),
            event(
                json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": second}),
            ),
            event(
                json!({"type": "response.function_call_arguments.done", "output_index": 0, "arguments": SPLIT_ARGUMENTS}),
            ),
            completed(),
        ]
    });
}

#[test]
fn round_trip_keeps_call_ids_item_ids_and_reasoning() {
    let body = next_request_body(RESPONSES, PROVIDER, responses_request);
    assert_eq!(
        body["input"],
        json!([
            {"role": "user", "content": USER},
            {"id": "rs_68a1c0de6a", "type": "reasoning", "summary": []},
            {"type": "function_call", "id": "fc_68a1c0de7b", "call_id": "call_Vx81Lw0d",
             "name": "dice_roll", "arguments": "{\"formula\":\"1d20+5\"}"},
            {"type": "function_call", "id": "fc_68a1c0de8c", "call_id": "call_Kp27Qm4e",
             "name": "mcp__weather__get-forecast", "arguments": "{\"city\":\"Paris\",\"days\":2}"},
            {"type": "function_call_output", "call_id": "call_Vx81Lw0d", "output": "done: call_Vx81Lw0d"},
            {"type": "function_call_output", "call_id": "call_Kp27Qm4e", "output": "done: call_Kp27Qm4e"}
        ])
    );
}

#[test]
fn hostile_responses_fail_fast_with_typed_errors() {
    let mutate = |index: usize, key: &str, value: Value| {
        decode_edited(RESPONSES, PROVIDER, |body| {
            body["output"][index][key] = value
        })
    };
    assert_call_identity_checked(
        CallSlots {
            first: 1,
            second: 2,
            id_key: "call_id",
            first_id: "call_Vx81Lw0d",
            blank_name: " ",
            invented: "roll",
            canonical: "dice.roll",
        },
        mutate,
    );
    assert_eq!(
        mutate(0, "type", json!("web_search_call")).expect_err("refused"),
        DecodeError::InvalidResponse(
            "`output[0]` is a `web_search_call` item, which toolhost never asks for".into()
        )
    );
}

#[test]
fn statuses_map_to_finish_reasons() {
    let with = |status: &str, reason: Option<&str>| {
        decode_edited(RESPONSES, PROVIDER, |body| {
            body["status"] = json!(status);
            if let Some(reason) = reason {
                body["incomplete_details"] = json!({"reason": reason});
            }
        })
    };
    assert_eq!(
        with("incomplete", Some("max_output_tokens"))
            .expect("ok")
            .finish_reason,
        FinishReason::Length
    );
    assert_eq!(
        with("incomplete", Some("content_filter"))
            .expect("ok")
            .finish_reason,
        FinishReason::ContentFilter
    );
    assert_eq!(
        with("cancelled", None).expect("ok").finish_reason,
        FinishReason::Other("cancelled".into())
    );
    assert_eq!(
        with("failed", None).expect_err("failed"),
        DecodeError::ProviderError("the response failed without an error object".into())
    );
    let mut text_only = response_fixture();
    text_only["output"] = json!([{"id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "Hello.", "annotations": []}]}]);
    let reply = decode(&text_only).expect("ok");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(reply.message.text(), "Hello.");
    assert_eq!(reply.message.provider_metadata, Value::Null);
    let mut error = response_fixture();
    error["error"] = json!({"code": "server_error", "message": "The server had an error"});
    assert_eq!(
        decode(&error).expect_err("error"),
        DecodeError::ProviderError("The server had an error".into())
    );
}

#[test]
fn truncated_and_hostile_streams() {
    let turn = turn();
    let events = sse_fixture(PROVIDER, "stream_two_calls.sse");
    assert_cut_stream_incomplete(RESPONSES, PROVIDER, "`response.completed`");
    assert_event_after_end_refused(RESPONSES, PROVIDER, 2, "the response completed");
    // Deltas that do not add up to the done arguments.
    let tampered: Vec<SseEvent> = events
        .iter()
        .map(|e| {
            SseEvent::new(
                e.event.as_deref(),
                e.data.replace(r#""delta":"0+5\"}""#, r#""delta":"0+6\"}""#),
            )
        })
        .collect();
    assert_eq!(
        assemble(RESPONSES.stream_assembler(&turn), &tampered).expect_err("tampered"),
        DecodeError::InvalidResponse(
            "the arguments of a function_call differ from their deltas".into()
        )
    );
    // A delta for an item never added.
    let mut assembler = RESPONSES.stream_assembler(&turn);
    assert_eq!(
        assembler
            .push(&event(json!({"type": "response.function_call_arguments.delta", "output_index": 4, "delta": "{"})))
            .expect_err("orphan"),
        DecodeError::InvalidResponse(
            "an event refers to output item 4, which is not an open `function_call` item".into()
        )
    );
    // An unknown alias is not refused when its item is added: the whole
    // call is kept typed for the run loop.
    let mut assembler = RESPONSES.stream_assembler(&turn);
    assembler
        .push(&event(json!({"type": "response.output_item.added", "output_index": 0, "item": {
            "type": "function_call", "call_id": "call_1", "name": "workspace.read_file", "arguments": ""}})))
        .expect("kept");
    // Failure events.
    let mut assembler = RESPONSES.stream_assembler(&turn);
    assert_eq!(
        assembler
            .push(&event(
                json!({"type": "response.failed", "response": {"id": "r", "status": "failed",
                "error": {"code": "server_error", "message": "boom"}}})
            ))
            .expect_err("failed"),
        DecodeError::ProviderError("boom".into())
    );
    let mut assembler = RESPONSES.stream_assembler(&turn);
    assert_eq!(
        assembler
            .push(&event(
                json!({"type": "error", "code": "rate_limit", "message": "slow down"})
            ))
            .expect_err("error"),
        DecodeError::ProviderError("slow down".into())
    );
}

#[test]
fn metadata_of_another_provider_or_unreadable_is_refused() {
    let mut foreign = history();
    foreign.call_metadata[1] = tagged("gemini", json!({"thoughtSignature": "c2ln"}));
    let error = RESPONSES
        .encode_request(&responses_request(foreign.messages()), false)
        .expect_err("foreign");
    assert_eq!(
        error,
        EncodeError::LostProviderMetadata {
            provider: PROVIDER,
            holder: "tool call `call_Rr2eadB7`".into(),
            reason: "it carries metadata produced by `gemini`, which openai_responses cannot use"
                .into(),
        }
    );
    assert_eq!(error.code(), "provider.lost_metadata");
    let mut broken = history();
    broken.message_metadata = tagged(PROVIDER, json!({"reasoning": "rs_1"}));
    assert_eq!(
        RESPONSES
            .encode_request(&responses_request(broken.messages()), false)
            .expect_err("broken"),
        EncodeError::LostProviderMetadata {
            provider: PROVIDER,
            holder: "message 1".into(),
            reason: "its `reasoning` is not a list".into(),
        }
    );
    // Calls without metadata need nothing back: no item id is sent.
    let mut plain = history();
    plain.call_metadata = [Value::Null, Value::Null];
    plain.message_metadata = Value::Null;
    let body = encoded(RESPONSES, &responses_request(plain.messages()));
    assert_eq!(
        body["input"][2],
        json!({"type": "function_call", "call_id": "call_Rr1ollA9", "name": "dice_roll",
               "arguments": "{\"formula\":\"2d6\"}"})
    );
}

#[test]
fn an_unknown_call_goes_back_under_its_own_name_with_its_error() {
    let messages = unknown_exchange("call_9", "get_weather", Value::Null);
    let body = encoded(RESPONSES, &request("o4-mini", messages, turn()));
    let items = body["input"].as_array().expect("input");
    let call = items
        .iter()
        .find(|item| item["type"] == "function_call")
        .expect("the call");
    assert_eq!(call["call_id"], "call_9");
    assert_eq!(call["name"], "get_weather");
    let output = items
        .iter()
        .find(|item| item["type"] == "function_call_output")
        .expect("its answer");
    assert_eq!(output["call_id"], "call_9");
    assert!(
        output["output"]
            .as_str()
            .is_some_and(|text| text.starts_with("## Tool error")),
        "{output}"
    );
}
