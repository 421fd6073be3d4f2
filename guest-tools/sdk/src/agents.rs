//! The agents this agent may call (`agent-read`, 0.1.3), behind a trait so
//! a tool's logic runs the same against the host and an in-memory double.

use crate::bindings::toolhost::host::agent_read;

pub use agent_read::{AgentSummary, Purpose};

pub trait Agents {
    /// Agents that accept this caller for `purpose`, by profile id.
    fn list_agents(&self, purpose: Purpose) -> Vec<AgentSummary>;
}

/// The host's capability, as imported by the component.
#[derive(Debug, Clone, Copy, Default)]
pub struct Host;

impl Agents for Host {
    fn list_agents(&self, purpose: Purpose) -> Vec<AgentSummary> {
        agent_read::list_agents(purpose)
    }
}
