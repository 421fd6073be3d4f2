//! Tool declarations: name rules and each provider's schema handling. A
//! constraint a provider cannot express is an error naming the tool and
//! the JSON pointer, never a silent change.

mod common;

use common::*;
use serde_json::{Value, json};
use toolhost_core::{AgentModelTool, Classified, ErrorClass, ToolChoice};
use toolhost_providers::{EncodeError, GeminiSchemaMode, Provider, SchemaIssue};

const OPENAPI: Provider = Provider::Gemini {
    schema: GeminiSchemaMode::OpenApi,
};

/// One tool, `builtin:dice.roll` under `alias`, with `schema`.
fn tools(alias: &str, schema: Value) -> Vec<AgentModelTool> {
    let mut binding = dice_binding(alias);
    binding.descriptor.input_schema = schema;
    let snapshot = snapshot_of(vec![binding]);
    turn_of(&snapshot, ToolChoice::Auto).tools().to_vec()
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn unsupported(provider: &'static str, path: &str, reason: &str) -> EncodeError {
    EncodeError::SchemaUnsupported(Box::new(SchemaIssue {
        provider,
        tool_id: dice(),
        alias: "dice_roll".into(),
        path: path.into(),
        reason: reason.into(),
    }))
}

fn openapi(schema: Value) -> Result<Value, EncodeError> {
    OPENAPI
        .encode_tools(&tools("dice_roll", schema))
        .map(|tools| tools[0]["functionDeclarations"][0].clone())
}

fn openapi_parameters(properties: Value) -> Value {
    openapi(object(properties)).expect("converts")["parameters"]["properties"].clone()
}

#[test]
fn gemini_names_start_with_a_letter_or_underscore() {
    for alias in ["1dice", "-dice"] {
        let tools = tools(alias, object(json!({})));
        let error = OPENAPI.encode_tools(&tools).expect_err("refused");
        assert_eq!(
            error,
            EncodeError::ToolNameInvalid {
                provider: "gemini",
                tool_id: dice(),
                alias: alias.into(),
                rule: "names start with a letter or `_` and are at most 64 of A-Z, a-z, 0-9, `_`, `.`, `:`, `-`",
            }
        );
        assert_eq!(error.code(), "provider.tool_name_invalid");
        assert_eq!(error.class(), ErrorClass::SystemFailure);
        // The other providers accept them.
        for provider in &ALL[..3] {
            assert!(provider.encode_tools(&tools).is_ok(), "{}", provider.name());
        }
    }
}

#[test]
fn openai_refuses_composition_at_the_root() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}},
        "anyOf": [{"required": ["a"]}]});
    for provider in [Provider::OpenaiChat, Provider::OpenaiResponses] {
        assert_eq!(
            provider
                .encode_tools(&tools("dice_roll", schema.clone()))
                .expect_err("refused"),
            unsupported(
                provider.name(),
                "#/anyOf",
                "`anyOf` is refused at the top level of a tool schema"
            )
        );
    }
    // Below the root, everything is sent as is.
    let nested = object(json!({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}));
    let declared = Provider::OpenaiChat
        .encode_tools(&tools("dice_roll", nested.clone()))
        .expect("sent");
    assert_eq!(declared[0]["function"]["parameters"], nested);
}

#[test]
fn anthropic_strips_schema_and_refuses_what_the_api_refuses() {
    let anthropic = Provider::Anthropic;
    let schema = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:dice",
        "type": "object", "properties": {"a": {"type": "string", "examples": ["x"]}}});
    let declared = anthropic
        .encode_tools(&tools("dice_roll", schema))
        .expect("encodes");
    assert_eq!(
        declared[0]["input_schema"],
        json!({"$id": "urn:dice", "type": "object", "properties": {"a": {"type": "string", "examples": ["x"]}}})
    );
    let one_of = json!({"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
    assert_eq!(
        anthropic
            .encode_tools(&tools("dice_roll", one_of))
            .expect_err("refused"),
        unsupported(
            "anthropic",
            "#/oneOf",
            "`oneOf` is refused at the top level of a tool schema"
        )
    );
    let tuple = object(
        json!({"a/b": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}}),
    );
    assert_eq!(
        anthropic
            .encode_tools(&tools("dice_roll", tuple))
            .expect_err("refused"),
        unsupported(
            "anthropic",
            "#/properties/a~1b/items",
            "`items` as an array is draft-07 tuple syntax; the API validates draft 2020-12, which spells it `prefixItems`"
        )
    );
}

#[test]
fn gemini_json_schema_mode_sends_the_schema_as_is() {
    let schema = object(
        json!({"a": {"oneOf": [{"type": "string"}, {"const": 3}]}, "b-c": {"type": "object"}}),
    );
    let declared = ALL[3]
        .encode_tools(&tools("dice_roll", schema.clone()))
        .expect("encodes");
    assert_eq!(
        declared[0]["functionDeclarations"][0]["parametersJsonSchema"],
        schema
    );
}

