//! The projection every capability's interfaces are linked with: a host
//! function sees its call through a [`View`] — the shared [`CallCore`] and
//! the capability's own per-call state, taken out of the store's
//! [`CallCapabilities`](toolhost_sandbox::CallCapabilities) by type.

use std::marker::PhantomData;

use toolhost_core::HostCallError;
use toolhost_sandbox::{CallCore, CallState};
use wasmtime::component::HasData;

use crate::bindings::toolhost::host::capability_types::CapabilityError;

/// What a capability's host functions see of their call.
pub struct View<'a, S> {
    pub(crate) core: &'a mut CallCore,
    /// `None`: the call was not prepared with this capability (not granted,
    /// or nothing to act on, like a run without a chat).
    pub(crate) state: Option<S>,
}

/// [`HasData`] for the views of per-call state `S`.
pub(crate) struct Projected<S>(PhantomData<S>);

impl<S: 'static> HasData for Projected<S> {
    type Data<'a> = View<'a, S>;
}

/// The store projected onto capability state `S` (a cheap clone: states
/// are `Arc`s).
pub(crate) fn project<S: Clone + 'static>(state: &mut CallState) -> View<'_, S> {
    let (core, call) = state.project::<S>();
    View {
        core,
        state: call.cloned(),
    }
}

impl<S> View<'_, S> {
    /// Answer with the error record the 0.1.2+ capabilities share.
    pub(crate) fn answer<T>(
        &mut self,
        result: Result<T, HostCallError>,
    ) -> wasmtime::Result<Result<T, CapabilityError>> {
        self.core
            .answer(result, |code, message| CapabilityError { code, message })
    }
}
