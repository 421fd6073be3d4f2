//! The line-window read contract: every model-visible text read is addressed
//! by a 1-based `start_line` and a `line_count`, and an over-budget read is a
//! successful preview that says where to continue.
//!
//! Rules of [`select`]:
//!
//! - Lines are separated by `\n`; a trailing `\n` does not open an extra empty
//!   line, and a `\r` before a `\n` stays part of its line (see the
//!   [crate documentation](crate)). Empty text has 0 lines and is addressed
//!   as line 1: the window is start 1, end 0, empty.
//! - `start_line` defaults to 1, `line_count` to "through the end". A
//!   `start_line` of 0, a `line_count` of 0 and a `start_line` beyond
//!   `max(total_lines, 1)` are errors ([`LineRangeError`]).
//! - The window ends at `min(start + count - 1, total)`, and at most
//!   `start + max_lines - 1`.
//! - Lines are added from the start while `used + separator + line_chars <=
//!   max_chars`, where the separating newline costs 1. A first line that alone
//!   exceeds the budget is clipped to `max_chars` characters (on a character
//!   boundary) and flagged `line_truncated`; a later line that does not fit
//!   ends the window before it.
//! - The character budget is unlimited when a full read was requested (neither
//!   `start_line` nor `line_count`) and the text is within
//!   [`MAX_FULL_READ_BYTES`], the line limit and the caller's character
//!   budget; otherwise it is the caller's budget ([`ReadLimits::max_chars`],
//!   [`MAX_READ_CHARS`] for `workspace.read_file`, smaller for `skill.read`).
//!   The budget check uses the caller's budget rather than a fixed 80,000 so
//!   that a smaller budget is never exceeded; with that, a full read that
//!   qualifies fits its budget anyway, so the two cases return the same
//!   window.

use std::fmt::{self, Write as _};

use crate::metrics;

/// Most lines one read returns.
pub const MAX_READ_LINES: u32 = 1200;
/// Character budget of one `workspace.read_file` call.
pub const MAX_READ_CHARS: usize = 80_000;
/// Largest text (in bytes) a full read may return without a budget.
pub const MAX_FULL_READ_BYTES: usize = 256 * 1024;

/// A reading tool's limits for one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Most lines in one window; 0 counts as 1.
    pub max_lines: u32,
    /// Character budget of the returned text (newlines included). With 0 the
    /// window is the first line clipped to nothing (or an empty first line);
    /// a caller with no budget left should refuse before selecting.
    pub max_chars: usize,
}

impl ReadLimits {
    /// `workspace.read_file`: [`MAX_READ_LINES`] lines, [`MAX_READ_CHARS`] chars.
    pub const WORKSPACE: Self = Self {
        max_lines: MAX_READ_LINES,
        max_chars: MAX_READ_CHARS,
    };

    /// [`MAX_READ_LINES`] lines and the given character budget (for example
    /// the smaller of `skill.read`'s per-call and remaining budgets).
    pub const fn with_max_chars(max_chars: usize) -> Self {
        Self {
            max_lines: MAX_READ_LINES,
            max_chars,
        }
    }
}

impl Default for ReadLimits {
    fn default() -> Self {
        Self::WORKSPACE
    }
}

/// An invalid `start_line` / `line_count`. The tool maps it to its own error
/// code (`workspace.invalid_line_range`, `chat.invalid_message_range`, …) and
/// uses the [`Display`](fmt::Display) text as the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRangeError {
    /// "start_line must be >= 1"
    StartLineZero,
    /// "line_count must be >= 1"
    LineCountZero,
    /// "start_line N is beyond total lines T"
    StartLineBeyondEnd { start_line: u32, total_lines: u32 },
}

impl fmt::Display for LineRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::StartLineZero => f.write_str("start_line must be >= 1"),
            Self::LineCountZero => f.write_str("line_count must be >= 1"),
            Self::StartLineBeyondEnd {
                start_line,
                total_lines,
            } => write!(
                f,
                "start_line {start_line} is beyond total lines {total_lines}"
            ),
        }
    }
}

