//! Counts calls in a static. With a fresh instance per call every call sees 1.
use std::sync::atomic::{AtomicU64, Ordering};

use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

static CALLS: AtomicU64 = AtomicU64::new(0);

struct Stateful;

impl Tool for Stateful {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.stateful", "Counts its own calls.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        let calls = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Output::text(calls.to_string()))
    }
}

toolhost_guest::export_tool!(Stateful);
