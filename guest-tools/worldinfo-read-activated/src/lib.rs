//! `worldinfo.read_activated`: the world-info entries activated for this run.
//!
//! Without arguments it lists them (index mode: ref, name, book, position,
//! size). With `entries` it reads them (content mode): at most 20 per call,
//! each whole or by 1-based line window, an entry at most 8,000 characters
//! and all of them at most 20,000; what does not fit is previewed with the
//! next `start_line`. Refs are `worldinfo:<world>#<uid>`, or
//! `worldinfo:activated#<index>` when the world or uid is empty.

use serde::Serialize;
use serde_json::{Value, json};
use toolhost_guest::knowledge::{self, WorldInfo, WorldInfoEntry};
use toolhost_guest::markdown::{code, fenced_into};
use toolhost_guest::text::lines::{self, ReadLimits};
use toolhost_guest::text::metrics;
use toolhost_guest::{Arguments, Output, ToolError};

pub const MAX_ENTRIES: usize = 20;
pub const MAX_ENTRY_CHARS: usize = 8_000;
pub const MAX_TOTAL_CHARS: usize = 20_000;

toolhost_guest::builtin_tool!(ReadActivated, |args| read_activated(
    &args,
    &knowledge::Host
));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Listed<'a> {
    world: &'a str,
    uid: &'a str,
    display_name: Option<&'a str>,
    constant: bool,
    position: Option<&'a str>,
    total_chars: u64,
    total_words: u64,
    #[serde(rename = "ref")]
    reference: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReadEntry<'a> {
    #[serde(flatten)]
    listed: Listed<'a>,
    total_lines: u32,
    start_line: u32,
    end_line: u32,
    chars: u64,
    words: u64,
    line_truncated: bool,
    next_start_line: Option<u32>,
    content: &'a str,
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::invalid_arguments(message)
}

fn listed(entry: &WorldInfoEntry) -> Listed<'_> {
    let total = metrics(&entry.content);
    Listed {
        world: &entry.world,
        uid: &entry.uid,
        display_name: entry.display_name.as_deref(),
        constant: entry.constant,
        position: entry.position.as_deref(),
        total_chars: total.chars,
        total_words: total.words,
        reference: &entry.reference,
    }
}

fn title(entry: &WorldInfoEntry) -> String {
    let name = entry.display_name.as_deref().unwrap_or(&entry.uid);
    let book = if entry.world.is_empty() {
        String::new()
    } else {
        format!(" in {}", code(&entry.world))
    };
    format!("{}{book}", code(name))
}

