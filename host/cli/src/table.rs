//! Plain aligned text tables for people (`tools list`, `journal`).

/// Print `rows` under `header`, each column as wide as its widest cell.
/// Trailing spaces are trimmed so the output diffs cleanly.
pub fn print<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(|cell| cell.chars().count());
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = header.map(str::to_owned);
    for row in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        println!("{}", line.join("  ").trim_end());
    }
}