impl std::error::Error for LineRangeError {}

/// The lines one read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineWindow<'a> {
    /// First line returned (1-based; 1 for empty text).
    pub start_line: u32,
    /// Last line returned; `start_line - 1` when nothing was returned (empty
    /// text).
    pub end_line: u32,
    /// Lines in the whole text.
    pub total_lines: u32,
    /// The returned lines joined by `\n` (a slice of the input; no trailing
    /// newline), the first one clipped when `line_truncated`.
    pub text: &'a str,
    /// The only returned line was longer than the budget and was clipped.
    pub line_truncated: bool,
    /// Characters in `text`.
    pub chars: u64,
    /// Words in `text` (see [`metrics`](mod@crate::metrics)).
    pub words: u64,
}

impl LineWindow<'_> {
    /// Whether the window is less than the whole text: it starts after line 1,
    /// ends before the last line, or clipped its line.
    pub fn truncated(&self) -> bool {
        self.line_truncated || self.start_line > 1 || self.end_line < self.total_lines
    }

    /// Whether the window is the whole text, so the caller saw all of it.
    pub fn is_full(&self) -> bool {
        !self.truncated()
    }

    /// Where to continue: the line after the window, if there is one.
    pub fn next_start_line(&self) -> Option<u32> {
        (self.end_line < self.total_lines).then(|| self.end_line + 1)
    }

    /// Lines returned (0 for empty text).
    pub fn line_count(&self) -> u32 {
        (self.end_line + 1).saturating_sub(self.start_line)
    }

    /// The window as `{n:>width} | {line}` rows joined by `\n`, where width is
    /// the number of digits of the last line number shown; empty when no line
    /// was returned.
    pub fn render_numbered(&self) -> String {
        let mut out = String::new();
        self.render_numbered_into(&mut out);
        out
    }

    /// [`render_numbered`](Self::render_numbered), appended to `out`.
    pub fn render_numbered_into(&self, out: &mut String) {
        if self.end_line >= self.start_line {
            push_numbered(out, self.text, self.start_line, self.end_line);
        }
    }
}

/// The lines of `text` (see the [module documentation](self)).
pub fn lines(text: &str) -> std::str::SplitTerminator<'_, char> {
    text.split_terminator('\n')
}

/// How many lines `text` has: 0 for empty text, and a trailing `\n` does not
/// add one. Saturates at `u32::MAX`.
pub fn total_lines(text: &str) -> u32 {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    let open_last_line = usize::from(!text.is_empty() && !text.ends_with('\n'));
    saturate(newlines + open_last_line)
}

