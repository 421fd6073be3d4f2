//! Tool declarations: each provider's function-name rule and what its
//! schema dialect refuses.
//!
//! The rule for every sanitizer here: dropping a pure annotation (a keyword
//! that never changes which arguments are valid: `$schema`, `examples`,
//! `deprecated`, an unknown vendor keyword…) is allowed; a constraint the
//! target cannot express is a `provider.schema_unsupported` error naming the
//! tool and the JSON pointer of the keyword. A schema is never loosened or
//! reinterpreted behind the model's back. Exact rewrites (`const: "a"` →
//! `enum: ["a"]`) are allowed because they change nothing.
//!
//! - OpenAI (both APIs): sent as is; the root may not be `oneOf`, `anyOf`,
//!   `allOf`, `enum`, `const` or `not` (the API's own 400).
//! - Anthropic: the root `$schema` is dropped (the API validates against
//!   draft 2020-12 and refuses a schema declaring another dialect); root
//!   `oneOf`/`anyOf`/`allOf` and the draft-07 tuple form `items: [...]` are
//!   refused (the API's own 400s).
//! - Gemini: either the schema as is in `parametersJsonSchema`, or the
//!   checked down-conversion to the OpenAPI subset of `parameters`
//!   ([`gemini_parameters`]); see `docs/providers.md`.

use serde_json::{Map, Value};
use toolhost_core::AgentModelTool;

use crate::error::{EncodeError, SchemaIssue};

/// One provider's rule for function names.
pub(crate) struct NameRule {
    pub max_len: usize,
    /// Gemini: the first character is a letter or `_`.
    pub letter_first: bool,
    /// Allowed besides ASCII letters and digits.
    pub extra: &'static [u8],
    pub text: &'static str,
}

/// OpenAI Chat, OpenAI Responses and Anthropic: `^[a-zA-Z0-9_-]{1,64}$`.
pub(crate) const OPENAI_ANTHROPIC_NAMES: NameRule = NameRule {
    max_len: 64,
    letter_first: false,
    extra: b"_-",
    text: "names are 1 to 64 of A-Z, a-z, 0-9, `_`, `-`",
};

/// Gemini: a letter or `_` first, then letters, digits, `_`, `.`, `:`, `-`.
/// The documented maximum is 128 in newer text and 64 in older; 64 holds
/// everywhere (and every toolhost alias fits it).
pub(crate) const GEMINI_NAMES: NameRule = NameRule {
    max_len: 64,
    letter_first: true,
    extra: b"_.:-",
    text: "names start with a letter or `_` and are at most 64 of A-Z, a-z, 0-9, `_`, `.`, `:`, `-`",
};

impl NameRule {
    /// Whether `byte` may stand in a name.
    pub fn allows(&self, byte: u8) -> bool {
        byte.is_ascii_alphanumeric() || self.extra.contains(&byte)
    }

    /// Whether `name` keeps the rule.
    pub fn accepts(&self, name: &str) -> bool {
        let name = name.as_bytes();
        !name.is_empty()
            && name.len() <= self.max_len
            && name.iter().all(|b| self.allows(*b))
            && (!self.letter_first || name[0].is_ascii_alphabetic() || name[0] == b'_')
    }
}

/// Every provider's rule: a name all of them take keeps each.
pub(crate) const EVERY_PROVIDER: [&NameRule; 2] = [&OPENAI_ANTHROPIC_NAMES, &GEMINI_NAMES];

pub(crate) fn check_name(
    provider: &'static str,
    tool: &AgentModelTool,
    rule: &NameRule,
) -> Result<(), EncodeError> {
    if rule.accepts(&tool.model_alias) {
        return Ok(());
    }
    Err(EncodeError::ToolNameInvalid {
        provider,
        tool_id: tool.tool_id.clone(),
        alias: tool.model_alias.clone(),
        rule: rule.text,
    })
}

/// The error for `tool` at `path`.
fn unsupported(
    provider: &'static str,
    tool: &AgentModelTool,
    path: &str,
    reason: impl Into<String>,
) -> EncodeError {
    EncodeError::SchemaUnsupported(Box::new(SchemaIssue {
        provider,
        tool_id: tool.tool_id.clone(),
        alias: tool.model_alias.clone(),
        path: path.to_owned(),
        reason: reason.into(),
    }))
}

