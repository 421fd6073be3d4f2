//! Anthropic Messages (`POST /v1/messages`).
//!
//! Tools are `{name, description, input_schema}` (see `schema` for the two
//! things stripped or refused). Calls are `tool_use` content blocks whose
//! `id` is the call id and whose `input` must be an object; results go back
//! in the next user message as `tool_result` blocks (`is_error` set for
//! errors), all of them first, so the messages are merged by role.
//!
//! What must round trip: the `tool_use` ids (they are the call ids) and the
//! reply's `thinking` / `redacted_thinking` blocks with their signatures
//! (kept verbatim in the message's metadata as `thinking`), which the API
//! requires at the start of an assistant turn that used extended thinking.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use toolhost_core::turn::ModelTurn;
use toolhost_core::{
    AgentModelRequest, AgentModelResponse, AgentModelRole, AgentModelTool, FinishReason,
    ProviderToolCall,
};

use crate::decode::{Arguments, Reply};
use crate::encode::{self, Choice, Item, Turn};
use crate::error::{DecodeError, EncodeError, invalid};
use crate::json::{self, Object};
use crate::metadata;
use crate::schema::{self, OPENAI_ANTHROPIC_NAMES};
use crate::sse::{SseEvent, StreamAssembler};

pub const PROVIDER: &str = "anthropic";

/// The `tools` array.
pub fn encode_tools(tools: &[AgentModelTool]) -> Result<Vec<Value>, EncodeError> {
    tools
        .iter()
        .map(|tool| {
            schema::check_name(PROVIDER, tool, &OPENAI_ANTHROPIC_NAMES)?;
            let mut declaration = Object::new();
            declaration.insert("name".into(), tool.model_alias.clone().into());
            encode::insert_description(&mut declaration, tool);
            declaration.insert(
                "input_schema".into(),
                schema::anthropic_input_schema(PROVIDER, tool)?,
            );
            Ok(Value::Object(declaration))
        })
        .collect()
}

/// The user turn in front of a conversation that would open with the
/// assistant (SillyTavern's placeholder for Claude).
pub const OPENING_USER_TEXT: &str = "Let's get started.";

/// The request body. `max_tokens` is required by the API: a request
/// without `settings.max_output_tokens` is refused rather than given a
/// made-up limit.
pub fn encode_request(request: &AgentModelRequest, stream: bool) -> Result<Value, EncodeError> {
    let turns = encode::prepare(PROVIDER, request)?;
    let Some(max_tokens) = request.settings.max_output_tokens else {
        return Err(EncodeError::SettingMissing {
            provider: PROVIDER,
            setting: "settings.maxOutputTokens (the API's required max_tokens)",
        });
    };
    // `messages` has no system role: the leading System turns join the
    // top-level `system`, and a later one is user text merged with its
    // neighbours (SillyTavern's Claude converter does the same).
    let head = encode::system_head(request, &turns);
    let mut messages = Vec::new();
    for (index, turn) in turns.iter().enumerate().skip(head.turns) {
        match turn.role {
            AgentModelRole::System | AgentModelRole::User => {
                encode::push_merged(&mut messages, "user", text_blocks(turn));
            }
            AgentModelRole::Assistant => {
                encode::push_merged(&mut messages, "assistant", assistant_blocks(index, turn)?);
            }
            AgentModelRole::Tool => {
                let results = turn
                    .items
                    .iter()
                    .filter_map(|item| match item {
                        Item::Result { result, .. } => {
                            let mut block = json!({
                                "type": "tool_result",
                                "tool_use_id": result.call_id,
                                "content": result.model_text(),
                            });
                            if result.is_error {
                                block["is_error"] = true.into();
                            }
                            Some(block)
                        }
                        _ => None,
                    })
                    .collect();
                encode::push_merged(&mut messages, "user", results);
            }
        }
    }
    // The API refuses a conversation that opens with the assistant ("first
    // message must use the user role"); a chat app's history often does (a
    // character's greeting). SillyTavern puts the same line in front.
    if messages
        .first()
        .is_some_and(|(role, _)| *role == "assistant")
    {
        messages.insert(
            0,
            (
                "user",
                vec![json!({"type": "text", "text": OPENING_USER_TEXT})],
            ),
        );
    }
    let mut body = Object::new();
    body.insert("model".into(), encode::model(PROVIDER, request)?);
    body.insert("max_tokens".into(), max_tokens.into());
    encode::insert_some(&mut body, "system", system(&head.texts));
    body.insert(
        "messages".into(),
        messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect(),
    );
    let choice = match encode::choice(&request.turn)? {
        Choice::NoTools => None,
        Choice::None => Some(json!({"type": "none"})),
        Choice::Auto => Some(json!({"type": "auto"})),
        Choice::Required => Some(json!({"type": "any"})),
        Choice::Specific(alias) => Some(json!({"type": "tool", "name": alias})),
    };
    if let Some(choice) = choice {
        body.insert(
            "tools".into(),
            Value::Array(encode_tools(request.turn.tools())?),
        );
        body.insert("tool_choice".into(), choice);
    }
    encode::insert_some(&mut body, "temperature", request.settings.temperature);
    if stream {
        body.insert("stream".into(), true.into());
    }
    Ok(Value::Object(body))
}

