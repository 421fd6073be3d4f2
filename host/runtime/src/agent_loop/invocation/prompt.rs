//! What the model reads before its first round: the system prompt, and the
//! task or handoff brief, naming tools by their aliases in the snapshot and
//! only the workspace roots the invocation sees.

use serde_json::Value;
use toolhost_core::alias::builtin_alias;
use toolhost_core::profile::Profile;
use toolhost_journal::layout::TOOL_RESULTS_DIR;
use toolhost_workspace::Root;

use crate::invocation::Invocation;

/// The system prompt: who the agent is, the workspace roots it sees (and
/// which it may write), and how its part ends, naming the tools by this
/// snapshot's aliases. The roots are the invocation's own view — the
/// profile's roots within the run's — so the prompt names no root a call
/// would find hidden.
pub(super) fn system_prompt(profile: &Profile, session: &Invocation, foreground: bool) -> String {
    let name = profile.display_name.as_deref().unwrap_or(&profile.id);
    let mut prompt = format!("You are {name}.");
    if let Some(description) = &profile.description {
        prompt.push(' ');
        prompt.push_str(description);
    }
    prompt
        .push_str("\n\nYou act only through tool calls; text outside them is not shown to anyone.");
    let roots = session.workspace().workspace().roots();
    // `tool-results/` is the runtime's, shown to everyone; the results
    // that need it name their own paths there.
    let shown: Vec<&Root> = roots
        .roots()
        .iter()
        .filter(|root| root.visible && root.name != TOOL_RESULTS_DIR)
        .collect();
    let body = message_body(profile, session).filter(|_| foreground);
    if !shown.is_empty() {
        let described: Vec<String> = shown
            .iter()
            .map(|root| {
                let access = if root.writable {
                    "writable"
                } else {
                    "read-only"
                };
                match body {
                    Some(body) if profile.output.message_body_root() == root.name => {
                        format!("{}/ ({access}; your reply goes in {body})", root.name)
                    }
                    _ => format!("{}/ ({access})", root.name),
                }
            })
            .collect();
        prompt.push_str(&format!(" Your workspace has {}.", join(&described)));
    }
    let snapshot = session.snapshot();
    // Only what this snapshot offers is named.
    let alias = |native: &str| snapshot.builtin_alias_of(native).map(str::to_owned);
    if !foreground {
        // The seed: a return-mode child keeps its notes in summaries/ and
        // scratch/, and writes the shared roots only when its task asks.
        let notes: Vec<String> = shown
            .iter()
            .filter(|root| root.writable && ["summaries", "scratch"].contains(&root.name.as_str()))
            .map(|root| format!("{}/", root.name))
            .collect();
        if !notes.is_empty() {
            prompt.push_str(&format!(
                " Keep your notes in {}; write elsewhere only when your task asks for a file there.",
                notes.join(" or ")
            ));
        }
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
        let write_it = format!("write it to {} with {write}", body.unwrap_or("a file"));
        prompt.push_str(&format!(
            " When your reply is ready: {write_it}, publish it with {commit}, \
             then end the run with {finish} as the last call of that reply."
        ));
    }
    prompt
}

/// The invocation's message body, when its root is one the invocation
/// sees and may write (the profile names it, `output/main.md` by default):
/// the file the model writes its reply to. A body in a read-only root is
/// none — the model could not write it, so no text points it there.
pub(super) fn message_body<'p>(profile: &'p Profile, session: &Invocation) -> Option<&'p str> {
    let root = profile.output.message_body_root();
    session
        .workspace()
        .workspace()
        .roots()
        .roots()
        .iter()
        .any(|shown| shown.name == root && shown.visible && shown.writable)
        .then_some(profile.output.message_body.as_str())
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
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
