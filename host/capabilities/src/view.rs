//! The projection every capability's interfaces are linked with: a host
//! function sees its call through a [`View`] — the shared [`CallCore`] and
//! the capability's own per-call state, taken out of the store's
//! [`CallCapabilities`](toolhost_sandbox::CallCapabilities) by the
//! capability's key.

use std::marker::PhantomData;

use toolhost_core::HostCallError;
use toolhost_sandbox::{CallCore, CallState};
use wasmtime::component::HasData;

use crate::bindings::toolhost::host::capability_types::CapabilityError;
use crate::lifecycle::HostCapability;

/// What a capability's host functions see of their call.
pub struct View<'a, S> {
    pub(crate) core: &'a mut CallCore,
    /// `None`: the call was not prepared with this capability (not granted,
    /// or nothing to act on, like a run without a chat).
    pub(crate) state: Option<S>,
}

/// [`HasData`] for the views of capability `C`.
pub(crate) struct Projected<C>(PhantomData<C>);

impl<C: HostCapability> HasData for Projected<C> {
    type Data<'a> = View<'a, C::State>;
}

/// The store projected onto capability `C`'s state (a cheap clone: states
/// are `Arc`s).
pub(crate) fn project<C>(state: &mut CallState) -> View<'_, C::State>
where
    C: HostCapability,
    C::State: Clone,
{
    let (core, call) = state.project::<C::State>(C::KEY);
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
