//! The front matter of a `SKILL.md`: the lines between a first `---` line
//! and the next `---` (or `...`) line, a YAML mapping of which only `name`
//! and `description` are read.
//!
//! This is a deliberately small reader, not a YAML library: it knows
//! top-level `key: value` lines and, for the two values it reads, the
//! scalar forms SKILL.md files use — plain (also folded over indented
//! lines), `'single'` and `"double"` quoted (with escapes), and `|` / `>`
//! block scalars. Other keys (`license`, `allowed-tools`, a nested
//! `metadata:` mapping…) are skipped without being interpreted. What it
//! does not understand in `name` or `description` (a list, a mapping, an
//! anchor, an alias, a tag, a broken quote) is an error, so a skill is
//! skipped rather than shown with a wrong name. No document is ever
//! expanded: there are no aliases to bomb with.

/// The two fields a skill needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrontMatter {
    pub name: String,
    pub description: String,
}

/// Longest description, in characters (the Agent Skills format's limit):
/// the list of skills goes into the model's context.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// A top-level key and its lines: the text after the colon, then the
/// indented (or blank) lines that follow.
struct Field<'a> {
    key: String,
    line: usize,
    value: &'a str,
    rest: Vec<&'a str>,
}

/// Parse the front matter of `text` (a whole `SKILL.md`). The error says
/// what is wrong, for a diagnostic.
pub(crate) fn parse(text: &str) -> Result<FrontMatter, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line));
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return Err("SKILL.md does not start with front matter (a `---` line)".to_owned()),
    }
    let mut body = Vec::new();
    let mut closed = false;
    for line in lines {
        let end = line.trim_end();
        if end == "---" || end == "..." {
            closed = true;
            break;
        }
        body.push(line);
    }
    if !closed {
        return Err("the front matter is not closed by a `---` line".to_owned());
    }

    let fields = split_fields(&body)?;
    let mut name = None;
    let mut description = None;
    for field in &fields {
        let slot = match field.key.as_str() {
            "name" => &mut name,
            "description" => &mut description,
            _ => continue,
        };
        let value = scalar(field.value, &field.rest).map_err(|problem| {
            format!(
                "front matter `{}` (line {}): {problem}",
                field.key,
                field.line + 2
            )
        })?;
        *slot = value;
    }
    let name = name
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .ok_or_else(|| "the front matter has no `name`".to_owned())?;
    let description = description
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .ok_or_else(|| "the front matter has no `description`".to_owned())?;
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "the description is {chars} characters long; the limit is {MAX_DESCRIPTION_CHARS}"
        ));
    }
    Ok(FrontMatter { name, description })
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

fn split_fields<'a>(body: &[&'a str]) -> Result<Vec<Field<'a>>, String> {
    let mut fields: Vec<Field<'a>> = Vec::new();
    for (index, &line) in body.iter().enumerate() {
        let indented = line.starts_with([' ', '\t']);
        if indented || is_blank(line) {
            match fields.last_mut() {
                Some(field) => field.rest.push(line),
                None if is_blank(line) || is_comment(line) => {}
                None => {
                    return Err(format!(
                        "front matter line {} is indented but belongs to no key",
                        index + 2
                    ));
                }
            }
            continue;
        }
        if line.starts_with('#') {
            // A comment at the margin ends any block above it.
            if let Some(field) = fields.last_mut() {
                field.rest.push("");
            }
            continue;
        }
        let (key, value) = key_value(line)
            .ok_or_else(|| format!("front matter line {} is not a `key: value` line", index + 2))?;
        if fields.iter().any(|field| field.key == key) {
            return Err(format!("front matter key `{key}` appears twice"));
        }
        fields.push(Field {
            key,
            line: index,
            value,
            rest: Vec::new(),
        });
    }
    Ok(fields)
}

