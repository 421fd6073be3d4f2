//! A tool written directly against the frozen `toolhost:host@0.1.0` and
//! `toolhost:tool@0.1.0` packages (no SDK), as an extension built before
//! 0.1.1 would be. It must keep loading and running on a host whose newest
//! version is later: its `log@0.1.0` and `random@0.1.0` imports link to the
//! host's 0.1.x semver-compatibly.

wit_bindgen::generate!({
    world: "toolhost:host/pure-tool@0.1.0",
    path: ["../../../wit/tool", "../../../wit/host"],
    generate_all,
});

use exports::toolhost::tool::tool::Guest;
use toolhost::host::{log, random};
use toolhost::tool::types::{Annotations, Descriptor, ToolError, ToolOutput};

struct Legacy;

impl Guest for Legacy {
    fn describe() -> Descriptor {
        Descriptor {
            native_name: "legacy.draw".into(),
            title: None,
            description: "Draws one number from the host's random stream.".into(),
            input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#
                .into(),
            output_schema: None,
            annotations: Annotations {
                read_only: true,
                mutating: false,
                control: false,
                idempotent: false,
                open_world: false,
                source_kind: Some("random".into()),
            },
        }
    }

    fn call(_arguments: String) -> Result<ToolOutput, ToolError> {
        log::log(log::Level::Info, "drawing");
        let drawn = random::next_u64();
        Ok(ToolOutput {
            content: format!("drew {drawn}"),
            structured: None,
            resource_refs: Vec::new(),
            effect: None,
        })
    }
}

export!(Legacy);
