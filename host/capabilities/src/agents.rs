//! `agent-read` (0.1.3): the agents this agent may call.
//! The runtime works the list out per invocation (who accepts this caller,
//! for what); this module only filters it by purpose. No list — a call
//! outside an agent run — is an empty list.

use std::sync::Arc;

use toolhost_core::Capability;
use toolhost_sandbox::{CallState, HostFault};
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::bindings::toolhost::host::agent_read as wit;
use crate::lifecycle::{BindInputs, HostCapability};
use crate::view::{Projected, View, project};

/// One agent the calling agent may delegate to or hand off to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallableAgent {
    pub profile_id: String,
    pub display_name: Option<String>,
    pub description: Option<String>,
    /// This caller may delegate tasks to it.
    pub delegate: bool,
    /// This caller may hand the run off to it.
    pub handoff: bool,
    pub result_budget_tokens: u32,
    pub max_invocations_per_run: u32,
    pub max_concurrent_invocations: u32,
    pub max_handoff_depth: u32,
}

/// `agent-read`.
pub struct AgentRead;

impl HostCapability for AgentRead {
    const KEY: &'static str = "agent-read";
    type Bound = Arc<Vec<CallableAgent>>;
    type State = Arc<Vec<CallableAgent>>;

    /// The agents the invocation's agent may call.
    fn bind(inputs: &BindInputs) -> Option<Self::Bound> {
        inputs.agents.clone()
    }

    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        Ok(bound.filter(|_| grant.has(Capability::AgentRead)).cloned())
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, Projected<Self>>(linker, project::<Self>)
    }
}

impl wit::Host for View<'_, Arc<Vec<CallableAgent>>> {
    fn list_agents(&mut self, purpose: wit::Purpose) -> wasmtime::Result<Vec<wit::AgentSummary>> {
        let Some(agents) = &self.state else {
            return Ok(Vec::new());
        };
        let mut listed: Vec<wit::AgentSummary> = agents
            .iter()
            .filter(|agent| match purpose {
                wit::Purpose::Any => agent.delegate || agent.handoff,
                wit::Purpose::Delegate => agent.delegate,
                wit::Purpose::Handoff => agent.handoff,
            })
            .map(|agent| {
                let mut operations = Vec::new();
                if agent.delegate {
                    operations.push("delegate".to_owned());
                }
                if agent.handoff {
                    operations.push("handoff".to_owned());
                }
                wit::AgentSummary {
                    profile_id: agent.profile_id.clone(),
                    display_name: agent.display_name.clone(),
                    description: agent.description.clone(),
                    operations,
                    result_budget_tokens: agent.result_budget_tokens,
                    max_invocations_per_run: agent.max_invocations_per_run,
                    max_concurrent_invocations: agent.max_concurrent_invocations,
                    max_handoff_depth: agent.max_handoff_depth,
                }
            })
            .collect();
        listed.sort_by(|a, b| a.profile_id.cmp(&b.profile_id));
        Ok(listed)
    }
}
