//! Fixtures shared by the golden tests: one snapshot of three tools, the
//! turn built from it, a history with two calls and their results, a chat
//! app's prompt snapshot (`prompt_snapshot`), and the JSON / SSE fixture
//! files under `tests/fixtures/<provider>/`.

#![allow(dead_code)] // each test binary uses its own share

mod prompt_snapshot;

#[allow(unused_imports)] // not every test binary sends a snapshot
pub use prompt_snapshot::*;

use std::path::PathBuf;

use serde_json::{Value, json};
use toolhost_core::turn::ModelTurn;
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelResponse,
    AgentModelRole, AgentModelSettings, AgentToolResult, Classified, ErrorClass, FinishReason,
    InvocationToolSnapshot, ModelCall, ModelCallError, TokenUsage, ToolBinding, ToolCall,
    ToolChoice, ToolDescriptor, ToolId, ToolTurnContract, UnknownToolCall, UnknownToolResult,
};
use toolhost_providers::{
    DecodeError, GeminiSchemaMode, Provider, SseEvent, StreamAssembler, frame_sse,
};

/// Every provider, Gemini with its JSON Schema mode.
pub const ALL: [Provider; 4] = [
    Provider::OpenaiChat,
    Provider::OpenaiResponses,
    Provider::Anthropic,
    Provider::Gemini {
        schema: GeminiSchemaMode::JsonSchema,
    },
];

pub const WEATHER_SERVER: &str = "3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b";

pub fn dice() -> ToolId {
    ToolId::builtin("dice.roll").expect("id")
}

pub fn read_file() -> ToolId {
    ToolId::builtin("workspace.read_file").expect("id")
}

pub fn forecast() -> ToolId {
    ToolId::parse(&format!("mcp/{WEATHER_SERVER}:get-forecast")).expect("id")
}

fn binding(id: ToolId, alias: &str, description: &str, schema: Value) -> ToolBinding {
    ToolBinding {
        descriptor: ToolDescriptor {
            id,
            title: None,
            description: Some(description.into()),
            input_schema: schema,
            output_schema: None,
            annotations: json!({}),
        },
        model_alias: alias.into(),
        max_calls: None,
        limits: None,
        approval: None,
    }
}

pub fn dice_binding(alias: &str) -> ToolBinding {
    binding(
        dice(),
        alias,
        "Roll dice in NdS+M notation.",
        json!({
            "type": "object",
            "properties": {"formula": {"type": "string", "description": "Dice notation, e.g. 2d6+1."}},
            "required": ["formula"],
            "additionalProperties": false
        }),
    )
}

pub fn read_file_binding() -> ToolBinding {
    binding(
        read_file(),
        "workspace_read_file",
        "Read a text file of the workspace.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "startLine": {"type": "integer", "minimum": 1}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    )
}

/// An MCP tool whose schema came from a draft-07 generator.
pub fn forecast_binding() -> ToolBinding {
    binding(
        forecast(),
        "mcp__weather__get-forecast",
        "Get the forecast for a city.",
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "title": "Forecast",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3}
            },
            "required": ["city"]
        }),
    )
}

pub fn snapshot_of(bindings: Vec<ToolBinding>) -> InvocationToolSnapshot {
    InvocationToolSnapshot::new("inv_root", bindings, 20).expect("snapshot")
}

pub fn snapshot() -> InvocationToolSnapshot {
    snapshot_of(vec![
        dice_binding("dice_roll"),
        read_file_binding(),
        forecast_binding(),
    ])
}

pub fn turn_of(snapshot: &InvocationToolSnapshot, choice: ToolChoice) -> ModelTurn {
    let contract = ToolTurnContract::all(snapshot, choice).expect("contract");
    ModelTurn::new(snapshot, contract).expect("turn")
}

pub fn turn() -> ModelTurn {
    turn_of(&snapshot(), ToolChoice::Auto)
}

pub const SYSTEM: &str = "You are a careful assistant. Use tools when they help.";
pub const USER: &str = "Roll 2d6 and read notes.md, please.";