/// Refuse `keywords` at the root of the tool's input schema.
fn refuse_at_root(
    provider: &'static str,
    tool: &AgentModelTool,
    keywords: &[&str],
) -> Result<(), EncodeError> {
    let Some(root) = tool.input_schema.as_object() else {
        return Err(unsupported(
            provider,
            tool,
            "#",
            "the root is not an object schema",
        ));
    };
    match keywords.iter().find(|keyword| root.contains_key(**keyword)) {
        Some(keyword) => Err(unsupported(
            provider,
            tool,
            &format!("#/{keyword}"),
            format!("`{keyword}` is refused at the top level of a tool schema"),
        )),
        None => Ok(()),
    }
}

/// OpenAI's `parameters` (Chat and Responses): the schema as is, unless
/// its root is one of the forms the API refuses.
pub(crate) fn openai_parameters(
    provider: &'static str,
    tool: &AgentModelTool,
) -> Result<Value, EncodeError> {
    refuse_at_root(
        provider,
        tool,
        &["oneOf", "anyOf", "allOf", "enum", "const", "not"],
    )?;
    Ok(tool.input_schema.clone())
}

/// Anthropic's `input_schema`.
pub(crate) fn anthropic_input_schema(
    provider: &'static str,
    tool: &AgentModelTool,
) -> Result<Value, EncodeError> {
    refuse_at_root(provider, tool, &["oneOf", "anyOf", "allOf"])?;
    if let Some(path) = find_tuple_items(&tool.input_schema, "#") {
        return Err(unsupported(
            provider,
            tool,
            &path,
            "`items` as an array is draft-07 tuple syntax; the API validates draft 2020-12, which spells it `prefixItems`",
        ));
    }
    let mut schema = tool.input_schema.clone();
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
    }
    Ok(schema)
}

/// The JSON pointer of the first draft-07 tuple `items`, if any.
fn find_tuple_items(schema: &Value, path: &str) -> Option<String> {
    let map = schema.as_object()?;
    if matches!(map.get("items"), Some(Value::Array(_))) {
        return Some(format!("{path}/items"));
    }
    map.iter().find_map(|(keyword, value)| {
        let here = format!("{path}/{}", pointer_token(keyword));
        match (keyword.as_str(), value) {
            (
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas",
                Value::Object(children),
            ) => children.iter().find_map(|(name, child)| {
                find_tuple_items(child, &format!("{here}/{}", pointer_token(name)))
            }),
            ("allOf" | "anyOf" | "oneOf" | "prefixItems", Value::Array(children)) => children
                .iter()
                .enumerate()
                .find_map(|(index, child)| find_tuple_items(child, &format!("{here}/{index}"))),
            (
                "items"
                | "additionalProperties"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedItems"
                | "unevaluatedProperties",
                child,
            ) => find_tuple_items(child, &here),
            _ => None,
        }
    })
}

/// A JSON pointer reference token (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

// --- Gemini `parameters`: the OpenAPI 3.0 subset -----------------------------

/// Keywords Gemini's `Schema` has, copied as they are.
const GEMINI_KEPT: &[&str] = &[
    "description",
    "title",
    "default",
    "example",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "propertyOrdering",
    "nullable",
    "$ref",
];

/// Annotations: they never change which arguments are valid, so dropping
/// them changes nothing the model is held to.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
];

/// Constraints Gemini's `Schema` cannot state: refused, never dropped.
const GEMINI_REFUSED: &[&str] = &[
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "additionalItems",
    "contains",
    "minContains",
    "maxContains",
    "multipleOf",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "definitions",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$recursiveRef",
    "$recursiveAnchor",
];

/// `format` values Gemini documents; others are dropped (in JSON Schema
/// 2020-12 `format` is an annotation unless a validator opts in).
const GEMINI_FORMATS: &[&str] = &["float", "double", "int32", "int64", "enum", "date-time"];

/// Function parameter names: `[A-Za-z_][A-Za-z0-9_]{0,63}`.
fn is_gemini_parameter_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

