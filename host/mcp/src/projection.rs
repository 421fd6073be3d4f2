//! A `CallToolResult` as the model reads it: text content as is;
//! structured content under `## Details`; anything that is not text
//! (images, audio, resources, links) named under `## Notes` rather than
//! pasted.

use serde_json::Value;

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
            "image" | "audio" => {
                let size = block["data"].as_str().map_or(0, str::len);
                notes.push(format!(
                    "{} ({}, {size} bytes of base64, not shown)",
                    block["type"].as_str().unwrap_or(""),
                    block["mimeType"].as_str().unwrap_or("unknown type")
                ));
            }
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
        content.push_str(&format!("\n\n## Details\n```json\n{pretty}\n```"));
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
                .contains("- image (image/png, 4 bytes of base64, not shown)")
        );
        assert!(
            projected
                .content
                .contains("- resource link test://static/1 (one)")
        );
        assert!(!projected.is_error);
        assert!(project(&json!({"content": [], "isError": true})).is_error);
    }
}
