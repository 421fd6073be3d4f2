//! `{tool:NAME}` in a builtin's model-facing text names another builtin by
//! its native name; it is written out as the alias that builtin has in the
//! snapshot the text is shown under, so no text hard-codes an alias. A
//! builtin the snapshot does not offer is written as the alias it would
//! have (builtins always get their native name with `.` → `_`). Anything
//! else between the braces (not a builtin's name, an unclosed brace) stays
//! as it is. Only builtins' own text and a profile's `toolDescriptions` are
//! rendered: an MCP server's or an extension's description is third-party
//! text and is never rewritten.

use serde_json::Value;

use crate::alias::builtin_alias;
use crate::builtin;

const OPEN: &str = "{tool:";

/// `text` with every `{tool:NAME}` of a builtin replaced by `alias(NAME)`,
/// or by the builtin's own alias when `alias` gives none. Linear in `text`.
pub fn render(text: &str, alias: &dyn Fn(&str) -> Option<String>) -> String {
    if !text.contains(OPEN) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        if builtin::is_builtin(name) {
            out.push_str(&alias(name).unwrap_or_else(|| builtin_alias(name)));
        } else {
            out.push_str(&rest[start..start + OPEN.len() + end + 1]);
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// [`render`] applied to every `description` string of a JSON schema.
pub fn render_schema(schema: &mut Value, alias: &dyn Fn(&str) -> Option<String>) {
    // Schemas are capped at load (64 KiB), so the recursion is bounded by
    // their nesting, which serde_json already caps at 128.
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => *text = render(text, alias),
                    _ => render_schema(value, alias),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                render_schema(item, alias);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamed(name: &str) -> Option<String> {
        (name == "agent.delegate").then(|| "delegate_v2".to_owned())
    }

    #[test]
    fn references_become_aliases_and_the_rest_stays() {
        assert_eq!(
            render(
                "Call {tool:agent.delegate}, then {tool:agent.await}; {tool:nope.tool} and {tool:x",
                &renamed
            ),
            "Call delegate_v2, then agent_await; {tool:nope.tool} and {tool:x"
        );
        assert_eq!(render("no refs {here}", &renamed), "no refs {here}");
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "From {tool:skill.list}."},
                           "description": {"type": "string"}}
        });
        render_schema(&mut schema, &|_| None);
        assert_eq!(
            schema["properties"]["name"]["description"],
            "From skill_list."
        );
        // A property *named* description is not text.
        assert_eq!(schema["properties"]["description"]["type"], "string");
    }
}
