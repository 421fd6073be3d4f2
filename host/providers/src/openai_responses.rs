//! OpenAI Responses (`POST /v1/responses`), used statelessly: every request
//! carries the whole history in `input`; no `previous_response_id`.
//!
//! Tools are flat `{"type":"function", name, description, parameters,
//! "strict": false}` (`strict` defaults to `true` in this API, which would
//! demand the strict schema subset). Calls are `function_call` output items
//! (`call_id` links the result, `id` is the item id, `arguments` a JSON
//! text); results go back as `function_call_output` items, text only, no
//! error flag.
//!
//! What must round trip: each call's item id (`fc_…`, kept in the call's
//! metadata as `itemId`) and the reply's `reasoning` items (kept verbatim in
//! the message's metadata as `reasoning`), which reasoning models require
//! before the `function_call` items that followed them. They are replayed
//! first, then the message's text and calls in order.

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

pub const PROVIDER: &str = "openai_responses";

/// The `tools` array.
pub fn encode_tools(tools: &[AgentModelTool]) -> Result<Vec<Value>, EncodeError> {
    tools
        .iter()
        .map(|tool| {
            schema::check_name(PROVIDER, tool, &OPENAI_ANTHROPIC_NAMES)?;
            let mut declaration = Object::new();
            declaration.insert("type".into(), "function".into());
            declaration.insert("name".into(), tool.model_alias.clone().into());
            encode::insert_description(&mut declaration, tool);
            declaration.insert(
                "parameters".into(),
                schema::openai_parameters(PROVIDER, tool)?,
            );
            declaration.insert("strict".into(), false.into());
            Ok(Value::Object(declaration))
        })
        .collect()
}

/// The request body.
pub fn encode_request(request: &AgentModelRequest, stream: bool) -> Result<Value, EncodeError> {
    let turns = encode::prepare(PROVIDER, request)?;
    let mut input = Vec::new();
    for (index, turn) in turns.iter().enumerate() {
        match turn.role {
            // An input message may have the role `system`: the app's
            // instructions stay in place; `instructions` is the agent's own.
            AgentModelRole::System => {
                input.push(json!({"role": "system", "content": turn.text()}));
            }
            AgentModelRole::User => {
                input.push(json!({"role": "user", "content": turn.text()}));
            }
            AgentModelRole::Assistant => assistant_items(index, turn, &mut input)?,
            AgentModelRole::Tool => {
                for item in &turn.items {
                    if let Item::Result { result, .. } = item {
                        input.push(json!({
                            "type": "function_call_output",
                            "call_id": result.call_id,
                            "output": result.model_text(),
                        }));
                    }
                }
            }
        }
    }
    let mut body = Object::new();
    body.insert("model".into(), encode::model(PROVIDER, request)?);
    encode::insert_some(&mut body, "instructions", request.system.clone());
    body.insert("input".into(), Value::Array(input));
    let choice = match encode::choice(&request.turn)? {
        Choice::NoTools => None,
        Choice::None => Some(json!("none")),
        Choice::Auto => Some(json!("auto")),
        Choice::Required => Some(json!("required")),
        Choice::Specific(alias) => Some(json!({"type": "function", "name": alias})),
    };
    if let Some(choice) = choice {
        body.insert(
            "tools".into(),
            Value::Array(encode_tools(request.turn.tools())?),
        );
        body.insert("tool_choice".into(), choice);
    }
    encode::insert_some(&mut body, "temperature", request.settings.temperature);
    encode::insert_some(
        &mut body,
        "max_output_tokens",
        request.settings.max_output_tokens,
    );
    if stream {
        body.insert("stream".into(), true.into());
    }
    Ok(Value::Object(body))
}

/// One assistant message as input items: its reasoning items, then its
/// text and calls in order.
fn assistant_items(
    index: usize,
    turn: &Turn<'_>,
    input: &mut Vec<Value>,
) -> Result<(), EncodeError> {
    input.extend(
        encode::metadata_list(PROVIDER, index, turn, "reasoning")?
            .iter()
            .cloned(),
    );
    for item in &turn.items {
        match item {
            Item::Text { text, .. } if !text.is_empty() => {
                input.push(json!({"role": "assistant", "content": text}));
            }
            Item::Call {
                call,
                alias,
                metadata,
            } => {
                let mut wire = Object::new();
                wire.insert("type".into(), "function_call".into());
                if let Some(item_id) = metadata.and_then(|fields| fields.get("itemId")) {
                    wire.insert("id".into(), item_id.clone());
                }
                wire.insert("call_id".into(), call.call_id.into());
                wire.insert("name".into(), alias.to_string().into());
                wire.insert("arguments".into(), encode::arguments_text(call).into());
                input.push(Value::Object(wire));
            }
            _ => {}
        }
    }
    Ok(())
}

