//! `workspace.finish`: end the run's tool loop. The tool returns a `finish`
//! effect; the host checks the run may finish (a foreground run needs a
//! successful commit), cancels the caller's unfinished child tasks and
//! promotes `persist/`.

use serde_json::json;
use toolhost_guest::{Arguments, Effect, FinishRequest, Output, ToolError};

toolhost_guest::builtin_control_tool!(WorkspaceFinish, |args| finish(&args));

pub fn finish(args: &Arguments) -> Result<Output, ToolError> {
    args.only(&["reason"])?;
    let reason = args.optional_str("reason")?;
    Ok(Output::text("Finish requested.")
        .structured(json!({ "reason": reason }))
        .effect(Effect::Finish(FinishRequest {
            reason: reason.map(str::to_owned),
        })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_a_finish_effect_with_its_reason() {
        let args = Arguments::from_value(json!({"reason": "reply committed"})).expect("object");
        match finish(&args).expect("finish").effect {
            Some(Effect::Finish(request)) => {
                assert_eq!(request.reason.as_deref(), Some("reply committed"))
            }
            other => panic!("expected a finish effect, got {other:?}"),
        }
        let none = finish(&Arguments::default()).expect("finish");
        assert!(matches!(
            none.effect,
            Some(Effect::Finish(FinishRequest { reason: None }))
        ));
        let bad = Arguments::from_value(json!({"commit": true})).expect("object");
        assert_eq!(
            finish(&bad).expect_err("unknown").code,
            "tool.invalid_arguments"
        );
    }
}
