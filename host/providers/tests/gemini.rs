//! Gemini generateContent golden tests (fixtures: `fixtures/gemini/`).

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelResponse, Classified, FinishReason,
    TokenUsage, ToolChoice,
};
use toolhost_providers::{DecodeError, EncodeError, GeminiSchemaMode, Provider, SseEvent, gemini};

const PROVIDER: &str = "gemini";
const GEMINI: Provider = Provider::Gemini {
    schema: GeminiSchemaMode::JsonSchema,
};
const MODEL: &str = "gemini-3-pro-preview";

fn signed(signature: &str) -> Value {
    tagged(PROVIDER, json!({"thoughtSignature": signature}))
}

fn unsigned() -> Value {
    tagged(PROVIDER, json!({}))
}

/// Only the first call of a parallel batch carries the signature.
fn history() -> History {
    History {
        call_ids: ["8k2m1x7q", "3n9p4r6t"],
        call_metadata: [signed("CiwBjz1rX0KxGq7vS1jHnW2aT4pQ"), unsigned()],
        message_metadata: Value::Null,
    }
}

fn decode(body: &Value) -> Result<AgentModelResponse, DecodeError> {
    gemini::decode_response(&turn(), body)
}

fn response_fixture() -> Value {
    fixture(PROVIDER, "response_two_calls.json")
}

fn expected_two_calls(id: &str) -> AgentModelResponse {
    // STOP with function calls finishes as ToolCalls: the reply asks for tools.
    TwoCalls {
        text: Some("I'll roll and check the weather."),
        call_ids: ["q4v7w1z3", "b8c2d6f0"],
        call_metadata: [signed("CiQBjz1rX2Vq8Hn4Lk0Pz7Tb"), unsigned()],
        message_metadata: Value::Null,
        // Thinking tokens are output.
        usage: TokenUsage {
            input_tokens: 312,
            output_tokens: 140,
        },
    }
    .response(id)
}

#[test]
fn request_with_tools_history_and_results_matches_the_fixture() {
    let request = request(MODEL, history().messages(), turn());
    let body = assert_history_request_matches(GEMINI, PROVIDER, &request);
    // The same body streams (another endpoint, same JSON).
    let streamed = GEMINI.encode_request(&request, true).expect("encodes");
    assert_eq!(streamed, body);
}

/// The leading system messages join `systemInstruction` after the agent's
/// prompt; the later one is user text merged with its neighbours, so
/// `contents` holds only alternating user and model turns.
#[test]
fn prompt_snapshot_lifts_leading_system_messages_and_merges_later_ones() {
    let request = writer_request(MODEL, prompt_snapshot_messages());
    let body = assert_prompt_snapshot_matches(GEMINI, PROVIDER, &request);
    assert_roles_alternate(&body, "contents", ["user", "model"]);
}

#[test]
fn openapi_mode_declares_the_checked_subset() {
    let tools = Provider::Gemini {
        schema: GeminiSchemaMode::OpenApi,
    }
    .encode_tools(turn().tools())
    .expect("encodes");
    assert_eq!(tools, fixture(PROVIDER, "tools_openapi.json"));
}

#[test]
fn tool_choice_forms() {
    let snapshot = snapshot();
    let cases = [
        (ToolChoice::None, json!({"mode": "NONE"})),
        (ToolChoice::Required, json!({"mode": "ANY"})),
        (
            ToolChoice::Specific(dice()),
            json!({"mode": "ANY", "allowedFunctionNames": ["dice_roll"]}),
        ),
    ];
    for (choice, expected) in cases {
        let request = request(MODEL, history().messages(), turn_of(&snapshot, choice));
        let body = encoded(GEMINI, &request);
        assert_eq!(
            body["toolConfig"],
            json!({"functionCallingConfig": expected})
        );
    }
}

#[test]
fn response_with_two_calls_decodes() {
    assert_eq!(
        decode(&response_fixture()).expect("decodes"),
        expected_two_calls("mN3lZpb0KJ2q1MkP5o2v4Qo")
    );
}

