//! Recurses without bound. `{"frames": "small"}` (default) keeps locals in
//! wasm locals, so the engine's wasm stack overflows; `{"frames": "large"}`
//! puts an array in every frame, so Rust's shadow stack in linear memory runs
//! out first and the guest traps on an out-of-bounds access.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct Recursion;

#[allow(unconditional_recursion)]
fn small_frames(depth: u64) -> u64 {
    // Work after the call keeps it from becoming a loop.
    small_frames(depth.wrapping_add(1)).rotate_left(3) ^ depth
}

#[allow(unconditional_recursion)]
fn large_frames(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 32]);
    frame[1] + large_frames(std::hint::black_box(depth + 1))
}

impl Tool for Recursion {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.recursion", "Recurses forever.")
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        let depth = match args.optional_str("frames")?.unwrap_or("small") {
            "large" => large_frames(0),
            _ => small_frames(std::hint::black_box(0)),
        };
        Ok(Output::text(depth.to_string()))
    }
}

toolhost_guest::export_tool!(Recursion);
