//! `workspace.search_files`: plain-text search over the visible workspace.
//!
//! Query normalization and line scoring are the shared rules of
//! `toolhost-text` (also used by `skill.search`): a query with letters,
//! digits or `_` is scored by tokens; one without (`——`, `...`) is searched
//! literally. Files are walked up to 8 levels deep and 5,000 files; files
//! that are not UTF-8 text are skipped and counted. Zero hits is a success.

use serde::Serialize;
use toolhost_guest::catalog;
use toolhost_guest::markdown::code;
use toolhost_guest::search_result::{HitFacts, LineHit, LineSearch};
use toolhost_guest::workspace::{self, Workspace};
use toolhost_guest::{Arguments, Output, ToolError};

pub const MAX_DEPTH: u32 = 8;
pub const MAX_FILES: u32 = 5_000;

toolhost_guest::builtin_tool!(SearchFiles, |args| search_files(&args, &workspace::Host));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    query: &'a str,
    hits: &'a [LineHit],
    searched_files: u64,
    skipped_files: u64,
    truncated: bool,
}

pub fn search_files(args: &Arguments, workspace: &impl Workspace) -> Result<Output, ToolError> {
    args.only(&["query", "path", "limit", "context_lines"])?;
    let query = args.required_str("query")?;
    let path = args.optional_dir_path("path")?;
    let search = LineSearch::parse(args, query, "workspace", "tool.invalid_arguments")?;

    let files = workspace.walk_files(path, MAX_DEPTH, MAX_FILES)?;
    // Binary, too large, vanished since the walk: counted, passed over.
    let scanned = search.scan(&files.entries, |entry| {
        let file = workspace.read_text(&entry.path).ok()?;
        Some((file.path, file.text, file.sha256))
    });
    let hits: Vec<LineHit> = scanned
        .found
        .iter()
        .map(|kept| {
            LineHit::new(kept, workspace::line_ref).facts(HitFacts {
                chars: kept.chars,
                words: kept.words,
                sha256: kept.extra.clone(),
            })
        })
        .collect();

    let mut content = String::new();
    if hits.is_empty() {
        content.push_str(&format!(
            "No visible workspace files matched {}.",
            code(query)
        ));
    } else {
        content.push_str(&format!(
            "Search {} matched {} workspace location(s).{}",
            code(query),
            hits.len(),
            catalog::pointer(
                "workspace.read_file",
                " Use {} with path and start_line/line_count to read more."
            )
        ));
        for hit in &hits {
            hit.render_into(&mut content);
        }
    }
    scanned.tally_into(&mut content);
    if files.truncated {
        content.push_str(&format!(
            " Only the first {MAX_FILES} files were searched; give a path to search the rest."
        ));
    }
    let structured = Structured {
        query,
        hits: &hits,
        searched_files: scanned.searched,
        skipped_files: scanned.skipped,
        truncated: files.truncated,
    };
    Ok(Output::text(content)
        .structured(structured)
        .resource_refs_from(hits.iter().map(|hit| hit.reference.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemoryWorkspace, call, transcript};

    #[test]
    fn finds_scored_windows_across_files() {
        let workspace = MemoryWorkspace::with(&[
            ("output/a.md", "alpha\nbeta gamma\ndelta\n"),
            ("plan/b.md", "gamma\nnothing\n"),
        ]);
        let output = call(
            search_files,
            &workspace,
            json!({"query": "beta gamma", "context_lines": 0}),
        )
        .expect("search");
        let structured = output.structured_value().expect("structured");
        let hits = structured["hits"].as_array().expect("hits");
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0]["path"], "output/a.md");
        assert_eq!(hits[0]["startLine"], 2);
        assert_eq!(hits[0]["score"], 1.0);
        assert_eq!(hits[0]["ref"], "workspace:output/a.md#L2-L2");
        assert_eq!(hits[1]["path"], "plan/b.md");
        assert!(
            output
                .content
                .starts_with("Search `beta gamma` matched 2 workspace location(s).")
        );
        assert_eq!(structured["searchedFiles"], 2);
    }

    #[test]
    fn punctuation_only_queries_match_literally_and_zero_hits_is_success() {
        let workspace = MemoryWorkspace::with(&[("output/a.md", "wait——what\nplain\n")]);
        let output = call(search_files, &workspace, json!({"query": "——"})).expect("search");
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["hits"][0]["startLine"], 1);

        let output = call(search_files, &workspace, json!({"query": "absent"}))
            .expect("zero hits is success");
        assert!(
            output
                .content
                .starts_with("No visible workspace files matched `absent`.")
        );
    }

    #[test]
    fn binary_files_are_skipped_and_counted() {
        let workspace = MemoryWorkspace::with(&[("output/a.md", "needle\n")]);
        workspace
            .files
            .borrow_mut()
            .insert("output/blob.bin".into(), vec![0xff, 0xfe, 0x00]);
        let output = call(search_files, &workspace, json!({"query": "needle"})).expect("search");
        assert!(
            output
                .content
                .contains("Skipped 1 file(s) that could not be read as text.")
        );
        assert_eq!(output.structured_value().expect("s")["skippedFiles"], 1);
    }

    #[test]
    fn limits_are_checked_with_their_codes() {
        let workspace = MemoryWorkspace::default();
        for (args, code) in [
            (
                json!({"query": "x", "limit": 0}),
                "workspace.search_limit_invalid",
            ),
            (
                json!({"query": "x", "limit": 51}),
                "workspace.search_limit_too_large",
            ),
            (
                json!({"query": "x", "context_lines": 6}),
                "workspace.search_context_too_large",
            ),
            (json!({"query": "  "}), "tool.invalid_arguments"),
            (json!({}), "tool.invalid_arguments"),
        ] {
            assert_eq!(
                call(search_files, &workspace, args.clone())
                    .expect_err("refused")
                    .code,
                code,
                "{args}"
            );
        }
    }

    #[test]
    fn the_limit_keeps_the_best_hits() {
        let files: Vec<(String, String)> = (0..30)
            .map(|n| (format!("output/{n:02}.md"), format!("needle {n}\n")))
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let workspace = MemoryWorkspace::with(&refs);
        let output = call(
            search_files,
            &workspace,
            json!({"query": "needle", "limit": 5}),
        )
        .expect("search");
        let structured = output.structured_value().expect("structured");
        let paths: Vec<&str> = structured["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|hit| hit["path"].as_str().expect("path"))
            .collect();
        // Equal scores: path order.
        assert_eq!(
            paths,
            [
                "output/00.md",
                "output/01.md",
                "output/02.md",
                "output/03.md",
                "output/04.md"
            ]
        );
    }

    /// The model-facing output, byte for byte: pinned so a refactor of the
    /// shared records cannot change what the model or a program reads.
    #[test]
    fn the_output_is_pinned() {
        let workspace = MemoryWorkspace::with(&[
            ("output/a.md", "alpha\nbeta gamma\ndelta\n"),
            ("plan/b.md", "gamma\nnothing\n"),
        ]);
        workspace
            .files
            .borrow_mut()
            .insert("output/blob.bin".into(), vec![0xff, 0xfe, 0x00]);
        let args = json!({"query": "beta gamma", "context_lines": 1});
        assert_eq!(
            transcript(&call(search_files, &workspace, args)),
            "Search `beta gamma` matched 2 workspace location(s).\n\n`output/a.md` lines 1-3, score 1.000, ref workspace:output/a.md#L1-L3\n```\n1 | alpha\n2 | beta gamma\n3 | delta\n```\n\n`plan/b.md` lines 1-2, score 0.556, ref workspace:plan/b.md#L1-L2\n```\n1 | gamma\n2 | nothing\n```\n\nSearched 2 file(s). Skipped 1 file(s) that could not be read as text.\n{\"query\":\"beta gamma\",\"hits\":[{\"path\":\"output/a.md\",\"score\":1.0,\"startLine\":1,\"endLine\":3,\"snippet\":\"1 | alpha\\n2 | beta gamma\\n3 | delta\",\"chars\":22,\"words\":4,\"sha256\":\"ce2e408db0333496\",\"ref\":\"workspace:output/a.md#L1-L3\"},{\"path\":\"plan/b.md\",\"score\":0.5555555555555556,\"startLine\":1,\"endLine\":2,\"snippet\":\"1 | gamma\\n2 | nothing\",\"chars\":13,\"words\":2,\"sha256\":\"bbda8660830d0855\",\"ref\":\"workspace:plan/b.md#L1-L2\"}],\"searchedFiles\":2,\"skippedFiles\":1,\"truncated\":false}\n[\"workspace:output/a.md#L1-L3\", \"workspace:plan/b.md#L1-L2\"]\n"
        );
    }
}