#[test]
fn stream_with_split_text_assembles() {
    assert_eq!(
        assembled_two_calls(GEMINI, PROVIDER),
        expected_two_calls("pX9mZqa1Lb6r2NkQ")
    );
}

fn chunk(parts: Value, finish: Option<&str>) -> SseEvent {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    SseEvent::new(
        None,
        json!({"candidates": [candidate], "responseId": "r1"}).to_string(),
    )
}

/// Gemini streams function calls whole; what splits is text, and a
/// signature may come on a later chunk with empty text.
#[test]
fn text_split_anywhere_keeps_its_late_signature() {
    let turn = turn();
    let whole = "Dice: \"2d6\" é🎲.";
    for (first, second) in splits(whole) {
        let events = [
            chunk(json!([{"text": first}]), None),
            chunk(json!([{"text": second}]), None),
            chunk(
                json!([{"text": "", "thoughtSignature": "c2ln"}]),
                Some("STOP"),
            ),
        ];
        let response = assemble(GEMINI.stream_assembler(&turn), &events).expect("assembles");
        assert_eq!(
            response.message.parts,
            vec![text(whole)],
            "split {first:?}|{second:?}"
        );
        assert_eq!(
            response.message.provider_metadata,
            tagged(
                PROVIDER,
                json!({"textSignatures": [{"part": 0, "thoughtSignature": "c2ln"}]})
            )
        );
        assert_eq!(response.finish_reason, FinishReason::Stop);
    }
}

#[test]
fn round_trip_keeps_ids_aliases_and_signatures() {
    let body = next_request_body(GEMINI, PROVIDER, |messages| {
        request(MODEL, messages, turn())
    });
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"text": "I'll roll and check the weather."},
            {"functionCall": {"id": "q4v7w1z3", "name": "dice_roll", "args": {"formula": "1d20+5"}},
             "thoughtSignature": "CiQBjz1rX2Vq8Hn4Lk0Pz7Tb"},
            {"functionCall": {"id": "b8c2d6f0", "name": "mcp__weather__get-forecast", "args": {"city": "Paris", "days": 2}}}
        ]})
    );
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"id": "q4v7w1z3", "name": "dice_roll", "response": {"output": "done: q4v7w1z3"}}},
            {"functionResponse": {"id": "b8c2d6f0", "name": "mcp__weather__get-forecast", "response": {"output": "done: b8c2d6f0"}}}
        ]})
    );
}

#[test]
fn text_signatures_round_trip_even_on_empty_text() {
    let body = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "The answer is 7."},
        {"text": "", "thoughtSignature": "c2lnLXRleHQ="}
    ]}, "finishReason": "STOP"}]});
    let reply = decode(&body).expect("decodes");
    assert_eq!(reply.finish_reason, FinishReason::Stop);
    assert_eq!(
        reply.message.provider_metadata,
        tagged(
            PROVIDER,
            json!({"textSignatures": [{"part": 1, "thoughtSignature": "c2lnLXRleHQ="}]})
        )
    );
    let messages = vec![
        AgentModelMessage::user_text("What is 3 + 4?"),
        reply.message,
        AgentModelMessage::user_text("Thanks."),
    ];
    let body = encoded(GEMINI, &request(MODEL, messages, turn()));
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [
            {"text": "The answer is 7."},
            {"text": "", "thoughtSignature": "c2lnLXRleHQ="}
        ]})
    );
}

