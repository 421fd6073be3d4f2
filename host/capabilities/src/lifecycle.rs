//! The lifecycle every host capability has, once: the shape of Spin's
//! factors (`configure_app` → `prepare` → link → after the call) for a tool
//! call instead of an app instance.
//!
//! ```text
//! bind     once per invocation: reads its own part of the run's and the
//!          invocation's inputs (the chat, the workspace session, ...)
//! prepare  once per call: the call's own state, from the bound part and
//!          the component's grant (none: not granted, nothing to act on)
//! link     once per engine: its WIT interfaces, each projected onto the
//!          state under its key
//! begin    before the executor runs the call (a per-call counter reset,
//!          a write-intent sink set)
//! settle   after it: what the journal records of the call, undoing begin
//! ```
//!
//! The capabilities are listed once, in `lib.rs`; the runtime holds their
//! bound parts as one opaque [`InvocationBound`](crate::InvocationBound).

use std::sync::Arc;

use serde_json::{Map, Value};

use toolhost_core::{InvocationToolSnapshot, Profile, ProfileVersion};
use toolhost_sandbox::{CallState, HostFault};
use toolhost_workspace::{IntentSink, WorkspaceSession};
use wasmtime::component::Linker;

use crate::{CallGrant, CallableAgent, RunContext};

/// One host capability, whole.
pub trait HostCapability: 'static {
    /// Its key in a call's store: each capability's state is found by its
    /// key, never by its type (a test checks the keys are unique).
    const KEY: &'static str;
    /// What it holds for one invocation.
    type Bound: Send + Sync + std::fmt::Debug + 'static;
    /// What one call's store holds of it.
    type State: Send + 'static;

    /// Its part of an invocation's inputs; `None`: nothing to act on (a
    /// run without a chat), and every call is prepared without it.
    fn bind(inputs: &BindInputs) -> Option<Self::Bound>;

    /// One call's state; `None` when the grant lacks the capability or
    /// there is nothing bound.
    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault>;

    /// Its interfaces, added to the sandbox's linker.
    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()>;

    /// Before the executor runs a call of the invocation. An invocation
    /// runs one call at a time (`Invocation::execute` takes it mutably), so
    /// `begin`, the call's `prepare` and `settle` follow each other for one
    /// call before the next call's `begin`; per-call state kept in the
    /// bound part relies on that.
    fn begin(_bound: &Self::Bound, _call: &CallScope) {}

    /// After the call ran (whatever its outcome): what it spent, and any
    /// per-call setting of [`begin`](Self::begin) undone.
    fn settle(_bound: &Self::Bound, _settlement: &mut Settlement) {}
}

/// What an invocation's capabilities are bound from.
#[derive(Debug, Clone, Default)]
pub struct BindInputs {
    /// What the run was bound to (its chat, world info and skills).
    pub run: Option<Arc<RunContext>>,
    /// The invocation's agent profile (its skills' visibility and budget).
    pub profile: Option<Arc<Profile>>,
    /// The invocation's view of the workspace (its read-state is shared by
    /// all of its calls).
    pub workspace: Option<Arc<WorkspaceSession>>,
    /// The invocation's tools as the model sees them.
    pub snapshot: Option<Arc<InvocationToolSnapshot>>,
    /// The agents the invocation's agent may call; none outside an agent run.
    pub agents: Option<Arc<Vec<CallableAgent>>>,
    /// Skill characters the invocation's calls were charged before its run
    /// was reopened.
    pub skill_chars_charged: u64,
    /// The invocation's profile as a grant names it (with the tenant whose
    /// run it is): an extension granted to some profiles is rechecked
    /// against it at every call; none outside an invocation.
    pub grant_profile: Option<Arc<ProfileVersion>>,
}

/// What the runtime tells the capabilities of one call it is about to run.
#[derive(Default)]
pub struct CallScope {
    /// Records each workspace write of the call before it lands (a write
    /// tool of a run that can be resumed).
    pub write_intents: Option<IntentSink>,
    /// What the capabilities recorded of this call when it first ran
    /// ([`Settlement::recorded`], from its journal event), each under its
    /// key: a replay hands it back so the call reads the same values.
    pub recorded: Map<String, Value>,
}

/// What one call spent of the capabilities, for its journal event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settlement {
    /// Skill characters shown to the model (`skillReadChars`).
    pub skill_read_chars: u64,
    /// What a capability read from outside the call's recorded entropy
    /// (the clock), under its key: journalled with the call
    /// (`recorded`) so a replay can give it back ([`CallScope::recorded`]).
    pub recorded: Map<String, Value>,
}