pub fn call(call_id: &str, tool_id: ToolId, arguments: Value, metadata: Value) -> ToolCall {
    ToolCall {
        call_id: call_id.into(),
        tool_id,
        arguments,
        provider_metadata: metadata,
    }
}

pub fn result_ok(call: &ToolCall, content: &str) -> AgentToolResult {
    AgentToolResult {
        call_id: call.call_id.clone(),
        tool_id: call.tool_id.clone(),
        content: content.into(),
        // Never sent to a model.
        structured: json!({"total": 7, "rolls": [3, 4]}),
        is_error: false,
        error_code: None,
        resource_refs: vec![],
    }
}

pub fn result_error(call: &ToolCall, code: &str, content: &str) -> AgentToolResult {
    AgentToolResult {
        call_id: call.call_id.clone(),
        tool_id: call.tool_id.clone(),
        content: content.into(),
        structured: json!({"path": "notes.md"}),
        is_error: true,
        error_code: Some(code.into()),
        resource_refs: vec![],
    }
}

pub fn assistant(parts: Vec<AgentModelContentPart>, metadata: Value) -> AgentModelMessage {
    AgentModelMessage {
        role: AgentModelRole::Assistant,
        parts,
        provider_metadata: metadata,
    }
}

pub fn text(text: &str) -> AgentModelContentPart {
    AgentModelContentPart::Text { text: text.into() }
}

pub fn tool_call(call: ToolCall) -> AgentModelContentPart {
    AgentModelContentPart::ToolCall { call }
}

pub fn tool_message(results: Vec<AgentToolResult>) -> AgentModelMessage {
    AgentModelMessage {
        role: AgentModelRole::Tool,
        parts: results
            .into_iter()
            .map(|result| AgentModelContentPart::ToolResult { result })
            .collect(),
        provider_metadata: Value::Null,
    }
}

/// The one call of `response` under a name its request did not offer.
pub fn only_unknown(response: &AgentModelResponse) -> &UnknownToolCall {
    let unknown: Vec<&UnknownToolCall> = response
        .message
        .calls()
        .filter_map(|call| match call {
            ModelCall::Unknown(unknown) => Some(unknown),
            ModelCall::Tool(_) => None,
        })
        .collect();
    assert_eq!(unknown.len(), 1, "{response:?}");
    unknown[0]
}

/// A question, an assistant message calling `name` (which no request
/// offers) as `call_id`, and the error that answered it.
pub fn unknown_exchange(call_id: &str, name: &str, metadata: Value) -> Vec<AgentModelMessage> {
    vec![
        AgentModelMessage::user_text(USER),
        assistant(
            vec![AgentModelContentPart::UnknownToolCall {
                call: UnknownToolCall {
                    call_id: call_id.into(),
                    name: name.into(),
                    arguments: json!({"city": "Paris"}),
                    provider_metadata: metadata,
                    hint: String::new(),
                },
            }],
            Value::Null,
        ),
        AgentModelMessage {
            role: AgentModelRole::Tool,
            parts: vec![AgentModelContentPart::UnknownToolResult {
                result: UnknownToolResult {
                    call_id: call_id.into(),
                    name: name.into(),
                    error_code: "model.unknown_tool_call".into(),
                    content: format!("model.unknown_tool_call: `{name}` is not a tool"),
                },
            }],
            provider_metadata: Value::Null,
        },
    ]
}

/// The history every request fixture encodes: a question, an assistant
/// message with text and two calls (ids and metadata as `provider` gave
/// them), and the two results, the second an error.
pub struct History {
    pub call_ids: [&'static str; 2],
    pub call_metadata: [Value; 2],
    pub message_metadata: Value,
}

impl History {
    pub fn calls(&self) -> [ToolCall; 2] {
        [
            call(
                self.call_ids[0],
                dice(),
                json!({"formula": "2d6"}),
                self.call_metadata[0].clone(),
            ),
            call(
                self.call_ids[1],
                read_file(),
                json!({"path": "notes.md"}),
                self.call_metadata[1].clone(),
            ),
        ]
    }