#[test]
fn hostile_responses_fail_fast_with_typed_errors() {
    let mutate = |index: usize, key: &str, value: Value| {
        decode_edited(GEMINI, PROVIDER, |body| {
            let call = &mut body["candidates"][0]["content"]["parts"][index]["functionCall"];
            match value {
                Value::Null => {
                    call.as_object_mut().expect("call").remove(key);
                }
                value => call[key] = value,
            }
        })
    };
    // Gemini's `id` is optional on the wire; SPEC §9 still fails fast on
    // a call without one. Dots are legal Gemini names: the canonical
    // native name is still not resolved.
    assert_call_identity_checked(
        CallSlots {
            first: 1,
            second: 2,
            id_key: "id",
            first_id: "q4v7w1z3",
            blank_name: "",
            invented: "roll_dice",
            canonical: "dice.roll",
        },
        mutate,
    );
    assert_eq!(
        mutate(1, "args", json!("{\"formula\":\"1d20\"}")).expect_err("string args"),
        DecodeError::InvalidToolCall(
            "the arguments of call `q4v7w1z3` must be a JSON object, got a string".into()
        )
    );
    // A call without parameters has no `args`.
    let no_args = mutate(1, "args", Value::Null).expect("no args");
    assert_eq!(
        no_args.message.tool_calls().next().expect("call").arguments,
        json!({})
    );
}

#[test]
fn finish_reasons_map_and_unknown_ones_are_kept() {
    assert_finish_reasons(
        GEMINI,
        PROVIDER,
        |body, reason| body["candidates"][0]["finishReason"] = reason,
        &[
            ("MAX_TOKENS", FinishReason::Length),
            ("SAFETY", FinishReason::ContentFilter),
            (
                "MALFORMED_FUNCTION_CALL",
                FinishReason::Other("MALFORMED_FUNCTION_CALL".into()),
            ),
        ],
    );
    let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 9}});
    let reply = decode(&blocked).expect("blocked prompt");
    assert_eq!(reply.finish_reason, FinishReason::ContentFilter);
    assert!(reply.message.parts.is_empty());
    assert_eq!(
        decode(&json!({"candidates": []})).expect_err("nothing"),
        DecodeError::InvalidResponse("expected exactly one candidate, got 0".into())
    );
    let error = json!({"error": {"code": 400, "message": "Function call is missing a thought_signature in functionCall parts.", "status": "INVALID_ARGUMENT"}});
    assert_eq!(
        decode(&error).expect_err("error"),
        DecodeError::ProviderError(
            "Function call is missing a thought_signature in functionCall parts.".into()
        )
    );
    let mut code_part = response_fixture();
    code_part["candidates"][0]["content"]["parts"][0] =
        json!({"executableCode": {"language": "PYTHON", "code": "1"}});
    assert_eq!(
        decode(&code_part).expect_err("code").code(),
        "model.invalid_response"
    );
}

