//! `skill.read`: read a file of a skill (its `SKILL.md` by default) by
//! 1-based line window, within the read budget the profile gives skills: at
//! most `maxReadCharsPerCall` per call and `maxReadCharsPerRun` for the whole
//! invocation. A file over what is left returns a preview that names the
//! next `start_line`; what is shown is charged.

use serde::Serialize;
use toolhost_guest::knowledge::{self, Skills};
use toolhost_guest::line_read::{LineRequest, WindowRecord, Wording};
use toolhost_guest::markdown::code;
use toolhost_guest::text::lines::{self, ReadLimits};
use toolhost_guest::{Arguments, Output, ToolError};

toolhost_guest::builtin_tool!(SkillRead, |args| read_skill(&args, &knowledge::Host));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    name: &'a str,
    path: &'a str,
    sha256: &'a str,
    #[serde(flatten)]
    window: WindowRecord,
    budget_remaining: u64,
}

pub fn read_skill(args: &Arguments, skills: &impl Skills) -> Result<Output, ToolError> {
    args.only(&["name", "path", "start_line", "line_count"])?;
    let name = args.required_str("name")?;
    let path = args.optional_str("path")?.unwrap_or("");
    let request = LineRequest::parse(args, |key, _| {
        ToolError::new("skill.invalid_request", format!("{key} is too large"))
    })?;

    let budget = skills.budget();
    let allowance = budget.per_call.min(budget.remaining) as usize;
    if allowance == 0 {
        return Err(ToolError::new(
            "skill.read_budget_exhausted",
            "the skill read budget of this run is used up; continue without reading more skills",
        ));
    }
    let file = skills.read_text(name, path)?;
    let window = lines::select(
        &file.text,
        request.start_line,
        request.line_count,
        ReadLimits::with_max_chars(allowance),
    )
    .map_err(|error| ToolError::new("skill.invalid_request", error.to_string()))?;
    skills.charge(window.chars)?;
    let remaining = budget.remaining - window.chars;

    let shown = code(&format!("{name}/{}", file.path));
    let mut content = String::new();
    Wording::SKILL.render_into(&shown, &window, &mut content);
    content.push_str(&format!(
        "\n\nSkill read budget left for this run: {remaining} chars."
    ));
    let structured = Structured {
        name,
        path: &file.path,
        sha256: &file.sha256,
        window: WindowRecord::new(&window, &file.text).without_total_words(),
        budget_remaining: remaining,
    };
    Ok(Output::text(content)
        .structured(structured)
        .resource_ref(format!(
            "skills/{name}/{}#L{}-L{}",
            file.path, window.start_line, window.end_line
        )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemorySkills, call, transcript};

    fn library(per_call: u64, per_run: u64) -> MemorySkills {
        let guide: String = (1..=40)
            .map(|n| format!("Rule {n}: write well.\n"))
            .collect();
        MemorySkills::with(
            per_call,
            per_run,
            &[(
                "prose-style",
                "Vivid prose.",
                &[("SKILL.md", &guide), ("examples/a.md", "An example.")],
            )],
        )
    }

    #[test]
    fn reads_skill_md_by_default_and_charges_what_is_shown() {
        let skills = library(10_000, 10_000);
        let output = call(read_skill, &skills, json!({"name": "prose-style"})).expect("read");
        assert!(
            output
                .content
                .starts_with("`prose-style/SKILL.md`, the whole file (40 line(s)):"),
            "{}",
            output.content
        );
        let structured = output.structured_value().expect("structured");
        let charged = structured["chars"].as_u64().expect("chars");
        assert_eq!(*skills.remaining.borrow(), 10_000 - charged);
        assert_eq!(output.resource_refs, ["skills/prose-style/SKILL.md#L1-L40"]);
        let example = call(
            read_skill,
            &skills,
            json!({"name": "prose-style", "path": "examples/a.md"}),
        )
        .expect("read");
        assert!(example.content.contains("1 | An example."));
    }

    #[test]
    fn the_budget_previews_then_refuses() {
        let skills = library(100, 150);
        let first = call(read_skill, &skills, json!({"name": "prose-style"})).expect("a preview");
        let structured = first.structured_value().expect("structured");
        assert!(
            structured["chars"].as_u64().expect("chars") <= 100,
            "the per-call budget"
        );
        assert!(structured["nextStartLine"].as_u64().is_some());
        // Keep reading: what is left is shown until nothing is.
        let mut calls = 0;
        let error = loop {
            calls += 1;
            assert!(calls < 10, "the run budget must run out");
            match call(
                read_skill,
                &skills,
                json!({"name": "prose-style", "start_line": 5}),
            ) {
                Ok(_) => continue,
                Err(error) => break error,
            }
        };
        assert_eq!(error.code, "skill.read_budget_exhausted");
        assert_eq!(
            *skills.remaining.borrow(),
            0,
            "all 150 chars were charged, no more"
        );
    }

    #[test]
    fn errors_come_through() {
        let skills = library(1000, 1000);
        assert_eq!(
            call(read_skill, &skills, json!({"name": "nope"}))
                .expect_err("x")
                .code,
            "skill.not_visible"
        );
        assert_eq!(
            call(
                read_skill,
                &skills,
                json!({"name": "prose-style", "path": "x.md"})
            )
            .expect_err("x")
            .code,
            "skill.not_found"
        );
        assert_eq!(
            call(
                read_skill,
                &skills,
                json!({"name": "prose-style", "start_line": 99})
            )
            .expect_err("x")
            .code,
            "skill.invalid_request"
        );
        assert_eq!(
            call(
                read_skill,
                &skills,
                json!({"name": "prose-style", "max_chars": 5})
            )
            .expect_err("x")
            .code,
            "tool.invalid_arguments"
        );
    }

    /// The model-facing output, byte for byte: pinned so a refactor of the
    /// shared records cannot change what the model or a program reads.
    #[test]
    fn the_output_is_pinned() {
        let skills = library(100, 10_000);
        let got: String = [
            json!({"name": "prose-style", "path": "examples/a.md"}),
            json!({"name": "prose-style", "start_line": 3}),
            json!({"name": "prose-style", "start_line": 4294967296u64}),
            json!({"name": "prose-style", "line_count": "two"}),
        ]
        .into_iter()
        .map(|args| transcript(&call(read_skill, &skills, args)))
        .collect();
        assert_eq!(
            got,
            "`prose-style/examples/a.md`, the whole file (1 line(s)):\n\n```\n1 | An example.\n```\n\nSkill read budget left for this run: 9989 chars.\n{\"name\":\"prose-style\",\"path\":\"examples/a.md\",\"sha256\":\"f362ee42291819e6\",\"totalLines\":1,\"startLine\":1,\"endLine\":1,\"chars\":11,\"words\":2,\"totalChars\":11,\"lineTruncated\":false,\"nextStartLine\":null,\"budgetRemaining\":9989}\n[\"skills/prose-style/examples/a.md#L1-L1\"]\n`prose-style/SKILL.md` lines 3-7 of 40:\n\n```\n3 | Rule 3: write well.\n4 | Rule 4: write well.\n5 | Rule 5: write well.\n6 | Rule 6: write well.\n7 | Rule 7: write well.\n```\n\nPreview ended before the end of the file. Continue with start_line=8.\n\nSkill read budget left for this run: 9890 chars.\n{\"name\":\"prose-style\",\"path\":\"SKILL.md\",\"sha256\":\"f7e9f2cd58899a4f\",\"totalLines\":40,\"startLine\":3,\"endLine\":7,\"chars\":99,\"words\":20,\"totalChars\":831,\"lineTruncated\":false,\"nextStartLine\":8,\"budgetRemaining\":9890}\n[\"skills/prose-style/SKILL.md#L3-L7\"]\nskill.invalid_request: start_line is too large\ntool.invalid_arguments: line_count must be a non-negative integer\n"
        );
    }
}
