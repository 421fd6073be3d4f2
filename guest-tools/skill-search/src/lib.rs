//! `skill.search`: plain-text search inside one skill's files.
//!
//! The same query rules and line-window selection as
//! `workspace.search_files` (`toolhost-text`). Files that are not UTF-8 text
//! are skipped and counted. The snippets shown count against the skill read
//! budget: hits are shown best first while they fit what is left, and a
//! search that finds something but has no budget left for it says so.

use serde_json::json;
use toolhost_guest::catalog;
use toolhost_guest::knowledge::{self, Skills};
use toolhost_guest::markdown::code;
use toolhost_guest::search_result::{LineHit, LineSearch};
use toolhost_guest::{Arguments, Output, ToolError};

toolhost_guest::builtin_tool!(SkillSearch, |args| search_skill(&args, &knowledge::Host));

/// Whether `path` is `prefix` or lies under it.
fn under(path: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_matches('/');
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

pub fn search_skill(args: &Arguments, skills: &impl Skills) -> Result<Output, ToolError> {
    args.only(&["name", "query", "path", "limit", "context_lines"])?;
    let name = args.required_str("name")?;
    let query = args.required_str("query")?;
    let prefix = args.optional_str("path")?.unwrap_or("");
    let search = LineSearch::parse(args, query, "skill", "skill.invalid_request")?;
    let budget = skills.budget();
    let allowance = budget.per_call.min(budget.remaining);

    let files = skills.files(name)?;
    let in_scope = files.iter().filter(|file| under(&file.path, prefix));
    let scanned = search.scan(in_scope, |file| {
        let text = skills.read_text(name, &file.path).ok()?;
        Some((text.path, text.text, ()))
    });
    let found = &scanned.found;
    // Show the best hits while their snippets fit the allowance.
    let mut shown_chars = 0u64;
    let mut hits = Vec::new();
    for kept in found {
        let cost = kept.chars;
        if shown_chars + cost > allowance {
            break;
        }
        shown_chars += cost;
        hits.push(LineHit::new(kept, |path, start, end| {
            format!("skills/{name}/{path}#L{start}-L{end}")
        }));
    }
    if !found.is_empty() && hits.is_empty() {
        return Err(ToolError::new(
            "skill.read_budget_exhausted",
            format!(
                "the search found {} match(es), but the skill read budget left ({allowance} chars) cannot show any",
                found.len()
            ),
        ));
    }
    skills.charge(shown_chars)?;

    let mut content = String::new();
    if found.is_empty() {
        content.push_str(&format!(
            "No file of skill {} matched {}.",
            code(name),
            code(query)
        ));
    } else {
        content.push_str(&format!(
            "Search {} in skill {} matched {} location(s).{}",
            code(query),
            code(name),
            hits.len(),
            catalog::pointer("skill.read", " Read more with {} and the path.")
        ));
        for hit in &hits {
            hit.render_into(&mut content);
        }
        if hits.len() < found.len() {
            content.push_str(&format!(
                "\n\n{} more match(es) did not fit the skill read budget left.",
                found.len() - hits.len()
            ));
        }
    }
    scanned.tally_into(&mut content);
    let structured = json!({
        "name": name,
        "query": query,
        "hits": hits,
        "searchedFiles": scanned.searched,
        "skippedFiles": scanned.skipped,
        "charged": shown_chars,
    });
    Ok(Output::text(content)
        .structured(structured)
        .resource_refs_from(hits.iter().map(|hit| hit.reference.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::{MemorySkills, call, transcript};

    fn library(per_call: u64, per_run: u64) -> MemorySkills {
        MemorySkills::with(
            per_call,
            per_run,
            &[(
                "lore-keeper",
                "Keeps facts straight.",
                &[
                    (
                        "SKILL.md",
                        "# Lore keeper\nCheck the timeline before writing.\n",
                    ),
                    (
                        "reference/timeline.md",
                        "Year 1: the lantern is lit.\nYear 9: the bridge falls.\n",
                    ),
                ],
            )],
        )
    }

    #[test]
    fn finds_hits_in_the_skill_files_and_charges_them() {
        let skills = library(1_000, 1_000);
        let output = call(
            search_skill,
            &skills,
            json!({"name": "lore-keeper", "query": "timeline", "context_lines": 0}),
        )
        .expect("search");
        let structured = output.structured_value().expect("structured");
        assert_eq!(
            structured["hits"][0]["ref"],
            "skills/lore-keeper/SKILL.md#L2-L2"
        );
        let charged = structured["charged"].as_u64().expect("charged");
        assert!(charged > 0);
        assert_eq!(*skills.remaining.borrow(), 1_000 - charged);
        let scoped = call(
            search_skill,
            &skills,
            json!({"name": "lore-keeper", "query": "lantern", "path": "reference"}),
        )
        .expect("search");
        assert_eq!(scoped.structured_value().expect("s")["searchedFiles"], 1);
    }

    #[test]
    fn zero_hits_is_success_and_the_budget_is_enforced() {
        let skills = library(1_000, 1_000);
        let output = call(
            search_skill,
            &skills,
            json!({"name": "lore-keeper", "query": "dragon"}),
        )
        .expect("zero hits");
        assert!(
            output
                .content
                .starts_with("No file of skill `lore-keeper` matched `dragon`.")
        );
        let broke = library(5, 5);
        let error = call(
            search_skill,
            &broke,
            json!({"name": "lore-keeper", "query": "timeline"}),
        )
        .expect_err("budget");
        assert_eq!(error.code, "skill.read_budget_exhausted");
        assert_eq!(*broke.remaining.borrow(), 5, "nothing charged on refusal");
    }

    #[test]
    fn arguments_have_their_codes() {
        let skills = library(1_000, 1_000);
        for (args, code) in [
            (
                json!({"name": "lore-keeper", "query": "x", "limit": 0}),
                "skill.search_limit_invalid",
            ),
            (
                json!({"name": "lore-keeper", "query": "x", "limit": 99}),
                "skill.search_limit_too_large",
            ),
            (
                json!({"name": "lore-keeper", "query": "x", "context_lines": 9}),
                "skill.search_context_too_large",
            ),
            (json!({"name": "nope", "query": "x"}), "skill.not_visible"),
            (json!({"query": "x"}), "tool.invalid_arguments"),
        ] {
            assert_eq!(
                call(search_skill, &skills, args.clone())
                    .expect_err("refused")
                    .code,
                code,
                "{args}"
            );
        }
    }

    /// The model-facing output, byte for byte: pinned so a refactor of the
    /// shared records cannot change what the model or a program reads.
    #[test]
    fn the_output_is_pinned() {
        let skills = library(1_000, 1_000);
        let args = json!({"name": "lore-keeper", "query": "the timeline", "context_lines": 1});
        assert_eq!(
            transcript(&call(search_skill, &skills, args)),
            "Search `the timeline` in skill `lore-keeper` matched 2 location(s).\n\n`SKILL.md` lines 1-2, score 1.000, ref skills/lore-keeper/SKILL.md#L1-L2\n```\n1 | # Lore keeper\n2 | Check the timeline before writing.\n```\n\n`reference/timeline.md` lines 1-2, score 0.273, ref skills/lore-keeper/reference/timeline.md#L1-L2\n```\n1 | Year 1: the lantern is lit.\n2 | Year 9: the bridge falls.\n```\n\nSearched 2 file(s).\n{\"charged\":101,\"hits\":[{\"endLine\":2,\"path\":\"SKILL.md\",\"ref\":\"skills/lore-keeper/SKILL.md#L1-L2\",\"score\":1.0,\"snippet\":\"1 | # Lore keeper\\n2 | Check the timeline before writing.\",\"startLine\":1},{\"endLine\":2,\"path\":\"reference/timeline.md\",\"ref\":\"skills/lore-keeper/reference/timeline.md#L1-L2\",\"score\":0.2727272727272727,\"snippet\":\"1 | Year 1: the lantern is lit.\\n2 | Year 9: the bridge falls.\",\"startLine\":1}],\"name\":\"lore-keeper\",\"query\":\"the timeline\",\"searchedFiles\":2,\"skippedFiles\":0}\n[\"skills/lore-keeper/SKILL.md#L1-L2\", \"skills/lore-keeper/reference/timeline.md#L1-L2\"]\n"
        );
    }
}