/// `key: value` (or `key:` alone); the key may be quoted.
fn key_value(line: &str) -> Option<(String, &str)> {
    let (key, after) = if let Some(quote @ ('"' | '\'')) = line.chars().next() {
        let close = line[1..].find(quote)? + 1;
        (line[1..close].to_owned(), &line[close + 1..])
    } else {
        let colon = line
            .char_indices()
            .find(|&(at, c)| {
                c == ':'
                    && line[at + 1..]
                        .chars()
                        .next()
                        .is_none_or(|next| next == ' ' || next == '\t')
            })?
            .0;
        (line[..colon].trim_end().to_owned(), &line[colon..])
    };
    let value = after.trim_start().strip_prefix(':')?;
    if key.is_empty() || key.starts_with(['-', '[', '{', '?']) {
        return None;
    }
    if !value.is_empty() && !value.starts_with([' ', '\t']) {
        return None;
    }
    Some((key, value))
}

/// The string value of a field: `Ok(None)` for an empty or null value.
fn scalar(value: &str, rest: &[&str]) -> Result<Option<String>, String> {
    let first = value.trim();
    match first.chars().next() {
        None => plain(rest, true),
        Some('"') => quoted(first, rest, '"').map(Some),
        Some('\'') => quoted(first, rest, '\'').map(Some),
        Some('|' | '>') => block(first, rest).map(Some),
        Some('[' | '{') => Err("must be a string, not a list or a mapping".to_owned()),
        Some('&' | '*' | '!') => Err("anchors, aliases and tags are not supported".to_owned()),
        Some('@' | '`' | '%') => Err(format!("a value cannot start with `{}`", &first[..1])),
        Some('#') => plain(rest, true),
        Some(_) => {
            let mut lines = vec![strip_comment(first)];
            lines.extend(rest.iter().copied());
            let text = fold_plain(&lines)?;
            if ["~", "null", "Null", "NULL"].contains(&text.as_str()) {
                Ok(None)
            } else {
                Ok(Some(text))
            }
        }
    }
}

/// A plain value that starts on the lines below its key.
fn plain(rest: &[&str], nested_check: bool) -> Result<Option<String>, String> {
    let content: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|line| !is_blank(line) && !is_comment(line))
        .collect();
    if content.is_empty() {
        return Ok(None);
    }
    if nested_check {
        for line in &content {
            let line = line.trim();
            if line == "-" || line.starts_with("- ") || key_value(line).is_some() {
                return Err("must be a string, not a list or a mapping".to_owned());
            }
        }
    }
    fold_plain(rest).map(Some)
}

/// ` # comment` at the end of a plain value.
fn strip_comment(line: &str) -> &str {
    let mut previous_space = false;
    for (at, c) in line.char_indices() {
        if c == '#' && previous_space {
            return line[..at].trim_end();
        }
        previous_space = c == ' ' || c == '\t';
    }
    line.trim_end()
}

/// Plain multi-line folding: lines trimmed and joined with a space, a blank
/// line is a line break, comment lines end the value.
fn fold_plain(lines: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    let mut blanks = 0;
    for line in lines {
        if is_comment(line) {
            if out.is_empty() {
                continue;
            }
            break;
        }
        let line = strip_comment(line.trim());
        if line.is_empty() {
            blanks += 1;
            continue;
        }
        if !out.is_empty() {
            if blanks > 0 {
                out.extend(std::iter::repeat_n('\n', blanks));
            } else {
                out.push(' ');
            }
        }
        blanks = 0;
        out.push_str(line);
    }
    Ok(out)
}

