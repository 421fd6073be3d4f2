//! What every encoder checks in the history before anything leaves the
//! host: current aliases, the call/result pairing, provider metadata,
//! settings. Run against all four providers: the rules are shared.

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelRole, Classified,
    ErrorClass, ToolChoice,
};
use toolhost_providers::{EncodeError, GeminiSchemaMode, Provider};

/// The fixture history with metadata each provider accepts as its own.
fn history_for(provider: Provider) -> History {
    let meta = tagged(provider.name(), json!({}));
    History {
        call_ids: ["call_a", "call_b"],
        call_metadata: [meta.clone(), meta],
        message_metadata: Value::Null,
    }
}

fn encode(provider: Provider, request: &AgentModelRequest) -> Result<Value, EncodeError> {
    provider.encode_request(request, false)
}

fn for_all(messages: impl Fn(Provider) -> Vec<AgentModelMessage>, expected: EncodeError) {
    for provider in ALL {
        let request = request("model-x", messages(provider), turn());
        assert_eq!(
            encode(provider, &request).expect_err("refused"),
            expected,
            "{}",
            provider.name()
        );
    }
}

#[test]
fn past_calls_go_out_under_the_current_alias() {
    // A later snapshot renamed dice.roll's alias; the history follows it.
    let renamed = snapshot_of(vec![
        dice_binding("roll_dice_v2"),
        read_file_binding(),
        forecast_binding(),
    ]);
    for provider in ALL {
        let request = request(
            "model-x",
            history_for(provider).messages(),
            turn_of(&renamed, ToolChoice::Auto),
        );
        let body = encode(provider, &request).expect("encodes").to_string();
        assert!(
            body.contains("\"roll_dice_v2\""),
            "{}: {body}",
            provider.name()
        );
        assert!(
            !body.contains("\"dice_roll\""),
            "{}: {body}",
            provider.name()
        );
    }
}

#[test]
fn a_historical_tool_absent_from_the_request_fails_fast() {
    let without_read = snapshot_of(vec![dice_binding("dice_roll"), forecast_binding()]);
    for provider in ALL {
        let request = request(
            "model-x",
            history_for(provider).messages(),
            turn_of(&without_read, ToolChoice::Auto),
        );
        let error = encode(provider, &request).expect_err("refused");
        assert_eq!(
            error,
            EncodeError::HistoricalToolMissing {
                call_id: "call_b".into(),
                tool_id: read_file(),
            },
            "{}",
            provider.name()
        );
        assert_eq!(error.code(), "provider.historical_tool_missing");
        assert_eq!(error.class(), ErrorClass::SystemFailure);
    }
}

#[test]
fn only_the_model_text_of_results_is_sent() {
    for provider in ALL {
        let request = request("model-x", history_for(provider).messages(), turn());
        let body = encode(provider, &request).expect("encodes").to_string();
        assert!(
            body.contains("## Tool error\\n\\nworkspace.not_found: `notes.md` does not exist"),
            "{body}"
        );
        // `structured` and `errorCode` are for the runtime only.
        assert!(!body.contains("rolls"), "{}: {body}", provider.name());
        assert!(
            !body.contains("errorCode") && !body.contains("error_code"),
            "{body}"
        );
    }
}

#[test]
fn every_call_needs_exactly_one_result_right_after_it() {
    // No results at all.
    for_all(
        |provider| history_for(provider).messages()[..2].to_vec(),
        EncodeError::InvalidHistory(
            "calls `call_a`, `call_b` have no result at the end of the history".into(),
        ),
    );
    // A user message between the calls and their results.
    for_all(
        |provider| {
            let mut messages = history_for(provider).messages();
            messages.insert(2, AgentModelMessage::user_text("hurry"));
            messages
        },
        EncodeError::InvalidHistory(
            "calls `call_a`, `call_b` have no result before message 2".into(),
        ),
    );
    // A system message there (world info) is no result either.
    for_all(
        |provider| {
            let mut messages = history_for(provider).messages();
            messages.insert(2, AgentModelMessage::system_text(WORLD_INFO));
            messages
        },
        EncodeError::InvalidHistory(
            "calls `call_a`, `call_b` have no result before message 2".into(),
        ),
    );
    // A result no call is waiting for (answered twice).
    for_all(
        |provider| {
            let mut messages = history_for(provider).messages();
            let again = messages[2].clone();
            messages.push(again);
            messages
        },
        EncodeError::InvalidHistory(
            "message 3 holds a result for call `call_a`, which no earlier assistant message is waiting for".into(),
        ),
    );
}

#[test]
fn a_result_must_belong_to_its_call() {
    for_all(
        |provider| {
            let mut messages = history_for(provider).messages();
            if let AgentModelContentPart::ToolResult { result } = &mut messages[2].parts[0] {
                result.tool_id = forecast();
            }
            messages
        },
        EncodeError::InvalidHistory(format!(
            "tool.result_identity_mismatch: result for call `call_a` of `{}` does not belong to call `call_a` of `builtin:dice.roll`",
            forecast()
        )),
    );
}