    pub fn messages(&self) -> Vec<AgentModelMessage> {
        let [roll, read] = self.calls();
        vec![
            AgentModelMessage::user_text(USER),
            assistant(
                vec![
                    text("Rolling and reading now."),
                    tool_call(roll.clone()),
                    tool_call(read.clone()),
                ],
                self.message_metadata.clone(),
            ),
            tool_message(vec![
                result_ok(&roll, "Rolled 2d6: 3 + 4 = 7."),
                result_error(
                    &read,
                    "workspace.not_found",
                    "workspace.not_found: `notes.md` does not exist",
                ),
            ]),
        ]
    }
}

pub fn settings(model: &str) -> AgentModelSettings {
    AgentModelSettings {
        model: model.into(),
        temperature: Some(0.2),
        max_output_tokens: Some(1024),
    }
}

pub fn request(
    model: &str,
    messages: Vec<AgentModelMessage>,
    turn: ModelTurn,
) -> AgentModelRequest {
    AgentModelRequest {
        settings: settings(model),
        system: Some(SYSTEM.into()),
        messages,
        turn,
    }
}

fn fixture_path(provider: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(provider)
        .join(name)
}

pub fn fixture_text(provider: &str, name: &str) -> String {
    let path = fixture_path(provider, name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

pub fn fixture(provider: &str, name: &str) -> Value {
    serde_json::from_str(&fixture_text(provider, name))
        .unwrap_or_else(|error| panic!("{provider}/{name}: {error}"))
}

pub fn sse_fixture(provider: &str, name: &str) -> Vec<SseEvent> {
    frame_sse(&fixture_text(provider, name)).expect("fixture frames")
}

/// Feed `events` to `assembler` and finish it.
pub fn assemble(
    mut assembler: Box<dyn StreamAssembler + '_>,
    events: &[SseEvent],
) -> Result<toolhost_core::AgentModelResponse, toolhost_providers::DecodeError> {
    for event in events {
        assembler.push(event)?;
    }
    assembler.finish()
}

/// `{"provider": name}` plus `fields`.
pub fn tagged(provider: &str, fields: Value) -> Value {
    let mut map = fields.as_object().cloned().unwrap_or_default();
    map.insert("provider".into(), provider.into());
    Value::Object(map)
}

/// The assistant message after decoding a reply with these parts.
pub fn reply_message(parts: Vec<AgentModelContentPart>, metadata: Value) -> AgentModelMessage {
    assistant(parts, metadata)
}

/// What every provider's `response_two_calls` fixture decodes to: an
/// optional text, then `dice.roll` (1d20+5) and the forecast for Paris
/// over 2 days, under the provider's own call ids and metadata; finished
/// to call tools.
pub struct TwoCalls<'a> {
    pub text: Option<&'a str>,
    pub call_ids: [&'a str; 2],
    pub call_metadata: [Value; 2],
    pub message_metadata: Value,
    pub usage: TokenUsage,
}

impl TwoCalls<'_> {
    pub fn response(self, id: &str) -> AgentModelResponse {
        let [roll_meta, forecast_meta] = self.call_metadata;
        let mut parts: Vec<AgentModelContentPart> = self.text.map(text).into_iter().collect();
        parts.push(tool_call(call(
            self.call_ids[0],
            dice(),
            json!({"formula": "1d20+5"}),
            roll_meta,
        )));
        parts.push(tool_call(call(
            self.call_ids[1],
            forecast(),
            json!({"city": "Paris", "days": 2}),
            forecast_meta,
        )));
        AgentModelResponse {
            message: reply_message(parts, self.message_metadata),
            finish_reason: FinishReason::ToolCalls,
            usage: Some(self.usage),
            response_id: Some(id.into()),
        }
    }
}

/// The messages of the next request after `reply`: the question, the
/// reply, a result for each of its calls.
pub fn next_history(reply: &AgentModelMessage) -> Vec<AgentModelMessage> {
    let results = reply
        .tool_calls()
        .map(|call| result_ok(call, &format!("done: {}", call.call_id)))
        .collect();
    vec![
        AgentModelMessage::user_text(USER),
        reply.clone(),
        tool_message(results),
    ]
}

/// Every character boundary of `text`: where a stream may split it.
pub fn splits(text: &str) -> impl Iterator<Item = (&str, &str)> {
    (0..=text.len())
        .filter(|index| text.is_char_boundary(*index))
        .map(|index| text.split_at(index))
}

/// Where a format's `response_two_calls` fixture keeps its two calls, and
/// the names it is probed with, for the checks every format shares.
pub struct CallSlots<'a> {
    /// The first call's index in the format's list of parts or items.
    pub first: usize,
    /// The second call's index.
    pub second: usize,
    /// The field a call's id is in (`id`, `call_id`).
    pub id_key: &'a str,
    /// The first call's id in the fixture.
    pub first_id: &'a str,
    /// A name the format reads as no name.
    pub blank_name: &'a str,
    /// A name no request offers.
    pub invented: &'a str,
    /// `dice.roll`'s canonical name as the format may spell it: offered
    /// as `dice_roll`, so never resolved.
    pub canonical: &'a str,
}

/// A reply's call identity is checked the same in every wire format: a
/// repeated call id, a call without a name and one without an id fail
/// fast; a name the request did not offer is kept typed for the run loop,
/// never resolved — neither an invented name nor a tool's canonical one.
/// `mutate(index, key, value)` decodes the fixture with that field of the
/// call at `index` set to `value` (`Value::Null`: as the format removes it).
pub fn assert_call_identity_checked(
    slots: CallSlots,
    mutate: impl Fn(usize, &str, Value) -> Result<AgentModelResponse, DecodeError>,
) {
    let CallSlots {
        first,
        second,
        id_key,
        first_id,
        blank_name,
        invented,
        canonical,
    } = slots;
    assert_eq!(
        mutate(second, id_key, json!(first_id)).expect_err("duplicate id"),
        DecodeError::DuplicateCallId(first_id.into())
    );
    assert_eq!(
        mutate(first, "name", json!(blank_name)).expect_err("blank name"),
        DecodeError::ToolCall(ModelCallError::InvalidToolCall(format!(
            "tool call `{first_id}` has no name"
        )))
    );
    assert_eq!(
        mutate(first, id_key, Value::Null).expect_err("no id"),
        DecodeError::ToolCall(ModelCallError::InvalidToolCall(
            "a tool call has no call id".into()
        ))
    );
    let kept = |name: &str| {
        let reply = mutate(first, "name", json!(name)).expect("kept");
        only_unknown(&reply).error()
    };
    assert_eq!(
        kept(invented),
        ModelCallError::UnknownToolCall {
            name: invented.into(),
            hint: String::new()
        }
    );
    let canonical_error = kept(canonical);
    assert_eq!(
        canonical_error.to_string(),
        format!(
            "model.unknown_tool_call: `{canonical}` is not a tool of this request (`{canonical}` is a tool's canonical name; this request calls it `dice_roll`)"
        )
    );
    assert_eq!(canonical_error.code(), "model.unknown_tool_call");
    assert_eq!(
        canonical_error.class(),
        ErrorClass::PolicyDenied { fail_fast: true }
    );
}

/// The arguments every format's split-stream test sends: quotes, a
/// two-byte letter and a four-byte emoji, so a cut lands inside each.
pub const SPLIT_ARGUMENTS: &str = r#"{"formula":"2d6 \"fair\" é🎲"}"#;

/// A call's arguments streamed in two pieces assemble to the same object
/// wherever the stream cuts them (every character boundary of
/// [`SPLIT_ARGUMENTS`]). `events(first, second)` is the format's stream of
/// one `dice_roll` call whose arguments arrive as `first`, then `second`.
pub fn assert_split_arguments_assemble(
    provider: Provider,
    events: impl Fn(&str, &str) -> Vec<SseEvent>,
) {
    let turn = turn();
    for (first, second) in splits(SPLIT_ARGUMENTS) {
        let events = events(first, second);
        let response = assemble(provider.stream_assembler(&turn), &events).expect("assembles");
        let call = response.message.tool_calls().next().expect("a call");
        assert_eq!(
            call.arguments,
            json!({"formula": "2d6 \"fair\" é🎲"}),
            "split {first:?}|{second:?}"
        );
    }
}

/// The format's `stream_two_calls.sse` fixture without its last event,
/// which marks the end, is incomplete: `missing` names what it lacks.
pub fn assert_cut_stream_incomplete(provider: Provider, name: &str, missing: &str) {
    let turn = turn();
    let events = sse_fixture(name, "stream_two_calls.sse");
    assert_eq!(
        assemble(
            provider.stream_assembler(&turn),
            &events[..events.len() - 1]
        )
        .expect_err("cut"),
        DecodeError::StreamIncomplete(format!("the stream ended without {missing}"))
    );
}

/// The same fixture with its event `late` sent again after the end is
/// refused: `after` names the end it came after.
pub fn assert_event_after_end_refused(provider: Provider, name: &str, late: usize, after: &str) {
    let turn = turn();
    let events = sse_fixture(name, "stream_two_calls.sse");
    let mut after_end = events.clone();
    after_end.push(events[late].clone());
    assert_eq!(
        assemble(provider.stream_assembler(&turn), &after_end).expect_err("after the end"),
        DecodeError::InvalidResponse(format!("an event arrived after {after}"))
    );
}

/// The format's `stream_two_calls.sse` fixture, assembled whole.
pub fn assembled_two_calls(provider: Provider, name: &str) -> AgentModelResponse {
    let turn = turn();
    let events = sse_fixture(name, "stream_two_calls.sse");
    assemble(provider.stream_assembler(&turn), &events).expect("assembles")
}

/// The body `provider` sends after its `response_two_calls.json`: the
/// reply decoded, then `request` made of the question, that reply and a
/// result for each of its calls ([`next_history`]).
pub fn next_request_body(
    provider: Provider,
    name: &str,
    request: impl FnOnce(Vec<AgentModelMessage>) -> AgentModelRequest,
) -> Value {
    let reply = provider
        .decode_response(&turn(), &fixture(name, "response_two_calls.json"))
        .expect("decodes");
    encoded(provider, &request(next_history(&reply.message)))
}

/// The format's `response_two_calls.json` with `edit` applied, decoded by
/// `provider`: how a test probes one field of a reply.
pub fn decode_edited(
    provider: Provider,
    name: &str,
    edit: impl FnOnce(&mut Value),
) -> Result<AgentModelResponse, DecodeError> {
    let mut body = fixture(name, "response_two_calls.json");
    edit(&mut body);
    provider.decode_response(&turn(), &body)
}

/// `request` as `provider` encodes it, unstreamed, is the format's
/// `request_tools_history.json`; the body, for what a test checks next.
pub fn assert_history_request_matches(
    provider: Provider,
    name: &str,
    request: &AgentModelRequest,
) -> Value {
    let body = encoded(provider, request);
    assert_eq!(body, fixture(name, "request_tools_history.json"));
    body
}

/// Each of `cases` — a finish reason as the format's field holds it, and
/// the [`FinishReason`] it decodes to — set into the reply fixture by
/// `set` and decoded.
pub fn assert_finish_reasons(
    provider: Provider,
    name: &str,
    set: impl Fn(&mut Value, Value),
    cases: &[(&str, FinishReason)],
) {
    for (reason, expected) in cases {
        let decoded = decode_edited(provider, name, |body| set(body, json!(reason)));
        assert_eq!(
            &decoded.expect("decodes").finish_reason,
            expected,
            "{reason}"
        );
    }
}

/// `request` as `provider` encodes it for a whole (unstreamed) reply.
pub fn encoded(provider: Provider, request: &AgentModelRequest) -> Value {
    provider.encode_request(request, false).expect("encodes")
}
