//! Reads the clock twice each way and answers with the readings, in order.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError, clock};

struct ClockReader;

impl Tool for ClockReader {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.clock_reader", "Reads the clock.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        let readings = [
            clock::now_ms(),
            clock::elapsed_ns(),
            clock::elapsed_ns(),
            clock::now_ms(),
        ];
        Ok(Output::text(serde_json::json!(readings).to_string()))
    }
}

toolhost_guest::export_tool!(ClockReader);