/// A `"…"` or `'…'` value, possibly over several lines.
fn quoted(first: &str, rest: &[&str], quote: char) -> Result<String, String> {
    let mut source = first.to_owned();
    for line in rest {
        source.push('\n');
        source.push_str(line);
    }
    let mut out = String::new();
    let mut chars = source[1..].char_indices().peekable();
    let mut closed_at = None;
    while let Some((at, c)) = chars.next() {
        match c {
            c if c == quote => {
                if quote == '\'' && chars.peek().map(|&(_, next)| next) == Some('\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                closed_at = Some(at + 1 + c.len_utf8());
                break;
            }
            '\\' if quote == '"' => {
                let Some((_, escape)) = chars.next() else {
                    break;
                };
                match escape {
                    '\n' => {
                        // An escaped line break joins the lines as they are.
                        while chars.peek().is_some_and(|&(_, c)| c == ' ' || c == '\t') {
                            chars.next();
                        }
                    }
                    'u' | 'x' | 'U' => {
                        let digits = match escape {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = (0..digits)
                            .filter_map(|_| chars.next().map(|(_, c)| c))
                            .collect();
                        let decoded = u32::from_str_radix(&hex, 16)
                            .ok()
                            .filter(|_| hex.len() == digits)
                            .and_then(char::from_u32)
                            .ok_or_else(|| format!("`\\{escape}{hex}` is not a valid escape"))?;
                        out.push(decoded);
                    }
                    other => out.push(match other {
                        '0' => '\0',
                        'a' => '\u{7}',
                        'b' => '\u{8}',
                        't' | '\t' => '\t',
                        'n' => '\n',
                        'v' => '\u{b}',
                        'f' => '\u{c}',
                        'r' => '\r',
                        'e' => '\u{1b}',
                        ' ' => ' ',
                        '"' => '"',
                        '/' => '/',
                        '\\' => '\\',
                        'N' => '\u{85}',
                        '_' => '\u{a0}',
                        'L' => '\u{2028}',
                        'P' => '\u{2029}',
                        unknown => return Err(format!("`\\{unknown}` is not a valid escape")),
                    }),
                }
            }
            '\n' => {
                // Line folding: trailing and leading white space go, one
                // line break is a space, each further (blank) one a newline.
                while out.ends_with([' ', '\t']) {
                    out.pop();
                }
                let mut breaks = 0;
                while let Some(&(_, next)) = chars.peek() {
                    match next {
                        ' ' | '\t' => {}
                        '\n' => breaks += 1,
                        _ => break,
                    }
                    chars.next();
                }
                if breaks == 0 {
                    out.push(' ');
                } else {
                    out.extend(std::iter::repeat_n('\n', breaks));
                }
            }
            c => out.push(c),
        }
    }
    let Some(end) = closed_at else {
        return Err(format!("the {quote}quoted{quote} value is not closed"));
    };
    let after = &source[end..];
    let trailing = after.trim_start_matches([' ', '\t']);
    if !(trailing.is_empty() || trailing.starts_with('#') || trailing.starts_with('\n')) {
        return Err("unexpected text after the closing quote".to_owned());
    }
    if after
        .lines()
        .skip(1)
        .any(|line| !is_blank(line) && !is_comment(line))
    {
        return Err("unexpected text after the closing quote".to_owned());
    }
    Ok(out)
}

/// A `|` (literal) or `>` (folded) block scalar. Chomping indicators are
/// accepted; the result is trimmed by the caller anyway.
fn block(header: &str, rest: &[&str]) -> Result<String, String> {
    let folded = header.starts_with('>');
    let indicators = strip_comment(&header[1..]);
    let mut explicit = None;
    for c in indicators.chars() {
        match c {
            '+' | '-' => {}
            '1'..='9' if explicit.is_none() => explicit = c.to_digit(10).map(|d| d as usize),
            _ => return Err(format!("`{header}` is not a block scalar header")),
        }
    }
    let indent = match explicit {
        Some(indent) => indent,
        None => rest
            .iter()
            .find(|line| !is_blank(line))
            .map(|line| line.len() - line.trim_start_matches(' ').len())
            .unwrap_or(0),
    };
    let mut lines = Vec::new();
    for line in rest {
        if is_blank(line) {
            lines.push("");
            continue;
        }
        let spaces = line.len() - line.trim_start_matches(' ').len();
        if spaces < indent || indent == 0 {
            if line.trim_start_matches(' ').starts_with('\t') {
                return Err("tabs cannot indent a block".to_owned());
            }
            return Err("a line of the block is less indented than its first line".to_owned());
        }
        lines.push(&line[indent..]);
    }
    if !folded {
        return Ok(lines.join("\n"));
    }
    let mut out = String::new();
    let mut blanks = 0;
    let mut previous_more = false;
    for line in lines {
        if line.is_empty() {
            blanks += 1;
            continue;
        }
        let more = line.starts_with([' ', '\t']);
        if out.is_empty() {
            out.extend(std::iter::repeat_n('\n', blanks));
        } else if blanks > 0 {
            let extra = usize::from(previous_more || more);
            out.extend(std::iter::repeat_n('\n', blanks + extra));
        } else if previous_more || more {
            out.push('\n');
        } else {
            out.push(' ');
        }
        blanks = 0;
        out.push_str(line);
        previous_more = more;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fm(front: &str) -> Result<FrontMatter, String> {
        parse(&format!("---\n{front}\n---\n# Body\n"))
    }

    fn description(front: &str) -> String {
        fm(&format!("name: x\n{front}")).unwrap().description
    }

    #[test]
    fn plain_values() {
        let parsed = fm("name: prose-style\ndescription: Keeps prose tight. # a comment").unwrap();
        assert_eq!(parsed.name, "prose-style");
        assert_eq!(parsed.description, "Keeps prose tight.");
        assert_eq!(
            description("description: Use when: writing"),
            "Use when: writing"
        );
        assert_eq!(description("description: C# tips"), "C# tips");
    }

    #[test]
    fn plain_values_fold_over_indented_lines() {
        assert_eq!(
            description("description: first line\n  second line\n\n  third"),
            "first line second line\nthird"
        );
        assert_eq!(
            description("description:\n  on the next line"),
            "on the next line"
        );
    }

    #[test]
    fn quoted_values() {
        assert_eq!(
            description("description: \"a \\\"b\\\" \\u00e9\\n\""),
            "a \"b\" é"
        );
        assert_eq!(
            description("description: 'it''s # not a comment'"),
            "it's # not a comment"
        );
        assert_eq!(
            description("description: \"one\n  two\n\n  three\""),
            "one two\nthree"
        );
        assert_eq!(description("description: 'a' # trailing comment"), "a");
        assert!(fm("name: x\ndescription: \"open").is_err());
        assert!(fm("name: x\ndescription: \"a\" b").is_err());
        assert!(fm("name: x\ndescription: \"\\q\"").is_err());
    }

    #[test]
    fn block_values() {
        assert_eq!(
            description("description: |\n  line one\n  line two\n"),
            "line one\nline two"
        );
        assert_eq!(
            description("description: >-\n  folded\n  text\n\n  para\n    kept\n  end"),
            "folded text\npara\n  kept\nend"
        );
        assert!(fm("name: x\ndescription: |\n    deep\n  shallow").is_err());
        assert!(fm("name: x\ndescription: |x\n  a").is_err());
    }

    #[test]
    fn other_keys_are_skipped() {
        let parsed = fm(
            "# comment\nlicense: MIT\nname: lore-keeper\nmetadata:\n  author: someone\n  tags: [a, b]\nallowed-tools: Read Grep\ndescription: Tracks lore.",
        )
        .unwrap();
        assert_eq!(parsed.name, "lore-keeper");
        assert_eq!(parsed.description, "Tracks lore.");
    }

    #[test]
    fn crlf_and_bom() {
        let parsed = parse("\u{feff}---\r\nname: a\r\ndescription: b\r\n---\r\nbody").unwrap();
        assert_eq!(
            (parsed.name.as_str(), parsed.description.as_str()),
            ("a", "b")
        );
    }

    #[test]
    fn refusals() {
        for (text, expected) in [
            ("# Title\n", "does not start with front matter"),
            ("---\nname: a\ndescription: b\n", "not closed"),
            ("---\ndescription: b\n---\n", "no `name`"),
            ("---\nname: a\n---\n", "no `description`"),
            ("---\nname: a\ndescription:\n---\n", "no `description`"),
            ("---\nname: ~\ndescription: b\n---\n", "no `name`"),
            (
                "---\nname: a\nname: b\ndescription: c\n---\n",
                "appears twice",
            ),
            ("---\nname: [a]\ndescription: b\n---\n", "not a list"),
            ("---\nname: a\ndescription:\n  - b\n---\n", "not a list"),
            ("---\nname: a\ndescription:\n  k: v\n---\n", "not a list"),
            ("---\nname: *x\ndescription: b\n---\n", "aliases"),
            ("---\n  name: a\n---\n", "belongs to no key"),
            ("---\njust text\n---\n", "not a `key: value` line"),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(expected), "{text:?}: {error}");
        }
        let long = format!("---\nname: a\ndescription: {}\n---\n", "x".repeat(1025));
        assert!(parse(&long).unwrap_err().contains("limit is 1024"));
    }
}
