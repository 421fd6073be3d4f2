//! What a host capability may hold and use of one call.
//!
//! The sandbox knows no capability beyond `log` and `random`; the others
//! are linked by the embedder (`toolhost-capabilities`), each projecting the
//! call's store onto its own state, the way wasmtime's WASI interfaces each
//! project onto their own context: [`CallState::project`] hands a
//! capability the shared [`CallCore`] and its own per-call state, prepared
//! for this call into [`CallCapabilities`] — or none, when the call was not
//! given that capability. Every state lives exactly as long as the call.

use std::any::Any;
use std::time::Instant;

use toolhost_core::{HostCallError, ToolEffect, WorkMeter};

use crate::Trust;

/// A system failure inside a host capability. The run must fail.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct HostFault {
    pub code: String,
    pub message: String,
}

/// The guest ran past its deadline, or the host's work for it did.
#[derive(Debug, thiserror::Error)]
#[error("the call's deadline passed")]
pub(crate) struct DeadlineReached;

/// What every capability shares of its call.
pub struct CallCore {
    /// The wall-clock instant after which the call is stopped.
    pub(crate) deadline_at: Instant,
    pub(crate) trust: Trust,
    /// A system failure a host capability hit; the call was stopped for it.
    pub(crate) host_fault: Option<HostFault>,
}

impl CallCore {
    /// What the component is trusted with beyond its grant.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// When the call is stopped.
    pub fn deadline_at(&self) -> Instant {
        self.deadline_at
    }

    /// What host-side work for this call may spend: until its deadline.
    pub fn work_meter(&self) -> WorkMeter {
        WorkMeter::until(self.deadline_at)
    }

    /// Record `fault` as the call's and return the trap that stops the guest.
    pub fn fault(&mut self, fault: HostFault) -> wasmtime::Error {
        let error = wasmtime::Error::new(fault.clone());
        // The first fault is the cause; later ones are consequences.
        self.host_fault.get_or_insert(fault);
        error
    }

    /// The one place a capability's answer becomes what the guest sees: a
    /// recoverable error goes to the tool as its interface's error record
    /// (`wit(code, message)`), a system failure stops the call as its
    /// [`HostFault`] (the run fails), a passed deadline stops it like a
    /// guest running late (the model reads `sandbox.deadline_exceeded`).
    pub fn answer<T, W>(
        &mut self,
        result: Result<T, HostCallError>,
        wit: impl FnOnce(String, String) -> W,
    ) -> wasmtime::Result<Result<T, W>> {
        match result {
            Ok(value) => Ok(Ok(value)),
            Err(HostCallError::Recoverable { code, message }) => Ok(Err(wit(code, message))),
            Err(HostCallError::System { code, message }) => {
                Err(self.fault(HostFault { code, message }))
            }
            Err(HostCallError::DeadlinePassed) => Err(wasmtime::Error::new(DeadlineReached)),
        }
    }
}

/// The change to the run a builtin control tool requested during its call
/// (`toolhost:control`): the capability records it here, and the sandbox
/// hands it on with the call's successful outcome (a call that fails
/// applies nothing).
#[derive(Debug, Default)]
pub struct RequestedEffect(pub Option<ToolEffect>);

impl RequestedEffect {
    /// The key the `control` capability keeps it under in a call's store.
    pub const KEY: &'static str = "control";
}

/// The per-call states of the capabilities a call was prepared with, each
/// under its capability's key: two capabilities that hold the same type of
/// state never see each other's.
#[derive(Default)]
pub struct CallCapabilities {
    states: Vec<(&'static str, Box<dyn Any + Send>)>,
}

impl CallCapabilities {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add (or replace) the state of the capability `key`.
    pub fn insert<S: Any + Send>(&mut self, key: &'static str, state: S) {
        self.states.retain(|(held, _)| *held != key);
        self.states.push((key, Box::new(state)));
    }

    /// The state of the capability `key`, made with `make` if there is none
    /// yet (or, a bug, one of another type).
    pub fn get_or_insert_with<S: Any + Send>(
        &mut self,
        key: &'static str,
        make: impl FnOnce() -> S,
    ) -> &mut S {
        let index = match self
            .states
            .iter()
            .position(|(held, state)| *held == key && state.is::<S>())
        {
            Some(index) => index,
            None => {
                self.insert(key, make());
                self.states.len() - 1
            }
        };
        match self.states[index].1.downcast_mut::<S>() {
            Some(state) => state,
            None => unreachable!("the state at {index} was just found or made as S"),
        }
    }

    /// The state of the capability `key`; none when the call was not
    /// prepared with it.
    pub fn get_mut<S: Any>(&mut self, key: &'static str) -> Option<&mut S> {
        let state = self
            .states
            .iter_mut()
            .find(|(held, _)| *held == key)
            .map(|(_, state)| state)?;
        debug_assert!(
            state.is::<S>(),
            "capability `{key}` holds another type of state"
        );
        state.downcast_mut::<S>()
    }
}

#[cfg(test)]
mod tests {
    use super::CallCapabilities;

    #[test]
    fn states_of_one_type_under_two_keys_stay_apart() {
        let mut states = CallCapabilities::new();
        states.insert("chat", 1_u32);
        states.insert("skills", 2_u32);
        assert_eq!(states.get_mut::<u32>("chat"), Some(&mut 1));
        assert_eq!(states.get_mut::<u32>("skills"), Some(&mut 2));
        states.insert("chat", 3_u32);
        assert_eq!(states.get_mut::<u32>("chat"), Some(&mut 3));
        assert_eq!(states.get_mut::<u32>("worldinfo"), None);
        *states.get_or_insert_with("http", || 7_u32) += 1;
        assert_eq!(states.get_mut::<u32>("http"), Some(&mut 8));
        assert_eq!(states.get_mut::<u32>("skills"), Some(&mut 2));
    }
}