pub fn read_activated(args: &Arguments, world_info: &impl WorldInfo) -> Result<Output, ToolError> {
    args.only(&["entries"])?;
    let activation = world_info.activation()?;
    let Some(requested) = args.get("entries") else {
        return Ok(index(&activation));
    };
    let Value::Array(items) = requested else {
        return Err(invalid(
            "entries must be an array of {ref, start_line?, line_count?}",
        ));
    };
    if items.is_empty() || items.len() > MAX_ENTRIES {
        return Err(invalid(format!(
            "entries must list 1 to {MAX_ENTRIES} entries"
        )));
    }
    let mut reads: Vec<ReadEntry<'_>> = Vec::new();
    let mut used = 0usize;
    let mut not_read: Vec<String> = Vec::new();
    for (position, item) in items.iter().enumerate() {
        let item = Arguments::from_value(item.clone())
            .map_err(|_| invalid(format!("entries[{position}] must be an object")))?;
        item.only(&["ref", "start_line", "line_count"])
            .map_err(|error| invalid(format!("entries[{position}]: {}", error.message)))?;
        let reference = item
            .required_str("ref")
            .map_err(|error| invalid(format!("entries[{position}]: {}", error.message)))?;
        let number = |key: &str| -> Result<Option<u32>, ToolError> {
            item.optional_u64(key)
                .map_err(|error| invalid(format!("entries[{position}]: {}", error.message)))?
                .map(|value| {
                    u32::try_from(value)
                        .map_err(|_| invalid(format!("entries[{position}].{key} is too large")))
                })
                .transpose()
        };
        let (start_line, line_count) = (number("start_line")?, number("line_count")?);
        let entry = activation
            .entries
            .iter()
            .find(|entry| entry.reference == reference)
            .ok_or_else(|| {
                ToolError::new(
                    "worldinfo.entry_not_found",
                    format!("no activated world-info entry has the ref `{reference}`; call worldinfo_read_activated with no arguments to list them"),
                )
            })?;
        let budget = MAX_ENTRY_CHARS.min(MAX_TOTAL_CHARS - used);
        if budget == 0 {
            not_read.push(reference.to_owned());
            continue;
        }
        let window = lines::select(
            &entry.content,
            start_line,
            line_count,
            ReadLimits::with_max_chars(budget),
        )
        .map_err(|error| {
            ToolError::new(
                "worldinfo.invalid_entry_range",
                format!("`{reference}`: {error}"),
            )
        })?;
        used += window.chars as usize;
        reads.push(ReadEntry {
            listed: listed(entry),
            total_lines: window.total_lines,
            start_line: window.start_line,
            end_line: window.end_line,
            chars: window.chars,
            words: window.words,
            line_truncated: window.line_truncated,
            next_start_line: window.next_start_line(),
            content: window.text,
        });
    }
    let mut content = String::new();
    for read in &reads {
        if !content.is_empty() {
            content.push_str("\n\n");
        }
        let entry = activation
            .entries
            .iter()
            .find(|entry| entry.reference == read.listed.reference);
        let heading = entry.map(title).unwrap_or_default();
        content.push_str(&format!("### {heading} ({})\n\n", read.listed.reference));
        fenced_into(read.content, &mut content);
        if let Some(next) = read.next_start_line {
            content.push_str(&format!(
                "\n\nPreview ended before the end of this entry. Continue with ref `{}` and start_line={next}.",
                read.listed.reference
            ));
        }
    }
    if !not_read.is_empty() {
        content.push_str(&format!(
            "\n\nNot read, the {MAX_TOTAL_CHARS}-character total of one call was reached: {}. Ask for them in another call.",
            not_read.join(", ")
        ));
    }
    let structured = json!({
        "mode": "content",
        "timestampMs": activation.timestamp_ms,
        "trigger": activation.trigger,
        "totalEntries": activation.entries.len(),
        "entries": reads,
        "notRead": not_read,
    });
    let mut output = Output::text(content).structured(structured);
    for read in &reads {
        output = output.resource_ref(read.listed.reference.to_owned());
    }
    Ok(output)
}

