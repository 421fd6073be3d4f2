//! What the tools that read text by 1-based line window
//! (`workspace.read_file`, `skill.read`, `chat.read_messages`) share around
//! `toolhost-text`'s window rules: `start_line`/`line_count` parsed, the
//! record of the window each reports, and a file's window as the model
//! reads it. Each tool keeps its own error codes
//! and words, and what it reports around the window (a path and a version,
//! a message's author, a budget).

use serde::Serialize;

use crate::markdown::fenced_into;
use crate::text::lines::LineWindow;
use crate::text::metrics;
use crate::{Arguments, ToolError};

/// The window a call asks for; absent is the tool's default (from line 1,
/// as many lines as the read budget allows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LineRequest {
    pub start_line: Option<u32>,
    pub line_count: Option<u32>,
}

impl LineRequest {
    /// `start_line` then `line_count` from `args`: each an optional
    /// non-negative integer (else `tool.invalid_arguments`), and one past
    /// `u32` is the tool's own error, `too_large(key, value)`. Zero is left
    /// to the window rules, which name it.
    pub fn parse(
        args: &Arguments,
        too_large: impl Fn(&str, u64) -> ToolError,
    ) -> Result<Self, ToolError> {
        let number = |key: &str| -> Result<Option<u32>, ToolError> {
            args.optional_u64(key)?
                .map(|value| u32::try_from(value).map_err(|_| too_large(key, value)))
                .transpose()
        };
        Ok(Self {
            start_line: number("start_line")?,
            line_count: number("line_count")?,
        })
    }
}

/// The facts of one window, in the order every reading tool reports them:
/// where it is in the text, its size and the whole text's, whether its line
/// was cut, where to continue. Flattened into each tool's own record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowRecord {
    pub total_lines: u32,
    pub start_line: u32,
    pub end_line: u32,
    pub chars: u64,
    pub words: u64,
    pub total_chars: u64,
    /// Reported by the tools that always did (`skill.read` never has).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_words: Option<u64>,
    pub line_truncated: bool,
    /// Whether the window is the whole text; reported by
    /// `workspace.read_file` only (see [`full_read`](Self::full_read)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_read: Option<bool>,
    pub next_start_line: Option<u32>,
}

impl WindowRecord {
    /// The record of `window`, a window of `whole`.
    pub fn new(window: &LineWindow<'_>, whole: &str) -> Self {
        let total = metrics(whole);
        Self {
            total_lines: window.total_lines,
            start_line: window.start_line,
            end_line: window.end_line,
            chars: window.chars,
            words: window.words,
            total_chars: total.chars,
            total_words: Some(total.words),
            line_truncated: window.line_truncated,
            full_read: None,
            next_start_line: window.next_start_line(),
        }
    }

    /// Also report whether the window is the whole text.
    pub fn full_read(mut self, window: &LineWindow<'_>) -> Self {
        self.full_read = Some(window.is_full());
        self
    }

    /// Leave the whole text's words out.
    pub fn without_total_words(mut self) -> Self {
        self.total_words = None;
        self
    }
}

/// How a file-reading tool words a window. `workspace.read_file` and
/// `skill.read` have always worded three things differently and models were
/// shown both, so each keeps its own, byte for byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wording {
    /// After the file's name when it has no line.
    pub empty: &'static str,
    /// Around the line count of a whole file.
    pub whole: (&'static str, &'static str),
    /// Ends the heading of a part.
    pub part_end: &'static str,
    /// Whether the continuation also names `line_count` (this window's).
    pub continue_with_line_count: bool,
}

impl Wording {
    /// `workspace.read_file`'s.
    pub const WORKSPACE: Self = Self {
        empty: " is empty (0 lines).",
        whole: (", the whole file: ", " line(s)."),
        part_end: ".",
        continue_with_line_count: true,
    };

    /// `skill.read`'s.
    pub const SKILL: Self = Self {
        empty: " is empty.",
        whole: (", the whole file (", " line(s)):"),
        part_end: ":",
        continue_with_line_count: false,
    };

