//! Plain aligned text tables for people (`tools list`, `journal`). Cells
//! hold text from outside (titles, server names, guest messages): each is
//! escaped to one safe line first.

/// Print `rows` under `header`, each column as wide as its widest cell.
/// Trailing spaces are trimmed so the output diffs cleanly.
pub fn print<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    print!("{}", render(header, rows));
}

fn render<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let rows: Vec<[String; N]> = rows
        .iter()
        .map(|row| {
            row.clone()
                .map(|cell| crate::terminal::line(&cell).into_owned())
        })
        .collect();
    let rows = rows.as_slice();
    let mut widths = header.map(|cell| cell.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = header.map(str::to_owned);
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A title from an MCP server or an extension cannot forge a row,
    /// clear the screen or reorder what is shown.
    #[test]
    fn cells_are_escaped_to_one_line() {
        let text = render(
            ["ID", "TITLE"],
            &[[
                "mcp/x:roll".to_owned(),
                "Roll\nmcp/y:fake  Fake tool\u{1b}[2J\u{202e}".to_owned(),
            ]],
        );
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text:?}"
        );
        assert!(
            text.contains("Roll\\nmcp/y:fake  Fake tool\\u{1b}[2J\\u{202e}"),
            "{text}"
        );
    }
}