#[test]
fn gemini_openapi_exact_rewrites() {
    assert_eq!(
        openapi_parameters(json!({
            "maybe": {"type": ["string", "null"], "maxLength": 5},
            "fixed": {"const": "d6"},
            "side": {"enum": ["left", "right", null]},
            "when": {"type": "string", "format": "date-time"},
            "link": {"type": "string", "format": "uri"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "list": {"type": "array", "items": {"type": "number"}, "uniqueItems": false, "minItems": 1}
        })),
        json!({
            "maybe": {"type": "STRING", "nullable": true, "maxLength": 5},
            "fixed": {"type": "STRING", "enum": ["d6"]},
            "side": {"type": "STRING", "enum": ["left", "right"], "nullable": true},
            "when": {"type": "STRING", "format": "date-time"},
            "link": {"type": "STRING"},
            "either": {"anyOf": [{"type": "INTEGER"}, {"type": "STRING"}]},
            "list": {"type": "ARRAY", "items": {"type": "NUMBER"}, "minItems": 1}
        })
    );
}

#[test]
fn gemini_openapi_drops_only_annotations() {
    let declaration = openapi(json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": "urn:dice",
        "$comment": "generated",
        "type": "object",
        "title": "Dice",
        "properties": {
            "formula": {"type": "string", "examples": ["2d6"], "deprecated": false,
                        "x-display": "wide", "description": "NdS", "default": "1d6"}
        },
        "required": ["formula"]
    }))
    .expect("converts");
    assert_eq!(
        declaration["parameters"],
        json!({"type": "OBJECT", "title": "Dice", "required": ["formula"], "properties": {
            "formula": {"type": "STRING", "description": "NdS", "default": "1d6"}}})
    );
}

#[test]
fn gemini_openapi_keeps_defs_and_refs() {
    let parameters = openapi(json!({
        "type": "object",
        "$defs": {"die": {"type": "string", "pattern": "^d[0-9]+$"}},
        "properties": {"die": {"$ref": "#/$defs/die"}}
    }))
    .expect("converts")["parameters"]
        .clone();
    assert_eq!(
        parameters,
        json!({"type": "OBJECT",
               "$defs": {"die": {"type": "STRING", "pattern": "^d[0-9]+$"}},
               "properties": {"die": {"$ref": "#/$defs/die"}}})
    );
}

#[test]
fn gemini_openapi_function_without_parameters() {
    for schema in [
        json!({"type": "object"}),
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "object", "properties": {}, "required": [], "$schema": "x"}),
    ] {
        let declaration = openapi(schema.clone()).expect("converts");
        assert_eq!(
            declaration,
            json!({"name": "dice_roll", "description": "Roll dice in NdS+M notation."}),
            "{schema}"
        );
    }
    assert_eq!(
        openapi(json!({"type": "object", "additionalProperties": {"type": "string"}}))
            .expect_err("map"),
        unsupported(
            "gemini",
            "#/additionalProperties",
            "`additionalProperties` on an object without properties has no Gemini form"
        )
    );
}

#[test]
fn gemini_openapi_refuses_what_it_cannot_state() {
    let refuse = |properties: Value| openapi(object(properties)).expect_err("refused");
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}),
            "#/properties/a/oneOf",
            "`oneOf` has no Gemini form",
        ),
        (
            json!({"a": {"type": "integer", "exclusiveMinimum": 0}}),
            "#/properties/a/exclusiveMinimum",
            "`exclusiveMinimum` has no Gemini form",
        ),
        (
            json!({"a": {"type": "integer", "enum": [1, 2]}}),
            "#/properties/a/enum",
            "Gemini enums are strings; `enum` holds a number",
        ),
        (
            json!({"a": {"const": true}}),
            "#/properties/a/const",
            "Gemini enums are strings; `const` holds a boolean",
        ),
        (
            json!({"a": {"type": ["string", "integer"]}}),
            "#/properties/a/type",
            "a union of types (STRING, INTEGER) has no Gemini form",
        ),
        (
            json!({"a": {"type": "object"}}),
            "#/properties/a",
            "an object without properties has no Gemini form (Gemini requires properties on OBJECT)",
        ),
        (
            json!({"a": {"description": "anything"}}),
            "#/properties/a",
            "a schema without `type` accepts any value, which Gemini cannot express",
        ),
        (
            json!({"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}),
            "#/properties/a/uniqueItems",
            "`uniqueItems` has no Gemini form",
        ),
        (
            json!({"a": {"type": "array", "items": [{"type": "string"}]}}),
            "#/properties/a/items",
            "tuple `items` has no Gemini form",
        ),
        (
            json!({"a": {"type": "object", "properties": {"b": {"type": "string"}},
                      "patternProperties": {"^x": {"type": "string"}}}}),
            "#/properties/a/patternProperties",
            "`patternProperties` has no Gemini form",
        ),
        (
            json!({"a": {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["c"]}}),
            "#/properties/a/required",
            "`c` is required but not among the declared properties",
        ),
        (
            json!({"start-line": {"type": "integer"}}),
            "#/properties/start-line",
            "parameter names are a letter or `_` then letters, digits and `_` (at most 64); `start-line` is not",
        ),
    ];
    for (properties, path, reason) in cases {
        assert_eq!(
            refuse(properties.clone()),
            unsupported("gemini", path, reason),
            "{properties}"
        );
    }
    // The error names the tool, its alias and the place.
    assert_eq!(
        refuse(json!({"a": {"oneOf": []}})).to_string(),
        "provider.schema_unsupported: gemini cannot express the input schema of `dice_roll` (builtin:dice.roll) at `#/properties/a/oneOf`: `oneOf` has no Gemini form"
    );
}

#[test]
fn encode_request_fails_on_the_first_unsupported_tool() {
    let schema = object(json!({"a": {"allOf": [{"type": "string"}]}}));
    let mut binding = dice_binding("dice_roll");
    binding.descriptor.input_schema = schema;
    let snapshot = snapshot_of(vec![binding]);
    let request = request(
        "gemini-2.5-flash",
        vec![toolhost_core::AgentModelMessage::user_text("hi")],
        turn_of(&snapshot, ToolChoice::Auto),
    );
    assert_eq!(
        OPENAPI
            .encode_request(&request, false)
            .expect_err("refused"),
        unsupported(
            "gemini",
            "#/properties/a/allOf",
            "`allOf` has no Gemini form"
        )
    );
}
