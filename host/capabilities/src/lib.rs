//! The host capabilities beyond `log` and `random`, one module each, each
//! with one lifecycle (the shape of Spin's factors and of wasmtime's
//! per-interface WASI contexts):
//!
//! - **inputs**: what the capability acts on for a whole invocation, in
//!   [`InvocationInputs`] (the workspace session, the run's chat, ...),
//!   gathered once when the invocation starts;
//! - **prepare**: per call, from those inputs and the component's grant
//!   ([`CallGrant`]), the call's own state — none when the grant lacks the
//!   capability — plus its policy hook (an extension not granted
//!   `tool-results/` gets a workspace session without it);
//! - **link**: its WIT interfaces added to the sandbox's linker, each
//!   projected onto that state through [`CallState::project`]; no struct
//!   implements every host trait;
//! - errors: every capability answers with
//!   [`HostCallError`](toolhost_core::HostCallError), which the sandbox turns
//!   into what the guest sees in one place
//!   ([`CallCore::answer`](toolhost_sandbox::CallCore::answer)).
//!
//! | module | interfaces (`toolhost:host`) | state |
//! |---|---|---|
//! | [`workspace`] | `workspace-read`, `workspace-write` (0.1.1) | the invocation's `WorkspaceSession` |
//! | [`chat`] | `chat-read` (0.1.2, `scan` 0.1.4) | the run's chat, frozen at its prefix |
//! | [`worldinfo`] | `worldinfo-read` (0.1.2) | the run's activated world info |
//! | [`skills`] | `skill-read` (0.1.2) | the visible skills and the invocation's budget |
//! | [`agents`] | `agent-read` (0.1.3) | the agents this agent may call |
//! | [`catalog`] | `toolhost:catalog/tools@0.1.0` (its own package; every component, no grant) | the invocation's snapshot |
//! | [`control`] | `toolhost:control/effects@0.1.0` (its own package; builtin control tools only) | the call's one requested effect |
//! | [`http`] | `wasi:http/outgoing-handler@0.2` (its own package) | the granted hosts and the call's request count |

use std::sync::Arc;

use toolhost_core::allowed_hosts::AllowedHosts;
use toolhost_core::{Capability, CapabilitySet};
use toolhost_sandbox::{CallCapabilities, CallState, HostFault, ToolComponent, Trust};
use wasmtime::component::Linker;

pub mod agents;
pub mod catalog;
pub mod chat;
pub mod control;
pub mod http;
pub mod skills;
mod view;
pub mod workspace;
pub mod worldinfo;

pub use view::View;

pub use agents::CallableAgent;
pub use skills::SkillAccess;
pub use workspace::READ_STATE_REFUSED;

/// The bindings of every capability of the newest host version; the tool
/// contract and `log`/`random` are the sandbox's own (`with:`), so their
/// types are shared.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "toolhost:host/all-capabilities@0.1.4",
        path: ["../../wit/tool", "../../wit/host-0.1.4"],
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "toolhost:tool/types": toolhost_sandbox::bindings::toolhost::tool::types,
            "toolhost:host/log": toolhost_sandbox::bindings::toolhost::host::log,
            "toolhost:host/random": toolhost_sandbox::bindings::toolhost::host::random,
        },
    });
}

/// What an invocation's calls may act on, gathered once when it starts.
/// Each capability prepares a call's state from its own part.
#[derive(Debug, Clone, Default)]
pub struct InvocationInputs {
    /// The invocation's workspace session (its read-state is shared by all
    /// of the invocation's calls).
    pub workspace: Option<Arc<toolhost_workspace::WorkspaceSession>>,
    /// The chat the run is bound to, frozen at its input prefix.
    pub chat: Option<Arc<toolhost_chat::BoundChat>>,
    /// The run's activated world info.
    pub worldinfo: Option<Arc<toolhost_worldinfo::Activation>>,
    /// The skills the invocation may read, and its budget.
    pub skills: Option<Arc<SkillAccess>>,
    /// The agents the invocation's agent may call; none outside an agent run.
    pub agents: Option<Arc<Vec<CallableAgent>>>,
    /// The invocation's tools as the model sees them; none outside one.
    pub snapshot: Option<Arc<toolhost_core::InvocationToolSnapshot>>,
    /// The invocation's profile as a grant names it (with the tenant whose
    /// run it is), rechecked against an extension's grant at every call;
    /// none outside an invocation, where a profile-restricted extension is
    /// refused. Shared: the inputs are cloned for every call.
    pub profile: Option<Arc<toolhost_core::ProfileVersion>>,
}

