//! `workspace.read_file`: read a workspace text file by 1-based line window.
//!
//! Omitting `start_line`/`line_count` asks for the whole file. A file (or a
//! window) over the read budget — 1,200 lines, 80,000 characters, 256 KiB for
//! a whole-file read — still succeeds: it returns a leading preview, says
//! where it stopped and how to continue (`nextStartLine`). What the model was
//! shown is reported to the host (`record-read`), which checks later edits of
//! this invocation against it.
//!
//! The text says what the next read needs — line numbers, the total lines,
//! where to continue — and no statistics (characters, words, the version
//! hash): the model does not act on them (seed §4). The structured result
//! keeps them for programs.

use serde::Serialize;
use toolhost_guest::line_read::{LineRequest, WindowRecord, Wording};
use toolhost_guest::markdown::code;
use toolhost_guest::text::lines::{self, ReadLimits};
use toolhost_guest::workspace::{self, Workspace};
use toolhost_guest::{Arguments, Output, ToolError};

toolhost_guest::builtin_tool!(ReadFile, |args| read_file(&args, &workspace::Host));

#[derive(Serialize)]
struct Structured<'a> {
    path: &'a str,
    sha256: &'a str,
    #[serde(flatten)]
    window: WindowRecord,
}

/// Read through `workspace` (the host inside the sandbox, anything natively).
pub fn read_file(args: &Arguments, workspace: &impl Workspace) -> Result<Output, ToolError> {
    args.only(&["path", "start_line", "line_count"])?;
    let path = args.required_str("path")?;
    // A line number or count past u32 is beyond any file (0 is the
    // line-window rules' own error).
    let request = LineRequest::parse(args, |key, value| {
        ToolError::new(
            "workspace.invalid_line_range",
            format!("{key} {value} is beyond any file"),
        )
    })?;

    let file = workspace.read_text(path)?;
    let window = lines::select(
        &file.text,
        request.start_line,
        request.line_count,
        ReadLimits::WORKSPACE,
    )
    .map_err(|error| ToolError::new("workspace.invalid_line_range", error.to_string()))?;
    let seen = (!window.is_full()).then_some(window.text);
    workspace.record_read(&file.path, &file.sha256, seen)?;

    let shown = code(&file.path);
    let mut content = String::with_capacity(window.text.len() + 256);
    Wording::WORKSPACE.render_into(&shown, &window, &mut content);
    if window.line_truncated {
        content.push_str(&format!(
            "\n\nLine {} is longer than the read budget and was cut; use workspace_search_files to find text inside it.",
            window.start_line
        ));
    }
    let structured = Structured {
        path: &file.path,
        sha256: &file.sha256,
        window: WindowRecord::new(&window, &file.text).full_read(&window),
    };
    Ok(Output::text(content)
        .structured(structured)
        .resource_ref(workspace::line_ref(
            &file.path,
            window.start_line,
            window.end_line,
        )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemoryWorkspace, call, transcript};

    #[test]
    fn a_whole_file_is_shown_numbered_and_recorded_as_a_full_read() {
        let workspace = MemoryWorkspace::with(&[("output/a.md", "# Title\n\nBody with `code`.\n")]);
        let output = call(read_file, &workspace, json!({"path": "output/a.md"})).expect("read");
        assert_eq!(
            output.content,
            "`output/a.md`, the whole file: 3 line(s).\n\n```\n1 | # Title\n2 | \n3 | Body with `code`.\n```"
        );
        let reads = workspace.reads.borrow();
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].2, None, "a full read");
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["fullRead"], true);
        assert_eq!(structured["totalLines"], 3);
        assert_eq!(output.resource_refs, ["workspace:output/a.md#L1-L3"]);
    }

    #[test]
    fn a_window_is_a_partial_read_with_a_continuation_hint() {
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let workspace = MemoryWorkspace::with(&[("plan/p.md", &text)]);
        let output = call(
            read_file,
            &workspace,
            json!({"path": "plan/p.md", "start_line": 3, "line_count": 2}),
        )
        .expect("read");
        assert!(
            output
                .content
                .starts_with("`plan/p.md` lines 3-4 of 10.\n\n"),
            "{}",
            output.content
        );
        assert!(
            output.content.contains("```\n3 | line 3\n4 | line 4\n```"),
            "{}",
            output.content
        );
        assert!(
            output
                .content
                .ends_with("Continue with start_line=5 and line_count=2."),
            "{}",
            output.content
        );
        assert_eq!(
            workspace.reads.borrow()[0].2.as_deref(),
            Some("line 3\nline 4")
        );
    }

    #[test]
    fn an_oversized_file_previews_within_the_budget() {
        let text: String = (1..=1500).map(|n| format!("{n}\n")).collect();
        let workspace = MemoryWorkspace::with(&[("output/big.txt", &text)]);
        let output = call(read_file, &workspace, json!({"path": "output/big.txt"}))
            .expect("a preview, not an error");
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["endLine"], 1200);
        assert_eq!(structured["nextStartLine"], 1201);
        assert_eq!(structured["fullRead"], false);
        assert!(output.content.contains("start_line=1201"));
    }

    #[test]
    fn bad_ranges_and_arguments_are_typed_errors() {
        let workspace = MemoryWorkspace::with(&[("output/a.md", "one\ntwo\n")]);
        let error = call(
            read_file,
            &workspace,
            json!({"path": "output/a.md", "start_line": 3}),
        )
        .expect_err("beyond");
        assert_eq!(error.code, "workspace.invalid_line_range");
        assert_eq!(error.message, "start_line 3 is beyond total lines 2");
        let error = call(
            read_file,
            &workspace,
            json!({"path": "output/a.md", "line_count": 0}),
        )
        .expect_err("zero");
        assert_eq!(error.message, "line_count must be >= 1");
        let error = call(
            read_file,
            &workspace,
            json!({"path": "output/a.md", "start_char": 3}),
        )
        .expect_err("G1 args");
        assert_eq!(error.code, "tool.invalid_arguments");
        let error =
            call(read_file, &workspace, json!({"path": "output/missing.md"})).expect_err("missing");
        assert_eq!(error.code, "workspace.file_not_found");
        assert!(
            workspace.reads.borrow().is_empty(),
            "nothing shown, nothing recorded"
        );
    }

    #[test]
    fn the_text_carries_no_statistics_and_the_structured_result_keeps_them() {
        let text: String = (1..=10).map(|n| format!("word {n}\n")).collect();
        let workspace = MemoryWorkspace::with(&[("plan/p.md", &text)]);
        for args in [
            json!({"path": "plan/p.md"}),
            json!({"path": "plan/p.md", "start_line": 2, "line_count": 3}),
        ] {
            let output = call(read_file, &workspace, args).expect("read");
            let structured = output.structured_value().expect("structured");
            let sha256 = structured["sha256"].as_str().expect("sha256");
            for statistic in ["chars", "words", sha256] {
                assert!(!output.content.contains(statistic), "{}", output.content);
            }
            assert!(structured["totalChars"].as_u64().is_some());
            assert!(structured["totalWords"].as_u64().is_some());
        }
    }

    #[test]
    fn an_empty_file_says_so() {
        let workspace = MemoryWorkspace::with(&[("output/e.md", "")]);
        let output = call(read_file, &workspace, json!({"path": "output/e.md"})).expect("read");
        assert_eq!(output.content, "`output/e.md` is empty (0 lines).");
    }

    /// The model-facing output, byte for byte: pinned so a refactor of the
    /// shared records cannot change what the model or a program reads.
    #[test]
    fn the_output_is_pinned() {
        let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
        let workspace = MemoryWorkspace::with(&[("plan/p.md", &text)]);
        let got: String = [
            json!({"path": "plan/p.md"}),
            json!({"path": "plan/p.md", "start_line": 3, "line_count": 2}),
            json!({"path": "plan/p.md", "start_line": 4294967296u64}),
            json!({"path": "plan/p.md", "line_count": -1}),
        ]
        .into_iter()
        .map(|args| transcript(&call(read_file, &workspace, args)))
        .collect();
        assert_eq!(
            got,
            "`plan/p.md`, the whole file: 10 line(s).\n\n```\n 1 | line 1\n 2 | line 2\n 3 | line 3\n 4 | line 4\n 5 | line 5\n 6 | line 6\n 7 | line 7\n 8 | line 8\n 9 | line 9\n10 | line 10\n```\n{\"path\":\"plan/p.md\",\"sha256\":\"65ab00cf0a3624a1\",\"totalLines\":10,\"startLine\":1,\"endLine\":10,\"chars\":70,\"words\":20,\"totalChars\":71,\"totalWords\":20,\"lineTruncated\":false,\"fullRead\":true,\"nextStartLine\":null}\n[\"workspace:plan/p.md#L1-L10\"]\n`plan/p.md` lines 3-4 of 10.\n\n```\n3 | line 3\n4 | line 4\n```\n\nPreview ended before the end of the file. Continue with start_line=5 and line_count=2.\n{\"path\":\"plan/p.md\",\"sha256\":\"65ab00cf0a3624a1\",\"totalLines\":10,\"startLine\":3,\"endLine\":4,\"chars\":13,\"words\":4,\"totalChars\":71,\"totalWords\":20,\"lineTruncated\":false,\"fullRead\":false,\"nextStartLine\":5}\n[\"workspace:plan/p.md#L3-L4\"]\nworkspace.invalid_line_range: start_line 4294967296 is beyond any file\ntool.invalid_arguments: line_count must be a non-negative integer\n"
        );
    }
}
