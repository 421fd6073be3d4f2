//! Loops forever without calling the host: only fuel or the epoch deadline stops it.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct Spin;

impl Tool for Spin {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.spin", "Busy-loops forever.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        let mut counter = 0_u64;
        loop {
            counter = std::hint::black_box(counter.wrapping_add(1));
        }
    }
}

toolhost_guest::export_tool!(Spin);
