//! Gemini `generateContent` (`POST /v1beta/models/{model}:generateContent`,
//! streamed as `:streamGenerateContent?alt=sse`). The model name is in the
//! URL, not the body.
//!
//! Tools are one `{"functionDeclarations": [...]}` entry; each declaration
//! carries the input schema either as `parametersJsonSchema` (the default:
//! JSON Schema as is) or as the OpenAPI-subset `parameters`, down-converted
//! and checked by `schema` ([`GeminiSchemaMode`]). Calls are `functionCall`
//! parts with `args` as an object and an `id`; results go back in a user
//! turn as `functionResponse` parts `{id, name, response: {output | error}}`.
//!
//! What must round trip: the `thoughtSignature` a `functionCall` part
//! carried (Gemini 3 refuses a history without it), kept in the call's
//! metadata; and signatures on text parts, kept in the message's metadata as
//! `textSignatures` (by part index). A history call without Gemini metadata
//! was not produced by Gemini and cannot carry its signature: it is refused
//! (`provider.lost_metadata`).

use serde::{Deserialize, Serialize};
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
use crate::schema::{self, GEMINI_NAMES};
use crate::sse::{self, SseEvent, StreamAssembler};

pub const PROVIDER: &str = "gemini";

/// How tool input schemas are declared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GeminiSchemaMode {
    /// `parametersJsonSchema`: the schema as is, nothing lost.
    #[default]
    JsonSchema,
    /// `parameters`: the OpenAPI 3.0 subset, for endpoints or models that
    /// lack `parametersJsonSchema`. Annotations are dropped; a constraint
    /// the subset cannot state fails `provider.schema_unsupported`.
    OpenApi,
}

/// The `tools` array: one entry holding every declaration, or none.
pub fn encode_tools(
    tools: &[AgentModelTool],
    mode: GeminiSchemaMode,
) -> Result<Vec<Value>, EncodeError> {
    let declarations = tools
        .iter()
        .map(|tool| {
            schema::check_name(PROVIDER, tool, &GEMINI_NAMES)?;
            let mut declaration = Object::new();
            declaration.insert("name".into(), tool.model_alias.clone().into());
            encode::insert_description(&mut declaration, tool);
            match mode {
                GeminiSchemaMode::JsonSchema => {
                    declaration.insert("parametersJsonSchema".into(), tool.input_schema.clone());
                }
                GeminiSchemaMode::OpenApi => {
                    encode::insert_some(
                        &mut declaration,
                        "parameters",
                        schema::gemini_parameters(PROVIDER, tool)?,
                    );
                }
            }
            Ok(Value::Object(declaration))
        })
        .collect::<Result<Vec<_>, EncodeError>>()?;
    if declarations.is_empty() {
        return Ok(Vec::new());
    }
    Ok(vec![json!({"functionDeclarations": declarations})])
}

/// The request body (the same for both endpoints).
pub fn encode_request(
    request: &AgentModelRequest,
    mode: GeminiSchemaMode,
) -> Result<Value, EncodeError> {
    let turns = encode::prepare(PROVIDER, request)?;
    // Not in the body, but the URL cannot be built without it.
    encode::model(PROVIDER, request)?;
    // `contents` has only `user` and `model` turns: the leading System
    // turns join `systemInstruction`, and a later one is user text merged
    // with its neighbours (as SillyTavern's Gemini converter does).
    let head = encode::system_head(request, &turns);
    let mut contents = Vec::new();
    for (index, turn) in turns.iter().enumerate().skip(head.turns) {
        match turn.role {
            AgentModelRole::System | AgentModelRole::User => {
                let parts = turn
                    .items
                    .iter()
                    .filter_map(|item| match item {
                        Item::Text { text, .. } if !text.is_empty() => Some(json!({"text": text})),
                        _ => None,
                    })
                    .collect();
                encode::push_merged(&mut contents, "user", parts);
            }
            AgentModelRole::Assistant => {
                encode::push_merged(&mut contents, "model", model_parts(index, turn)?);
            }
            AgentModelRole::Tool => {
                let parts = turn
                    .items
                    .iter()
                    .filter_map(|item| match item {
                        Item::Result { result, alias } => {
                            let key = if result.is_error { "error" } else { "output" };
                            Some(json!({"functionResponse": {
                                "id": result.call_id,
                                "name": alias,
                                "response": {key: result.model_text()},
                            }}))
                        }
                        _ => None,
                    })
                    .collect();
                encode::push_merged(&mut contents, "user", parts);
            }
        }
    }
    let mut body = Object::new();
    body.insert(
        "contents".into(),
        contents
            .into_iter()
            .map(|(role, parts)| json!({"role": role, "parts": parts}))
            .collect(),
    );
    if !head.texts.is_empty() {
        let parts: Vec<Value> = head
            .texts
            .iter()
            .map(|text| json!({"text": text}))
            .collect();
        body.insert("systemInstruction".into(), json!({"parts": parts}));
    }
    let config = match encode::choice(&request.turn)? {
        Choice::NoTools => None,
        Choice::None => Some(json!({"mode": "NONE"})),
        Choice::Auto => Some(json!({"mode": "AUTO"})),
        Choice::Required => Some(json!({"mode": "ANY"})),
        Choice::Specific(alias) => Some(json!({"mode": "ANY", "allowedFunctionNames": [alias]})),
    };
    if let Some(config) = config {
        body.insert(
            "tools".into(),
            Value::Array(encode_tools(request.turn.tools(), mode)?),
        );
        body.insert(
            "toolConfig".into(),
            json!({"functionCallingConfig": config}),
        );
    }
    let mut generation = Object::new();
    encode::insert_some(&mut generation, "temperature", request.settings.temperature);
    encode::insert_some(
        &mut generation,
        "maxOutputTokens",
        request.settings.max_output_tokens,
    );
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    Ok(Value::Object(body))
}