/// What one call's component was granted.
#[derive(Debug, Clone, Copy)]
pub struct CallGrant<'a> {
    pub capabilities: &'a CapabilitySet,
    pub trust: Trust,
    /// An extension may read `tool-results/` (other calls' results) only
    /// when its grant says so; a builtin always may.
    pub tool_results: bool,
    /// Where `outbound-http` may send requests (an extension's grant; none
    /// for a builtin).
    pub allowed_hosts: &'a AllowedHosts,
    /// The component imports `toolhost:catalog`, which needs no grant.
    pub catalog: bool,
}

static NO_HOSTS: AllowedHosts = AllowedHosts::none();

impl<'a> CallGrant<'a> {
    /// What a loaded component was granted; `tool_results` is the
    /// registry's answer for an extension (a builtin always may). No host.
    pub fn of(component: &'a ToolComponent, tool_results: bool) -> Self {
        Self {
            capabilities: component.grant(),
            trust: component.trust(),
            tool_results,
            allowed_hosts: &NO_HOSTS,
            catalog: component.imports_ungated(),
        }
    }

    /// With the hosts an extension's grant allows.
    pub fn allowing(self, allowed_hosts: &'a AllowedHosts) -> Self {
        Self {
            allowed_hosts,
            ..self
        }
    }
}

/// Every capability's interfaces, added to the sandbox's linker
/// ([`SandboxConfig::capabilities`](toolhost_sandbox::SandboxConfig)).
pub fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    bindings::toolhost::host::capability_types::add_to_linker::<_, NoState>(linker, |_| NoState)?;
    workspace::link(linker)?;
    chat::link(linker)?;
    worldinfo::link(linker)?;
    skills::link(linker)?;
    agents::link(linker)?;
    http::link(linker)?;
    control::link(linker)?;
    catalog::link(linker)
}

/// One call's capability states: each granted capability prepares its own
/// from `inputs`; an ungranted one holds nothing for the call.
pub fn prepare(
    inputs: &InvocationInputs,
    grant: &CallGrant<'_>,
) -> Result<CallCapabilities, HostFault> {
    let mut states = CallCapabilities::new();
    let granted = |capability| grant.capabilities.contains(capability);
    // Every component may ask what the model calls a tool; only one that
    // imports the interface is given the state, so no other call pays for it.
    if grant.catalog {
        states.insert_some(catalog::prepare(inputs));
    }
    // A state is held only when there is something to act on; without one
    // a capability answers "nothing bound" (a run without a chat, a call
    // outside an agent run).
    if granted(Capability::WorkspaceRead) || granted(Capability::WorkspaceWrite) {
        states.insert_some(workspace::prepare(inputs, grant)?);
    }
    if granted(Capability::ChatRead) {
        states.insert_some(chat::prepare(inputs));
    }
    if granted(Capability::WorldinfoRead) {
        states.insert_some(worldinfo::prepare(inputs));
    }
    if granted(Capability::SkillRead) {
        states.insert_some(skills::prepare(inputs));
    }
    if granted(Capability::AgentRead) {
        states.insert_some(agents::prepare(inputs));
    }
    if granted(Capability::Control) {
        states.insert(control::prepare());
    }
    if granted(Capability::OutboundHttp) {
        states.insert(http::prepare(grant));
    }
    Ok(states)
}

/// `capability-types` declares only the error record the 0.1.2+
/// capabilities share; it is linked once, with no state.
pub(crate) struct NoState;

impl wasmtime::component::HasData for NoState {
    type Data<'a> = NoState;
}

impl bindings::toolhost::host::capability_types::Host for NoState {}

/// The sandbox's defaults with every capability here linked.
pub fn sandbox_config() -> toolhost_sandbox::SandboxConfig {
    toolhost_sandbox::SandboxConfig {
        capabilities: Some(link),
        ..toolhost_sandbox::SandboxConfig::default()
    }
}