#[test]
fn call_ids_are_unique_across_the_history() {
    for_all(
        |provider| {
            let history = history_for(provider);
            let mut messages = history.messages();
            messages.push(AgentModelMessage::user_text("again"));
            let [roll, _] = history.calls();
            messages.push(assistant(vec![tool_call(roll.clone())], Value::Null));
            messages.push(tool_message(vec![result_ok(&roll, "7")]));
            messages
        },
        EncodeError::InvalidHistory("call id `call_a` appears twice in the history".into()),
    );
}

#[test]
fn parts_belong_to_their_roles() {
    for_all(
        |provider| {
            let [roll, _] = history_for(provider).calls();
            vec![AgentModelMessage {
                role: toolhost_core::AgentModelRole::User,
                parts: vec![tool_call(roll)],
                provider_metadata: Value::Null,
            }]
        },
        EncodeError::InvalidHistory("message 0 (user) cannot hold a tool call part".into()),
    );
    for_all(
        |_| {
            vec![AgentModelMessage {
                role: toolhost_core::AgentModelRole::Tool,
                parts: vec![text("x")],
                provider_metadata: Value::Null,
            }]
        },
        EncodeError::InvalidHistory("message 0 (tool) cannot hold a text part".into()),
    );
    // A system message is instructions: text only.
    for_all(
        |provider| {
            let [roll, _] = history_for(provider).calls();
            vec![AgentModelMessage {
                role: AgentModelRole::System,
                parts: vec![text(PRESET), tool_call(roll)],
                provider_metadata: Value::Null,
            }]
        },
        EncodeError::InvalidHistory("message 0 (system) cannot hold a tool call part".into()),
    );
    for_all(
        |provider| {
            let [roll, _] = history_for(provider).calls();
            vec![AgentModelMessage {
                role: AgentModelRole::System,
                parts: vec![AgentModelContentPart::ToolResult {
                    result: result_ok(&roll, "7"),
                }],
                provider_metadata: Value::Null,
            }]
        },
        EncodeError::InvalidHistory("message 0 (system) cannot hold a tool result part".into()),
    );
    for_all(
        |_| vec![],
        EncodeError::InvalidHistory("a request needs at least one message".into()),
    );
    for_all(
        |_| vec![assistant(vec![], Value::Null)],
        EncodeError::InvalidHistory("message 0 has no parts".into()),
    );
}

/// A run's rounds after the app's prompt snapshot: its calls and results
/// encode as they do without it, and the formats without a system role in
/// their messages still send only alternating user/assistant turns.
#[test]
fn calls_after_a_prompt_snapshot_encode_in_every_format() {
    for provider in ALL {
        let mut messages = prompt_snapshot_messages();
        // The history's own question is the snapshot's task.
        messages.extend(history_for(provider).messages().into_iter().skip(1));
        messages.push(assistant(vec![text("「灯塔的灯亮了。」")], Value::Null));
        messages.push(AgentModelMessage::user_text("Go on."));
        let mut request = request("model-x", messages, turn());
        request.system = Some(WRITER_SYSTEM.into());
        let body = encode(provider, &request).expect("encodes");
        let wire = body.to_string();
        for needle in [
            "call_a",
            "call_b",
            "Rolled 2d6: 3 + 4 = 7.",
            "「灯塔的灯亮了。」",
            CARD,
            WORLD_INFO,
        ] {
            assert!(
                wire.contains(needle),
                "{}: {needle} in {wire}",
                provider.name()
            );
        }
        match provider {
            Provider::Anthropic => {
                assert_roles_alternate(&body, "messages", ["user", "assistant"]);
                assert_eq!(body["system"].as_array().map(Vec::len), Some(3));
            }
            Provider::Gemini { .. } => {
                assert_roles_alternate(&body, "contents", ["user", "model"]);
                assert_eq!(
                    body["systemInstruction"]["parts"].as_array().map(Vec::len),
                    Some(3)
                );
            }
            Provider::OpenaiChat | Provider::OpenaiResponses => {}
        }
    }
}

