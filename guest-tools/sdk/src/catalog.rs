//! `toolhost:catalog`: what the model calls a tool in this invocation. A
//! profile decides which tools are offered, and extension and MCP tools get
//! aliases that depend on the snapshot, so a tool's text that points the
//! model at another tool asks here instead of writing a name down. Every
//! component may import it; no grant is needed.

/// Bindings of `toolhost:catalog/tools@0.1.0`.
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package toolhost:guest-sdk;
            world catalog-imports {
                import toolhost:catalog/tools@0.1.0;
            }
        ",
        world: "toolhost:guest-sdk/catalog-imports",
        path: ["../../wit/catalog"],
        generate_all,
    });
}

/// The name the model calls `tool` (a canonical id: `builtin:chat.read_messages`,
/// `ext/<id>:<tool>`; or a builtin's native name alone) by in this invocation; `None` when the invocation does
/// not offer it, or the call runs outside one — natively (unit tests) too.
pub fn model_name(tool: &str) -> Option<String> {
    imp::model_name(tool)
}

/// `sentence` with the model's name for `tool` in place of `{}`, or nothing
/// when the invocation does not offer `tool`: a pointer to a tool the model
/// cannot call is left out rather than written wrong.
pub fn pointer(tool: &str, sentence: &str) -> String {
    model_name(tool)
        .map(|name| sentence.replacen("{}", &name, 1))
        .unwrap_or_default()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    pub(super) fn model_name(tool: &str) -> Option<String> {
        super::bindings::toolhost::catalog::tools::model_name(tool)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) fn model_name(_: &str) -> Option<String> {
        None
    }
}
