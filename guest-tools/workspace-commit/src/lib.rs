//! `workspace.commit`: publish a workspace file as the run's message in the
//! chat. The tool only checks its arguments and returns a `commit` effect;
//! the host reads the file, writes the chat and answers with what it did.

use serde_json::json;
use toolhost_guest::{Arguments, CommitMode, CommitRequest, Effect, Output, ToolError};

/// `workspace.commit_mode_invalid`: `mode` is neither `replace` nor `append`.
pub const CODE_MODE_INVALID: &str = "workspace.commit_mode_invalid";

toolhost_guest::builtin_control_tool!(WorkspaceCommit, |args| commit(&args));

pub fn commit(args: &Arguments) -> Result<Output, ToolError> {
    args.only(&["path", "mode", "reason"])?;
    let path = args.optional_str("path")?;
    let mode = match args.optional_str("mode")? {
        None | Some("replace") => CommitMode::Replace,
        Some("append") => CommitMode::Append,
        Some(other) => {
            return Err(ToolError::new(
                CODE_MODE_INVALID,
                format!("mode must be \"replace\" or \"append\", not \"{other}\""),
            ));
        }
    };
    let reason = args.optional_str("reason")?;
    let target = path.unwrap_or("output/main.md");
    Ok(Output::text(format!("Commit of {target} requested."))
        .structured(json!({"path": path, "mode": mode_name(mode), "reason": reason}))
        .effect(Effect::Commit(CommitRequest {
            path: path.map(str::to_owned),
            mode,
            reason: reason.map(str::to_owned),
        })))
}

fn mode_name(mode: CommitMode) -> &'static str {
    match mode {
        CommitMode::Replace => "replace",
        CommitMode::Append => "append",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::args;

    #[test]
    fn defaults_to_replacing_with_the_message_body() {
        let output = commit(&args(json!({}))).expect("commit");
        match output.effect {
            Some(Effect::Commit(request)) => {
                assert_eq!(request.path, None, "the host applies the profile's default");
                assert!(matches!(request.mode, CommitMode::Replace));
                assert_eq!(request.reason, None);
            }
            other => panic!("expected a commit effect, got {other:?}"),
        }
    }

    #[test]
    fn append_with_a_path_and_a_reason() {
        let output = commit(&args(
            json!({"path": " output/part2.md ", "mode": "append", "reason": "second half"}),
        ))
        .expect("commit");
        match output.effect {
            Some(Effect::Commit(request)) => {
                assert_eq!(request.path.as_deref(), Some("output/part2.md"));
                assert!(matches!(request.mode, CommitMode::Append));
                assert_eq!(request.reason.as_deref(), Some("second half"));
            }
            other => panic!("expected a commit effect, got {other:?}"),
        }
    }

    #[test]
    fn bad_arguments_are_recoverable_errors() {
        let error = commit(&args(json!({"mode": "overwrite"}))).expect_err("mode");
        assert_eq!(error.code, CODE_MODE_INVALID);
        let error = commit(&args(json!({"finish": true}))).expect_err("unknown key");
        assert_eq!(error.code, "tool.invalid_arguments");
        let error = commit(&args(json!({"path": 3}))).expect_err("path type");
        assert_eq!(error.code, "tool.invalid_arguments");
        let error = commit(&args(json!({"path": "  "}))).expect_err("blank path");
        assert_eq!(error.code, "tool.invalid_arguments");
    }
}
