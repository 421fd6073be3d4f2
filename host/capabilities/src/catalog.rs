//! `toolhost:catalog/tools@0.1.0`: what the model calls a tool in this
//! invocation. Every component may import it (the load check counts it with
//! the WASI baseline): it tells a tool nothing the model is not shown. A
//! call outside an invocation (`toolhost call`) has no snapshot, and every
//! answer is none.

use std::sync::Arc;

use toolhost_core::{InvocationToolSnapshot, ToolId};
use toolhost_sandbox::{CallState, HostFault};
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::lifecycle::{BindInputs, HostCapability};
use crate::view::{Projected, View, project};

mod bindings {
    wasmtime::component::bindgen!({
        inline: "
            package toolhost:host-bindings;
            world catalog-imports {
                import toolhost:catalog/tools@0.1.0;
            }
        ",
        path: ["../../wit/catalog"],
        imports: { default: trappable },
    });
}

use bindings::toolhost::catalog::tools;

/// `toolhost:catalog/tools`.
pub struct Catalog;

impl HostCapability for Catalog {
    const KEY: &'static str = "catalog";
    type Bound = Arc<InvocationToolSnapshot>;
    type State = Arc<InvocationToolSnapshot>;

    /// The invocation's snapshot, if the call runs in one.
    fn bind(inputs: &BindInputs) -> Option<Self::Bound> {
        inputs.snapshot.clone()
    }

    /// Every component may ask what the model calls a tool; only one that
    /// imports the interface is given the state, so no other call pays
    /// for it.
    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        Ok(bound.filter(|_| grant.catalog).cloned())
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        tools::add_to_linker::<_, Projected<Self>>(linker, project::<Self>)
    }
}

impl tools::Host for View<'_, Arc<InvocationToolSnapshot>> {
    fn model_name(&mut self, tool: String) -> wasmtime::Result<Option<String>> {
        let Some(snapshot) = &self.state else {
            return Ok(None);
        };
        // A bare native name is a builtin's.
        let id = if tool.contains(':') {
            ToolId::parse(&tool)
        } else {
            ToolId::builtin(&tool)
        };
        Ok(id
            .ok()
            .and_then(|id| snapshot.binding(&id))
            .map(|binding| binding.model_alias.clone()))
    }
}
