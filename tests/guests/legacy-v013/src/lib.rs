//! A tool written directly against the frozen `toolhost:host@0.1.3` and
//! `toolhost:tool@0.1.0` packages (no SDK), as an extension built when
//! 0.1.3 was the newest would be. It must keep loading and running on a
//! host whose newest version is later: its `@0.1.3` imports link to the
//! host's newest 0.1.x semver-compatibly.

wit_bindgen::generate!({
    world: "toolhost:host/agent-reader@0.1.3",
    path: ["../../../wit/tool", "../../../wit/host-0.1.3"],
    generate_all,
});

use exports::toolhost::tool::tool::Guest;
use toolhost::host::agent_read;
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
            native_name: "legacy.agents".into(),
            title: None,
            description: "Lists the agents this agent may call.".into(),
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
        let agents: Vec<String> = agent_read::list_agents(agent_read::Purpose::Any)
            .into_iter()
            .map(|agent| agent.profile_id)
            .collect();
        Ok(output(format!("agents: {}", agents.join(", "))))
    }
}

export!(Legacy);