/// A model turn's parts, each with the signature it was received with.
fn model_parts(index: usize, turn: &Turn<'_>) -> Result<Vec<Value>, EncodeError> {
    let text_signatures = encode::metadata_list(PROVIDER, index, turn, "textSignatures")?;
    let text_signature = |part: usize| {
        text_signatures
            .iter()
            .find(|entry| entry.get("part").and_then(Value::as_u64) == Some(part as u64))
            .and_then(|entry| entry.get("thoughtSignature"))
    };
    let mut parts = Vec::new();
    for item in &turn.items {
        match item {
            Item::Text { text, part } => {
                let signature = text_signature(*part);
                // An empty text part may exist only to carry a signature.
                if text.is_empty() && signature.is_none() {
                    continue;
                }
                let mut wire = json!({"text": text});
                if let Some(signature) = signature {
                    wire["thoughtSignature"] = signature.clone();
                }
                parts.push(wire);
            }
            Item::Call {
                call,
                alias,
                metadata,
            } => {
                let Some(fields) = metadata else {
                    return Err(EncodeError::LostProviderMetadata {
                        provider: PROVIDER,
                        holder: format!("tool call `{}`", call.call_id),
                        reason: "it carries no Gemini metadata, so the thoughtSignature Gemini may require cannot be sent back".into(),
                    });
                };
                let mut wire = json!({"functionCall": {
                    "id": call.call_id,
                    "name": alias,
                    "args": encode::arguments_object(PROVIDER, call)?,
                }});
                if let Some(signature) = fields.get("thoughtSignature") {
                    wire["thoughtSignature"] = signature.clone();
                }
                parts.push(wire);
            }
            Item::Result { .. } => {}
        }
    }
    Ok(parts)
}

/// A `GenerateContentResponse`.
pub fn decode_response(turn: &ModelTurn, body: &Value) -> Result<AgentModelResponse, DecodeError> {
    if let Some(error) = json::provider_error(body) {
        return Err(error);
    }
    let root = json::object(body, "response")?;
    let id = json::optional_str(root, "responseId", "response")?;
    let usage = json::usage(
        root.get("usageMetadata"),
        &["promptTokenCount"],
        // Thinking is output the model produced (and is billed as such).
        &["candidatesTokenCount", "thoughtsTokenCount"],
        "usageMetadata",
    )?;
    let mut reply = Reply::new(turn, Arguments::OptionalObject);
    let candidate = match json::optional_array(root, "candidates", "response")? {
        [candidate] => json::object(candidate, "candidates[0]")?,
        // A blocked prompt gets no candidate at all.
        [] if root
            .get("promptFeedback")
            .and_then(|feedback| feedback.get("blockReason"))
            .is_some() =>
        {
            return Ok(reply.finish(Value::Null, FinishReason::ContentFilter, usage, id));
        }
        other => {
            return Err(invalid(format!(
                "expected exactly one candidate, got {}",
                other.len()
            )));
        }
    };
    let parts = match candidate.get("content") {
        // A candidate stopped by a filter may have no content.
        None | Some(Value::Null) => &[][..],
        Some(content) => json::optional_array(
            json::object(content, "candidates[0].content")?,
            "parts",
            "candidates[0].content",
        )?,
    };
    let mut text_signatures = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let path = format!("candidates[0].content.parts[{index}]");
        let map = json::object(part, &path)?;
        let signature = json::optional_str(map, "thoughtSignature", &path)?;
        if let Some(call) = map.get("functionCall") {
            let call = json::object(call, &format!("{path}.functionCall"))?;
            let mut fields = Map::new();
            if let Some(signature) = signature {
                fields.insert("thoughtSignature".into(), signature.into());
            }
            reply.call(ProviderToolCall {
                call_id: json::optional_str(call, "id", &path)?.map(str::to_owned),
                name: json::optional_str(call, "name", &path)?.map(str::to_owned),
                arguments: call.get("args").cloned(),
                provider_metadata: metadata::tagged(PROVIDER, fields),
            })?;
        } else if let Some(text) = json::optional_str(map, "text", &path)? {
            // Thought summaries are the model's notes, not its reply.
            if map.get("thought").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(signature) = signature {
                text_signatures
                    .push(json!({"part": reply.part_count(), "thoughtSignature": signature}));
            }
            reply.text(text);
        } else {
            return Err(invalid(format!(
                "`{path}` is neither text nor a function call"
            )));
        }
    }
    let finish_reason = match json::required_str(candidate, "finishReason", "candidates[0]")? {
        // Gemini says STOP for a turn that calls functions too.
        "STOP" if reply.has_calls() => FinishReason::ToolCalls,
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_owned()),
    };
    let message_metadata = if text_signatures.is_empty() {
        Value::Null
    } else {
        let mut fields = Map::new();
        fields.insert("textSignatures".into(), Value::Array(text_signatures));
        metadata::tagged(PROVIDER, fields)
    };
    Ok(reply.finish(message_metadata, finish_reason, usage, id))
}

