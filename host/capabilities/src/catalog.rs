//! `toolhost:catalog/tools@0.1.0`: what the model calls a tool in this
//! invocation. Every component may import it (the load check counts it with
//! the WASI baseline): it tells a tool nothing the model is not shown. A
//! call outside an invocation (`toolhost call`) has no snapshot, and every
//! answer is none.

use std::sync::Arc;

use toolhost_core::{InvocationToolSnapshot, ToolId};
use toolhost_sandbox::CallState;
use wasmtime::component::Linker;

use crate::InvocationInputs;
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

/// One call's catalog: its invocation's snapshot, if it runs in one.
pub fn prepare(inputs: &InvocationInputs) -> Option<Arc<InvocationToolSnapshot>> {
    inputs.snapshot.clone()
}

pub(crate) fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    tools::add_to_linker::<_, Projected<Arc<InvocationToolSnapshot>>>(linker, project)
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
