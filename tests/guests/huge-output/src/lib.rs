//! Returns `bytes` bytes of content (default 16 MiB), far over the output cap.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct HugeOutput;

impl Tool for HugeOutput {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.huge_output", "Returns an enormous result.")
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        let bytes = args.optional_u64("bytes")?.unwrap_or(16 << 20);
        Ok(Output::text("x".repeat(bytes as usize)))
    }
}

toolhost_guest::export_tool!(HugeOutput);
