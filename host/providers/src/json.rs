//! Reading provider JSON without trusting it: every accessor names the path
//! it read, so a malformed reply is a `model.invalid_response` that says
//! where, never a panic or a silent default.

use serde_json::{Map, Value};
use toolhost_core::TokenUsage;

use crate::error::{DecodeError, invalid};

pub(crate) type Object = Map<String, Value>;

/// `value` as an object.
pub(crate) fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Object, DecodeError> {
    value
        .as_object()
        .ok_or_else(|| invalid(format!("`{path}` is not a JSON object")))
}

/// A field that must be an object.
pub(crate) fn required_object<'a>(
    map: &'a Object,
    key: &str,
    path: &str,
) -> Result<&'a Object, DecodeError> {
    match map.get(key) {
        Some(value) => object(value, &format!("{path}.{key}")),
        None => Err(invalid(format!("`{path}.{key}` is missing"))),
    }
}

/// A field that must be an array.
pub(crate) fn required_array<'a>(
    map: &'a Object,
    key: &str,
    path: &str,
) -> Result<&'a [Value], DecodeError> {
    match map.get(key) {
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(invalid(format!("`{path}.{key}` is not an array"))),
        None => Err(invalid(format!("`{path}.{key}` is missing"))),
    }
}

/// An optional array: absent or `null` is empty.
pub(crate) fn optional_array<'a>(
    map: &'a Object,
    key: &str,
    path: &str,
) -> Result<&'a [Value], DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(invalid(format!("`{path}.{key}` is not an array"))),
    }
}

/// An optional string: absent or `null` is `None`.
pub(crate) fn optional_str<'a>(
    map: &'a Object,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, DecodeError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(invalid(format!("`{path}.{key}` is not a string"))),
    }
}

/// A field that must be a string.
pub(crate) fn required_str<'a>(
    map: &'a Object,
    key: &str,
    path: &str,
) -> Result<&'a str, DecodeError> {
    optional_str(map, key, path)?.ok_or_else(|| invalid(format!("`{path}.{key}` is missing")))
}

/// A field that must be a non-negative integer (stream indexes).
pub(crate) fn required_index(map: &Object, key: &str, path: &str) -> Result<u64, DecodeError> {
    map.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid(format!("`{path}.{key}` is not a non-negative integer")))
}

/// The provider's error object, when the body is one (`{"error": {...}}`).
pub(crate) fn provider_error(body: &Value) -> Option<DecodeError> {
    let error = body.get("error").filter(|error| !error.is_null())?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    Some(DecodeError::ProviderError(message))
}

/// Token counts: `inputs` and `outputs` are summed (a provider may split
/// input into cached and uncached, output into visible and thinking).
/// `None` when the provider sent no usage object.
pub(crate) fn usage(
    value: Option<&Value>,
    inputs: &[&str],
    outputs: &[&str],
    path: &str,
) -> Result<Option<TokenUsage>, DecodeError> {
    let Some(value) = value.filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    let map = object(value, path)?;
    let sum = |keys: &[&str]| -> Result<u64, DecodeError> {
        keys.iter()
            .try_fold(0u64, |total, key| match map.get(*key) {
                None | Some(Value::Null) => Ok(total),
                Some(count) => count
                    .as_u64()
                    .map(|count| total.saturating_add(count))
                    .ok_or_else(|| invalid(format!("`{path}.{key}` is not a token count"))),
            })
    };
    Ok(Some(TokenUsage {
        input_tokens: sum(inputs)?,
        output_tokens: sum(outputs)?,
    }))
}

/// What a JSON value is, for error messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parse a stream event's `data` (or any embedded JSON text).
pub(crate) fn parse(text: &str, what: &str) -> Result<Value, DecodeError> {
    serde_json::from_str(text).map_err(|error| invalid(format!("{what} is not JSON: {error}")))
}
