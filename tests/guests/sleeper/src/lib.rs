//! Sleeps for a minute. The sleep is a WASI host call, where epoch
//! interruption cannot reach; only the host's outer timeout stops it.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct Sleeper;

impl Tool for Sleeper {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.sleeper", "Blocks in a host call.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(60));
        Ok(Output::text("woke up"))
    }
}

toolhost_guest::export_tool!(Sleeper);