/// Assembles `streamGenerateContent` chunks (each a partial
/// `GenerateContentResponse`) into one response: text parts are
/// concatenated, function calls arrive whole. There is no terminal event:
/// the stream is complete once a chunk carried a `finishReason`.
pub struct GeminiStream<'t> {
    turn: &'t ModelTurn,
    response_id: Option<String>,
    parts: Vec<Value>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    prompt_feedback: Option<Value>,
}

impl<'t> GeminiStream<'t> {
    pub fn new(turn: &'t ModelTurn) -> Self {
        Self {
            turn,
            response_id: None,
            parts: Vec::new(),
            finish_reason: None,
            usage: None,
            prompt_feedback: None,
        }
    }

    fn part(&mut self, part: &Value) -> Result<(), DecodeError> {
        let path = "chunk.candidates[0].content.parts[]";
        let map = json::object(part, path)?;
        if let Some(call) = map.get("functionCall") {
            let call = json::object(call, path)?;
            // Its name is decoded with the rest of the call: an unknown
            // one is kept for the run loop to answer.
            json::optional_str(call, "name", path)?;
        }
        let is_plain_text = |map: &Object| map.contains_key("text") && !map.contains_key("thought");
        if is_plain_text(map) {
            let text = json::required_str(map, "text", path)?;
            let signature = map.get("thoughtSignature");
            if let Some(Value::Object(last)) = self.parts.last_mut() {
                // Continue the text part being streamed, unless that one is
                // already closed by a signature.
                if is_plain_text(last) && !last.contains_key("thoughtSignature") {
                    if let Some(Value::String(existing)) = last.get_mut("text") {
                        existing.push_str(text);
                    }
                    if let Some(signature) = signature {
                        last.insert("thoughtSignature".into(), signature.clone());
                    }
                    return Ok(());
                }
            }
        }
        self.parts.push(part.clone());
        Ok(())
    }
}

impl StreamAssembler for GeminiStream<'_> {
    fn push(&mut self, event: &SseEvent) -> Result<(), DecodeError> {
        let chunk = json::parse(&event.data, "a stream chunk")?;
        if let Some(error) = json::provider_error(&chunk) {
            return Err(error);
        }
        let map = json::object(&chunk, "chunk")?;
        sse::set_once(
            &mut self.response_id,
            json::optional_str(map, "responseId", "chunk")?,
            "the response id",
        )?;
        if let Some(usage) = map.get("usageMetadata").filter(|usage| !usage.is_null()) {
            self.usage = Some(usage.clone());
        }
        if let Some(feedback) = map.get("promptFeedback").filter(|f| !f.is_null()) {
            self.prompt_feedback = Some(feedback.clone());
        }
        let candidate = match json::optional_array(map, "candidates", "chunk")? {
            [] => return Ok(()),
            [candidate] => json::object(candidate, "chunk.candidates[0]")?,
            more => {
                return Err(invalid(format!(
                    "one candidate was asked for, a chunk sent {}",
                    more.len()
                )));
            }
        };
        if let Some(content) = candidate.get("content").filter(|c| !c.is_null()) {
            let content = json::object(content, "chunk.candidates[0].content")?;
            for part in json::optional_array(content, "parts", "chunk.candidates[0].content")? {
                self.part(part)?;
            }
        }
        if let Some(reason) = json::optional_str(candidate, "finishReason", "chunk.candidates[0]")?
        {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<AgentModelResponse, DecodeError> {
        let blocked = self
            .prompt_feedback
            .as_ref()
            .is_some_and(|feedback| feedback.get("blockReason").is_some());
        let candidates = match self.finish_reason {
            Some(reason) => json!([{
                "content": {"role": "model", "parts": self.parts},
                "finishReason": reason,
            }]),
            None if blocked => json!([]),
            None => {
                return Err(DecodeError::StreamIncomplete(
                    "the stream ended without a finishReason".into(),
                ));
            }
        };
        let body = json!({
            "responseId": self.response_id,
            "candidates": candidates,
            "usageMetadata": self.usage,
            "promptFeedback": self.prompt_feedback,
        });
        decode_response(self.turn, &body)
    }
}
