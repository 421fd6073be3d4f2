//! `{tool:NAME}` in a builtin's model-facing text names another builtin by
//! its native name; it is written out as the alias that builtin has in the
//! snapshot the text is shown under, so no text hard-codes an alias. A
//! builtin the snapshot does not offer is written as the alias it would
//! have (builtins always get their native name with `.` → `_`). Anything
//! else between the braces (not a builtin's name, an unclosed brace) stays
//! as it is. `{messageBody}` is the profile's message body (the file a
//! commit with no path publishes; `output/main.md` unless the profile names
//! another), so `workspace.commit` never describes a default the host does
//! not use. Only builtins' own text and a profile's `toolDescriptions` are
//! rendered: an MCP server's or an extension's description is third-party
//! text and is never rewritten.

use serde_json::Value;

use crate::alias::builtin_alias;
use crate::builtin;

const OPEN: &str = "{tool:";
const MESSAGE_BODY: &str = "{messageBody}";

/// What a builtin's text may refer to.
pub struct Refs<'a> {
    /// A builtin's alias in this snapshot, by native name (`None`: not
    /// offered, or no snapshot).
    pub alias: &'a dyn Fn(&str) -> Option<String>,
    /// The profile's message body.
    pub message_body: &'a str,
}

/// `text` with every `{tool:NAME}` of a builtin replaced by its alias (or
/// by the builtin's own alias when `refs` gives none) and `{messageBody}`
/// by the message body. Linear in `text`.
pub fn render(text: &str, refs: &Refs<'_>) -> String {
    let text = if text.contains(MESSAGE_BODY) {
        std::borrow::Cow::Owned(text.replace(MESSAGE_BODY, refs.message_body))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let alias = refs.alias;
    if !text.contains(OPEN) {
        return text.into_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_ref();
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
pub fn render_schema(schema: &mut Value, refs: &Refs<'_>) {
    // Schemas are capped at load (64 KiB), so the recursion is bounded by
    // their nesting, which serde_json already caps at 128.
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => *text = render(text, refs),
                    _ => render_schema(value, refs),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                render_schema(item, refs);
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

    const RENAMED: Refs<'static> = Refs {
        alias: &renamed,
        message_body: "drafts/reply.md",
    };

    #[test]
    fn references_become_aliases_and_the_rest_stays() {
        assert_eq!(
            render(
                "Call {tool:agent.delegate}, then {tool:agent.await}; {tool:nope.tool} and {tool:x",
                &RENAMED
            ),
            "Call delegate_v2, then agent_await; {tool:nope.tool} and {tool:x"
        );
        assert_eq!(render("no refs {here}", &RENAMED), "no refs {here}");
        assert_eq!(
            render(
                "Default: {messageBody}; then {tool:agent.delegate}.",
                &RENAMED
            ),
            "Default: drafts/reply.md; then delegate_v2."
        );
        let mut schema = serde_json::json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "From {tool:skill.list}."},
                           "description": {"type": "string"}}
        });
        render_schema(
            &mut schema,
            &Refs {
                alias: &|_| None,
                message_body: "output/main.md",
            },
        );
        assert_eq!(
            schema["properties"]["name"]["description"],
            "From skill_list."
        );
        // A property *named* description is not text.
        assert_eq!(schema["properties"]["description"]["type"], "string");
    }
}
