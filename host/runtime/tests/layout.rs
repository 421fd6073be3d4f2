//! The runtime's shape, checked so it stays readable (issue 38): its
//! top-level modules import each other in one direction (no cycle), no
//! source file is longer than one sitting, and it names no domain crate —
//! chats, skills and world info reach it only through the capabilities.
//!
//! The module graph is read from the sources: every `crate::<name>` path
//! outside a comment (and `super::<name>` in a top-level module's own file,
//! where `super` is the crate root), `<name>` resolved to a top-level module
//! directly or through `lib.rs`'s re-exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const LONGEST_FILE: usize = 600;
const DOMAIN_CRATES: [&str; 3] = ["toolhost-chat", "toolhost-skills", "toolhost-worldinfo"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The first identifier of each path that follows `prefix` in `text`:
/// `crate::run::Run` gives `run`; a group, `crate::{run::Run, host}`,
/// gives `run` and `host` (however many lines it spans).
fn after(text: &str, prefix: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let preceded = rest[..at].chars().next_back().is_some_and(ident);
        rest = &rest[at + prefix.len()..];
        if preceded {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Each item at the group's own depth starts with a name.
            let mut depth = 0;
            let mut item_start = true;
            for (offset, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && ident(c) => {
                        let end = group[offset..]
                            .find(|c: char| !ident(c))
                            .map_or(group.len(), |len| offset + len);
                        names.push(group[offset..end].to_owned());
                        item_start = false;
                    }
                    c if c.is_whitespace() => {}
                    _ => item_start = false,
                }
            }
            continue;
        }
        let end = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
        if end > 0 {
            names.push(rest[..end].to_owned());
        }
    }
    names
}

/// Top-level module → the top-level modules it uses.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let module_of = |path: &Path| -> String {
        let relative = path.strip_prefix(&src).expect("under src");
        let first = relative.components().next().expect("a component");
        first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned()
    };
    let modules: BTreeSet<String> = files
        .iter()
        .map(|path| module_of(path))
        .filter(|module| module != "lib")
        .collect();
    // What `lib.rs` re-exports, by name: `crate::Run` is `run`'s.
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs");
    let mut exported = BTreeMap::new();
    for statement in lib.split(';') {
        let statement = statement.trim();
        let Some(used) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let Some((module, items)) = used.split_once("::") else {
            continue;
        };
        if modules.contains(module) {
            for item in items.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if !item.is_empty() {
                    exported.insert(item.to_owned(), module.to_owned());
                }
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &files {
        let module = module_of(path);
        if module == "lib" {
            continue;
        }
        let relative = path.strip_prefix(&src).expect("under src");
        let depth = relative.components().count();
        let own_file = depth == 1 || (depth == 2 && relative.ends_with("mod.rs"));
        let text = std::fs::read_to_string(path).expect("source");
        // Comments may name any module; only code imports one.
        let code: String = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let mut names = after(&code, "crate::");
        if own_file {
            names.extend(after(&code, "super::"));
        }
        for name in names {
            let target = if modules.contains(&name) {
                Some(name)
            } else {
                exported.get(&name).cloned()
            };
            if let Some(target) = target
                && target != module
            {
                graph.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    graph
}

/// A cycle in `graph`, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|on| on == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn the_modules_import_each_other_in_one_direction() {
    let graph = module_graph();
    // The graph is read at all: the call path's modules are in it.
    assert!(
        graph
            .get("invocation")
            .is_some_and(|uses| uses.contains("run") && uses.contains("executor")),
        "{graph:#?}"
    );
    assert_eq!(cycle(&graph), None, "{graph:#?}");
}

#[test]
fn paths_and_groups_are_read() {
    let text = "use crate::run::Run;\nuse crate::{\n    executor::{CallContext, ToolExecutor},\n    readable_view,\n};\nlet x = mycrate::other;";
    assert_eq!(after(text, "crate::"), ["run", "executor", "readable_view"]);
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let edges = [
        ("run", "invocation"),
        ("invocation", "approval"),
        ("approval", "run"),
    ];
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges {
        graph.entry(from.into()).or_default().insert(to.into());
    }
    let found = cycle(&graph).expect("a cycle");
    assert_eq!(found.first(), found.last());
    assert_eq!(found.len(), 4);
    graph.get_mut("approval").expect("node").clear();
    assert_eq!(cycle(&graph), None);
}

#[test]
fn every_source_file_reads_in_one_sitting() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path)
                .expect("source")
                .lines()
                .count();
            (lines > LONGEST_FILE).then(|| format!("{}: {lines} lines", path.display()))
        })
        .collect();
    assert!(long.is_empty(), "over {LONGEST_FILE} lines: {long:#?}");
}

#[test]
fn the_runtime_names_no_domain_crate() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("Cargo.toml");
    for domain in DOMAIN_CRATES {
        assert!(
            !manifest.contains(domain),
            "host/runtime/Cargo.toml names {domain}: reach it through toolhost-capabilities"
        );
    }
}
