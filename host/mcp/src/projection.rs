//! A `CallToolResult` as the model reads it: text content as is;
//! structured content under `## Details`, unless a text block already is
//! that content (the official SDKs send it both ways; the seed keeps one
//! copy); anything that is not text (images, audio, resources, links) named
//! under `## Notes` rather than pasted.

use serde_json::Value;

/// Longest text block (bytes) parsed to compare with the structured content:
/// a hostile server's huge text is not parsed a second time. A longer block
/// keeps its `## Details` — two copies, never a lost one.
pub const MAX_COMPARED_TEXT_BYTES: usize = 4 * 1024 * 1024;

/// A text that serializes the structured content differently from our pretty
/// form is at most about three times as long (wider indentation, `\uXXXX`
/// escapes of non-ASCII characters); a text longer than this many times the
/// pretty form, plus [`COMPARED_SLACK_BYTES`], cannot be the same and is not
/// parsed.
const COMPARED_RATIO: usize = 4;
const COMPARED_SLACK_BYTES: usize = 256;

#[derive(Debug, Clone, PartialEq)]
pub struct Projected {
    pub content: String,
    /// The whole result, for audit and UIs.
    pub structured: Value,
    /// The server marked the result an error (`isError`).
    pub is_error: bool,
}

pub fn project(result: &Value) -> Projected {
    let mut text = Vec::new();
    let mut notes = Vec::new();
    for block in result["content"].as_array().into_iter().flatten() {
        match block["type"].as_str().unwrap_or("") {
            "text" => text.push(block["text"].as_str().unwrap_or("").to_owned()),
            // What it is, not its size: the model does not act on a
            // byte count (seed §4); the audit keeps the data.
            "image" | "audio" => notes.push(format!(
                "{} ({}, not shown)",
                block["type"].as_str().unwrap_or(""),
                block["mimeType"].as_str().unwrap_or("unknown type")
            )),
            "resource_link" => notes.push(format!(
                "resource link {} ({})",
                block["uri"].as_str().unwrap_or(""),
                block["name"].as_str().unwrap_or("")
            )),
            "resource" => notes.push(format!(
                "embedded resource {}",
                block["resource"]["uri"].as_str().unwrap_or("")
            )),
            other => notes.push(format!("a `{other}` block (not shown)")),
        }
    }
    let mut content = text.join("\n");
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let pretty = serde_json::to_string_pretty(structured).unwrap_or_default();
        let budget = pretty
            .len()
            .saturating_mul(COMPARED_RATIO)
            .saturating_add(COMPARED_SLACK_BYTES)
            .min(MAX_COMPARED_TEXT_BYTES);
        if !text.iter().any(|text| repeats(text, structured, budget)) {
            content.push_str(&format!("\n\n## Details\n```json\n{pretty}\n```"));
        }
    }
    if !notes.is_empty() {
        content.push_str("\n\n## Notes\n");
        for note in notes {
            content.push_str(&format!("- {note}\n"));
        }
    }
    Projected {
        content: content.trim().to_owned(),
        structured: result.clone(),
        is_error: result["isError"].as_bool().unwrap_or(false),
    }
}