#[test]
fn truncated_and_hostile_streams() {
    let turn = turn();
    assert_cut_stream_incomplete(GEMINI, PROVIDER, "a finishReason");
    // An unknown alias streams to the end and is kept typed.
    let unknown = [chunk(
        json!([{"functionCall": {"id": "x", "name": "get_weather", "args": {}}}]),
        Some("STOP"),
    )];
    let reply = assemble(GEMINI.stream_assembler(&turn), &unknown).expect("kept");
    assert_eq!(only_unknown(&reply).name, "get_weather");
    let duplicate = [
        chunk(
            json!([{"functionCall": {"id": "x", "name": "dice_roll", "args": {"formula": "d4"}}}]),
            None,
        ),
        chunk(
            json!([{"functionCall": {"id": "x", "name": "dice_roll", "args": {"formula": "d6"}}}]),
            Some("STOP"),
        ),
    ];
    assert_eq!(
        assemble(GEMINI.stream_assembler(&turn), &duplicate).expect_err("duplicate"),
        DecodeError::DuplicateCallId("x".into())
    );
    let mut assembler = GEMINI.stream_assembler(&turn);
    assert_eq!(
        assembler
            .push(&SseEvent::new(None, r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#))
            .expect_err("error"),
        DecodeError::ProviderError("The model is overloaded.".into())
    );
}

#[test]
fn history_calls_need_gemini_metadata() {
    // A call produced by another provider, or with no metadata at all,
    // cannot carry the signature Gemini 3 requires back.
    let mut foreign = history();
    foreign.call_metadata[0] = tagged("anthropic", json!({}));
    let error = GEMINI
        .encode_request(&request(MODEL, foreign.messages(), turn()), false)
        .expect_err("foreign");
    assert_eq!(error.code(), "provider.lost_metadata");
    let mut missing = history();
    missing.call_metadata[1] = Value::Null;
    assert_eq!(
        GEMINI
            .encode_request(&request(MODEL, missing.messages(), turn()), false)
            .expect_err("missing"),
        EncodeError::LostProviderMetadata {
            provider: PROVIDER,
            holder: "tool call `3n9p4r6t`".into(),
            reason: "it carries no Gemini metadata, so the thoughtSignature Gemini may require cannot be sent back".into(),
        }
    );
    let mut not_object = history();
    not_object.call_metadata[0] = json!("CiwBjz1r");
    assert_eq!(
        GEMINI
            .encode_request(&request(MODEL, not_object.messages(), turn()), false)
            .expect_err("not an object"),
        EncodeError::LostProviderMetadata {
            provider: PROVIDER,
            holder: "tool call `8k2m1x7q`".into(),
            reason: "its metadata is not a JSON object".into(),
        }
    );
}

#[test]
fn consecutive_turns_merge_by_role() {
    let [roll, read] = history().calls();
    let messages = vec![
        AgentModelMessage::user_text("One."),
        AgentModelMessage::user_text("Two."),
        assistant(vec![tool_call(roll.clone())], Value::Null),
        tool_message(vec![result_ok(&roll, "7")]),
        assistant(vec![tool_call(read.clone())], Value::Null),
        tool_message(vec![result_ok(&read, "notes")]),
        AgentModelMessage {
            role: toolhost_core::AgentModelRole::User,
            parts: vec![AgentModelContentPart::Text {
                text: "Three.".into(),
            }],
            provider_metadata: Value::Null,
        },
    ];
    let body = encoded(GEMINI, &request(MODEL, messages, turn()));
    let roles: Vec<&str> = body["contents"]
        .as_array()
        .expect("contents")
        .iter()
        .map(|content| content["role"].as_str().expect("role"))
        .collect();
    assert_eq!(roles, ["user", "model", "user", "model", "user"]);
    assert_eq!(
        body["contents"][0]["parts"],
        json!([{"text": "One."}, {"text": "Two."}])
    );
    assert_eq!(body["contents"][4]["parts"][1], json!({"text": "Three."}));
}

#[test]
fn an_unknown_call_goes_back_under_its_own_name_with_its_error() {
    let messages = unknown_exchange("x9", "get_weather", signed("CiwBjz1rX0Kx"));
    let body = encoded(GEMINI, &request(MODEL, messages, turn()));
    let contents = &body["contents"];
    let call = &contents[1]["parts"][0];
    assert_eq!(call["functionCall"]["id"], "x9");
    assert_eq!(call["functionCall"]["name"], "get_weather");
    assert_eq!(call["thoughtSignature"], "CiwBjz1rX0Kx");
    let answer = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(answer["id"], "x9");
    assert_eq!(answer["name"], "get_weather");
    assert!(answer["response"]["error"].is_string(), "{answer}");
}

/// An invented name Gemini would refuse (a dot, a digit first) goes back
/// under one it takes, the call and its answer under the same one.
#[test]
fn an_invented_name_goes_back_under_one_name_gemini_takes_for_call_and_answer() {
    for invented in ["dice.roll", "3d_roll"] {
        let messages = unknown_exchange("x9", invented, signed("CiwBjz1rX0Kx"));
        let body = encoded(GEMINI, &request(MODEL, messages, turn()));
        let contents = &body["contents"];
        let name = contents[1]["parts"][0]["functionCall"]["name"]
            .as_str()
            .expect("a name");
        assert!(
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
            "`{invented}` went out as `{name}`"
        );
        assert_ne!(name, "dice_roll", "a real alias");
        assert_eq!(
            contents[2]["parts"][0]["functionResponse"]["name"], name,
            "the answer pairs with the call"
        );
    }
}