/// `system`: one text as a plain string (what a request without System
/// turns always sent), several as text blocks in order, empty ones left out.
fn system(texts: &[&str]) -> Option<Value> {
    match texts {
        [] => None,
        [only] if blank(only) => None,
        [only] => Some(Value::from(*only)),
        many => {
            let blocks: Vec<Value> = many
                .iter()
                .filter(|text| !blank(text))
                .map(|text| json!({"type": "text", "text": text}))
                .collect();
            (!blocks.is_empty()).then_some(Value::Array(blocks))
        }
    }
}

/// A text the API refuses as a block ("text content blocks must contain
/// non-whitespace text"): a chat app's prompt may hold one.
fn blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// Text blocks; blank ones are left out (the API refuses them).
fn text_blocks(turn: &Turn<'_>) -> Vec<Value> {
    turn.items
        .iter()
        .filter_map(|item| match item {
            Item::Text { text, .. } if !blank(text) => Some(json!({"type": "text", "text": text})),
            _ => None,
        })
        .collect()
}

/// The thinking blocks the reply carried, then text and `tool_use` blocks
/// in order.
fn assistant_blocks(index: usize, turn: &Turn<'_>) -> Result<Vec<Value>, EncodeError> {
    let mut blocks = encode::metadata_list(PROVIDER, index, turn, "thinking")?.to_vec();
    for item in &turn.items {
        match item {
            Item::Text { text, .. } if !blank(text) => {
                blocks.push(json!({"type": "text", "text": text}));
            }
            Item::Call { call, alias, .. } => blocks.push(json!({
                "type": "tool_use",
                "id": call.call_id,
                "name": alias,
                "input": encode::arguments_object(PROVIDER, call)?,
            })),
            _ => {}
        }
    }
    Ok(blocks)
}

/// A `message` object.
pub fn decode_response(turn: &ModelTurn, body: &Value) -> Result<AgentModelResponse, DecodeError> {
    if let Some(error) = json::provider_error(body) {
        return Err(error);
    }
    let root = json::object(body, "message")?;
    let mut reply = Reply::new(turn, Arguments::Object);
    let mut thinking = Vec::new();
    for (index, block) in json::required_array(root, "content", "message")?
        .iter()
        .enumerate()
    {
        let path = format!("content[{index}]");
        let map = json::object(block, &path)?;
        match json::required_str(map, "type", &path)? {
            "text" => reply.text(json::required_str(map, "text", &path)?),
            "tool_use" => reply.call(ProviderToolCall {
                call_id: json::optional_str(map, "id", &path)?.map(str::to_owned),
                name: json::optional_str(map, "name", &path)?.map(str::to_owned),
                arguments: map.get("input").cloned(),
                provider_metadata: metadata::tagged(PROVIDER, Map::new()),
            })?,
            "thinking" | "redacted_thinking" => thinking.push(block.clone()),
            other => {
                return Err(invalid(format!(
                    "`{path}` is a `{other}` block, which toolhost never asks for"
                )));
            }
        }
    }
    let finish_reason = match json::required_str(root, "stop_reason", "message")? {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    };
    // Cached input is input too: the three counts add up to what was read.
    let usage = json::usage(
        root.get("usage"),
        &[
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ],
        &["output_tokens"],
        "usage",
    )?;
    let message_metadata = if thinking.is_empty() {
        Value::Null
    } else {
        let mut fields = Map::new();
        fields.insert("thinking".into(), Value::Array(thinking));
        metadata::tagged(PROVIDER, fields)
    };
    let id = json::optional_str(root, "id", "message")?;
    Ok(reply.finish(message_metadata, finish_reason, usage, id))
}

/// Assembles `message_start`, `content_block_*`, `message_delta` up to
/// `message_stop` into the message they build; then decodes it like a whole
/// response. `tool_use` input arrives as `input_json_delta` fragments of one
/// JSON text per block, parsed once the stream is complete.
pub struct AnthropicStream<'t> {
    turn: &'t ModelTurn,
    message: Option<Object>,
    /// By content block `index`.
    blocks: BTreeMap<u64, Value>,
    input_json: BTreeMap<u64, String>,
    stop_reason: Option<String>,
    usage: Object,
    stopped: bool,
}

