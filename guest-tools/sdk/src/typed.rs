//! Typed tools: one argument struct gives the input schema, the parsing and
//! the error messages, so a tool is its logic and little else.
//!
//! ```ignore
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use toolhost_guest::{Output, ToolError, TypedTool};
//!
//! /// What the model sends.
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct Args {
//!     /// The text to repeat.
//!     text: String,
//! }
//!
//! struct Echo;
//!
//! impl TypedTool for Echo {
//!     const NAME: &'static str = "demo.echo";
//!     const DESCRIPTION: &'static str = "Repeat the text back.";
//!     type Args = Args;
//!
//!     fn run(args: Args) -> Result<Output, ToolError> {
//!         Ok(Output::text(args.text))
//!     }
//! }
//!
//! toolhost_guest::export_tool!(Echo);
//! ```
//!
//! Doc comments become the schema's descriptions; `#[serde(deny_unknown_fields)]`
//! becomes `"additionalProperties": false`; `Option` fields and fields with
//! `#[serde(default)]` are optional.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Arguments, Descriptor, Output, Tool, ToolError};

/// A tool described by its argument type. Every `TypedTool` is a [`Tool`].
pub trait TypedTool {
    /// The native name (`lowercase.words`), unique within the extension.
    const NAME: &'static str;
    /// What the model reads to decide when to call it.
    const DESCRIPTION: &'static str;
    /// The arguments, parsed from the model's JSON object.
    type Args: DeserializeOwned + JsonSchema;

    /// Add a title, annotations or an output schema to the generated
    /// descriptor (name, description, input schema).
    fn descriptor(generated: Descriptor) -> Descriptor {
        generated
    }

    /// One call on parsed arguments.
    fn run(args: Self::Args) -> Result<Output, ToolError>;
}

impl<T: TypedTool> Tool for T {
    fn describe() -> Descriptor {
        T::descriptor(
            Descriptor::new(T::NAME, T::DESCRIPTION).input_schema(input_schema::<T::Args>()),
        )
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        T::run(parse::<T::Args>(&args)?)
    }
}

/// The JSON schema of an argument type, as a tool's input schema: the
/// generator's `$schema` and `title` dropped (providers ignore or reject
/// them), everything else kept.
pub fn input_schema<A: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(A).to_value();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
    }
    schema
}

/// Parse arguments into `A`; a mismatch is `tool.invalid_arguments` naming
/// the field (`times: invalid type: string "3", expected u32`).
pub fn parse<A: DeserializeOwned>(args: &Arguments) -> Result<A, ToolError> {
    serde_path_to_error::deserialize(args.to_value()).map_err(|error| {
        let path = error.path().to_string();
        let message = error.into_inner().to_string();
        ToolError::invalid_arguments(if path == "." {
            message
        } else {
            format!("{path}: {message}")
        })
    })
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// Arguments of the test tool.
    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Args {
        /// The text to repeat.
        text: String,
        /// How many times.
        #[serde(default)]
        times: Option<u32>,
    }

    struct Repeat;

    impl TypedTool for Repeat {
        const NAME: &'static str = "demo.repeat";
        const DESCRIPTION: &'static str = "Repeat a text.";
        type Args = Args;

        fn descriptor(generated: Descriptor) -> Descriptor {
            generated.title("Repeat")
        }

        fn run(args: Args) -> Result<Output, ToolError> {
            let times = args.times.unwrap_or(1);
            if !(1..=5).contains(&times) {
                return Err(ToolError::invalid_arguments("times must be 1 to 5"));
            }
            Ok(Output::text(args.text.repeat(times as usize)))
        }
    }

    fn call(arguments: serde_json::Value) -> Result<Output, ToolError> {
        Repeat::call(Arguments::parse(&arguments.to_string())?)
    }

    #[test]
    fn the_schema_comes_from_the_struct() {
        let descriptor = Repeat::describe();
        assert_eq!(descriptor.native_name, "demo.repeat");
        assert_eq!(descriptor.title.as_deref(), Some("Repeat"));
        let schema = descriptor.input_schema;
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["required"], json!(["text"]));
        assert_eq!(
            schema["properties"]["text"]["description"],
            "The text to repeat."
        );
        assert_eq!(
            schema["properties"]["times"]["description"],
            "How many times."
        );
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none());
    }

    #[test]
    fn arguments_are_parsed_and_mismatches_name_the_field() {
        assert_eq!(
            call(json!({"text": "ab", "times": 2})).expect("ok").content,
            "abab"
        );
        assert_eq!(call(json!({"text": "ab"})).expect("ok").content, "ab");
        for (arguments, expected) in [
            (json!({"times": 2}), "missing field `text`"),
            (
                json!({"text": "a", "times": "2"}),
                "times: invalid type: string \"2\"",
            ),
            (
                json!({"text": "a", "times": -1}),
                "times: invalid value: integer `-1`",
            ),
            (json!({"text": "a", "loud": true}), "unknown field `loud`"),
        ] {
            let error = call(arguments).expect_err(expected);
            assert_eq!(error.code, "tool.invalid_arguments");
            assert!(error.message.contains(expected), "{}", error.message);
        }
        assert_eq!(
            call(json!({"text": "a", "times": 9}))
                .expect_err("range")
                .message,
            "times must be 1 to 5"
        );
    }
}
