//! Its input schema is an array schema: the host must refuse to load it.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct BadDescriptor;

impl Tool for BadDescriptor {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.bad_descriptor", "Has a non-object schema.")
            .input_schema(serde_json::json!({ "type": "array" }))
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        Ok(Output::text("unreachable"))
    }
}

toolhost_guest::export_tool!(BadDescriptor);
