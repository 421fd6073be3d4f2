//! Draws randomness, so its component imports `toolhost:host/random`, while the
//! world it declares (minimal-tool) grants only `log`: the host must refuse it.
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError, random};

struct Overreach;

impl Tool for Overreach {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.overreach", "Uses a capability it was not granted.")
    }

    fn call(_: Arguments) -> Result<Output, ToolError> {
        Ok(Output::text(random::next_u64().to_string()))
    }
}

toolhost_guest::export_tool!(Overreach);
