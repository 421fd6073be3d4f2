//! Markdown for the model: code spans and fenced blocks that stay intact
//! whatever the text inside them holds.

/// `text` as an inline code span, with enough backticks around it that a
/// backtick inside cannot end it.
pub fn code(text: &str) -> String {
    let ticks = "`".repeat(longest_backtick_run(text) + 1);
    // A space keeps a span that starts or ends with a backtick readable.
    if text.starts_with('`') || text.ends_with('`') {
        format!("{ticks} {text} {ticks}")
    } else {
        format!("{ticks}{text}{ticks}")
    }
}

/// `text` as a fenced block, the fence longer than any backtick run inside.
pub fn fenced(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    fenced_into(text, &mut out);
    out
}

/// [`fenced`], appended to `out`.
pub fn fenced_into(text: &str, out: &mut String) {
    let fence = "`".repeat(longest_backtick_run(text).max(2) + 1);
    out.push_str(&fence);
    out.push('\n');
    out.push_str(text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&fence);
}

fn longest_backtick_run(text: &str) -> usize {
    let (mut longest, mut run) = (0, 0);
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_fences_outgrow_the_backticks_inside() {
        assert_eq!(code("a.md"), "`a.md`");
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x`"), "`` `x` ``");
        assert_eq!(fenced("1 | x"), "```\n1 | x\n```");
        assert_eq!(
            fenced("```rust\nfn f() {}\n```\n"),
            "````\n```rust\nfn f() {}\n```\n````"
        );
        assert_eq!(fenced(""), "```\n```");
    }
}
