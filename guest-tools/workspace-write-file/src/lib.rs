//! `workspace.write_file`: replace or append to a workspace text file.
//!
//! The model never sends a version: the host checks the write against what
//! this invocation has read (replacing an existing file needs a read of its
//! current version; appending needs none) and writes atomically.

use serde::Serialize;
use toolhost_guest::markdown::code;
use toolhost_guest::workspace::{self, WorkspaceWriter, WriteMode};
use toolhost_guest::{Arguments, Output, ToolError};

toolhost_guest::builtin_tool!(WriteFile, |args| write_file(&args, &workspace::Host));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    path: &'a str,
    mode: &'static str,
    chars: u64,
    words: u64,
    sha256: &'a str,
    created: bool,
}

pub fn write_file(args: &Arguments, workspace: &impl WorkspaceWriter) -> Result<Output, ToolError> {
    args.only(&["path", "content", "mode"])?;
    let path = args.required_str("path")?;
    let content = args.raw_str("content")?;
    let mode = match args.optional_str("mode") {
        Ok(None) | Ok(Some("replace")) => WriteMode::Replace,
        Ok(Some("append")) => WriteMode::Append,
        Ok(Some(_)) | Err(_) => {
            return Err(ToolError::new(
                "workspace.write_mode_invalid",
                "mode must be `replace` or `append`",
            ));
        }
    };
    let written = workspace.write(path, content, mode)?;
    let (verb, mode_name) = match mode {
        WriteMode::Replace => ("Wrote", "replace"),
        WriteMode::Append => ("Appended to", "append"),
    };
    // Where it went and whether the file is new; the size and the hash are
    // for programs (structured), not the model (seed §4).
    let created = if written.created { " (a new file)" } else { "" };
    let text = format!("{verb} {}{created}.", code(&written.path));
    let structured = Structured {
        path: &written.path,
        mode: mode_name,
        chars: written.chars,
        words: written.words,
        sha256: &written.sha256,
        created: written.created,
    };
    Ok(Output::text(text)
        .structured(structured)
        .resource_ref(format!("workspace:{}", written.path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemoryWorkspace, call};

    #[test]
    fn replace_and_append_report_what_was_written() {
        let workspace = MemoryWorkspace::default();
        let output = call(
            write_file,
            &workspace,
            json!({"path": "output/a.md", "content": "Hello world"}),
        )
        .expect("write");
        assert_eq!(output.content, "Wrote `output/a.md` (a new file).");
        let structured = output.structured_value().expect("structured");
        assert_eq!(
            (&structured["chars"], &structured["words"]),
            (&json!(11), &json!(2))
        );
        let sha256 = structured["sha256"].as_str().expect("sha256");
        assert!(!output.content.contains(sha256));
        let output = call(
            write_file,
            &workspace,
            json!({"path": "output/a.md", "content": "\nMore", "mode": "append"}),
        )
        .expect("append");
        assert_eq!(output.content, "Appended to `output/a.md`.");
        assert_eq!(
            workspace.text("output/a.md").as_deref(),
            Some("Hello world\nMore")
        );
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["mode"], "append");
        assert_eq!(output.resource_refs, ["workspace:output/a.md"]);
    }

    #[test]
    fn content_is_verbatim_and_the_mode_is_checked() {
        let workspace = MemoryWorkspace::default();
        call(
            write_file,
            &workspace,
            json!({"path": "output/a.md", "content": "  spaced\n\n"}),
        )
        .expect("write");
        assert_eq!(
            workspace.text("output/a.md").as_deref(),
            Some("  spaced\n\n")
        );
        call(
            write_file,
            &workspace,
            json!({"path": "output/e.md", "content": ""}),
        )
        .expect("an empty file is fine");
        for mode in [json!("overwrite"), json!(""), json!(3)] {
            let error = call(
                write_file,
                &workspace,
                json!({"path": "output/a.md", "content": "x", "mode": mode}),
            )
            .expect_err("bad mode");
            assert_eq!(error.code, "workspace.write_mode_invalid");
            assert_eq!(error.message, "mode must be `replace` or `append`");
        }
        let error =
            call(write_file, &workspace, json!({"path": "output/a.md"})).expect_err("no content");
        assert_eq!(error.message, "content is required");
    }
}
