//! `worldinfo-read`: the world-info entries activated for the run. A run
//! without them is normal: the tool gets the recoverable
//! `worldinfo.activation_unavailable`.

use std::sync::Arc;

use toolhost_core::{Capability, HostCallError};
use toolhost_sandbox::{CallState, HostFault};
use toolhost_worldinfo::Activation;
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::bindings::toolhost::host::{capability_types as types, worldinfo_read as worldinfo};
use crate::lifecycle::{BindInputs, HostCapability};
use crate::view::{Projected, View, project};

/// `worldinfo-read`.
pub struct WorldinfoRead;

impl HostCapability for WorldinfoRead {
    const KEY: &'static str = "worldinfo-read";
    type Bound = Arc<Activation>;
    type State = Arc<Activation>;

    /// The run's activation, if it has one.
    fn bind(inputs: &BindInputs) -> Option<Self::Bound> {
        inputs.run.as_ref()?.worldinfo.clone()
    }

    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        Ok(bound
            .filter(|_| grant.has(Capability::WorldinfoRead))
            .cloned())
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        worldinfo::add_to_linker::<_, Projected<Self>>(linker, project::<Self>)
    }
}

impl worldinfo::Host for View<'_, Arc<Activation>> {
    fn activated(
        &mut self,
    ) -> wasmtime::Result<Result<worldinfo::Activation, types::CapabilityError>> {
        let result = match &self.state {
            None => Err(HostCallError::recoverable(
                "worldinfo.activation_unavailable",
                "no world info was activated for this run",
            )),
            Some(activation) => Ok(activation_record(activation)),
        };
        self.answer(result)
    }
}

fn activation_record(activation: &Activation) -> worldinfo::Activation {
    worldinfo::Activation {
        entries: activation
            .entries()
            .iter()
            .map(|entry| worldinfo::Entry {
                index: u32::try_from(entry.index).unwrap_or(u32::MAX),
                world: entry.world.clone(),
                uid: entry.uid.clone(),
                display_name: entry.display_name.clone(),
                constant: entry.constant,
                position: entry.position.clone(),
                content: entry.content.clone(),
                reference: entry.reference.clone(),
            })
            .collect(),
        timestamp_ms: activation.timestamp_ms(),
        trigger: activation.trigger().map(str::to_owned),
    }
}
