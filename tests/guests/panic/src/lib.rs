//! Panics; with panic=abort the guest traps after printing the message to stderr.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct Panic;

impl Tool for Panic {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.panic", "Panics on every call.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        panic!("hostile guest panicked on purpose");
    }
}

toolhost_guest::export_tool!(Panic);