/// The tool's input schema as Gemini's `parameters`, or `None` for a
/// function without parameters (a root object that declares no
/// properties: Gemini refuses an OBJECT without properties, and a
/// declaration without `parameters` says the same thing).
pub(crate) fn gemini_parameters(
    provider: &'static str,
    tool: &AgentModelTool,
) -> Result<Option<Value>, EncodeError> {
    let fail = |path: &str, reason: String| unsupported(provider, tool, path, reason);
    let Some(root) = tool.input_schema.as_object() else {
        return Err(fail("#", "the root is not an object schema".into()));
    };
    let declares_properties = root
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| !properties.is_empty());
    if !declares_properties {
        // Only a root that says nothing about arguments becomes a
        // declaration without `parameters`: any other keyword here might
        // constrain them, and would be lost.
        let constraining = root.iter().find(|(keyword, value)| match keyword.as_str() {
            "type" | "description" | "title" => false,
            "properties" | "required" => {
                !value.as_array().is_some_and(Vec::is_empty)
                    && !value.as_object().is_some_and(Map::is_empty)
            }
            // With nothing declared, extra properties are all a call could
            // hold; a function without parameters is the closest Gemini form
            // and the one MCP's `{"type": "object"}` no-argument tools mean.
            "additionalProperties" => !value.is_boolean(),
            other => !ANNOTATIONS.contains(&other),
        });
        return match constraining {
            None => Ok(None),
            Some((keyword, _)) => Err(fail(
                &format!("#/{}", pointer_token(keyword)),
                format!("`{keyword}` on an object without properties has no Gemini form"),
            )),
        };
    }
    if let Some(properties) = root.get("properties").and_then(Value::as_object)
        && let Some(name) = properties
            .keys()
            .find(|name| !is_gemini_parameter_name(name))
    {
        return Err(fail(
            &format!("#/properties/{}", pointer_token(name)),
            format!(
                "parameter names are a letter or `_` then letters, digits and `_` (at most 64); `{name}` is not"
            ),
        ));
    }
    convert(&tool.input_schema, "#", &fail).map(Some)
}

/// One schema to Gemini's subset, recursively.
fn convert(
    schema: &Value,
    path: &str,
    fail: &dyn Fn(&str, String) -> EncodeError,
) -> Result<Value, EncodeError> {
    let Some(map) = schema.as_object() else {
        return Err(fail(
            path,
            format!("a {} schema has no Gemini form", crate::json::kind(schema)),
        ));
    };
    let at = |keyword: &str| format!("{path}/{}", pointer_token(keyword));
    let mut out = Map::new();
    let mut nullable = false;
    for (keyword, value) in map {
        match keyword.as_str() {
            "type" | "enum" | "const" => {} // below, together
            "format" => {
                if let Some(format) = value.as_str().filter(|f| GEMINI_FORMATS.contains(f)) {
                    out.insert("format".into(), format.into());
                }
            }
            "required" => {
                let names = value
                    .as_array()
                    .filter(|names| names.iter().all(Value::is_string))
                    .ok_or_else(|| {
                        fail(&at(keyword), "`required` is not a list of names".into())
                    })?;
                let declared = map.get("properties").and_then(Value::as_object);
                if let Some(missing) = names
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|name| !declared.is_some_and(|props| props.contains_key(*name)))
                {
                    return Err(fail(
                        &at(keyword),
                        format!("`{missing}` is required but not among the declared properties"),
                    ));
                }
                out.insert(keyword.clone(), value.clone());
            }
            "properties" | "$defs" => {
                let children = value
                    .as_object()
                    .ok_or_else(|| fail(&at(keyword), format!("`{keyword}` is not an object")))?;
                let mut converted = Map::new();
                for (name, child) in children {
                    let child_path = format!("{}/{}", at(keyword), pointer_token(name));
                    converted.insert(name.clone(), convert(child, &child_path, fail)?);
                }
                out.insert(keyword.clone(), Value::Object(converted));
            }
            "items" => {
                if value.is_array() {
                    return Err(fail(
                        &at(keyword),
                        "tuple `items` has no Gemini form".into(),
                    ));
                }
                out.insert(keyword.clone(), convert(value, &at(keyword), fail)?);
            }
            "anyOf" => {
                let branches = value
                    .as_array()
                    .ok_or_else(|| fail(&at(keyword), "`anyOf` is not an array".into()))?;
                let converted = branches
                    .iter()
                    .enumerate()
                    .map(|(index, branch)| {
                        convert(branch, &format!("{}/{index}", at(keyword)), fail)
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(keyword.clone(), Value::Array(converted));
            }
            "additionalProperties" => {
                let converted = match value {
                    Value::Bool(_) => value.clone(),
                    _ => convert(value, &at(keyword), fail)?,
                };
                out.insert(keyword.clone(), converted);
            }
            "uniqueItems" if *value == Value::Bool(false) => {} // says nothing
            "uniqueItems" => {
                return Err(fail(
                    &at(keyword),
                    "`uniqueItems` has no Gemini form".into(),
                ));
            }
            kept if GEMINI_KEPT.contains(&kept) => {
                out.insert(keyword.clone(), value.clone());
            }
            refused if GEMINI_REFUSED.contains(&refused) => {
                return Err(fail(
                    &at(keyword),
                    format!("`{keyword}` has no Gemini form"),
                ));
            }
            // Annotations, and keywords JSON Schema does not define (which
            // it treats as annotations too).
            _ => {}
        }
    }
    let values = enum_values(map, path, &at, fail, &mut nullable)?;
    let kind = gemini_type(map.get("type"), path, &at, fail, &mut nullable)?;
    let kind = match (kind, &values) {
        (Some(kind), Some(_)) if kind != "STRING" => {
            return Err(fail(
                &at("enum"),
                format!("Gemini enums are strings; this one is {kind}"),
            ));
        }
        (None, Some(_)) => Some("STRING"),
        (None, None) if !out.contains_key("anyOf") && !out.contains_key("$ref") => {
            return Err(fail(
                path,
                "a schema without `type` accepts any value, which Gemini cannot express".into(),
            ));
        }
        (kind, _) => kind,
    };
    let declares_properties = out
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| !properties.is_empty());
    if kind == Some("OBJECT") && !declares_properties {
        return Err(fail(
            path,
            "an object without properties has no Gemini form (Gemini requires properties on OBJECT)".into(),
        ));
    }
    if let Some(kind) = kind {
        out.insert("type".into(), kind.into());
    }
    if let Some(values) = values {
        out.insert("enum".into(), Value::Array(values));
    }
    if nullable {
        out.insert("nullable".into(), true.into());
    }
    Ok(Value::Object(out))
}

