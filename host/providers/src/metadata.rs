//! Provider metadata: what a provider needs back on the next request
//! (Gemini thought signatures, OpenAI Responses item ids and reasoning items,
//! Anthropic thinking blocks), kept opaque to the runtime in
//! `ToolCall.provider_metadata` and `AgentModelMessage.provider_metadata`.
//!
//! Every adapter stores it as one object tagged with the provider that
//! produced it: `{"provider": "gemini", "thoughtSignature": "…"}`. The tag is
//! what lets an encoder tell "nothing to carry" (`null`) from "carried by
//! another provider" (a history produced by Gemini sent to Anthropic): the
//! latter would silently lose state the conversation depends on, so it fails
//! fast as `provider.lost_metadata`.

use serde_json::{Map, Value};

use crate::error::EncodeError;
use crate::json::Object;

const TAG: &str = "provider";

/// Tag `fields` with `provider`.
pub(crate) fn tagged(provider: &'static str, fields: Object) -> Value {
    let mut map = Map::with_capacity(fields.len() + 1);
    map.insert(TAG.into(), Value::String(provider.into()));
    map.extend(fields);
    Value::Object(map)
}

/// `provider`'s own fields in `metadata`: `None` when there is none (`null`),
/// an error when it belongs to another provider or is not ours to read.
pub(crate) fn own<'a>(
    provider: &'static str,
    metadata: &'a Value,
    holder: impl FnOnce() -> String,
) -> Result<Option<&'a Object>, EncodeError> {
    let lost = |reason: String| EncodeError::LostProviderMetadata {
        provider,
        holder: holder(),
        reason,
    };
    match metadata {
        Value::Null => Ok(None),
        Value::Object(map) => match map.get(TAG).and_then(Value::as_str) {
            Some(tag) if tag == provider => Ok(Some(map)),
            Some(other) => Err(lost(format!(
                "it carries metadata produced by `{other}`, which {provider} cannot use"
            ))),
            None => Err(lost("its metadata names no provider".into())),
        },
        _ => Err(lost("its metadata is not a JSON object".into())),
    }
}
