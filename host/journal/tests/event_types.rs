//! Outside this crate an event is matched by its struct's `TYPE`, never by
//! its name written out: a renamed event must fail to compile where it is
//! read, not go silently unmatched. The names are this crate's to write (its
//! own tests pin the wire format with them).

use std::path::{Path, PathBuf};

fn host() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every event type this crate defines, read from the `invocation_scoped!`
/// / `run_scoped!` lines and the hand-written `const TYPE`s.
fn event_types() -> Vec<String> {
    let mut types = Vec::new();
    for file in ["src/events.rs", "src/events/agent_loop.rs"] {
        let source = std::fs::read_to_string(host().join("journal").join(file)).expect("source");
        // A macro call may wrap its name onto the next line.
        let mut in_macro = false;
        for line in source.lines() {
            let line = line.trim();
            let starts =
                line.starts_with("invocation_scoped!(") || line.starts_with("run_scoped!(");
            in_macro |= starts;
            let named = in_macro || line.starts_with("const TYPE: &'static str = ");
            if named && let Some(name) = quoted(line) {
                types.push(name.to_owned());
                in_macro = false;
            }
            if line.ends_with(");") {
                in_macro = false;
            }
        }
    }
    types.sort();
    types.dedup();
    types
}

/// The first `"…"` of a line, if its text is a plain snake_case name.
fn quoted(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once('"')?;
    let (name, _) = rest.split_once('"')?;
    let plain = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    plain.then_some(name)
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            into.push(path);
        }
    }
}

#[test]
fn the_event_types_are_found() {
    let types = event_types();
    for known in [
        "run_started",
        "tool_call_unknown",
        "agent_task_ended",
        "run_completed",
    ] {
        assert!(types.iter().any(|t| t == known), "{known} in {types:?}");
    }
}

#[test]
fn no_crate_but_the_journal_spells_an_event_type_out() {
    let types = event_types();
    let mut files = Vec::new();
    for crate_dir in std::fs::read_dir(host()).expect("host/").flatten() {
        if crate_dir.file_name() != "journal" {
            rust_files(&crate_dir.path(), &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} files", files.len());
    let quoted: Vec<(&String, String)> = types
        .iter()
        .map(|name| (name, format!("\"{name}\"")))
        .collect();
    let mut found = Vec::new();
    for file in files {
        let relative = file.strip_prefix(host()).unwrap_or(&file).to_owned();
        let source = std::fs::read_to_string(&file).expect("source");
        for (number, line) in source.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for (name, quoted) in &quoted {
                if line.contains(quoted.as_str()) {
                    found.push(format!(
                        "{}:{}: \"{name}\": use its struct's TYPE",
                        relative.display(),
                        number + 1
                    ));
                }
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}
