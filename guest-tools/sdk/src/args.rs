//! Argument parsing shared by every tool, so all tools answer a malformed call
//! the same way: one code (`tool.invalid_arguments`) and a sentence naming the
//! argument.
//!
//! Conventions: the arguments are a JSON object; an unknown key is rejected;
//! `null` counts as absent for optional keys; integers are non-negative JSON
//! integers; required strings are trimmed and must not be empty, except
//! "raw" strings (file content, patch text) which are taken verbatim.

use serde_json::{Map, Value};

use crate::ToolError;

/// The model's arguments for one call: a JSON object.
#[derive(Debug, Clone, Default)]
pub struct Arguments {
    map: Map<String, Value>,
}

impl Arguments {
    /// Parse the argument text the host passes to `call`.
    pub fn parse(text: &str) -> Result<Self, ToolError> {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => Self::from_value(value),
            Err(_) => Err(ToolError::invalid_arguments(
                "arguments must be an object (the text is not valid JSON)",
            )),
        }
    }

    pub fn from_value(value: Value) -> Result<Self, ToolError> {
        match value {
            Value::Object(map) => Ok(Self { map }),
            other => Err(ToolError::invalid_arguments(format!(
                "arguments must be an object, not {}",
                json_kind(&other)
            ))),
        }
    }

    /// Reject any key not in `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), ToolError> {
        match self.map.keys().find(|key| !allowed.contains(&key.as_str())) {
            None => Ok(()),
            Some(key) if allowed.is_empty() => Err(ToolError::invalid_arguments(format!(
                "{key} is not supported; this tool takes no arguments"
            ))),
            Some(key) => Err(ToolError::invalid_arguments(format!(
                "{key} is not supported; supported arguments: {}",
                allowed.join(", ")
            ))),
        }
    }

    /// The value under `key`, with `null` treated as absent.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key).filter(|value| !value.is_null())
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// A required string, trimmed, not empty.
    pub fn required_str(&self, key: &str) -> Result<&str, ToolError> {
        self.optional_str(key)?
            .ok_or_else(|| ToolError::invalid_arguments(format!("{key} is required")))
    }

    /// An optional string, trimmed; present but blank is an error.
    pub fn optional_str(&self, key: &str) -> Result<Option<&str>, ToolError> {
        let Some(text) = self.optional_raw_str(key)? else {
            return Ok(None);
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(ToolError::invalid_arguments(format!(
                "{key} must not be empty"
            )));
        }
        Ok(Some(trimmed))
    }

    /// A required string taken verbatim (may be empty or start with spaces).
    pub fn raw_str(&self, key: &str) -> Result<&str, ToolError> {
        self.optional_raw_str(key)?
            .ok_or_else(|| ToolError::invalid_arguments(format!("{key} is required")))
    }

    pub fn optional_raw_str(&self, key: &str) -> Result<Option<&str>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(ToolError::invalid_arguments(format!(
                "{key} must be a string, not {}",
                json_kind(other)
            ))),
        }
    }

    /// An optional directory path where absent, `null`, blank, `.` and `./`
    /// all mean "the workspace root" (returned as `""`), trimmed otherwise.
    pub fn optional_dir_path(&self, key: &str) -> Result<&str, ToolError> {
        let path = self.optional_raw_str(key)?.map_or("", str::trim);
        Ok(if path == "." || path == "./" {
            ""
        } else {
            path
        })
    }

    /// An optional non-negative JSON integer.
    pub fn optional_u64(&self, key: &str) -> Result<Option<u64>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => value.as_u64().map(Some).ok_or_else(|| {
                ToolError::invalid_arguments(format!("{key} must be a non-negative integer"))
            }),
        }
    }

    /// An optional string that must be one of `allowed` (trimmed).
    pub fn optional_choice(
        &self,
        key: &str,
        allowed: &[&'static str],
    ) -> Result<Option<&'static str>, ToolError> {
        let Some(text) = self.optional_str(key)? else {
            return Ok(None);
        };
        allowed
            .iter()
            .find(|choice| **choice == text)
            .copied()
            .map(Some)
            .ok_or_else(|| {
                ToolError::invalid_arguments(format!(
                    "{key} must be one of {}, not \"{text}\"",
                    allowed.join(", ")
                ))
            })
    }

    /// An optional array of non-blank strings (each trimmed).
    pub fn optional_str_list(&self, key: &str) -> Result<Option<Vec<&str>>, ToolError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Value::Array(items) = value else {
            return Err(ToolError::invalid_arguments(format!(
                "{key} must be an array of strings, not {}",
                json_kind(value)
            )));
        };
        let mut list = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match item {
                Value::String(text) if !text.trim().is_empty() => list.push(text.trim()),
                Value::String(_) => {
                    return Err(ToolError::invalid_arguments(format!(
                        "{key}[{index}] must not be empty"
                    )));
                }
                other => {
                    return Err(ToolError::invalid_arguments(format!(
                        "{key}[{index}] must be a string, not {}",
                        json_kind(other)
                    )));
                }
            }
        }
        Ok(Some(list))
    }

    /// A nested object argument, as its own [`Arguments`].
    pub fn required_object(&self, key: &str) -> Result<Arguments, ToolError> {
        match self.get(key) {
            None => Err(ToolError::invalid_arguments(format!("{key} is required"))),
            Some(Value::Object(map)) => Ok(Arguments { map: map.clone() }),
            Some(other) => Err(ToolError::invalid_arguments(format!(
                "{key} must be an object, not {}",
                json_kind(other)
            ))),
        }
    }

    /// The arguments as a JSON object (for an effect that carries them).
    pub fn to_value(&self) -> Value {
        Value::Object(self.map.clone())
    }

    /// Every string value directly in this object is at most `max_bytes`
    /// long (UTF-8 bytes, as the reference counts).
    pub fn strings_at_most(&self, max_bytes: usize, context: &str) -> Result<(), ToolError> {
        for (key, value) in &self.map {
            if let Value::String(text) = value
                && text.len() > max_bytes
            {
                return Err(ToolError::invalid_arguments(format!(
                    "{context}{key} is {} bytes; at most {max_bytes} are allowed",
                    text.len()
                )));
            }
        }
        Ok(())
    }

    pub fn optional_bool(&self, key: &str) -> Result<Option<bool>, ToolError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(other) => Err(ToolError::invalid_arguments(format!(
                "{key} must be true or false, not {}",
                json_kind(other)
            ))),
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Arguments {
        Arguments::parse(text).expect("valid arguments")
    }

    fn message(result: Result<impl std::fmt::Debug, ToolError>) -> String {
        let error = result.expect_err("an error");
        assert_eq!(error.code, "tool.invalid_arguments");
        error.message
    }

    #[test]
    fn arguments_must_be_an_object() {
        assert!(message(Arguments::parse("[1]")).contains("must be an object, not an array"));
        assert!(message(Arguments::parse("\"{}\"")).contains("not a string"));
        assert!(message(Arguments::parse("{not json")).contains("not valid JSON"));
        assert!(Arguments::parse("{}").expect("object").is_empty());
    }

    #[test]
    fn unknown_keys_are_rejected_by_name() {
        let parsed = args(r#"{"formula":"d6","seed":1}"#);
        let text = message(parsed.only(&["formula"]));
        assert!(text.starts_with("seed is not supported"), "{text}");
        assert!(text.contains("supported arguments: formula"), "{text}");
        assert!(message(args(r#"{"x":1}"#).only(&[])).contains("takes no arguments"));
        assert!(args(r#"{"formula":"d6"}"#).only(&["formula"]).is_ok());
    }

    #[test]
    fn required_strings_are_trimmed_and_not_blank() {
        assert_eq!(args(r#"{"q":"  hi "}"#).required_str("q").ok(), Some("hi"));
        assert_eq!(message(args("{}").required_str("q")), "q is required");
        assert_eq!(
            message(args(r#"{"q":null}"#).required_str("q")),
            "q is required"
        );
        assert_eq!(
            message(args(r#"{"q":"  "}"#).required_str("q")),
            "q must not be empty"
        );
        assert!(message(args(r#"{"q":3}"#).required_str("q")).contains("not a number"));
    }

    #[test]
    fn choices_lists_and_nested_objects() {
        let parsed = args(r#"{"m":" b ","l":[" x ","y"],"o":{"k":"v"}}"#);
        assert_eq!(
            parsed.optional_choice("m", &["a", "b"]).ok(),
            Some(Some("b"))
        );
        assert!(message(parsed.optional_choice("m", &["a"])).contains("must be one of a"));
        assert_eq!(parsed.optional_choice("none", &["a"]).ok(), Some(None));
        assert_eq!(
            parsed.optional_str_list("l").ok(),
            Some(Some(vec!["x", "y"]))
        );
        assert!(message(args(r#"{"l":["x",""]}"#).optional_str_list("l")).contains("l[1]"));
        assert!(message(args(r#"{"l":"x"}"#).optional_str_list("l")).contains("array"));
        let nested = parsed.required_object("o").expect("object");
        assert_eq!(nested.required_str("k").ok(), Some("v"));
        assert!(message(parsed.required_object("m")).contains("must be an object"));
        assert_eq!(message(parsed.required_object("q")), "q is required");
        let long = args(&format!(r#"{{"s":"{}"}}"#, "é".repeat(5)));
        assert!(long.strings_at_most(10, "").is_ok());
        assert!(message(long.strings_at_most(9, "task.")).starts_with("task.s is 10 bytes"));
    }

    #[test]
    fn raw_strings_are_verbatim() {
        assert_eq!(args(r#"{"c":"  x\n"}"#).raw_str("c").ok(), Some("  x\n"));
        assert_eq!(args(r#"{"c":""}"#).raw_str("c").ok(), Some(""));
        assert_eq!(message(args("{}").raw_str("c")), "c is required");
    }

    #[test]
    fn directory_paths_default_to_the_root() {
        for root in [
            "{}",
            r#"{"p":null}"#,
            r#"{"p":""}"#,
            r#"{"p":" . "}"#,
            r#"{"p":"./"}"#,
        ] {
            assert_eq!(args(root).optional_dir_path("p").ok(), Some(""), "{root}");
        }
        assert_eq!(
            args(r#"{"p":" output/ "}"#).optional_dir_path("p").ok(),
            Some("output/")
        );
        assert!(message(args(r#"{"p":1}"#).optional_dir_path("p")).contains("must be a string"));
    }

    #[test]
    fn integers_are_non_negative_json_integers() {
        assert_eq!(args(r#"{"n":7}"#).optional_u64("n").ok(), Some(Some(7)));
        assert_eq!(args("{}").optional_u64("n").ok(), Some(None));
        for bad in [r#"{"n":-1}"#, r#"{"n":1.5}"#, r#"{"n":"7"}"#] {
            assert_eq!(
                message(args(bad).optional_u64("n")),
                "n must be a non-negative integer"
            );
        }
    }

    #[test]
    fn booleans_are_json_booleans() {
        assert_eq!(
            args(r#"{"b":true}"#).optional_bool("b").ok(),
            Some(Some(true))
        );
        assert!(message(args(r#"{"b":"true"}"#).optional_bool("b")).contains("not a string"));
    }
}
