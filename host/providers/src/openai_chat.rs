//! OpenAI Chat Completions (`POST /v1/chat/completions`).
//!
//! Tools are `{"type":"function","function":{name, description, parameters}}`
//! without `strict` (strict mode needs every property required and
//! `additionalProperties: false` everywhere, which toolhost schemas do not
//! promise). Calls come back in `message.tool_calls[]` with `arguments` as a
//! JSON text; results go back as one `{"role":"tool","tool_call_id"}`
//! message per call, text only, with no error flag (the `## Tool error`
//! heading is the flag). Nothing needs to round trip but the call ids.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use toolhost_core::turn::ModelTurn;
use toolhost_core::{
    AgentModelRequest, AgentModelResponse, AgentModelRole, AgentModelTool, FinishReason,
    ProviderToolCall,
};

use crate::decode::{Arguments, Reply};
use crate::encode::{self, Choice, Item};
use crate::error::{DecodeError, EncodeError, invalid};
use crate::json::{self, Object};
use crate::metadata;
use crate::schema::{self, OPENAI_ANTHROPIC_NAMES};
use crate::sse::{self, SseEvent, StreamAssembler};

pub const PROVIDER: &str = "openai_chat";

/// The `tools` array.
pub fn encode_tools(tools: &[AgentModelTool]) -> Result<Vec<Value>, EncodeError> {
    tools
        .iter()
        .map(|tool| {
            schema::check_name(PROVIDER, tool, &OPENAI_ANTHROPIC_NAMES)?;
            let mut function = Map::new();
            function.insert("name".into(), tool.model_alias.clone().into());
            encode::insert_description(&mut function, tool);
            function.insert(
                "parameters".into(),
                schema::openai_parameters(PROVIDER, tool)?,
            );
            Ok(json!({"type": "function", "function": function}))
        })
        .collect()
}

/// The request body. With `stream`, usage is asked for in the last chunk.
pub fn encode_request(request: &AgentModelRequest, stream: bool) -> Result<Value, EncodeError> {
    let turns = encode::prepare(PROVIDER, request)?;
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for turn in &turns {
        match turn.role {
            // The app's instructions stay where it put them: Chat takes a
            // `system` message anywhere in `messages`.
            AgentModelRole::System => {
                messages.push(json!({"role": "system", "content": turn.text()}));
            }
            AgentModelRole::User => {
                messages.push(json!({"role": "user", "content": turn.text()}));
            }
            AgentModelRole::Assistant => {
                let calls: Vec<Value> = turn
                    .items
                    .iter()
                    .filter_map(|item| match item {
                        Item::Call { call, alias, .. } => Some(json!({
                            "id": call.call_id,
                            "type": "function",
                            "function": {"name": alias, "arguments": encode::arguments_text(call)},
                        })),
                        _ => None,
                    })
                    .collect();
                let text = turn.text();
                // `content` may be null only beside tool calls.
                let content = if text.is_empty() && !calls.is_empty() {
                    Value::Null
                } else {
                    text.into()
                };
                let mut message = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(calls);
                }
                messages.push(message);
            }
            AgentModelRole::Tool => {
                for item in &turn.items {
                    if let Item::Result { result, .. } = item {
                        messages.push(json!({
                            "role": "tool",
                            "tool_call_id": result.call_id,
                            "content": result.model_text(),
                        }));
                    }
                }
            }
        }
    }
    let mut body = Object::new();
    body.insert("model".into(), encode::model(PROVIDER, request)?);
    body.insert("messages".into(), Value::Array(messages));
    let choice = match encode::choice(&request.turn)? {
        Choice::NoTools => None,
        Choice::None => Some(json!("none")),
        Choice::Auto => Some(json!("auto")),
        Choice::Required => Some(json!("required")),
        Choice::Specific(alias) => Some(json!({"type": "function", "function": {"name": alias}})),
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
        "max_completion_tokens",
        request.settings.max_output_tokens,
    );
    if stream {
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(body))
}

/// A `chat.completion` body.
pub fn decode_response(turn: &ModelTurn, body: &Value) -> Result<AgentModelResponse, DecodeError> {
    if let Some(error) = json::provider_error(body) {
        return Err(error);
    }
    let root = json::object(body, "response")?;
    let choice = match json::required_array(root, "choices", "response")? {
        [choice] => json::object(choice, "choices[0]")?,
        other => {
            return Err(invalid(format!(
                "expected exactly one choice, got {}",
                other.len()
            )));
        }
    };
    let message = json::required_object(choice, "message", "choices[0]")?;
    let path = "choices[0].message";
    let mut reply = Reply::new(turn, Arguments::JsonText);
    if let Some(text) = json::optional_str(message, "content", path)?.filter(|t| !t.is_empty()) {
        reply.text(text);
    }
    // A refusal is what the model said to the user instead of an answer.
    if let Some(refusal) = json::optional_str(message, "refusal", path)? {
        reply.text(refusal);
    }
    for (index, call) in json::optional_array(message, "tool_calls", path)?
        .iter()
        .enumerate()
    {
        let path = format!("{path}.tool_calls[{index}]");
        let call = json::object(call, &path)?;
        if let Some(kind) = json::optional_str(call, "type", &path)?.filter(|k| *k != "function") {
            return Err(DecodeError::InvalidToolCall(format!(
                "`{path}` is a `{kind}` call; only function tools are declared"
            )));
        }
        let function = json::required_object(call, "function", &path)?;
        reply.call(ProviderToolCall {
            call_id: json::optional_str(call, "id", &path)?.map(str::to_owned),
            name: json::optional_str(function, "name", &path)?.map(str::to_owned),
            arguments: function.get("arguments").cloned(),
            provider_metadata: metadata::tagged(PROVIDER, Map::new()),
        })?;
    }
    let finish_reason = finish_reason(json::required_str(choice, "finish_reason", "choices[0]")?);
    let usage = json::usage(
        root.get("usage"),
        &["prompt_tokens"],
        &["completion_tokens"],
        "usage",
    )?;
    let id = json::optional_str(root, "id", "response")?;
    Ok(reply.finish(Value::Null, finish_reason, usage, id))
}

fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "stop" => FinishReason::Stop,
        "tool_calls" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Assembles `chat.completion.chunk` events up to `data: [DONE]` into the
/// `chat.completion` body they stand for, then decodes it like one.
pub struct ChatStream<'t> {
    turn: &'t ModelTurn,
    id: Option<String>,
    content: String,
    refusal: Option<String>,
    /// By `tool_calls[].index`: fragments of one call share it; only the
    /// first carries id and name.
    calls: BTreeMap<u64, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    done: bool,
}

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    arguments: String,
}

impl<'t> ChatStream<'t> {
    pub fn new(turn: &'t ModelTurn) -> Self {
        Self {
            turn,
            id: None,
            content: String::new(),
            refusal: None,
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: None,
            done: false,
        }
    }

    fn choice(&mut self, choice: &Value) -> Result<(), DecodeError> {
        let path = "chunk.choices[]";
        let choice = json::object(choice, path)?;
        let index = json::required_index(choice, "index", path)?;
        if index != 0 {
            return Err(invalid(format!(
                "one choice was asked for, the stream sent choice {index}"
            )));
        }
        if let Some(reason) = json::optional_str(choice, "finish_reason", path)? {
            self.finish_reason = Some(reason.to_owned());
        }
        let Some(delta) = choice.get("delta") else {
            return Ok(());
        };
        let path = "chunk.choices[0].delta";
        let delta = json::object(delta, path)?;
        if let Some(text) = json::optional_str(delta, "content", path)? {
            self.content.push_str(text);
        }
        if let Some(text) = json::optional_str(delta, "refusal", path)? {
            self.refusal.get_or_insert_default().push_str(text);
        }
        for fragment in json::optional_array(delta, "tool_calls", path)? {
            let path = "chunk.choices[0].delta.tool_calls[]";
            let fragment = json::object(fragment, path)?;
            let index = json::required_index(fragment, "index", path)?;
            let call = self.calls.entry(index).or_default();
            let what = |field: &str| format!("the {field} of tool call {index}");
            sse::set_once(
                &mut call.id,
                json::optional_str(fragment, "id", path)?,
                &what("id"),
            )?;
            sse::set_once(
                &mut call.kind,
                json::optional_str(fragment, "type", path)?,
                &what("type"),
            )?;
            if let Some(function) = fragment.get("function") {
                let function = json::object(function, path)?;
                let name = json::optional_str(function, "name", path)?;
                sse::set_once(&mut call.name, name, &what("name"))?;
                if let Some(arguments) = json::optional_str(function, "arguments", path)? {
                    call.arguments.push_str(arguments);
                }
            }
        }
        Ok(())
    }
}

impl StreamAssembler for ChatStream<'_> {
    fn push(&mut self, event: &SseEvent) -> Result<(), DecodeError> {
        if self.done {
            return Err(invalid("an event arrived after `[DONE]`"));
        }
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = json::parse(&event.data, "a stream chunk")?;
        if let Some(error) = json::provider_error(&chunk) {
            return Err(error);
        }
        let map = json::object(&chunk, "chunk")?;
        sse::set_once(
            &mut self.id,
            json::optional_str(map, "id", "chunk")?,
            "the response id",
        )?;
        // With `include_usage`, the last chunk before `[DONE]` has no
        // choices and the usage of the whole reply.
        if let Some(usage) = map.get("usage").filter(|usage| !usage.is_null()) {
            self.usage = Some(usage.clone());
        }
        for choice in json::optional_array(map, "choices", "chunk")? {
            self.choice(choice)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<AgentModelResponse, DecodeError> {
        if !self.done {
            return Err(DecodeError::StreamIncomplete(
                "the stream ended without `data: [DONE]`".into(),
            ));
        }
        let Some(finish_reason) = self.finish_reason else {
            return Err(DecodeError::StreamIncomplete(
                "the stream ended without a finish_reason".into(),
            ));
        };
        let tool_calls: Vec<Value> = self
            .calls
            .into_values()
            .map(|call| {
                let mut function = Object::new();
                encode::insert_some(&mut function, "name", call.name);
                function.insert("arguments".into(), call.arguments.into());
                let mut wire = Object::new();
                encode::insert_some(&mut wire, "id", call.id);
                encode::insert_some(&mut wire, "type", call.kind);
                wire.insert("function".into(), Value::Object(function));
                Value::Object(wire)
            })
            .collect();
        let body = json!({
            "id": self.id,
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": self.content,
                    "refusal": self.refusal,
                    "tool_calls": tool_calls,
                },
                "finish_reason": finish_reason,
            }],
            "usage": self.usage,
        });
        decode_response(self.turn, &body)
    }
}