/// A `response` object.
pub fn decode_response(turn: &ModelTurn, body: &Value) -> Result<AgentModelResponse, DecodeError> {
    if let Some(error) = json::provider_error(body) {
        return Err(error);
    }
    let root = json::object(body, "response")?;
    let status = json::required_str(root, "status", "response")?;
    if status == "failed" {
        return Err(DecodeError::ProviderError(
            "the response failed without an error object".into(),
        ));
    }
    let mut reply = Reply::new(turn, Arguments::JsonText);
    let mut reasoning = Vec::new();
    for (index, item) in json::required_array(root, "output", "response")?
        .iter()
        .enumerate()
    {
        let path = format!("output[{index}]");
        let map = json::object(item, &path)?;
        match json::required_str(map, "type", &path)? {
            "message" => {
                for (part_index, part) in json::optional_array(map, "content", &path)?
                    .iter()
                    .enumerate()
                {
                    let path = format!("{path}.content[{part_index}]");
                    let part = json::object(part, &path)?;
                    match json::required_str(part, "type", &path)? {
                        "output_text" => reply.text(json::required_str(part, "text", &path)?),
                        "refusal" => reply.text(json::required_str(part, "refusal", &path)?),
                        other => {
                            return Err(invalid(format!("`{path}` is an unknown `{other}` part")));
                        }
                    }
                }
            }
            "function_call" => {
                let mut fields = Map::new();
                if let Some(item_id) = json::optional_str(map, "id", &path)? {
                    fields.insert("itemId".into(), item_id.into());
                }
                reply.call(ProviderToolCall {
                    call_id: json::optional_str(map, "call_id", &path)?.map(str::to_owned),
                    name: json::optional_str(map, "name", &path)?.map(str::to_owned),
                    arguments: map.get("arguments").cloned(),
                    provider_metadata: metadata::tagged(PROVIDER, fields),
                })?;
            }
            "reasoning" => reasoning.push(item.clone()),
            other => {
                return Err(invalid(format!(
                    "`{path}` is a `{other}` item, which toolhost never asks for"
                )));
            }
        }
    }
    let finish_reason = match status {
        "completed" if reply.has_calls() => FinishReason::ToolCalls,
        "completed" => FinishReason::Stop,
        "incomplete" => {
            let reason = root
                .get("incomplete_details")
                .and_then(|details| details.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("incomplete");
            match reason {
                "max_output_tokens" => FinishReason::Length,
                "content_filter" => FinishReason::ContentFilter,
                other => FinishReason::Other(other.to_owned()),
            }
        }
        other => FinishReason::Other(other.to_owned()),
    };
    let usage = json::usage(
        root.get("usage"),
        &["input_tokens"],
        &["output_tokens"],
        "usage",
    )?;
    let message_metadata = if reasoning.is_empty() {
        Value::Null
    } else {
        let mut fields = Map::new();
        fields.insert("reasoning".into(), Value::Array(reasoning));
        metadata::tagged(PROVIDER, fields)
    };
    let id = json::optional_str(root, "id", "response")?;
    Ok(reply.finish(message_metadata, finish_reason, usage, id))
}

/// Assembles the typed `response.*` events into the output items they
/// build, up to `response.completed` (or `response.incomplete`), whose
/// status and usage close the reply; then decodes it like a whole response.
pub struct ResponsesStream<'t> {
    turn: &'t ModelTurn,
    /// By `output_index`.
    items: BTreeMap<u64, Value>,
    terminal: Option<Value>,
}

impl<'t> ResponsesStream<'t> {
    pub fn new(turn: &'t ModelTurn) -> Self {
        Self {
            turn,
            items: BTreeMap::new(),
            terminal: None,
        }
    }

    fn item(&mut self, event: &Object, kind: &str) -> Result<&mut Object, DecodeError> {
        let index = json::required_index(event, "output_index", "event")?;
        self.items
            .get_mut(&index)
            .and_then(Value::as_object_mut)
            .filter(|item| item.get("type").and_then(Value::as_str) == Some(kind))
            .ok_or_else(|| {
                invalid(format!(
                    "an event refers to output item {index}, which is not an open `{kind}` item"
                ))
            })
    }

