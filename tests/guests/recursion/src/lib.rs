//! Recurses without bound until the wasm stack runs out.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct Recursion;

fn dive(depth: u64) -> u64 {
    // The frame and the work after the call keep the compiler from turning
    // the recursion into a loop.
    let frame = std::hint::black_box([depth; 32]);
    frame[1] + dive(std::hint::black_box(depth + 1))
}

impl Tool for Recursion {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.recursion", "Recurses forever.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        Ok(Output::text(dive(0).to_string()))
    }
}

toolhost_guest::export_tool!(Recursion);