/// Without the agent's own prompt the leading system messages still make
/// the system prompt of Anthropic and Gemini (one text: Anthropic's plain
/// string); an empty one is kept by OpenAI (content "") and dropped where
/// empty text blocks are; a history of system messages alone still sends
/// its last one, as user text.
#[test]
fn system_messages_without_a_system_prompt_empty_or_alone() {
    let snapshot = snapshot_of(vec![]);
    let system = |text: &str| AgentModelMessage::system_text(text);
    let cases = [
        vec![
            system("Card."),
            system(""),
            AgentModelMessage::user_text("hi"),
            system(""),
            system("Later."),
        ],
        vec![system("Only.")],
    ];
    for provider in ALL {
        let bodies: Vec<Value> = cases
            .iter()
            .map(|messages| {
                let mut request = request(
                    "model-x",
                    messages.clone(),
                    turn_of(&snapshot, ToolChoice::Auto),
                );
                request.system = None;
                request.settings.temperature = None;
                if provider != Provider::Anthropic {
                    request.settings.max_output_tokens = None;
                }
                encode(provider, &request).expect("encodes")
            })
            .collect();
        let expected = match provider {
            Provider::OpenaiChat => [
                json!({"model": "model-x", "messages": [
                    {"role": "system", "content": "Card."},
                    {"role": "system", "content": ""},
                    {"role": "user", "content": "hi"},
                    {"role": "system", "content": ""},
                    {"role": "system", "content": "Later."},
                ]}),
                json!({"model": "model-x", "messages": [{"role": "system", "content": "Only."}]}),
            ],
            Provider::OpenaiResponses => [
                json!({"model": "model-x", "input": [
                    {"role": "system", "content": "Card."},
                    {"role": "system", "content": ""},
                    {"role": "user", "content": "hi"},
                    {"role": "system", "content": ""},
                    {"role": "system", "content": "Later."},
                ]}),
                json!({"model": "model-x", "input": [{"role": "system", "content": "Only."}]}),
            ],
            Provider::Anthropic => [
                json!({"model": "model-x", "max_tokens": 1024, "system": "Card.", "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "hi"},
                        {"type": "text", "text": "Later."},
                    ]},
                ]}),
                json!({"model": "model-x", "max_tokens": 1024, "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "Only."}]},
                ]}),
            ],
            Provider::Gemini { .. } => [
                json!({
                    "contents": [{"role": "user", "parts": [{"text": "hi"}, {"text": "Later."}]}],
                    "systemInstruction": {"parts": [{"text": "Card."}]},
                }),
                json!({"contents": [{"role": "user", "parts": [{"text": "Only."}]}]}),
            ],
        };
        assert_eq!(bodies, expected, "{}", provider.name());
    }
}

#[test]
fn metadata_from_another_provider_is_lost_metadata() {
    for provider in ALL {
        let other = if provider == Provider::Anthropic {
            "gemini"
        } else {
            "anthropic"
        };
        let mut history = history_for(provider);
        history.message_metadata = tagged(other, json!({"thinking": []}));
        let foreign = request("model-x", history.messages(), turn());
        assert_eq!(
            encode(provider, &foreign).expect_err("refused"),
            EncodeError::LostProviderMetadata {
                provider: provider.name(),
                holder: "message 1".into(),
                reason: format!(
                    "it carries metadata produced by `{other}`, which {} cannot use",
                    provider.name()
                ),
            }
        );
        history.message_metadata = json!({"thinking": []});
        let untagged = request("model-x", history.messages(), turn());
        assert_eq!(
            encode(provider, &untagged)
                .expect_err("refused")
                .to_string(),
            format!(
                "provider.lost_metadata: {} needs its own metadata on message 1: its metadata names no provider",
                provider.name()
            )
        );
    }
}

#[test]
fn a_model_name_is_required() {
    for provider in ALL {
        let mut request = request("", history_for(provider).messages(), turn());
        request.settings.model = " ".into();
        assert_eq!(
            encode(provider, &request).expect_err("refused"),
            EncodeError::SettingMissing {
                provider: provider.name(),
                setting: "a model name (settings.model)",
            }
        );
    }
}

#[test]
fn no_system_prompt_and_no_settings_leave_fields_out() {
    let snapshot = snapshot_of(vec![]);
    for provider in ALL {
        let mut request = request(
            "model-x",
            vec![AgentModelMessage::user_text("hi")],
            turn_of(&snapshot, ToolChoice::Auto),
        );
        request.system = None;
        request.settings.temperature = None;
        if provider != Provider::Anthropic {
            request.settings.max_output_tokens = None;
        }
        let body = encode(provider, &request).expect("encodes");
        let expected = match provider {
            Provider::OpenaiChat => {
                json!({"model": "model-x", "messages": [{"role": "user", "content": "hi"}]})
            }
            Provider::OpenaiResponses => {
                json!({"model": "model-x", "input": [{"role": "user", "content": "hi"}]})
            }
            Provider::Anthropic => json!({"model": "model-x", "max_tokens": 1024,
                "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
            Provider::Gemini { .. } => {
                json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
            }
        };
        assert_eq!(body, expected, "{}", provider.name());
    }
}

#[test]
fn provider_config_serializes_by_format() {
    assert_eq!(
        serde_json::to_value(Provider::OpenaiChat).expect("json"),
        json!({"format": "openai_chat"})
    );
    assert_eq!(
        serde_json::from_value::<Provider>(json!({"format": "gemini"})).expect("parse"),
        Provider::Gemini {
            schema: GeminiSchemaMode::JsonSchema
        }
    );
    assert_eq!(
        serde_json::from_value::<Provider>(json!({"format": "gemini", "schema": "open_api"}))
            .expect("parse"),
        Provider::Gemini {
            schema: GeminiSchemaMode::OpenApi
        }
    );
}
