//! `workspace.apply_patch`: replace one exact piece of a workspace file.
//!
//! `old_string` must come from text this invocation was shown (or from a
//! file it knows fully because it wrote it), occur exactly once (or every
//! occurrence with `replace_all`, which needs a full read), and the file
//! must not have changed since; the host checks all of it and writes
//! atomically.

use serde::Serialize;
use toolhost_guest::markdown::code;
use toolhost_guest::workspace::{self, WorkspaceWriter};
use toolhost_guest::{Arguments, Output, ToolError};

toolhost_guest::builtin_tool!(ApplyPatch, |args| apply_patch(&args, &workspace::Host));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    path: &'a str,
    chars: u64,
    words: u64,
    old_sha256: &'a str,
    sha256: &'a str,
    replacements: u32,
}

pub fn apply_patch(
    args: &Arguments,
    workspace: &impl WorkspaceWriter,
) -> Result<Output, ToolError> {
    args.only(&["path", "old_string", "new_string", "replace_all"])?;
    let path = args.required_str("path")?;
    let old = args.raw_str("old_string")?;
    let new = args.raw_str("new_string")?;
    let replace_all = args.optional_bool("replace_all")?.unwrap_or(false);
    let patched = workspace.patch(path, old, new, replace_all)?;
    // The count of replacements confirms what was changed; the file's size
    // and hashes are for programs (structured), not the model (seed §4).
    let text = format!(
        "Patched {} with {} replacement(s).",
        code(&patched.path),
        patched.replacements
    );
    let structured = Structured {
        path: &patched.path,
        chars: patched.chars,
        words: patched.words,
        old_sha256: &patched.old_sha256,
        sha256: &patched.sha256,
        replacements: patched.replacements,
    };
    Ok(Output::text(text)
        .structured(structured)
        .resource_ref(format!("workspace:{}", patched.path)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemoryWorkspace, call};

    #[test]
    fn reports_the_replacements_and_keeps_the_statistics_structured() {
        let workspace = MemoryWorkspace::with(&[("output/a.md", "one two two")]);
        let output = call(
            apply_patch,
            &workspace,
            json!({"path": "output/a.md", "old_string": "two", "new_string": "2", "replace_all": true}),
        )
        .expect("patch");
        assert_eq!(
            output.content,
            "Patched `output/a.md` with 2 replacement(s)."
        );
        assert_eq!(workspace.text("output/a.md").as_deref(), Some("one 2 2"));
        let structured = output.structured_value().expect("s");
        assert_eq!(structured["replacements"], 2);
        assert_eq!(structured["chars"], 7);
        assert_eq!(structured["words"], 3);
        for hash in ["sha256", "oldSha256"] {
            let hash = structured[hash].as_str().expect("hash");
            assert!(!output.content.contains(hash), "{}", output.content);
        }
    }

    #[test]
    fn strings_are_raw_and_required() {
        let workspace = MemoryWorkspace::with(&[("output/a.md", "  indented\n")]);
        call(
            apply_patch,
            &workspace,
            json!({"path": "output/a.md", "old_string": "  indented", "new_string": "\tdone"}),
        )
        .expect("whitespace is kept");
        assert_eq!(workspace.text("output/a.md").as_deref(), Some("\tdone\n"));
        let error = call(
            apply_patch,
            &workspace,
            json!({"path": "output/a.md", "old_string": "x"}),
        )
        .expect_err("missing");
        assert_eq!(error.message, "new_string is required");
        let error = call(
            apply_patch,
            &workspace,
            json!({"path": "output/a.md", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
        )
        .expect_err("not a boolean");
        assert_eq!(error.code, "tool.invalid_arguments");
    }
}
