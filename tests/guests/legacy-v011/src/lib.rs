//! A tool written directly against the frozen `toolhost:host@0.1.1` and
//! `toolhost:tool@0.1.0` packages (no SDK), as an extension built when
//! 0.1.1 was the newest would be. It must keep loading and running on a
//! host whose newest version is later: its `@0.1.1` imports link to the
//! host's newest 0.1.x semver-compatibly.

wit_bindgen::generate!({
    world: "toolhost:host/workspace-reader@0.1.1",
    path: ["../../../wit/tool", "../../../wit/host-0.1.1"],
    generate_all,
});

use exports::toolhost::tool::tool::Guest;
use toolhost::host::workspace_read;
use toolhost::tool::types::{Annotations, Descriptor, ToolError, ToolOutput};

struct Legacy;

fn output(content: String) -> ToolOutput {
    ToolOutput {
        content,
        structured: None,
        resource_refs: Vec::new(),
        effect: None,
    }
}

impl Guest for Legacy {
    fn describe() -> Descriptor {
        Descriptor {
            native_name: "legacy.roots".into(),
            title: None,
            description: "Lists the visible workspace roots.".into(),
            input_schema: r#"{"type":"object","properties":{},"additionalProperties":false}"#
                .into(),
            output_schema: None,
            annotations: Annotations {
                read_only: true,
                mutating: false,
                control: false,
                idempotent: true,
                open_world: false,
                source_kind: None,
            },
        }
    }

    fn call(_arguments: String) -> Result<ToolOutput, ToolError> {
        let roots: Vec<String> = workspace_read::roots()
            .into_iter()
            .map(|root| {
                format!(
                    "{}{}",
                    root.path,
                    if root.writable { " (writable)" } else { "" }
                )
            })
            .collect();
        Ok(output(format!("roots: {}", roots.join(", "))))
    }
}

export!(Legacy);
