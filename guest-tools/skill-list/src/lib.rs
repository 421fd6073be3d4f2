//! `skill.list`: the installed skills this agent may use, by name.
//!
//! Only names and descriptions: how a skill is stored (its scope, files,
//! internal index fields) is not the model's business; `skill.read` opens one.

use serde::Serialize;
use serde_json::json;
use toolhost_guest::catalog;
use toolhost_guest::knowledge::{self, Skills};
use toolhost_guest::markdown::code;
use toolhost_guest::{Arguments, Output, ToolError};

toolhost_guest::builtin_tool!(SkillList, |args| list_skills(&args, &knowledge::Host));

#[derive(Serialize)]
struct Listed<'a> {
    name: &'a str,
    description: &'a str,
}

pub fn list_skills(args: &Arguments, skills: &impl Skills) -> Result<Output, ToolError> {
    args.only(&[])?;
    let mut all = skills.list_skills();
    all.sort_by(|a, b| a.name.cmp(&b.name));
    let mut content = String::new();
    if all.is_empty() {
        content.push_str("No skills are available to you.");
    } else {
        content.push_str(&format!(
            "{} skill(s) available.{}\n",
            all.len(),
            catalog::pointer("skill.read", " Read one with {} and its name.")
        ));
        for skill in &all {
            content.push_str(&format!("\n- {}: {}", code(&skill.name), skill.description));
        }
    }
    let listed: Vec<Listed<'_>> = all
        .iter()
        .map(|skill| Listed {
            name: &skill.name,
            description: &skill.description,
        })
        .collect();
    Ok(Output::text(content).structured(json!({ "skills": listed })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::MemorySkills;

    #[test]
    fn lists_names_and_descriptions_only() {
        let skills = MemorySkills::with(
            100,
            1000,
            &[
                (
                    "prose-style",
                    "How to write vivid prose.",
                    &[("SKILL.md", "# Prose")],
                ),
                (
                    "lore-keeper",
                    "Keeps the world's facts straight.",
                    &[("SKILL.md", "# Lore")],
                ),
            ],
        );
        let output = list_skills(&Arguments::default(), &skills).expect("list");
        assert_eq!(
            output.content,
            "2 skill(s) available.\n\n- `lore-keeper`: Keeps the world's facts straight.\n- `prose-style`: How to write vivid prose."
        );
        assert_eq!(
            output.structured_value().expect("structured"),
            json!({"skills": [
                {"name": "lore-keeper", "description": "Keeps the world's facts straight."},
                {"name": "prose-style", "description": "How to write vivid prose."}
            ]}),
            "no scope or other internal field leaks"
        );
        let none = list_skills(&Arguments::default(), &MemorySkills::default()).expect("list");
        assert_eq!(none.content, "No skills are available to you.");
        let error = list_skills(
            &Arguments::from_value(json!({"all": true})).expect("object"),
            &skills,
        )
        .expect_err("args");
        assert_eq!(error.code, "tool.invalid_arguments");
    }
}
