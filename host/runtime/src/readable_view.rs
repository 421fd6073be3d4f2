//! The readable view of an externalized MCP result
//! (`tool-results/<call>.view.txt`): the projected text with every
//! over-long physical line hard-wrapped, so all of it is reachable with
//! `workspace.read_file` line windows. The exact result stays in the JSON
//! audit (`tool-results/<call>.json`); only this view is wrapped (seed §7).

/// Widest line of a readable view, in characters. `workspace.read_file`
/// shows at most 80,000 characters per call (`MAX_READ_CHARS`,
/// `guest-tools/text/src/lines.rs`) and clips a longer single line, which a
/// one-line 2 MB JSON result would be; at 3,000 (the reference's width) one
/// read still shows about 26 wrapped lines, and a window never cuts a line.
pub const VIEW_LINE_CHARS: usize = 3_000;

/// `text` with each line longer than `width` characters (at least 1) split
/// into lines of `width` characters, the last one shorter; a split never
/// falls inside a UTF-8 character. Removing the inserted newlines gives back
/// `text`; lines within `width` are kept as they are. Linear in `text`.
pub fn hard_wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut out = String::with_capacity(text.len() + text.len() / width + 1);
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let mut chars = 0;
        for (offset, ch) in line.char_indices() {
            if chars == width {
                // `offset` is a character boundary: `line` is split there.
                debug_assert!(line.is_char_boundary(offset));
                out.push('\n');
                chars = 0;
            }
            out.push(ch);
            chars += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_at_the_width_and_short_ones_kept() {
        assert_eq!(hard_wrap("abcdefg\nhi\n", 3), "abc\ndef\ng\nhi\n");
        assert_eq!(hard_wrap("abcdef", 3), "abc\ndef");
        assert_eq!(hard_wrap("", 3), "");
        assert_eq!(hard_wrap("\n\n", 3), "\n\n");
        assert_eq!(hard_wrap("ab", 0), "a\nb", "a width of 0 counts as 1");
    }

    #[test]
    fn a_split_never_falls_inside_a_character() {
        // Two-, three- and four-byte characters: widths count characters.
        let text = "ÄéΩ語文字😀🙂x".repeat(5);
        let wrapped = hard_wrap(&text, 4);
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 4, "{line}");
        }
        assert_eq!(wrapped.replace('\n', ""), text);
    }

    #[test]
    fn a_two_megabyte_line_becomes_lines_of_the_view_width() {
        let text = format!("{{\"rows\":[{}]}}", "{\"k\":\"värde\"},".repeat(140_000));
        assert!(text.len() > 2_000_000 && !text.contains('\n'));
        let wrapped = hard_wrap(&text, VIEW_LINE_CHARS);
        let lines: Vec<&str> = wrapped.split('\n').collect();
        assert_eq!(lines.len(), text.chars().count().div_ceil(VIEW_LINE_CHARS));
        assert!(
            lines
                .iter()
                .all(|line| line.chars().count() <= VIEW_LINE_CHARS)
        );
        assert_eq!(lines.concat(), text);
    }
}