/// `enum` (or `const`, its one-value form) as Gemini's string enum; a
/// `null` member becomes `nullable`.
fn enum_values(
    map: &Map<String, Value>,
    path: &str,
    at: &dyn Fn(&str) -> String,
    fail: &dyn Fn(&str, String) -> EncodeError,
    nullable: &mut bool,
) -> Result<Option<Vec<Value>>, EncodeError> {
    let (keyword, members) = match (map.get("enum"), map.get("const")) {
        (Some(_), Some(_)) => {
            return Err(fail(
                path,
                "both `enum` and `const` have no single Gemini form".into(),
            ));
        }
        (Some(Value::Array(members)), None) => ("enum", members.clone()),
        (Some(_), None) => return Err(fail(&at("enum"), "`enum` is not an array".into())),
        (None, Some(value)) => ("const", vec![value.clone()]),
        (None, None) => return Ok(None),
    };
    let mut strings = Vec::with_capacity(members.len());
    for member in members {
        match member {
            Value::String(_) => strings.push(member),
            Value::Null => *nullable = true,
            other => {
                return Err(fail(
                    &at(keyword),
                    format!(
                        "Gemini enums are strings; `{keyword}` holds {}",
                        crate::json::kind(&other)
                    ),
                ));
            }
        }
    }
    if strings.is_empty() {
        return Err(fail(
            &at(keyword),
            format!("`{keyword}` allows only null, which Gemini cannot express"),
        ));
    }
    Ok(Some(strings))
}

/// `type` as Gemini's type name; `[T, "null"]` becomes `T` + `nullable`.
fn gemini_type(
    value: Option<&Value>,
    path: &str,
    at: &dyn Fn(&str) -> String,
    fail: &dyn Fn(&str, String) -> EncodeError,
    nullable: &mut bool,
) -> Result<Option<&'static str>, EncodeError> {
    let name = |text: &str| -> Result<&'static str, EncodeError> {
        Ok(match text {
            "string" => "STRING",
            "number" => "NUMBER",
            "integer" => "INTEGER",
            "boolean" => "BOOLEAN",
            "array" => "ARRAY",
            "object" => "OBJECT",
            "null" => "NULL",
            other => return Err(fail(&at("type"), format!("unknown type `{other}`"))),
        })
    };
    match value {
        None => Ok(None),
        Some(Value::String(text)) => name(text).map(Some),
        Some(Value::Array(types)) => {
            let mut kinds = Vec::new();
            for kind in types {
                let text = kind
                    .as_str()
                    .ok_or_else(|| fail(&at("type"), "`type` lists a non-string".into()))?;
                match name(text)? {
                    "NULL" => *nullable = true,
                    other => kinds.push(other),
                }
            }
            match kinds.as_slice() {
                [] => Ok(Some("NULL")),
                [one] => Ok(Some(one)),
                _ => Err(fail(
                    &at("type"),
                    format!("a union of types ({}) has no Gemini form", kinds.join(", ")),
                )),
            }
        }
        Some(_) => Err(fail(
            path,
            "`type` is neither a name nor a list of names".into(),
        )),
    }
}
