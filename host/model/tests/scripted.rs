//! The scripted model: replies in order, calls decoded through the
//! request's turn like a provider's, and every way a script can be wrong.

mod support;

use serde_json::json;
use support::golden;
use toolhost_core::{AgentModelMessage, Classified, FinishReason, ModelCall};
use toolhost_model::{AgentModel, ScriptedModel};

fn request() -> toolhost_core::AgentModelRequest {
    golden::request(
        "script",
        vec![AgentModelMessage::user_text("go")],
        golden::turn(),
    )
}

fn script(replies: serde_json::Value) -> String {
    json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": replies}).to_string()
}

#[tokio::test]
async fn replies_come_in_order_and_calls_resolve_through_the_turn() {
    let model = ScriptedModel::parse(
        &script(json!([
            {"text": "Rolling.", "toolCalls": [
                {"id": "call_1", "name": "dice_roll", "arguments": {"formula": "2d6"}},
                {"id": "call_2", "name": "workspace_read_file", "arguments": "{\"path\":\"output/main.md\"}"}
            ]},
            {"text": "Done, no tools."}
        ])),
        "inline",
    )
    .expect("script");
    assert_eq!(model.remaining(), 2);

    let first = model.complete(&request()).await.expect("first");
    let calls: Vec<_> = first.response.message.tool_calls().cloned().collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].tool_id, golden::dice());
    assert_eq!(calls[0].arguments, json!({"formula": "2d6"}));
    // A JSON string is parsed, as providers send arguments.
    assert_eq!(calls[1].arguments, json!({"path": "output/main.md"}));
    assert_eq!(first.response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.response.message.text(), "Rolling.");

    let second = model.complete(&request()).await.expect("second");
    assert_eq!(second.response.message.tool_calls().count(), 0);
    assert_eq!(second.response.finish_reason, FinishReason::Stop);

    let over = model.complete(&request()).await.expect_err("exhausted");
    assert_eq!(over.code(), "model.script_exhausted");
    assert!(over.to_string().contains("2 replies"), "{over}");
}

#[tokio::test]
async fn a_script_breaking_the_turn_fails_like_a_provider_would() {
    let cases = [
        (
            json!([{"toolCalls": [{"name": "dice_roll"}]}]),
            "model.invalid_tool_call",
        ),
        (
            json!([{"toolCalls": [{"id": "c", "name": " "}]}]),
            "model.invalid_tool_call",
        ),
        (
            json!([{"toolCalls": [{"id": "c", "name": "dice_roll"}, {"id": "c", "name": "dice_roll"}]}]),
            "model.duplicate_tool_call_id",
        ),
    ];
    for (replies, code) in cases {
        let model = ScriptedModel::parse(&script(replies.clone()), "inline").expect("script");
        let error = model.complete(&request()).await.expect_err("refused");
        assert_eq!(error.code(), code, "{replies}");
    }
}

#[tokio::test]
async fn a_scripted_unknown_name_comes_back_typed_like_a_providers() {
    let model = ScriptedModel::parse(
        &script(json!([{"toolCalls": [
            {"id": "c1", "name": "builtin:dice.roll"},
            {"id": "c2", "name": "dice_roll"},
        ]}])),
        "inline",
    )
    .expect("script");
    let reply = model.complete(&request()).await.expect("a reply");
    let calls: Vec<ModelCall<'_>> = reply.response.message.calls().collect();
    assert_eq!(calls.len(), 2);
    let ModelCall::Unknown(unknown) = calls[0] else {
        panic!("{:?}", calls[0]);
    };
    assert_eq!(unknown.name, "builtin:dice.roll");
    assert!(unknown.hint.contains("dice_roll"), "{}", unknown.hint);
    assert!(matches!(calls[1], ModelCall::Tool(call) if call.tool_id == golden::dice()));
}

#[test]
fn malformed_scripts_are_refused_at_load_naming_the_place() {
    let cases = [
        ("not json", "inline"),
        (
            r#"{"schemaVersion":2,"kind":"toolhost.modelScript","replies":[]}"#,
            "schemaVersion 2",
        ),
        (
            r#"{"schemaVersion":1,"kind":"other","replies":[]}"#,
            "kind is `other`",
        ),
        (
            r#"{"schemaVersion":1,"kind":"toolhost.modelScript","replies":[{"txt":"x"}]}"#,
            "replies[0]",
        ),
        (
            r#"{"schemaVersion":1,"kind":"toolhost.modelScript","replies":[{"toolCalls":[{"id":"a","nam":"x"}]}]}"#,
            "toolCalls[0]",
        ),
        (
            r#"{"schemaVersion":1,"kind":"toolhost.modelScript","replies":[{"text":"x","delayMs":60001}]}"#,
            "replies[0].delayMs`: at most 60000",
        ),
    ];
    for (text, needle) in cases {
        let error = ScriptedModel::parse(text, "inline").expect_err(text);
        assert_eq!(error.code(), "model.script_invalid", "{text}");
        assert!(error.to_string().contains(needle), "{text}: {error}");
    }
    // Within the bound, a delay is a plain reply.
    ScriptedModel::parse(
        r#"{"schemaVersion":1,"kind":"toolhost.modelScript","replies":[{"text":"x","delayMs":60000}]}"#,
        "inline",
    )
    .expect("a minute is allowed");
    let missing =
        ScriptedModel::load(std::path::Path::new("/nonexistent/script.json")).expect_err("missing");
    assert_eq!(missing.code(), "model.script_invalid");
}
