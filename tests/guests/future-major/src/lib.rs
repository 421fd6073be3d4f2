//! Built against a `toolhost:host@1.0.0` that does not exist (yet): its `log`
//! import names an incompatible major version, so the host must refuse it at
//! load with a message naming the version, whatever capabilities it holds.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

mod future {
    wit_bindgen::generate!({
        inline: "
            package toolhost:host@1.0.0;
            interface log { log: func(message: string); }
            world future-tool { import log; }
        ",
        world: "toolhost:host/future-tool@1.0.0",
    });
}

struct FutureMajor;

impl Tool for FutureMajor {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.future_major", "Built for a future toolhost.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        future::toolhost::host::log::log("hello from 1.0");
        Ok(Output::text("logged"))
    }
}

toolhost_guest::export_tool!(FutureMajor);
