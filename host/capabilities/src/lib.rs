//! The host capabilities beyond `log` and `random`, one module each, each
//! a [`HostCapability`] with one lifecycle (the shape of Spin's factors and
//! of wasmtime's per-interface WASI contexts; see [`lifecycle`]): **bind**
//! per invocation from its own part of the inputs ([`BindInputs`]),
//! **prepare** per call from the component's grant ([`CallGrant`]), **link**
//! its WIT interfaces (each projected onto its state under its key, so no
//! struct implements every host trait), **begin** and **settle** around the
//! call. They are listed once, below ([`capabilities!`]); the runtime holds
//! their bound parts as one [`InvocationBound`] and never names a chat, a
//! skill or a world-info entry. Errors: every capability answers with
//! [`HostCallError`](toolhost_core::HostCallError), which the sandbox turns
//! into what the guest sees in one place
//! ([`CallCore::answer`](toolhost_sandbox::CallCore::answer)).
//!
//! | module | interfaces (`toolhost:host`) | bound per invocation |
//! |---|---|---|
//! | [`workspace`] | `workspace-read`, `workspace-write` (0.1.1) | the invocation's `WorkspaceSession` |
//! | [`chat`] | `chat-read` (0.1.2, `scan` 0.1.4) | the run's chat, frozen at its prefix |
//! | [`worldinfo`] | `worldinfo-read` (0.1.2) | the run's activated world info |
//! | [`skills`] | `skill-read` (0.1.2) | the visible skills and the invocation's budget |
//! | [`agents`] | `agent-read` (0.1.3) | the agents this agent may call |
//! | [`catalog`] | `toolhost:catalog/tools@0.1.0` (its own package; every component, no grant) | the invocation's snapshot |
//! | [`control`] | `toolhost:control/effects@0.1.0` (its own package; builtin control tools only) | nothing: the call's one requested effect |
//! | [`http`] | `wasi:http/outgoing-handler@0.2` (its own package) | nothing: the granted hosts and the call's request count |
//! | [`clock`] | `toolhost:clock/clock@0.1.0` (its own package) | the call in progress: its readings, recorded or replayed |
//!
//! What a run is bound to (its chat, world info and skills) is loaded in
//! [`run_context`]; the chat a run commits its reply to, in [`chat_host`].

use std::sync::Arc;

use toolhost_core::allowed_hosts::AllowedHosts;
use toolhost_core::{Capability, CapabilitySet, ProfileVersion};
use toolhost_sandbox::{CallCapabilities, CallState, HostFault, ToolComponent, Trust};
use wasmtime::component::Linker;

pub mod agents;
pub mod catalog;
pub mod chat;
pub mod chat_host;
pub mod chat_prompt;
pub mod clock;
pub mod control;
pub mod http;
pub mod lifecycle;
pub mod run_context;
pub mod skills;
mod view;
pub mod workspace;
pub mod worldinfo;

pub use view::View;

pub use agents::CallableAgent;
pub use chat_host::{
    ChatHost, ChatHostError, CommitFuture, CommitOutcome, CommitRequest, SillyTavernChatHost,
};
pub use lifecycle::{BindInputs, CallScope, HostCapability, Settlement};
pub use run_context::{ContextError, RunBindings, RunContext};
pub use skills::SkillAccess;
pub use toolhost_chat::GenerationType;
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
    /// Stored secrets `outbound-http` writes into admitted requests (an
    /// extension's grant, resolved for the call's owner; none for a builtin).
    pub secrets: &'a [http::SecretHeader],
}

static NO_HOSTS: AllowedHosts = AllowedHosts::none();

impl<'a> CallGrant<'a> {
    /// The component was granted `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(capability)
    }

    /// What a loaded component was granted; `tool_results` is the
    /// registry's answer for an extension (a builtin always may). No host.
    pub fn of(component: &'a ToolComponent, tool_results: bool) -> Self {
        Self {
            capabilities: component.grant(),
            trust: component.trust(),
            tool_results,
            allowed_hosts: &NO_HOSTS,
            catalog: component.imports_ungated(),
            secrets: &[],
        }
    }

    /// With the secrets an extension's grant binds.
    pub fn with_secrets(self, secrets: &'a [http::SecretHeader]) -> Self {
        Self { secrets, ..self }
    }

    /// With the hosts an extension's grant allows.
    pub fn allowing(self, allowed_hosts: &'a AllowedHosts) -> Self {
        Self {
            allowed_hosts,
            ..self
        }
    }
}

/// The list, once: each capability's bound part in [`InvocationBound`], its
/// lifecycle steps called in this order, its interfaces linked by [`link`].
macro_rules! capabilities {
    ($($field:ident: $capability:ty),* $(,)?) => {
        /// Every capability's part of one invocation, bound once when it
        /// starts; shared by its calls. Opaque to the runtime.
        #[derive(Debug, Default)]
        pub struct InvocationBound {
            $($field: Option<<$capability as HostCapability>::Bound>,)*
            grant_profile: Option<Arc<ProfileVersion>>,
        }

        impl InvocationBound {
            /// Each capability reads its own part of `inputs`.
            pub fn bind(inputs: &BindInputs) -> Self {
                Self {
                    $($field: <$capability>::bind(inputs),)*
                    grant_profile: inputs.grant_profile.clone(),
                }
            }

            /// One call's capability states: each granted capability
            /// prepares its own; an ungranted one holds nothing for it.
            pub fn prepare(&self, grant: &CallGrant<'_>) -> Result<CallCapabilities, HostFault> {
                let mut states = CallCapabilities::new();
                $(
                    if let Some(state) = <$capability>::prepare(self.$field.as_ref(), grant)? {
                        states.insert(<$capability>::KEY, state);
                    }
                )*
                Ok(states)
            }

            /// Before the executor runs a call of the invocation.
            pub fn begin(&self, call: &CallScope) {
                $(if let Some(bound) = &self.$field { <$capability>::begin(bound, call); })*
            }

            /// After the call ran: what it spent.
            pub fn settle(&self) -> Settlement {
                let mut settlement = Settlement::default();
                $(if let Some(bound) = &self.$field { <$capability>::settle(bound, &mut settlement); })*
                settlement
            }
        }

        /// Every capability's interfaces, added to the sandbox's linker
        /// ([`SandboxConfig::capabilities`](toolhost_sandbox::SandboxConfig)).
        pub fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
            bindings::toolhost::host::capability_types::add_to_linker::<_, NoState>(linker, |_| NoState)?;
            $(<$capability>::link(linker)?;)*
            Ok(())
        }

        /// Every capability's key, in the list's order.
        pub const KEYS: &[&str] = &[$(<$capability>::KEY),*];
    };
}

capabilities! {
    catalog: catalog::Catalog,
    workspace: workspace::Workspace,
    chat: chat::ChatRead,
    worldinfo: worldinfo::WorldinfoRead,
    skills: skills::SkillRead,
    agents: agents::AgentRead,
    http: http::Http,
    control: control::Control,
    clock: clock::Clock,
}

impl InvocationBound {
    /// The invocation's profile as a grant names it: an extension granted
    /// to some profiles is rechecked against it at every call (none
    /// outside an invocation, where such an extension is refused).
    pub fn grant_profile(&self) -> Option<&ProfileVersion> {
        self.grant_profile.as_deref()
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn every_capability_has_its_own_key() {
        let mut keys = super::KEYS.to_vec();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), super::KEYS.len(), "{:?}", super::KEYS);
    }
}
