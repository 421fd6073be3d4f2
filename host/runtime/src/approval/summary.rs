//! What a person is shown of a call's arguments before approving it
//! (docs/policy.md, "Approvals"). Built once, where the approval is
//! recorded, and journalled with it: the HTTP API, the web UI and the
//! terminal show these same fields in this same order.
//!
//! The arguments that decide a call's effect — where it writes, what it
//! reaches, what it runs, how — come first, shown whole up to a bound
//! longer than any workspace path; the rest follow, each cut short with
//! the size of the whole stated. (One JSON line cut at 600 characters, with
//! keys sorted, hid a `write_file`'s `path` behind its `content`.) The work
//! is one pass over each value and the memory a few kilobytes, whatever
//! the arguments hold.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most fields shown besides the deciding ones (which are always shown);
/// the rest are counted in [`ArgumentsSummary::omitted`].
pub const MAX_FIELDS: usize = 24;
/// Shortest a deciding value is cut to when many share the summary.
pub const MIN_DECIDING_CHARS: usize = 48;
/// Longest argument name shown, in characters.
pub const NAME_CHARS: usize = 64;
/// Longest deciding value shown, in characters: a whole workspace path
/// (at most 1024 bytes) fits.
pub const DECIDING_CHARS: usize = 1024;
/// Longest other value shown, in characters.
pub const OTHER_CHARS: usize = 80;
/// Longest summary, in characters of its text form; other fields past it
/// are counted, not shown. Deciding fields are never left out: when many
/// share it (decoys a model added before the real `path`), each is cut
/// shorter, down to [`MIN_DECIDING_CHARS`].
pub const SUMMARY_CHARS: usize = 4000;

/// The words of an argument's name that say it decides the call's effect:
/// a place (path, file, URL, host), a program, or a way of doing it.
/// Matched against whole words of the name (`file_path`, `targetUrl`,
/// `replace_all`), so `content` or `profile` never match.
const DECIDING_WORDS: &[&str] = &[
    "path",
    "paths",
    "file",
    "files",
    "filename",
    "filepath",
    "dir",
    "directory",
    "folder",
    "cwd",
    "destination",
    "dest",
    "target",
    "url",
    "urls",
    "uri",
    "uris",
    "href",
    "host",
    "hosts",
    "hostname",
    "domain",
    "endpoint",
    "address",
    "port",
    "command",
    "cmd",
    "argv",
    "mode",
    "method",
    "replace",
    "overwrite",
    "recursive",
    "force",
    "append",
];

/// One argument as a person is shown it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgumentField {
    /// The argument's name, control characters escaped, cut to
    /// [`NAME_CHARS`].
    pub name: String,
    /// Its value as JSON (a string quoted, its newlines escaped), cut with
    /// `…` where it is longer than shown.
    pub value: String,
    /// The whole value's size when `value` is cut: `100.0 KiB, 5 389
    /// lines`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Its name says it decides the effect (a path, a URL, a host, a
    /// command, a mode…): shown first and longer.
    pub deciding: bool,
}

impl fmt::Display for ArgumentField {
    /// `path: "output/main.md"`, `content: "The dra…" (2.1 MiB, 48 213 lines)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.name, self.value)?;
        match &self.size {
            Some(size) => write!(f, " ({size})"),
            None => Ok(()),
        }
    }
}

/// A call's arguments as a person is shown them, deciding fields first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArgumentsSummary {
    pub fields: Vec<ArgumentField>,
    /// Fields not shown: past [`MAX_FIELDS`] or [`SUMMARY_CHARS`].
    #[serde(default)]
    pub omitted: usize,
}

impl ArgumentsSummary {
    /// The summary of a call's arguments: an object's fields, deciding ones
    /// first, each group in the object's order; anything else as one field
    /// named `(arguments)`.
    pub fn of(arguments: &Value) -> Self {
        let object = match arguments {
            Value::Object(object) => object,
            other => {
                return Self {
                    fields: vec![field("(arguments)", other, false, OTHER_CHARS)],
                    omitted: 0,
                };
            }
        };
        // Each name is judged once; each group keeps the object's order.
        let (deciding, others): (Vec<_>, Vec<_>) =
            object.iter().partition(|(name, _)| decides(name));
        let mut summary = Self::default();
        let mut used = 0;
        let share =
            (SUMMARY_CHARS / deciding.len().max(1)).clamp(MIN_DECIDING_CHARS, DECIDING_CHARS);
        for (name, value) in deciding {
            let shown = field(name, value, true, share);
            used += shown.to_string().chars().count() + 2;
            summary.fields.push(shown);
        }
        let mut shown_others = 0;
        for (name, value) in others {
            if shown_others == MAX_FIELDS {
                summary.omitted += 1;
                continue;
            }
            let shown = field(name, value, false, OTHER_CHARS);
            let chars = shown.to_string().chars().count() + 2;
            if used + chars > SUMMARY_CHARS {
                summary.omitted += 1;
                continue;
            }
            used += chars;
            shown_others += 1;
            summary.fields.push(shown);
        }
        summary
    }
}