/// Selects the lines a read returns; see the [module documentation](self).
pub fn select(
    text: &str,
    start_line: Option<u32>,
    line_count: Option<u32>,
    limits: ReadLimits,
) -> Result<LineWindow<'_>, LineRangeError> {
    let start = match start_line {
        Some(0) => return Err(LineRangeError::StartLineZero),
        Some(start) => start,
        None => 1,
    };
    if line_count == Some(0) {
        return Err(LineRangeError::LineCountZero);
    }
    let total = total_lines(text);
    if start > total.max(1) {
        return Err(LineRangeError::StartLineBeyondEnd {
            start_line: start,
            total_lines: total,
        });
    }
    if total == 0 {
        return Ok(LineWindow {
            start_line: 1,
            end_line: 0,
            total_lines: 0,
            text: "",
            line_truncated: false,
            chars: 0,
            words: 0,
        });
    }

    let max_lines = limits.max_lines.max(1);
    let full_read = start_line.is_none() && line_count.is_none();
    // Short-circuits so the character count only runs on small texts.
    let max_chars = if full_read
        && text.len() <= MAX_FULL_READ_BYTES
        && total <= max_lines
        && text.chars().count() <= limits.max_chars
    {
        usize::MAX
    } else {
        limits.max_chars
    };

    let requested_end =
        line_count.map_or(total, |count| start.saturating_add(count - 1).min(total));
    let last = requested_end.min(start.saturating_add(max_lines - 1));

    let mut offset = 0_usize; // byte offset of the current line
    let mut window_start = 0_usize;
    let mut window_end = 0_usize;
    let mut used = 0_usize;
    let mut end_line = start - 1;
    let mut line_truncated = false;
    for (number, line) in (1_u32..).zip(lines(text)) {
        if number < start {
            offset += line.len() + 1;
            continue;
        }
        if number > last {
            break;
        }
        if number == start {
            window_start = offset;
        }
        let separator = usize::from(number > start);
        let line_chars = line.chars().count();
        if used.saturating_add(separator).saturating_add(line_chars) <= max_chars {
            used += separator + line_chars;
            window_end = offset + line.len();
            end_line = number;
            offset += line.len() + 1;
            continue;
        }
        if number == start {
            // The first line alone is over budget: clip it.
            let cut = line
                .char_indices()
                .nth(max_chars)
                .map_or(line.len(), |(index, _)| index);
            window_end = offset + cut;
            used = max_chars;
            end_line = number;
            line_truncated = true;
        }
        break;
    }

    let selected = &text[window_start..window_end];
    Ok(LineWindow {
        start_line: start,
        end_line,
        total_lines: total,
        text: selected,
        line_truncated,
        chars: used as u64,
        words: metrics::words(selected),
    })
}

/// Appends `text`'s lines (split on `\n`) numbered from `first` as
/// `{n:>width} | {line}` rows joined by `\n`, width being the digits of
/// `last`, the number of the last row.
pub(crate) fn push_numbered(out: &mut String, text: &str, first: u32, last: u32) {
    let width = digits(last);
    for (number, line) in (first..).zip(text.split('\n')) {
        if number > first {
            out.push('\n');
        }
        // Writing to a String cannot fail.
        let _ = write!(out, "{number:>width$} | ");
        out.push_str(line);
    }
}

fn digits(mut n: u32) -> usize {
    let mut digits = 1;
    while n >= 10 {
        n /= 10;
        digits += 1;
    }
    digits
}

