//! `agent.list`: the agents this agent may delegate a task to or hand the
//! run off to, with what each is for and its limits. Only what the target
//! profiles publish for other agents (`agent-read`).

use serde_json::{Value, json};
use toolhost_guest::agents::{self, AgentSummary, Agents, Purpose};
use toolhost_guest::markdown::code;
use toolhost_guest::{Arguments, Output, ToolError};

/// Agents listed when `limit` is not given, and the most it may ask for.
pub const DEFAULT_LIMIT: u64 = 8;
pub const MAX_LIMIT: u64 = 20;

toolhost_guest::builtin_tool!(AgentList, |args| list_agents(&args, &agents::Host));

pub fn list_agents(args: &Arguments, host: &impl Agents) -> Result<Output, ToolError> {
    args.only(&["purpose", "query", "limit"])?;
    let (purpose, purpose_name) =
        match args.optional_choice("purpose", &["any", "delegate", "handoff"])? {
            None | Some("any") => (Purpose::Any, "any"),
            Some("delegate") => (Purpose::Delegate, "delegate"),
            Some(_) => (Purpose::Handoff, "handoff"),
        };
    let query = args.optional_str("query")?.map(str::to_ascii_lowercase);
    let limit = args.optional_u64("limit")?.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ToolError::invalid_arguments(format!(
            "limit must be between 1 and {MAX_LIMIT}, not {limit}"
        )));
    }
    let matching: Vec<AgentSummary> = host
        .list_agents(purpose)
        .into_iter()
        .filter(|agent| query.as_deref().is_none_or(|query| matches(agent, query)))
        .collect();
    let total = matching.len();
    let shown: Vec<&AgentSummary> = matching.iter().take(limit as usize).collect();

    let mut content = if shown.is_empty() {
        "No agent accepts calls from you for this purpose.".to_owned()
    } else {
        format!("{total} agent(s) you can call (purpose {purpose_name}):\n")
    };
    for agent in &shown {
        let name = agent
            .display_name
            .as_deref()
            .map(|name| format!(" ({name})"))
            .unwrap_or_default();
        content.push_str(&format!(
            "\n- {}{name}: {}",
            code(&agent.profile_id),
            agent.operations.join(", ")
        ));
        if let Some(description) = &agent.description {
            content.push_str(&format!(" — {description}"));
        }
        if agent.operations.iter().any(|op| op == "delegate") {
            content.push_str(&format!(
                " (at most {} task(s) per run, {} at a time)",
                agent.max_invocations_per_run, agent.max_concurrent_invocations
            ));
        }
    }
    if shown.len() < total {
        content.push_str(&format!(
            "\n\n{} more; narrow with query or raise limit.",
            total - shown.len()
        ));
    }
    let listed: Vec<Value> = shown
        .iter()
        .map(|agent| {
            json!({
                "profileId": agent.profile_id,
                "displayName": agent.display_name,
                "description": agent.description,
                "operations": agent.operations,
                "resultBudgetTokens": agent.result_budget_tokens,
                "maxInvocationsPerRun": agent.max_invocations_per_run,
                "maxConcurrentInvocations": agent.max_concurrent_invocations,
                "maxHandoffDepth": agent.max_handoff_depth,
            })
        })
        .collect();
    Ok(Output::text(content)
        .structured(json!({"purpose": purpose_name, "total": total, "agents": listed})))
}

/// ASCII case-insensitive substring of the id, name or description.
fn matches(agent: &AgentSummary, query: &str) -> bool {
    [
        Some(agent.profile_id.as_str()),
        agent.display_name.as_deref(),
        agent.description.as_deref(),
    ]
    .into_iter()
    .flatten()
    .any(|text| text.to_ascii_lowercase().contains(query))
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_guest::testing::{MemoryAgents, args};

    fn agent(id: &str, description: &str, operations: &[&str]) -> AgentSummary {
        AgentSummary {
            profile_id: id.into(),
            display_name: Some(id.to_uppercase()),
            description: Some(description.into()),
            operations: operations.iter().map(|op| (*op).to_owned()).collect(),
            result_budget_tokens: 8000,
            max_invocations_per_run: 2,
            max_concurrent_invocations: 1,
            max_handoff_depth: 8,
        }
    }

    fn roster() -> MemoryAgents {
        MemoryAgents(vec![
            agent("researcher", "Searches the chat for facts.", &["delegate"]),
            agent("editor", "Polishes a finished reply.", &["handoff"]),
            agent(
                "critic",
                "Reads drafts and says what is weak.",
                &["delegate", "handoff"],
            ),
        ])
    }

    #[test]
    fn lists_by_purpose_sorted_with_operations_and_limits() {
        let all = list_agents(&Arguments::default(), &roster()).expect("list");
        let structured = all.structured_value().expect("structured");
        let ids: Vec<&str> = structured["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .map(|agent| agent["profileId"].as_str().expect("id"))
            .collect();
        assert_eq!(ids, ["critic", "editor", "researcher"]);
        assert!(
            all.content
                .starts_with("3 agent(s) you can call (purpose any):")
        );
        assert!(all.content.contains(
            "- `researcher` (RESEARCHER): delegate — Searches the chat for facts. (at most 2 task(s) per run, 1 at a time)"
        ), "{}", all.content);

        let handoff = list_agents(&args(json!({"purpose": "handoff"})), &roster()).expect("list");
        assert_eq!(handoff.structured_value().expect("s")["total"], 2);
        let found = list_agents(&args(json!({"query": "DRAFTS"})), &roster()).expect("list");
        assert_eq!(
            found.structured_value().expect("s")["agents"][0]["profileId"],
            "critic"
        );
        let limited = list_agents(&args(json!({"limit": 1})), &roster()).expect("list");
        assert!(
            limited
                .content
                .ends_with("2 more; narrow with query or raise limit.")
        );
        let none = list_agents(&Arguments::default(), &MemoryAgents::default()).expect("list");
        assert_eq!(
            none.content,
            "No agent accepts calls from you for this purpose."
        );
    }

    #[test]
    fn bad_arguments_are_recoverable() {
        for value in [
            json!({"purpose": "rescue"}),
            json!({"limit": 0}),
            json!({"limit": 21}),
            json!({"query": 3}),
            json!({"all": true}),
        ] {
            let error = list_agents(&args(value.clone()), &roster()).expect_err("refused");
            assert_eq!(error.code, "tool.invalid_arguments", "{value}");
        }
    }
}