impl fmt::Display for ArgumentsSummary {
    /// One line: the fields joined by `, `, then what was left out;
    /// `(no arguments)` for none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fields.is_empty() && self.omitted == 0 {
            return f.write_str("(no arguments)");
        }
        for (index, field) in self.fields.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{field}")?;
        }
        match self.omitted {
            0 => Ok(()),
            1 => f.write_str("; 1 more field not shown"),
            n => write!(f, "; {n} more fields not shown"),
        }
    }
}

/// Whether a name's words include a deciding one (`filePath`, `target-url`).
fn decides(name: &str) -> bool {
    let mut word = String::new();
    let mut previous_lower = false;
    // A name longer than any real argument's is not looked into past this.
    for c in name.chars().take(NAME_CHARS).chain(std::iter::once(' ')) {
        let boundary = !c.is_alphanumeric() || (c.is_uppercase() && previous_lower);
        if boundary && !word.is_empty() {
            if DECIDING_WORDS.contains(&word.as_str()) {
                return true;
            }
            word.clear();
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
    }
    false
}

fn field(name: &str, value: &Value, deciding: bool, limit: usize) -> ArgumentField {
    let (value, size) = match value {
        Value::String(text) => string_value(text, limit),
        other => json_value(other, limit),
    };
    ArgumentField {
        name: toolhost_core::model_path::escaped(name, NAME_CHARS),
        value,
        size,
        deciding,
    }
}

/// A string quoted as JSON, cut to `limit` characters, with its size when
/// cut.
fn string_value(text: &str, limit: usize) -> (String, Option<String>) {
    let Some((cut, _)) = text.char_indices().nth(limit) else {
        return (quote(text), None);
    };
    let mut quoted = quote(&text[..cut]);
    quoted.insert(quoted.len() - 1, '…');
    let lines = newlines(text.as_bytes()) + usize::from(!text.ends_with('\n'));
    let size = format!(
        "{}, {} {}",
        bytes(text.len() as u64),
        grouped(lines as u64),
        if lines == 1 { "line" } else { "lines" }
    );
    (quoted, Some(size))
}

fn quote(text: &str) -> String {
    // Serializing a `str` cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

fn newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count()
}

/// Any other value as compact JSON, cut to `limit` characters: written
/// through a sink that keeps only the start and counts the rest.
fn json_value(value: &Value, limit: usize) -> (String, Option<String>) {
    let mut sink = Prefix {
        kept: Vec::new(),
        room: limit * 4,
        total: 0,
    };
    // Writing to the sink never fails, and a `Value` always serializes.
    let _ = serde_json::to_writer(&mut sink, value);
    let kept = match std::str::from_utf8(&sink.kept) {
        Ok(text) => text,
        Err(error) => std::str::from_utf8(&sink.kept[..error.valid_up_to()]).unwrap_or_default(),
    };
    let shown = match kept.char_indices().nth(limit) {
        Some((cut, _)) => &kept[..cut],
        None => kept,
    };
    if shown.len() as u64 == sink.total {
        return (shown.to_owned(), None);
    }
    let count = match value {
        Value::Array(items) => format!(", {} items", grouped(items.len() as u64)),
        Value::Object(fields) => format!(", {} fields", grouped(fields.len() as u64)),
        _ => String::new(),
    };
    (
        format!("{shown}…"),
        Some(format!("{}{count}", bytes(sink.total))),
    )
}

struct Prefix {
    kept: Vec<u8>,
    room: usize,
    total: u64,
}

impl std::io::Write for Prefix {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.total += buf.len() as u64;
        let take = buf.len().min(self.room - self.kept.len());
        self.kept.extend_from_slice(&buf[..take]);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `812 bytes`, `100.0 KiB`, `2.1 MiB`.
fn bytes(count: u64) -> String {
    const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
    if count < 1024 {
        return format!("{count} {}", if count == 1 { "byte" } else { "bytes" });
    }
    let mut scaled = count as f64 / 1024.0;
    let mut unit = 0;
    while scaled >= 1024.0 && unit < UNITS.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    format!("{scaled:.1} {}", UNITS[unit])
}

/// `48 213`: thousands apart, so a count reads at a glance.
fn grouped(count: u64) -> String {
    let digits = count.to_string();
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_long_write_still_shows_its_whole_path_first() {
        let path = format!("output/{}/chapter-12.md", "drafts/".repeat(40));
        let content = "The draft goes on.\n".repeat(100 * 1024 / 19);
        let summary = ArgumentsSummary::of(&json!({"path": path, "content": content}));
        let names: Vec<&str> = summary.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["path", "content"]);
        assert_eq!(summary.fields[0].value, format!("\"{path}\""));
        assert!(summary.fields[0].deciding && summary.fields[0].size.is_none());
        let content_field = &summary.fields[1];
        // The first 80 characters, quoted, with the cut marked.
        assert!(content_field.value.starts_with("\"The draft goes on.\\n"));
        assert!(
            content_field.value.ends_with("\\nThe …\""),
            "{}",
            content_field.value
        );
        assert_eq!(
            content_field.size.as_deref(),
            Some("100.0 KiB, 5 389 lines")
        );
        let text = summary.to_string();
        assert!(text.starts_with(&format!("path: \"{path}\", content: \"The draft")));
        assert!(text.ends_with("…\" (100.0 KiB, 5 389 lines)"), "{text}");
    }

    #[test]
    fn deciding_names_are_words_of_the_name() {
        for name in [
            "path",
            "file_path",
            "filePath",
            "targetUrl",
            "uri",
            "host",
            "command",
            "mode",
            "replace_all",
            "working-dir",
            "HTTP_METHOD",
        ] {
            assert!(decides(name), "{name}");
        }
        for name in [
            "content",
            "old_string",
            "new_string",
            "profile",
            "reason",
            "filler",
        ] {
            assert!(!decides(name), "{name}");
        }
        let summary = ArgumentsSummary::of(&json!({
            "body": "x", "url": "https://example.com/", "headers": {"a": "b"}, "method": "POST"
        }));
        let names: Vec<&str> = summary.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["method", "url", "body", "headers"]);
    }

    #[test]
    fn other_values_are_cut_json_with_their_size() {
        let items: Vec<u32> = (0..10_000).collect();
        let summary = ArgumentsSummary::of(&json!({"ids": items, "n": 3, "ok": true}));
        let ids = &summary.fields[0];
        assert!(ids.value.starts_with("[0,1,2,") && ids.value.ends_with('…'));
        assert_eq!(ids.value.chars().count(), OTHER_CHARS + 1);
        assert_eq!(ids.size.as_deref(), Some("47.7 KiB, 10 000 items"));
        assert_eq!(summary.fields[1].to_string(), "n: 3");
        assert_eq!(summary.fields[2].to_string(), "ok: true");
        assert_eq!(
            ArgumentsSummary::of(&json!({})).to_string(),
            "(no arguments)"
        );
        assert_eq!(
            ArgumentsSummary::of(&json!("x")).to_string(),
            "(arguments): \"x\""
        );
    }

    #[test]
    fn the_whole_summary_is_bounded() {
        let mut many = serde_json::Map::new();
        for index in 0..1000 {
            many.insert(format!("field{index:04}\n"), json!("v".repeat(500)));
        }
        many.insert("path".into(), json!("a".repeat(5000)));
        let summary = ArgumentsSummary::of(&Value::Object(many));
        assert_eq!(summary.fields[0].name, "path");
        assert_eq!(summary.fields[0].size.as_deref(), Some("4.9 KiB, 1 line"));
        assert_eq!(summary.fields.len() + summary.omitted, 1001);
        // The one deciding field, and at most MAX_FIELDS others.
        assert!(summary.fields.len() <= MAX_FIELDS + 1);
        assert!(summary.to_string().chars().count() <= SUMMARY_CHARS + 40);
        // A name cannot forge a line.
        assert!(summary.fields.iter().all(|f| !f.name.contains('\n')));
        assert!(summary.to_string().ends_with("more fields not shown"));
    }

    /// Decoys a model put before the real `path` (an MCP tool's schema may
    /// allow any property) cannot push it out of the card: deciding fields
    /// are never left out, only cut shorter when many share the summary.
    #[test]
    fn decoy_deciding_fields_cannot_hide_the_real_path() {
        let mut arguments = serde_json::Map::new();
        for index in 0..40 {
            arguments.insert(
                format!("a{index:02}_path"),
                json!(format!("decoys/{}", "x".repeat(2000))),
            );
        }
        arguments.insert("path".into(), json!("../../etc/cron.d/evil"));
        arguments.insert("content".into(), json!("* * * * * root sh"));
        let summary = ArgumentsSummary::of(&Value::Object(arguments));
        let path = summary
            .fields
            .iter()
            .find(|field| field.name == "path")
            .expect("the real path is shown");
        assert_eq!(path.value, "\"../../etc/cron.d/evil\"");
        assert_eq!(
            summary.fields.iter().filter(|field| field.deciding).count(),
            41
        );
        let decoy = &summary.fields[0];
        // 41 deciding fields share the summary: each is cut to its share
        // (quoted, with the cut marked).
        let share = SUMMARY_CHARS / 41;
        assert!(share >= MIN_DECIDING_CHARS);
        assert!(decoy.value.chars().count() <= share + 3, "{}", decoy.value);
        assert!(decoy.size.is_some(), "a cut decoy says its size");
    }
}