pub(crate) fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: ReadLimits = ReadLimits::WORKSPACE;

    fn numbered_text(lines: u32) -> String {
        (1..=lines)
            .map(|n| format!("line {n}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn empty_text_is_line_one_with_no_rows() {
        let window = select("", None, None, W).unwrap();
        assert_eq!(
            (window.start_line, window.end_line, window.total_lines),
            (1, 0, 0)
        );
        assert_eq!(window.text, "");
        assert_eq!((window.chars, window.words), (0, 0));
        assert_eq!(window.line_count(), 0);
        assert_eq!(window.next_start_line(), None);
        assert!(!window.truncated());
        assert!(window.is_full());
        assert_eq!(window.render_numbered(), "");
        // Line 1 is addressable, line 2 is not.
        assert_eq!(select("", Some(1), Some(5), W).unwrap().end_line, 0);
        assert_eq!(
            select("", Some(2), None, W).unwrap_err().to_string(),
            "start_line 2 is beyond total lines 0"
        );
    }

    #[test]
    fn one_line() {
        let window = select("hello world", None, None, W).unwrap();
        assert_eq!(
            (window.start_line, window.end_line, window.total_lines),
            (1, 1, 1)
        );
        assert_eq!(window.text, "hello world");
        assert_eq!((window.chars, window.words), (11, 2));
        assert!(window.is_full());
        assert_eq!(window.render_numbered(), "1 | hello world");
    }

    #[test]
    fn trailing_newline_does_not_add_a_line() {
        assert_eq!(total_lines("a\nb\n"), 2);
        assert_eq!(total_lines("a\nb"), 2);
        assert_eq!(total_lines("a\n\n"), 2);
        assert_eq!(total_lines("\n"), 1);
        assert_eq!(total_lines(""), 0);

        let window = select("a\nb\n", None, None, W).unwrap();
        assert_eq!((window.end_line, window.total_lines), (2, 2));
        assert_eq!(window.text, "a\nb");
        assert!(window.is_full());
        assert_eq!(
            select("a\nb\n", Some(3), None, W).unwrap_err(),
            LineRangeError::StartLineBeyondEnd {
                start_line: 3,
                total_lines: 2
            }
        );

        // An empty last line before the final newline is still a line.
        let window = select("a\n\n", Some(2), None, W).unwrap();
        assert_eq!((window.start_line, window.end_line), (2, 2));
        assert_eq!(window.text, "");
        assert_eq!(window.render_numbered(), "2 | ");

        let window = select("\n", None, None, W).unwrap();
        assert_eq!((window.end_line, window.total_lines), (1, 1));
        assert_eq!(window.render_numbered(), "1 | ");
    }

    #[test]
    fn zero_arguments_are_errors_with_the_reference_messages() {
        assert_eq!(
            select("a", Some(0), None, W).unwrap_err().to_string(),
            "start_line must be >= 1"
        );
        assert_eq!(
            select("a", None, Some(0), W).unwrap_err().to_string(),
            "line_count must be >= 1"
        );
        // start_line is checked first.
        assert_eq!(
            select("a", Some(0), Some(0), W).unwrap_err(),
            LineRangeError::StartLineZero
        );
    }

    #[test]
    fn start_beyond_total() {
        let text = numbered_text(3);
        assert_eq!(select(&text, Some(3), None, W).unwrap().text, "line 3");
        assert_eq!(
            select(&text, Some(4), Some(1), W).unwrap_err().to_string(),
            "start_line 4 is beyond total lines 3"
        );
        assert_eq!(
            select(&text, Some(u32::MAX), None, W)
                .unwrap_err()
                .to_string(),
            format!("start_line {} is beyond total lines 3", u32::MAX)
        );
    }

    #[test]
    fn a_window_in_the_middle() {
        let text = numbered_text(10);
        let window = select(&text, Some(4), Some(3), W).unwrap();
        assert_eq!((window.start_line, window.end_line), (4, 6));
        assert_eq!(window.text, "line 4\nline 5\nline 6");
        assert_eq!(window.chars, 20);
        assert_eq!(window.words, 6);
        assert_eq!(window.line_count(), 3);
        assert_eq!(window.next_start_line(), Some(7));
        assert!(window.truncated());
        assert!(!window.is_full());
        assert_eq!(
            window.render_numbered(),
            "4 | line 4\n5 | line 5\n6 | line 6"
        );

        // A count past the end stops at the last line.
        let window = select(&text, Some(9), Some(u32::MAX), W).unwrap();
        assert_eq!((window.end_line, window.next_start_line()), (10, None));
        // Starting after line 1 is truncated even when it reaches the end.
        assert!(window.truncated());
        // Line 1 through the end is full.
        assert!(select(&text, Some(1), Some(10), W).unwrap().is_full());
    }

    #[test]
    fn exactly_1200_lines_read_in_full() {
        let text = numbered_text(1200);
        let window = select(&text, None, None, W).unwrap();
        assert_eq!((window.end_line, window.total_lines), (1200, 1200));
        assert_eq!(window.text, text);
        assert!(window.is_full());
        assert_eq!(window.next_start_line(), None);
    }

    #[test]
    fn line_1201_is_left_for_the_next_read() {
        let text = numbered_text(1201);
        let window = select(&text, None, None, W).unwrap();
        assert_eq!((window.end_line, window.total_lines), (1200, 1201));
        assert!(window.text.ends_with("\nline 1200"));
        assert_eq!(window.next_start_line(), Some(1201));
        assert!(window.truncated());

        let rest = select(&text, Some(1201), None, W).unwrap();
        assert_eq!((rest.start_line, rest.end_line), (1201, 1201));
        assert_eq!(rest.text, "line 1201");
    }

    #[test]
    fn an_explicit_window_is_capped_at_1200_lines() {
        let text = numbered_text(3000);
        let window = select(&text, Some(101), Some(2000), W).unwrap();
        assert_eq!((window.start_line, window.end_line), (101, 1300));
        assert_eq!(window.line_count(), 1200);
        assert_eq!(window.next_start_line(), Some(1301));
        assert!(window.text.starts_with("line 101\n"));
        assert!(window.text.ends_with("\nline 1300"));

        let small = ReadLimits {
            max_lines: 2,
            max_chars: 1000,
        };
        assert_eq!(select(&text, None, None, small).unwrap().end_line, 2);
        let zero = ReadLimits {
            max_lines: 0,
            max_chars: 1000,
        };
        assert_eq!(select(&text, None, None, zero).unwrap().end_line, 1);
    }

    #[test]
    fn a_100000_char_line_is_clipped() {
        let text = "x".repeat(100_000);
        let window = select(&text, None, None, W).unwrap();
        assert_eq!(
            (window.start_line, window.end_line, window.total_lines),
            (1, 1, 1)
        );
        assert_eq!(window.text.len(), MAX_READ_CHARS);
        assert_eq!(window.chars, MAX_READ_CHARS as u64);
        assert_eq!(window.words, 1);
        assert!(window.line_truncated);
        assert!(window.truncated());
        assert_eq!(window.next_start_line(), None);

        // The clipped line is returned alone even when more lines follow.
        let text = format!("{text}\nshort");
        let window = select(&text, None, None, W).unwrap();
        assert_eq!(window.end_line, 1);
        assert!(window.line_truncated);
        assert_eq!(window.next_start_line(), Some(2));
        assert_eq!(select(&text, Some(2), None, W).unwrap().text, "short");
    }

    #[test]
    fn a_long_line_after_the_first_ends_the_window_unclipped() {
        let text = format!("first\n{}\nthird", "y".repeat(100_000));
        let window = select(&text, None, None, W).unwrap();
        assert_eq!(window.end_line, 1);
        assert_eq!(window.text, "first");
        assert!(!window.line_truncated);
        assert_eq!(window.next_start_line(), Some(2));
    }

    #[test]
    fn the_char_budget_stops_mid_file() {
        // 1000 lines of 99 chars + newline = 100 chars each: 100,000 chars.
        let line = "z".repeat(99);
        let text = vec![line.as_str(); 1000].join("\n");
        let window = select(&text, None, None, W).unwrap();
        // 800 lines cost 800*99 + 799 = 79,999 chars; line 801 would cost 100 more.
        assert_eq!(window.end_line, 800);
        assert_eq!(window.chars, 79_999);
        assert_eq!(window.text.chars().count(), 79_999);
        assert_eq!(window.next_start_line(), Some(801));
        assert!(!window.line_truncated);

        // The budget counts exactly: the separator and the line must both fit.
        let exact = ReadLimits::with_max_chars(7);
        let window = select("one\ntwo\nthree", None, None, exact).unwrap();
        assert_eq!(window.text, "one\ntwo");
        assert_eq!(window.next_start_line(), Some(3));
        let short = ReadLimits::with_max_chars(6);
        assert_eq!(select("one\ntwo", None, None, short).unwrap().text, "one");
    }

    #[test]
    fn a_partial_read_uses_the_budget_even_when_small() {
        let limits = ReadLimits::with_max_chars(5);
        // A full read of a text within the budget is whole.
        let window = select("ab\ncd", None, None, limits).unwrap();
        assert!(window.is_full());
        // A full read of a text over the budget is a preview.
        let window = select("ab\ncd\nef", None, None, limits).unwrap();
        assert_eq!(window.text, "ab\ncd");
        // An explicit window uses the budget too.
        let window = select("abc\ndef", Some(1), Some(2), ReadLimits::with_max_chars(4)).unwrap();
        assert_eq!(window.text, "abc");
    }

    #[test]
    fn a_full_read_over_256_kib_is_a_budgeted_preview() {
        // 1024 lines of 75 four-byte characters: over 256 KiB, but 77,823
        // chars, which the 80,000 budget still holds.
        let line = "😀".repeat(75);
        let text = vec![line.as_str(); 1024].join("\n");
        assert!(text.len() > MAX_FULL_READ_BYTES);
        let window = select(&text, None, None, W).unwrap();
        assert_eq!(window.end_line, 1024);
        assert!(window.is_full());
        // A budget smaller than the text makes it a preview.
        let window = select(&text, None, None, ReadLimits::with_max_chars(1000)).unwrap();
        assert_eq!(window.end_line, 13); // 13 lines cost 13*75 + 12 = 987; 14 would cost 1063
        assert_eq!(window.chars, 987);
    }

    #[test]
    fn crlf_keeps_the_carriage_return_in_the_line() {
        let text = "one\r\ntwo\r\n";
        assert_eq!(total_lines(text), 2);
        let window = select(text, None, None, W).unwrap();
        assert_eq!(window.text, "one\r\ntwo\r");
        assert_eq!(window.chars, 9);
        assert_eq!(window.render_numbered(), "1 | one\r\n2 | two\r");
        assert_eq!(select(text, Some(2), None, W).unwrap().text, "two\r");
    }

    #[test]
    fn clipping_respects_multibyte_characters() {
        let text = "你好世界";
        let window = select(text, None, None, ReadLimits::with_max_chars(2)).unwrap();
        assert_eq!(window.text, "你好");
        assert_eq!((window.chars, window.words), (2, 2));
        assert!(window.line_truncated);

        let text = "👋🏽😀❤️";
        let window = select(text, None, None, ReadLimits::with_max_chars(3)).unwrap();
        assert_eq!(window.text, "👋🏽😀");
        assert_eq!(window.chars, 3);

        // Budget counts characters, not bytes: 4 CJK characters (12 bytes) fit in 4.
        let window = select("你好\n世界", None, None, ReadLimits::with_max_chars(5)).unwrap();
        assert_eq!(window.text, "你好\n世界");
        assert!(window.is_full());
    }

    #[test]
    fn a_zero_budget_clips_the_first_line_to_nothing() {
        let window = select("abc\ndef", None, None, ReadLimits::with_max_chars(0)).unwrap();
        assert_eq!(window.text, "");
        assert_eq!(window.end_line, 1);
        assert!(window.line_truncated);
        assert_eq!(window.next_start_line(), Some(2));
    }

    #[test]
    fn numbering_width_is_the_digits_of_the_last_line_shown() {
        let text = numbered_text(120);
        let window = select(&text, Some(8), Some(3), W).unwrap();
        assert_eq!(
            window.render_numbered(),
            " 8 | line 8\n 9 | line 9\n10 | line 10"
        );
        let window = select(&text, Some(98), Some(3), W).unwrap();
        assert_eq!(
            window.render_numbered(),
            " 98 | line 98\n 99 | line 99\n100 | line 100"
        );
        let window = select(&text, Some(1), Some(9), W).unwrap();
        assert!(window.render_numbered().starts_with("1 | line 1\n2 | "));
        let mut out = String::from("header\n");
        select(&text, Some(120), None, W)
            .unwrap()
            .render_numbered_into(&mut out);
        assert_eq!(out, "header\n120 | line 120");
        assert_eq!(digits(0), 1);
        assert_eq!(digits(9), 1);
        assert_eq!(digits(10), 2);
        assert_eq!(digits(u32::MAX), 10);
    }
}