fn index(activation: &knowledge::Activation) -> Output {
    let mut content = String::new();
    if activation.entries.is_empty() {
        content.push_str("No world-info entry was activated for this reply.");
    } else {
        content.push_str(&format!(
            "{} world-info entr{} activated for this reply. Read them with worldinfo_read_activated and `entries: [{{ref}}]`.\n",
            activation.entries.len(),
            if activation.entries.len() == 1 { "y" } else { "ies" }
        ));
        // Each entry's lines (what a windowed read addresses); its size in
        // characters stays in the structured result (seed §4).
        for entry in &activation.entries {
            let lines = lines::total_lines(&entry.content);
            let constant = if entry.constant { ", constant" } else { "" };
            let position = entry
                .position
                .as_deref()
                .map(|position| format!(", position {position}"))
                .unwrap_or_default();
            content.push_str(&format!(
                "\n- {} {}{constant}{position}: {lines} line(s)",
                entry.reference,
                title(entry)
            ));
        }
    }
    let entries: Vec<Listed<'_>> = activation.entries.iter().map(listed).collect();
    let structured = json!({
        "mode": "index",
        "timestampMs": activation.timestamp_ms,
        "trigger": activation.trigger,
        "totalEntries": activation.entries.len(),
        "entries": entries,
    });
    let mut output = Output::text(content).structured(structured);
    for entry in &activation.entries {
        output = output.resource_ref(entry.reference.clone());
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::knowledge::Activation;
    use toolhost_guest::testing::{MemoryWorldInfo, call};

    fn entry(index: u32, world: &str, uid: &str, name: &str, content: &str) -> WorldInfoEntry {
        WorldInfoEntry {
            index,
            world: world.into(),
            uid: uid.into(),
            display_name: Some(name.into()),
            constant: index == 0,
            position: Some("before_char".into()),
            content: content.into(),
            reference: if world.is_empty() || uid.is_empty() {
                format!("worldinfo:activated#{index}")
            } else {
                format!("worldinfo:{world}#{uid}")
            },
        }
    }

    fn world_info() -> MemoryWorldInfo {
        MemoryWorldInfo(Some(Activation {
            entries: vec![
                entry(
                    0,
                    "Eldoria",
                    "12",
                    "The Silver Lantern",
                    "A lantern that never goes out.\nIt hangs by the bridge.",
                ),
                entry(1, "Eldoria", "", "Nameless", "An entry without a uid."),
                entry(
                    2,
                    "Bestiary",
                    "7",
                    "Dragon",
                    &"Dragons sleep.\n".repeat(700),
                ),
            ],
            timestamp_ms: Some(1_764_730_000_000),
            trigger: Some("normal".into()),
        }))
    }

    #[test]
    fn no_arguments_lists_the_index() {
        let output = call(read_activated, &world_info(), json!({})).expect("index");
        assert!(output.content.starts_with("3 world-info entries activated"));
        assert!(output.content.contains("- worldinfo:Eldoria#12 `The Silver Lantern` in `Eldoria`, constant, position before_char: 2 line(s)"), "{}", output.content);
        assert!(!output.content.contains("chars"), "{}", output.content);
        assert!(output.content.contains("worldinfo:activated#1"));
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["mode"], "index");
        assert_eq!(structured["entries"][2]["totalChars"], 10_500);
        assert!(
            structured["entries"][0].get("content").is_none(),
            "the index carries no content"
        );
    }

    #[test]
    fn entries_are_read_by_ref_and_long_ones_previewed() {
        let output = call(
            read_activated,
            &world_info(),
            json!({"entries": [{"ref": "worldinfo:Eldoria#12"}, {"ref": "worldinfo:Bestiary#7"}]}),
        )
        .expect("read");
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["mode"], "content");
        assert_eq!(
            structured["entries"][0]["content"],
            "A lantern that never goes out.\nIt hangs by the bridge."
        );
        let dragon = &structured["entries"][1];
        assert!(dragon["chars"].as_u64().expect("chars") <= 8_000);
        assert!(dragon["nextStartLine"].as_u64().is_some());
        assert!(
            output
                .content
                .contains("Continue with ref `worldinfo:Bestiary#7` and start_line=")
        );
    }

    #[test]
    fn errors_have_their_codes() {
        let error = call(
            read_activated,
            &world_info(),
            json!({"entries": [{"ref": "worldinfo:Nowhere#1"}]}),
        )
        .expect_err("missing");
        assert_eq!(error.code, "worldinfo.entry_not_found");
        let error = call(
            read_activated,
            &world_info(),
            json!({"entries": [{"ref": "worldinfo:Eldoria#12", "start_line": 5}]}),
        )
        .expect_err("range");
        assert_eq!(error.code, "worldinfo.invalid_entry_range");
        let error = call(read_activated, &MemoryWorldInfo(None), json!({})).expect_err("none");
        assert_eq!(error.code, "worldinfo.activation_unavailable");
        for args in [
            json!({"entries": []}),
            json!({"entries": [{}]}),
            json!({"book": "x"}),
        ] {
            assert_eq!(
                call(read_activated, &world_info(), args.clone())
                    .expect_err("refused")
                    .code,
                "tool.invalid_arguments",
                "{args}"
            );
        }
    }
}
