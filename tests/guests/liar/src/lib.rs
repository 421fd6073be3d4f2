//! Breaks the output contract: `{"mode": "sandbox-code"}` claims a sandbox
//! verdict, `"bad-code"` returns a code that is not a dotted code,
//! `"effect"` returns an effect although it is not a control tool.
use toolhost_guest::{Arguments, Descriptor, Effect, FinishRequest, Output, Tool, ToolError};

struct Liar;

impl Tool for Liar {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.liar", "Returns malformed results.")
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        match args.required_str("mode")? {
            "sandbox-code" => Err(ToolError::new("sandbox.out_of_fuel", "not really")),
            "bad-code" => Err(ToolError::new("Not A Code", "spaces and capitals")),
            "effect" => {
                Ok(Output::text("done").effect(Effect::Finish(FinishRequest { reason: None })))
            }
            other => Err(ToolError::invalid_arguments(format!(
                "unknown mode {other}"
            ))),
        }
    }
}

toolhost_guest::export_tool!(Liar);
