//! `toolhost:control`: how a builtin control tool changes the run. Only
//! tools exported with [`export_control_tool!`](crate::export_control_tool)
//! import it, and only builtins are granted it; an extension's tool cannot
//! request an effect.
//!
//! A control tool returns its effect on its [`Output`](crate::Output) as
//! before (`Output::effect`); the control export wrapper requests it from
//! the host before the call returns.

use crate::{Arguments, Effect, ToolError};

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

/// The longest string a brief's field may hold, in UTF-8 bytes.
pub const MAX_BRIEF_FIELD_BYTES: usize = 8_000;

/// `args[key]` as a brief another agent reads (`agent.delegate`'s `task`,
/// `agent.handoff`'s `handoff`): an object with a non-blank `objective`,
/// each of `strings` a string and each of `lists` a list of strings when
/// present, other keys kept as they are, and no string in it longer than
/// [`MAX_BRIEF_FIELD_BYTES`]. Every error is `tool.invalid_arguments` and
/// names the field under `key.`.
pub fn brief(
    args: &Arguments,
    key: &str,
    strings: &[&str],
    lists: &[&str],
) -> Result<Arguments, ToolError> {
    let brief = args.required_object(key)?;
    let nested =
        |error: ToolError| ToolError::invalid_arguments(format!("{key}.{}", error.message));
    brief.required_str("objective").map_err(nested)?;
    for field in strings {
        brief.optional_raw_str(field).map_err(nested)?;
    }
    for field in lists {
        brief.optional_str_list(field).map_err(nested)?;
    }
    brief.strings_at_most(MAX_BRIEF_FIELD_BYTES, &format!("{key}."))?;
    Ok(brief)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn checked(value: serde_json::Value) -> Result<Arguments, ToolError> {
        let args = Arguments::from_value(json!({ "task": value })).expect("object");
        brief(&args, "task", &["title"], &["refs"])
    }

    #[test]
    fn a_brief_keeps_its_extra_keys() {
        let brief = checked(json!({"objective": "Find it", "title": " T ", "deadline": 3}))
            .expect("a brief");
        assert_eq!(
            brief.to_value(),
            json!({"objective": "Find it", "title": " T ", "deadline": 3})
        );
    }

    #[test]
    fn each_refusal_names_the_field_under_the_brief() {
        let long = "x".repeat(MAX_BRIEF_FIELD_BYTES + 1);
        for (value, message) in [
            (json!("text"), "task must be an object, not a string"),
            (json!({}), "task.objective is required"),
            (
                json!({"objective": "o", "title": 1}),
                "task.title must be a string",
            ),
            (
                json!({"objective": "o", "refs": "a"}),
                "task.refs must be an array of strings",
            ),
            (
                json!({"objective": "o", "note": long}),
                "task.note is 8001 bytes; at most 8000 are allowed",
            ),
        ] {
            let error = checked(value.clone()).expect_err("refused");
            assert_eq!(error.code, "tool.invalid_arguments", "{value}");
            assert!(
                error.message.starts_with(message),
                "{value}: {}",
                error.message
            );
        }
    }
}
