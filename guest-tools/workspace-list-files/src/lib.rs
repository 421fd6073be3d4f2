//! `workspace.list_files`: the visible workspace entries under a path.
//!
//! Depth defaults to 2 (at most 4); at most 200 entries, directories first,
//! then by path. Hidden runtime storage never appears (the host filters it
//! before the cap).

use serde::Serialize;
use toolhost_guest::markdown::code;
use toolhost_guest::workspace::{self, EntryKind, Workspace};
use toolhost_guest::{Arguments, Output, ToolError};

pub const DEFAULT_DEPTH: u64 = 2;
pub const MAX_DEPTH: u64 = 4;
pub const MAX_ENTRIES: u32 = 200;

toolhost_guest::builtin_tool!(ListFiles, |args| list_files(&args, &workspace::Host));

#[derive(Serialize)]
struct StructuredEntry<'a> {
    path: &'a str,
    kind: &'static str,
}

#[derive(Serialize)]
struct Structured<'a> {
    path: &'a str,
    depth: u64,
    entries: Vec<StructuredEntry<'a>>,
    truncated: bool,
}

pub fn list_files(args: &Arguments, workspace: &impl Workspace) -> Result<Output, ToolError> {
    args.only(&["path", "depth"])?;
    let path = args.optional_dir_path("path")?;
    let depth = args.optional_u64("depth")?.unwrap_or(DEFAULT_DEPTH);
    if depth == 0 {
        return Err(ToolError::invalid_arguments("depth must be >= 1"));
    }
    if depth > MAX_DEPTH {
        return Err(ToolError::new(
            "workspace.list_depth_too_large",
            format!("depth must be <= {MAX_DEPTH}; list a subdirectory to see deeper"),
        ));
    }
    let listing = workspace.list(path, depth as u32, MAX_ENTRIES)?;

    let place = if path.is_empty() {
        "the workspace".to_owned()
    } else {
        code(path.trim_end_matches('/'))
    };
    let mut content = String::new();
    if listing.entries.is_empty() {
        content.push_str(&format!("No visible workspace files found in {place}."));
    } else {
        content.push_str(&format!(
            "{} entr{} in {place} (depth {depth}):\n",
            listing.entries.len(),
            if listing.entries.len() == 1 {
                "y"
            } else {
                "ies"
            }
        ));
        for entry in &listing.entries {
            let slash = if entry.kind == EntryKind::Directory {
                "/"
            } else {
                ""
            };
            content.push_str(&format!("\n- {}{slash}", entry.path));
        }
        if listing.truncated {
            content.push_str(&format!(
                "\n\nOnly the first {MAX_ENTRIES} entries are listed; list a subdirectory or use a smaller depth to see the rest."
            ));
        }
    }
    let structured = Structured {
        path,
        depth,
        entries: listing
            .entries
            .iter()
            .map(|entry| StructuredEntry {
                path: &entry.path,
                kind: match entry.kind {
                    EntryKind::File => "file",
                    EntryKind::Directory => "directory",
                },
            })
            .collect(),
        truncated: listing.truncated,
    };
    let mut output = Output::text(content).structured(structured);
    for entry in &listing.entries {
        output = output.resource_ref(format!("workspace:{}", entry.path));
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemoryWorkspace, call};

    #[test]
    fn lists_entries_as_markdown_with_refs() {
        let workspace = MemoryWorkspace::with(&[
            ("output/a.md", "a"),
            ("output/b.md", "b"),
            ("plan/p.md", "p"),
        ]);
        let output = call(list_files, &workspace, json!({"path": "output"})).expect("list");
        assert_eq!(
            output.content,
            "2 entries in `output` (depth 2):\n\n- output/a.md\n- output/b.md"
        );
        assert_eq!(
            output.resource_refs,
            ["workspace:output/a.md", "workspace:output/b.md"]
        );
        let structured = output.structured_value().expect("structured");
        assert_eq!(
            structured["entries"][0],
            json!({"path": "output/a.md", "kind": "file"})
        );
        assert_eq!(structured["truncated"], false);
    }

    #[test]
    fn the_root_is_the_default_and_empty_is_success() {
        let workspace = MemoryWorkspace::default();
        for args in [
            json!({}),
            json!({"path": "."}),
            json!({"path": ""}),
            json!({"path": null}),
        ] {
            let output = call(list_files, &workspace, args).expect("empty is success");
            assert_eq!(
                output.content,
                "No visible workspace files found in the workspace."
            );
        }
    }

    #[test]
    fn depth_is_checked() {
        let workspace = MemoryWorkspace::default();
        let error = call(list_files, &workspace, json!({"depth": 5})).expect_err("too deep");
        assert_eq!(error.code, "workspace.list_depth_too_large");
        let error = call(list_files, &workspace, json!({"depth": 0})).expect_err("zero");
        assert_eq!(error.code, "tool.invalid_arguments");
        let error = call(list_files, &workspace, json!({"depth": "2"})).expect_err("string");
        assert_eq!(error.code, "tool.invalid_arguments");
        let error = call(list_files, &workspace, json!({"recursive": true})).expect_err("unknown");
        assert!(error.message.starts_with("recursive is not supported"));
    }
}