    /// Append a text delta to part `content_index` of a message item.
    fn append_text(
        &mut self,
        event: &Object,
        part_kind: &str,
        key: &str,
    ) -> Result<(), DecodeError> {
        let content_index = json::required_index(event, "content_index", "event")?;
        let delta = json::required_str(event, "delta", "event")?.to_owned();
        let item = self.item(event, "message")?;
        let parts = item
            .entry("content")
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| invalid("a message item's content is not an array"))?;
        // A delta may open its part without `content_part.added`.
        if usize::try_from(content_index).is_ok_and(|index| index == parts.len()) {
            parts.push(json!({"type": part_kind, key: ""}));
        }
        let text = usize::try_from(content_index)
            .ok()
            .and_then(|index| parts.get_mut(index))
            .and_then(|part| part.get_mut(key))
            .and_then(|text| match text {
                Value::String(text) => Some(text),
                _ => None,
            })
            .ok_or_else(|| invalid(format!("a `{key}` delta for a part that has no `{key}`")))?;
        text.push_str(&delta);
        Ok(())
    }

    fn add_item(&mut self, event: &Object, done: bool) -> Result<(), DecodeError> {
        let index = json::required_index(event, "output_index", "event")?;
        let item = json::required_object(event, "item", "event")?;
        if item.get("type").and_then(Value::as_str) == Some("function_call") {
            // Its name is decoded with the rest of the call: an unknown one
            // is kept for the run loop to answer.
            json::optional_str(item, "name", "event.item")?;
        }
        match (self.items.get(&index), done) {
            (Some(_), false) => {
                return Err(invalid(format!("output item {index} was added twice")));
            }
            (None, true) => {
                return Err(invalid(format!(
                    "output item {index} is done but was never added"
                )));
            }
            // The done item is complete (ids, encrypted reasoning); its
            // arguments must be the ones the deltas built.
            (Some(open), true) => {
                let assembled = open.get("arguments").and_then(Value::as_str).unwrap_or("");
                let done_arguments = item.get("arguments").and_then(Value::as_str).unwrap_or("");
                if !assembled.is_empty() && assembled != done_arguments {
                    return Err(invalid(format!(
                        "the arguments of output item {index} differ from their deltas"
                    )));
                }
            }
            (None, false) => {}
        }
        self.items.insert(index, Value::Object(item.clone()));
        Ok(())
    }
}

impl StreamAssembler for ResponsesStream<'_> {
    fn push(&mut self, event: &SseEvent) -> Result<(), DecodeError> {
        if self.terminal.is_some() {
            return Err(invalid("an event arrived after the response completed"));
        }
        let data = json::parse(&event.data, "a stream event")?;
        let map = json::object(&data, "event")?;
        match json::required_str(map, "type", "event")? {
            "response.output_item.added" => self.add_item(map, false)?,
            "response.output_item.done" => self.add_item(map, true)?,
            "response.function_call_arguments.delta" => {
                let delta = json::required_str(map, "delta", "event")?.to_owned();
                let item = self.item(map, "function_call")?;
                match item.entry("arguments").or_insert_with(|| "".into()) {
                    Value::String(arguments) => arguments.push_str(&delta),
                    _ => return Err(invalid("a function_call item's arguments are not a string")),
                }
            }
            "response.function_call_arguments.done" => {
                let done = json::required_str(map, "arguments", "event")?.to_owned();
                let item = self.item(map, "function_call")?;
                if item.get("arguments").and_then(Value::as_str) != Some(done.as_str()) {
                    return Err(invalid(
                        "the arguments of a function_call differ from their deltas",
                    ));
                }
            }
            "response.content_part.added" => {
                let part = json::required_object(map, "part", "event")?;
                let kind = json::required_str(part, "type", "event.part")?.to_owned();
                let key = if kind == "refusal" { "refusal" } else { "text" };
                // Opening the part is appending nothing to it.
                let mut opening = map.clone();
                opening.insert("delta".into(), "".into());
                self.append_text(&opening, &kind, key)?;
            }
            "response.output_text.delta" => self.append_text(map, "output_text", "text")?,
            "response.refusal.delta" => self.append_text(map, "refusal", "refusal")?,
            "response.completed" | "response.incomplete" => {
                self.terminal = Some(Value::Object(
                    json::required_object(map, "response", "event")?.clone(),
                ));
            }
            "response.failed" => {
                let response = json::required_object(map, "response", "event")?;
                return Err(json::provider_error(&Value::Object(response.clone()))
                    .unwrap_or_else(|| DecodeError::ProviderError("the response failed".into())));
            }
            "error" => {
                let message =
                    json::optional_str(map, "message", "event")?.unwrap_or("stream error");
                return Err(DecodeError::ProviderError(message.to_owned()));
            }
            // `response.created`, `…in_progress`, `…done` echoes, reasoning
            // summary deltas, annotations: the items and the terminal
            // response carry all of it.
            _ => {}
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<AgentModelResponse, DecodeError> {
        let Some(mut response) = self.terminal else {
            return Err(DecodeError::StreamIncomplete(
                "the stream ended without `response.completed`".into(),
            ));
        };
        // The assembled items, not the terminal event's copy: what was
        // streamed is what the reply is.
        response["output"] = Value::Array(self.items.into_values().collect());
        decode_response(self.turn, &response)
    }
}