    /// `window` of the file named `shown` (already in code spans), as the
    /// model reads it: a heading, the lines numbered and fenced, and where
    /// to continue when the file goes on.
    pub fn render_into(&self, shown: &str, window: &LineWindow<'_>, content: &mut String) {
        content.push_str(shown);
        if window.total_lines == 0 {
            content.push_str(self.empty);
            return;
        }
        if window.is_full() {
            let (before, after) = self.whole;
            content.push_str(&format!("{before}{}{after}\n\n", window.total_lines));
        } else {
            content.push_str(&format!(
                " lines {}-{} of {}{}\n\n",
                window.start_line, window.end_line, window.total_lines, self.part_end
            ));
        }
        fenced_into(&window.render_numbered(), content);
        if let Some(next) = window.next_start_line() {
            content.push_str(&format!(
                "\n\nPreview ended before the end of the file. Continue with start_line={next}"
            ));
            if self.continue_with_line_count {
                content.push_str(&format!(" and line_count={}", window.line_count()));
            }
            content.push('.');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::args;
    use crate::text::lines::{self, ReadLimits};
    use serde_json::json;

    fn too_large(key: &str, value: u64) -> ToolError {
        ToolError::new("demo.too_large", format!("{key} {value}"))
    }

    #[test]
    fn a_request_is_two_optional_line_numbers() {
        assert_eq!(
            LineRequest::parse(&args(json!({})), too_large),
            Ok(LineRequest::default())
        );
        assert_eq!(
            LineRequest::parse(&args(json!({"start_line": 3, "line_count": 0})), too_large),
            Ok(LineRequest {
                start_line: Some(3),
                line_count: Some(0)
            })
        );
        let error = LineRequest::parse(&args(json!({"line_count": 4294967296u64})), too_large)
            .expect_err("past u32");
        assert_eq!(
            (error.code.as_str(), error.message.as_str()),
            ("demo.too_large", "line_count 4294967296")
        );
        let error = LineRequest::parse(
            &args(json!({"start_line": -1, "line_count": 4294967296u64})),
            too_large,
        )
        .expect_err("negative");
        assert_eq!(error.code, "tool.invalid_arguments", "start_line first");
    }

    #[test]
    fn the_record_keeps_the_order_every_reading_tool_reports() {
        let text = "one two\nthree\nfour\n";
        let window = lines::select(text, Some(2), Some(1), ReadLimits::WORKSPACE).expect("window");
        let record = WindowRecord::new(&window, text);
        assert_eq!(
            serde_json::to_string(&record).expect("json"),
            r#"{"totalLines":3,"startLine":2,"endLine":2,"chars":5,"words":1,"totalChars":19,"totalWords":4,"lineTruncated":false,"nextStartLine":3}"#
        );
        assert_eq!(
            serde_json::to_string(&record.full_read(&window).without_total_words()).expect("json"),
            r#"{"totalLines":3,"startLine":2,"endLine":2,"chars":5,"words":1,"totalChars":19,"lineTruncated":false,"fullRead":false,"nextStartLine":3}"#
        );
    }

    #[test]
    fn each_wording_renders_the_empty_the_whole_and_a_part() {
        let text = "one\ntwo\nthree\n";
        let render = |wording: Wording, text: &str, start: Option<u32>, count: Option<u32>| {
            let window = lines::select(text, start, count, ReadLimits::WORKSPACE).expect("window");
            let mut content = String::new();
            wording.render_into("`a.md`", &window, &mut content);
            content
        };
        assert_eq!(
            render(Wording::WORKSPACE, "", None, None),
            "`a.md` is empty (0 lines)."
        );
        assert_eq!(render(Wording::SKILL, "", None, None), "`a.md` is empty.");
        assert_eq!(
            render(Wording::WORKSPACE, text, None, None),
            "`a.md`, the whole file: 3 line(s).\n\n```\n1 | one\n2 | two\n3 | three\n```"
        );
        assert_eq!(
            render(Wording::SKILL, text, None, None),
            "`a.md`, the whole file (3 line(s)):\n\n```\n1 | one\n2 | two\n3 | three\n```"
        );
        assert_eq!(
            render(Wording::WORKSPACE, text, Some(1), Some(2)),
            "`a.md` lines 1-2 of 3.\n\n```\n1 | one\n2 | two\n```\n\nPreview ended before the end of the file. Continue with start_line=3 and line_count=2."
        );
        assert_eq!(
            render(Wording::SKILL, text, Some(1), Some(2)),
            "`a.md` lines 1-2 of 3:\n\n```\n1 | one\n2 | two\n```\n\nPreview ended before the end of the file. Continue with start_line=3."
        );
    }
}
