//! Text from outside — a manifest, an MCP server, a guest, a model — made
//! safe to print for a person. Such text may carry newlines that forge
//! extra lines, escape sequences that rewrite the terminal, and bidi
//! controls that show one string as another; each becomes a visible escape
//! (`\u{1b}`, `\u{202e}`). JSON output is left as it is: it is for programs.

use std::borrow::Cow;

/// For a cell, a field or a line: every control character escaped,
/// newlines and tabs included.
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// For multi-line text (a tool's answer, an error): newlines and tabs kept,
/// every other control and bidi character escaped.
pub fn block(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_layout: bool) -> Cow<'_, str> {
    let unsafe_char =
        |c: char| unsafe_for_terminal(c) && !(keep_layout && matches!(c, '\n' | '\t'));
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            _ if !unsafe_char(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            _ => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// C0 and C1 controls and DEL (`char::is_control`), and the characters
/// that reorder text: the Arabic letter mark, the LRM/RLM marks, the
/// embeddings and overrides, and the isolates.
fn unsafe_for_terminal(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_untouched() {
        assert!(matches!(line("Roll dice — 3d6 ✓"), Cow::Borrowed(_)));
        assert!(matches!(block("two\nlines\tand a tab"), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_escapes_and_bidi_become_visible() {
        assert_eq!(line("a\nb"), "a\\nb");
        assert_eq!(line("\x1b[2Jcleared"), "\\u{1b}[2Jcleared");
        assert_eq!(line("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(line("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(line("c1\u{9b}31m"), "c1\\u{9b}31m");
        assert_eq!(line("del\u{7f}"), "del\\u{7f}");
        assert_eq!(block("keep\nlines\r\x07"), "keep\nlines\\r\\u{7}");
    }
}
