//! Its `describe()` is a megabyte of description under a title full of
//! escape sequences: the host must refuse to load it (a descriptor is
//! bounded like a call's output).
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct Oversized;

impl Tool for Oversized {
    fn describe() -> Descriptor {
        Descriptor::new(
            "hostile.oversized",
            &"Describes itself at length. ".repeat(40_000),
        )
        .title("Roll dice\u{1b}[2J\u{202e}")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        Ok(Output::text("unreachable"))
    }
}

toolhost_guest::export_tool!(Oversized);
