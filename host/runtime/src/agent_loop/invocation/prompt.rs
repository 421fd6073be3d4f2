//! What the model reads before its first round: the system prompt, and the
//! task or handoff brief, naming tools by their aliases in the snapshot.

use serde_json::Value;
use toolhost_core::alias::builtin_alias;
use toolhost_core::profile::Profile;

use crate::invocation::InvocationSession;

/// The system prompt: who the agent is and how its part ends, naming the
/// tools by this snapshot's aliases.
pub(super) fn system_prompt(
    profile: &Profile,
    session: &InvocationSession,
    foreground: bool,
) -> String {
    let name = profile.display_name.as_deref().unwrap_or(&profile.id);
    let mut prompt = format!("You are {name}.");
    if let Some(description) = &profile.description {
        prompt.push(' ');
        prompt.push_str(description);
    }
    prompt.push_str(
        "\n\nYou act only through tool calls; text outside them is not shown to anyone. \
         Your workspace has output/ (the reply goes in output/main.md), scratch/, plan/, \
         summaries/ and persist/.",
    );
    let snapshot = session.snapshot();
    // Only what this snapshot offers is named.
    let alias = |native: &str| snapshot.builtin_alias_of(native).map(str::to_owned);
    if !foreground {
        if let Some(task_return) = alias("task.return") {
            prompt.push_str(&format!(
                " You work on a task another agent delegated to you: when it is done, report \
                 with {task_return} as the last call of that reply."
            ));
        }
        return prompt;
    }
    if let (Some(write), Some(commit), Some(finish)) = (
        alias("workspace.write_file"),
        alias("workspace.commit"),
        alias("workspace.finish"),
    ) {
        prompt.push_str(&format!(
            " When your reply is ready: write it with {write}, publish it with {commit}, \
             then end the run with {finish} as the last call of that reply."
        ));
    }
    prompt
}

/// Sections of a brief the renderers know, in order; other keys go under
/// "Additional Instructions".
fn render_brief(title: &str, intro: String, brief: &Value, known: &[(&str, &str)]) -> String {
    let mut text = format!("# {title}\n\n{intro}\n");
    for (key, heading) in known {
        match &brief[*key] {
            Value::String(value) if !value.trim().is_empty() => {
                text.push_str(&format!("\n## {heading}\n{value}\n"));
            }
            Value::Array(items) if !items.is_empty() => {
                text.push_str(&format!("\n## {heading}\n"));
                for item in items {
                    text.push_str(&format!("- {}\n", item.as_str().unwrap_or_default()));
                }
            }
            _ => {}
        }
    }
    if let Value::Object(map) = brief {
        let extra: serde_json::Map<String, Value> = map
            .iter()
            .filter(|(key, _)| !known.iter().any(|(known, _)| known == key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if !extra.is_empty() {
            text.push_str(&format!(
                "\n## Additional Instructions\n```json\n{}\n```\n",
                serde_json::to_string_pretty(&Value::Object(extra)).unwrap_or_default()
            ));
        }
    }
    text
}

pub(super) fn task_brief(caller: &Profile, task: &Value) -> String {
    let name = caller.display_name.as_deref().unwrap_or(&caller.id);
    render_brief(
        "Delegated Task",
        format!(
            "{name} delegated this task to you. Work on it with your tools; your result goes back to {name}, not to the chat. Report it with {}.",
            // The child's snapshot is not compiled yet; a builtin's alias
            // is its native name's, in every snapshot.
            builtin_alias("task.return")
        ),
        task,
        &[
            ("title", "Title"),
            ("objective", "Objective"),
            ("context", "Context"),
            ("expectedOutput", "Expected Output"),
        ],
    )
}

pub(super) fn handoff_brief(caller: &Profile, brief: &Value) -> String {
    let name = caller.display_name.as_deref().unwrap_or(&caller.id);
    render_brief(
        "Handoff Brief",
        format!(
            "{name} handed this run to you. The workspace holds its work so far. Finish the run yourself: commit the reply and call {}.",
            builtin_alias("workspace.finish")
        ),
        brief,
        &[
            ("title", "Title"),
            ("reason", "Reason"),
            ("objective", "Objective"),
            ("contextSummary", "Context Summary"),
            ("workspaceRefs", "Workspace References"),
            ("mustPreserve", "Must Preserve"),
            ("completionCriteria", "Completion Criteria"),
        ],
    )
}