/// Whether `text` already is `structured`, compared as JSON values (the
/// whitespace and key order of a server's serializer do not matter), or the
/// value of a `{"result": …}` wrapper: the SDKs wrap a tool's plain string
/// (or number, or list) that way, and send the bare value as text. Texts
/// longer than `budget` bytes are not parsed.
fn repeats(text: &str, structured: &Value, budget: usize) -> bool {
    let wrapped = match structured {
        Value::Object(map) if map.len() == 1 => map.get("result"),
        _ => None,
    };
    if wrapped.and_then(Value::as_str) == Some(text) {
        return true;
    }
    if text.len() > budget {
        return false;
    }
    // Only a wrapped scalar can be anything but an object or array.
    let opens = text.trim_start().starts_with(['{', '[']);
    if !opens && wrapped.is_none() {
        return false;
    }
    let Ok(parsed) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    &parsed == structured || wrapped == Some(&parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_details_and_notes() {
        let projected = project(&json!({
            "content": [
                {"type": "text", "text": "Sum: 3"},
                {"type": "image", "mimeType": "image/png", "data": "AAAA"},
                {"type": "resource_link", "uri": "test://static/1", "name": "one"}
            ],
            "structuredContent": {"sum": 3}
        }));
        assert!(
            projected
                .content
                .starts_with("Sum: 3\n\n## Details\n```json\n{\n  \"sum\": 3\n}\n```")
        );
        assert!(
            projected
                .content
                .contains("- image (image/png, not shown)\n")
        );
        assert!(
            projected
                .content
                .contains("- resource link test://static/1 (one)")
        );
        assert!(!projected.is_error);
        assert!(project(&json!({"content": [], "isError": true})).is_error);
    }

    fn details(result: Value) -> bool {
        project(&result).content.contains("## Details")
    }

    #[test]
    fn a_text_that_already_is_the_structured_content_is_read_once() {
        // The TypeScript SDK's way: JSON.stringify, compact, another key order.
        let projected = project(&json!({
            "content": [{"type": "text", "text": "{\"temperature\":33,\"conditions\":\"Cloudy\"}"}],
            "structuredContent": {"conditions": "Cloudy", "temperature": 33}
        }));
        assert_eq!(
            projected.content,
            "{\"temperature\":33,\"conditions\":\"Cloudy\"}"
        );
        // Python's json.dumps(indent=2), ASCII escapes, after a sentence.
        assert!(!details(json!({
            "content": [
                {"type": "text", "text": "The forecast:"},
                {"type": "text", "text": "{\n    \"city\": \"K\\u00f6ln\",\n    \"days\": [1, 2]\n}"}
            ],
            "structuredContent": {"days": [1, 2], "city": "Köln"}
        })));
        // FastMCP's wrapper of a plain string, and of a number.
        assert_eq!(
            project(&json!({
                "content": [{"type": "text", "text": "a plain answer"}],
                "structuredContent": {"result": "a plain answer"}
            }))
            .content,
            "a plain answer"
        );
        assert!(!details(json!({
            "content": [{"type": "text", "text": "42"}],
            "structuredContent": {"result": 42}
        })));
    }

    #[test]
    fn a_text_that_differs_keeps_the_details() {
        // Another value, a prose text, a JSON text that is not the same.
        assert!(details(json!({
            "content": [{"type": "text", "text": "{\"sum\": 4}"}],
            "structuredContent": {"sum": 3}
        })));
        assert!(details(json!({
            "content": [{"type": "text", "text": "not JSON {"}],
            "structuredContent": {"result": "something else"}
        })));
        assert!(details(json!({
            "content": [{"type": "text", "text": "{\"result\": \"x\", \"more\": 1}"}],
            "structuredContent": {"result": "x"}
        })));
        // No text at all: the details are all the model gets.
        assert!(details(
            json!({"content": [], "structuredContent": {"sum": 3}})
        ));
    }

    #[test]
    fn a_text_far_longer_than_the_structured_content_is_not_parsed() {
        // The same value padded with whitespace past the bound: not parsed,
        // so kept twice rather than spending work on it.
        let padded = format!("{{\"sum\": 3{}}}", " ".repeat(4096));
        assert_eq!(
            serde_json::from_str::<Value>(&padded).expect("valid JSON"),
            json!({"sum": 3})
        );
        assert!(details(json!({
            "content": [{"type": "text", "text": padded}],
            "structuredContent": {"sum": 3}
        })));
        assert!(repeats("{\"sum\": 3}", &json!({"sum": 3}), 10));
        assert!(!repeats("{\"sum\": 3}", &json!({"sum": 3}), 9));
    }
}