impl<'t> AnthropicStream<'t> {
    pub fn new(turn: &'t ModelTurn) -> Self {
        Self {
            turn,
            message: None,
            blocks: BTreeMap::new(),
            input_json: BTreeMap::new(),
            stop_reason: None,
            usage: Object::new(),
            stopped: false,
        }
    }

    /// Later counts replace earlier ones (`message_delta` carries the
    /// cumulative output count).
    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let Some(Value::Object(usage)) = usage {
            self.usage.extend(
                usage
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone())),
            );
        }
    }

    fn delta(&mut self, event: &Object) -> Result<(), DecodeError> {
        let index = json::required_index(event, "index", "event")?;
        let delta = json::required_object(event, "delta", "event")?;
        let block = self
            .blocks
            .get_mut(&index)
            .and_then(Value::as_object_mut)
            .ok_or_else(|| {
                invalid(format!(
                    "a delta for content block {index}, which was never started"
                ))
            })?;
        let (key, fragment) = match json::required_str(delta, "type", "event.delta")? {
            "text_delta" => ("text", json::required_str(delta, "text", "event.delta")?),
            "thinking_delta" => (
                "thinking",
                json::required_str(delta, "thinking", "event.delta")?,
            ),
            "signature_delta" => (
                "signature",
                json::required_str(delta, "signature", "event.delta")?,
            ),
            "input_json_delta" => {
                let fragment = json::required_str(delta, "partial_json", "event.delta")?;
                self.input_json.entry(index).or_default().push_str(fragment);
                return Ok(());
            }
            // Citations and delta kinds newer than this adapter: nothing
            // toolhost reads.
            _ => return Ok(()),
        };
        match block.entry(key).or_insert_with(|| "".into()) {
            Value::String(text) => text.push_str(fragment),
            _ => {
                return Err(invalid(format!(
                    "content block {index} has a non-text `{key}`"
                )));
            }
        }
        Ok(())
    }
}

impl StreamAssembler for AnthropicStream<'_> {
    fn push(&mut self, event: &SseEvent) -> Result<(), DecodeError> {
        if self.stopped {
            return Err(invalid("an event arrived after `message_stop`"));
        }
        let data = json::parse(&event.data, "a stream event")?;
        let map = json::object(&data, "event")?;
        match json::required_str(map, "type", "event")? {
            "message_start" => {
                let message = json::required_object(map, "message", "event")?;
                self.merge_usage(message.get("usage"));
                self.message = Some(message.clone());
            }
            "content_block_start" => {
                let index = json::required_index(map, "index", "event")?;
                let block = json::required_object(map, "content_block", "event")?;
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    // Its name is decoded with the rest of the call: an
                    // unknown one is kept for the run loop to answer.
                    json::optional_str(block, "name", "event.content_block")?;
                }
                if self
                    .blocks
                    .insert(index, Value::Object(block.clone()))
                    .is_some()
                {
                    return Err(invalid(format!("content block {index} was started twice")));
                }
            }
            "content_block_delta" => self.delta(map)?,
            "message_delta" => {
                let delta = json::required_object(map, "delta", "event")?;
                if let Some(reason) = json::optional_str(delta, "stop_reason", "event.delta")? {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.merge_usage(map.get("usage"));
            }
            "message_stop" => self.stopped = true,
            "error" => {
                return Err(json::provider_error(&data)
                    .unwrap_or_else(|| DecodeError::ProviderError("stream error".into())));
            }
            // `ping`, `content_block_stop` and event kinds newer than this
            // adapter.
            _ => {}
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<AgentModelResponse, DecodeError> {
        if !self.stopped {
            return Err(DecodeError::StreamIncomplete(
                "the stream ended without `message_stop`".into(),
            ));
        }
        let Some(mut message) = self.message else {
            return Err(invalid("the stream had no `message_start`"));
        };
        let mut blocks = self.blocks;
        for (index, text) in self.input_json {
            if text.trim().is_empty() {
                continue; // the start block's `input` stands
            }
            let input = serde_json::from_str(&text).map_err(|error| {
                DecodeError::InvalidToolCall(format!(
                    "the streamed input of content block {index} is not JSON: {error}"
                ))
            })?;
            if let Some(block) = blocks.get_mut(&index) {
                block["input"] = input;
            }
        }
        message.insert("content".into(), blocks.into_values().collect());
        message.insert("stop_reason".into(), self.stop_reason.into());
        message.insert("usage".into(), Value::Object(self.usage));
        decode_response(self.turn, &Value::Object(message))
    }
}
