//! `toolhost:control`: how a builtin control tool changes the run. Only
//! tools exported with [`export_control_tool!`](crate::export_control_tool)
//! import it, and only builtins are granted it; an extension's tool cannot
//! request an effect.
//!
//! A control tool returns its effect on its [`Output`](crate::Output) as
//! before (`Output::effect`); the control export wrapper requests it from
//! the host before the call returns.

use crate::{Effect, ToolError};

/// Bindings of `toolhost:control/effects@0.1.0`, sharing the tool
/// contract's types with [`crate::bindings`].
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package toolhost:guest-sdk;
            world control-imports {
                import toolhost:control/effects@0.1.0;
            }
        ",
        world: "toolhost:guest-sdk/control-imports",
        path: ["../../wit/tool", "../../wit/host-0.1.4", "../../wit/control"],
        with: {
            "toolhost:tool/types@0.1.0": crate::bindings::toolhost::tool::types,
            "toolhost:control/effects@0.1.0": generate,
        },
    });
}

/// Ask the host to apply `effect` after this call returns successfully.
pub fn request(effect: &Effect) -> Result<(), ToolError> {
    imp::request(effect).map_err(|message| ToolError::new("control.effect_refused", message))
}

#[cfg(target_arch = "wasm32")]
mod imp {
    pub(super) fn request(effect: &crate::Effect) -> Result<(), String> {
        super::bindings::toolhost::control::effects::request(effect)
    }
}

/// Natively (unit tests) there is no host: a control tool's tests read the
/// effect off its `Output`.
#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) fn request(_: &crate::Effect) -> Result<(), String> {
        Ok(())
    }
}
