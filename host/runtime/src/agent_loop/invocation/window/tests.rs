//! The window's trimming, on histories built by hand: what goes first, what
//! never goes, and the issue's long run (200 rounds of 20 KB results under
//! 100,000 characters) at unit level.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRole, AgentToolResult,
    InvocationToolSnapshot, ModelTurn, ToolBinding, ToolCall, ToolChoice, ToolDescriptor, ToolId,
    ToolTurnContract, UnknownToolCall, UnknownToolResult,
};
use toolhost_journal::RunLayout;

use super::*;

fn dice() -> ToolId {
    ToolId::builtin("dice.roll").expect("id")
}

fn text(role: AgentModelRole, chars: usize) -> AgentModelMessage {
    AgentModelMessage::text_of(role, "m".repeat(chars))
}

fn call(id: &str) -> AgentModelContentPart {
    AgentModelContentPart::ToolCall {
        call: ToolCall {
            call_id: id.into(),
            tool_id: dice(),
            arguments: json!({}),
            provider_metadata: Value::Null,
        },
    }
}

fn result(id: &str, chars: usize) -> AgentModelContentPart {
    AgentModelContentPart::ToolResult {
        result: AgentToolResult {
            call_id: id.into(),
            tool_id: dice(),
            content: "r".repeat(chars),
            structured: json!({"big": "structured"}),
            is_error: false,
            error_code: None,
            resource_refs: vec!["workspace:notes.md".into()],
        },
    }
}

fn message(role: AgentModelRole, parts: Vec<AgentModelContentPart>) -> AgentModelMessage {
    AgentModelMessage {
        role,
        parts,
        provider_metadata: Value::Null,
    }
}

/// A round: a reply calling `calls`, each answered with `chars` characters.
fn round(calls: &[&str], chars: usize) -> Vec<AgentModelMessage> {
    vec![
        message(
            AgentModelRole::Assistant,
            calls.iter().map(|id| call(id)).collect(),
        ),
        message(
            AgentModelRole::Tool,
            calls.iter().map(|id| result(id, chars)).collect(),
        ),
    ]
}

/// A preamble of a system message, `history` chat messages of `chars`
/// characters each (droppable) and the task; its flags.
fn preamble(history: usize, chars: usize) -> (Vec<AgentModelMessage>, Vec<bool>) {
    let mut messages = vec![text(AgentModelRole::System, 10)];
    let mut flags = vec![false];
    for index in 0..history {
        let role = if index % 2 == 0 {
            AgentModelRole::User
        } else {
            AgentModelRole::Assistant
        };
        messages.push(text(role, chars));
        flags.push(true);
    }
    messages.push(AgentModelMessage::user_text("the task"));
    flags.push(false);
    (messages, flags)
}

fn total(fixed: usize, history: &[AgentModelMessage]) -> usize {
    fixed + history.iter().map(message_chars).sum::<usize>()
}

fn short_stub(result: &AgentToolResult) -> String {
    format!("[stub {}]", result.call_id)
}

/// Every call has exactly one result after it, and every result one call
/// before it: what a provider needs to accept the history.
fn assert_pairs(history: &[AgentModelMessage]) {
    let mut calls: HashMap<&str, bool> = HashMap::new();
    for message in history {
        for part in &message.parts {
            match part {
                AgentModelContentPart::ToolCall { .. }
                | AgentModelContentPart::UnknownToolCall { .. } => {
                    let id = part.call_id().expect("id");
                    assert!(calls.insert(id, false).is_none(), "call {id} twice");
                }
                AgentModelContentPart::ToolResult { .. }
                | AgentModelContentPart::UnknownToolResult { .. } => {
                    let id = part.call_id().expect("id");
                    let answered = calls.get_mut(id).expect("a result after its call");
                    assert!(!*answered, "call {id} answered twice");
                    *answered = true;
                }
                AgentModelContentPart::Text { .. } => {}
            }
        }
    }
    let open: Vec<_> = calls.iter().filter(|(_, done)| !**done).collect();
    assert!(open.is_empty(), "calls without a result: {open:?}");
}

/// The result of `id`, wherever it is.
fn result_of<'a>(history: &'a [AgentModelMessage], id: &str) -> Option<&'a AgentToolResult> {
    history
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|part| match part {
            AgentModelContentPart::ToolResult { result } if result.call_id == id => Some(result),
            _ => None,
        })
}

fn history_of(
    preamble: (Vec<AgentModelMessage>, Vec<bool>),
    rounds: impl IntoIterator<Item = Vec<AgentModelMessage>>,
) -> (Vec<AgentModelMessage>, Vec<bool>) {
    let (mut history, flags) = preamble;
    history.extend(rounds.into_iter().flatten());
    (history, flags)
}

#[test]
fn under_budget_nothing_changes() {
    let (mut history, flags) = history_of(preamble(2, 100), [round(&["c1"], 1000)]);
    let before = history.clone();
    let budget = total(50, &history);
    let mut window = Window::new(budget, flags);
    assert_eq!(window.fit(50, &mut history, short_stub), Ok(None));
    assert_eq!(history, before);
}

#[test]
fn old_results_are_stubbed_oldest_first_and_only_as_far_as_needed() {
    let rounds = (1..=5).map(|n| round(&[&format!("c{n}")], 1000));
    let (mut history, flags) = history_of(preamble(0, 0), rounds);
    let full = total(0, &history);
    let mut window = Window::new(full - 1500, flags);
    let trimmed = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(trimmed.stubbed_calls, ["c1", "c2"]);
    assert_eq!((trimmed.dropped_history, trimmed.dropped_rounds), (0, 0));
    assert_eq!(trimmed.chars_before, full);
    assert_eq!(trimmed.chars_after, total(0, &history));
    assert!(trimmed.chars_after <= full - 1500);
    let stubbed = result_of(&history, "c1").expect("c1");
    assert_eq!(stubbed.content, "[stub c1]");
    assert_eq!(stubbed.tool_id, dice(), "the tool id stays");
    assert_eq!(stubbed.structured, Value::Null, "memory freed");
    assert!(stubbed.resource_refs.is_empty());
    for kept in ["c3", "c4", "c5"] {
        assert_eq!(result_of(&history, kept).expect(kept).content.len(), 1000);
    }
    assert_pairs(&history);
}

#[test]
fn a_stub_keeps_an_errors_code_and_heading() {
    let mut rounds: Vec<_> = (1..=3).map(|n| round(&[&format!("c{n}")], 1000)).collect();
    if let AgentModelContentPart::ToolResult { result } = &mut rounds[0][1].parts[0] {
        result.is_error = true;
        result.error_code = Some("workspace.not_found".into());
    }
    let (mut history, flags) = history_of(preamble(0, 0), rounds);
    let mut window = Window::new(total(0, &history) - 500, flags);
    window.fit(0, &mut history, short_stub).expect("fits");
    let stubbed = result_of(&history, "c1").expect("c1");
    assert!(stubbed.is_error);
    assert_eq!(stubbed.error_code.as_deref(), Some("workspace.not_found"));
    assert_eq!(stubbed.model_text(), "## Tool error\n\n[stub c1]");
}

#[test]
fn chat_history_goes_before_any_round() {
    let rounds = (1..=4).map(|n| round(&[&format!("c{n}")], 1000));
    let (mut history, flags) = history_of(preamble(3, 500), rounds);
    let full = total(0, &history);
    // Stubbing the two old rounds saves about 1,980; the rest takes one
    // history message.
    let mut window = Window::new(full - 2300, flags);
    let trimmed = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(trimmed.stubbed_calls, ["c1", "c2"]);
    assert_eq!(trimmed.dropped_history, 1);
    assert_eq!(trimmed.dropped_rounds, 0);
    assert_eq!(
        history.len(),
        1 + 2 + 1 + 8,
        "system, two history, task, rounds"
    );
    assert_eq!(history[0].role, AgentModelRole::System);
    assert_eq!(
        history[1].role,
        AgentModelRole::Assistant,
        "the oldest went"
    );
    assert_eq!(history[3].text(), "the task");
    for kept in ["c3", "c4"] {
        assert_eq!(result_of(&history, kept).expect(kept).content.len(), 1000);
    }
    assert_pairs(&history);
}

#[test]
fn rounds_go_whole_oldest_first_never_the_last_two_or_the_preamble() {
    let mut rounds: Vec<Vec<AgentModelMessage>> = Vec::new();
    for n in 1..=6 {
        let (a, b) = (format!("a{n}"), format!("b{n}"));
        let mut messages = round(&[&a, &b], 1000);
        messages.push(AgentModelMessage::user_text(format!("reminder {n}")));
        rounds.push(messages);
    }
    let (mut history, flags) = history_of(preamble(2, 300), rounds);
    let preamble_chars = total(0, &history[..4]);
    // The preamble's fixed part and the two last rounds whole, plus a little.
    let last_two = total(0, &history[history.len() - 6..]);
    let budget = preamble_chars - 600 + last_two + 100;
    let mut window = Window::new(budget, flags);
    let trimmed = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(trimmed.dropped_history, 2);
    assert!(trimmed.dropped_rounds >= 1, "{trimmed:?}");
    assert!(total(0, &history) <= budget);
    assert_pairs(&history);
    assert_eq!(history[0].role, AgentModelRole::System);
    assert_eq!(history[1].text(), "the task");
    assert_eq!(history[2].role, AgentModelRole::Assistant, "a round starts");
    for kept in ["a5", "b5", "a6", "b6"] {
        assert_eq!(result_of(&history, kept).expect(kept).content.len(), 1000);
    }
    let gone = format!("a{}", trimmed.dropped_rounds);
    assert!(result_of(&history, &gone).is_none());
    assert_eq!(history.last().expect("last").text(), "reminder 6");
}

#[test]
fn the_last_rounds_results_are_stubbed_only_when_nothing_else_is_left() {
    let rounds = (1..=4).map(|n| round(&[&format!("c{n}")], 1000));
    let (mut history, flags) = history_of(preamble(1, 100), rounds);
    let mut window = Window::new(1100, flags);
    let trimmed = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(trimmed.dropped_history, 1);
    assert_eq!(trimmed.dropped_rounds, 2);
    assert_eq!(trimmed.stubbed_calls, ["c1", "c2", "c3"]);
    assert_eq!(result_of(&history, "c3").expect("c3").content, "[stub c3]");
    assert_eq!(result_of(&history, "c4").expect("c4").content.len(), 1000);
    assert!(total(0, &history) <= 1100);
    assert_pairs(&history);
}

#[test]
fn over_budget_when_the_fixed_part_and_preamble_do_not_fit() {
    let (mut history, flags) = history_of(preamble(1, 100), [round(&["c1"], 1000)]);
    let mut window = Window::new(500, flags);
    let error = window
        .fit(480, &mut history, short_stub)
        .expect_err("over budget");
    assert_eq!(error.budget, 500);
    assert_eq!(error.needed, total(480, &history));
    assert!(error.needed > 500);
    assert!(error.to_string().starts_with(OverBudget::CODE));
}

#[test]
fn trimming_is_monotone() {
    let rounds = (1..=5).map(|n| round(&[&format!("c{n}")], 1000));
    let (mut history, flags) = history_of(preamble(0, 0), rounds);
    let budget = total(0, &history) - 2500;
    let mut window = Window::new(budget, flags);
    let first = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(first.stubbed_calls, ["c1", "c2", "c3"]);
    let event = first.event("inv_root", 5);
    assert_eq!((event.invocation_id.as_str(), event.round), ("inv_root", 5));
    assert_eq!(event.stubbed_calls, first.stubbed_calls);
    assert_eq!(
        (event.chars_before, event.chars_after, event.budget),
        (first.chars_before, first.chars_after, budget)
    );
    let after = history.clone();
    assert_eq!(window.fit(0, &mut history, short_stub), Ok(None));
    assert_eq!(history, after, "nothing added, nothing more trimmed");
    history.extend(round(&["c6"], 1000));
    let second = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(
        second.stubbed_calls,
        ["c4"],
        "the stubs stay, not made again"
    );
    assert_eq!(result_of(&history, "c1").expect("c1").content, "[stub c1]");
}

#[test]
fn a_result_shorter_than_its_stub_is_left_as_it_is() {
    let mut rounds = vec![round(&["tiny"], 3)];
    rounds.extend((1..=3).map(|n| round(&[&format!("c{n}")], 1000)));
    let (mut history, flags) = history_of(preamble(0, 0), rounds);
    let mut window = Window::new(total(0, &history) - 500, flags);
    let trimmed = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(trimmed.stubbed_calls, ["c1"]);
    assert_eq!(result_of(&history, "tiny").expect("tiny").content, "rrr");
}

#[test]
fn unknown_calls_go_with_their_round() {
    let mut first = round(&["c1"], 1000);
    first[0].parts.push(AgentModelContentPart::UnknownToolCall {
        call: UnknownToolCall {
            call_id: "u1".into(),
            name: "summon_dragon".into(),
            arguments: json!({"size": "large"}),
            provider_metadata: Value::Null,
            hint: String::new(),
        },
    });
    first[1]
        .parts
        .push(AgentModelContentPart::UnknownToolResult {
            result: UnknownToolResult {
                call_id: "u1".into(),
                name: "summon_dragon".into(),
                error_code: "model.unknown_tool_call".into(),
                content: "not a tool".into(),
            },
        });
    let rounds = std::iter::once(first).chain((2..=3).map(|n| round(&[&format!("c{n}")], 1000)));
    let (mut history, flags) = history_of(preamble(0, 0), rounds);
    let mut window = Window::new(total(0, &history) - 1100, flags);
    let trimmed = window
        .fit(0, &mut history, short_stub)
        .expect("fits")
        .expect("trimmed");
    assert_eq!(trimmed.dropped_rounds, 1);
    assert_pairs(&history);
    assert!(
        history
            .iter()
            .flat_map(|m| &m.parts)
            .all(|p| p.call_id() != Some("u1"))
    );
}

#[test]
fn characters_are_unicode_scalars_not_bytes() {
    let cjk = AgentModelMessage::user_text("你好世界");
    assert_eq!(message_chars(&cjk), 4);
    let called = message(
        AgentModelRole::Assistant,
        vec![AgentModelContentPart::ToolCall {
            call: ToolCall {
                call_id: "c1".into(),
                tool_id: dice(),
                arguments: json!({"名": "值"}),
                provider_metadata: Value::Null,
            },
        }],
    );
    // `builtin:dice.roll` and `{"名":"值"}`.
    assert_eq!(message_chars(&called), 17 + 9);
    let mut history = vec![cjk];
    let mut window = Window::new(4, vec![false]);
    assert_eq!(
        window.fit(0, &mut history, short_stub),
        Ok(None),
        "12 bytes, 4 chars"
    );
}

#[test]
fn the_stub_names_the_stored_file_and_the_read_tool_on_one_line() {
    let layout = RunLayout::new("/runs/run_x");
    let AgentModelContentPart::ToolResult { mut result } = result("call\n`9`", 20_000) else {
        unreachable!("a result part");
    };
    let path = layout.tool_result(&result.call_id).relative;
    assert!(path.starts_with("tool-results/call_") && path.ends_with(".json"));
    let line = stubber(&layout, Some("workspace_read_file"))(&result);
    assert_eq!(
        line,
        format!(
            "[Result of call `call??9?` (20000 characters) left out to fit the context window; read it with `workspace_read_file` at `{path}`.]"
        )
    );
    result.content = "短い".into();
    let line = stubber(&layout, None)(&result);
    assert!(line.contains("(2 characters)"), "{line}");
    assert!(
        line.ends_with(&format!("it is stored at `{path}`.]")),
        "{line}"
    );
    assert!(!line.contains('\n'));
}

#[test]
fn the_fixed_part_counts_each_tools_alias_description_and_schema() {
    let schema = json!({"type": "object", "properties": {"formula": {"type": "string"}}});
    let binding = ToolBinding {
        descriptor: ToolDescriptor {
            id: dice(),
            title: None,
            description: Some("Roll dice — 骰子.".into()),
            input_schema: schema.clone(),
            output_schema: None,
            annotations: json!({}),
        },
        model_alias: "dice_roll".into(),
        max_calls: None,
        limits: None,
        approval: None,
    };
    let snapshot = InvocationToolSnapshot::new("inv_root", vec![binding], 10).expect("snapshot");
    let contract = ToolTurnContract::all(&snapshot, ToolChoice::Auto).expect("contract");
    let turn = ModelTurn::new(&snapshot, contract).expect("turn");
    let expected = "dice_roll".len()
        + "Roll dice — 骰子.".chars().count()
        + schema.to_string().chars().count();
    assert_eq!(turn_chars(&turn), expected);
    assert_eq!(fixed_chars(Some("系统"), &turn), expected + 2);
}

/// The issue's long run at unit level: 200 rounds, each reading 20 KB, under
/// 100,000 characters. After every round's trimming the request fits, every
/// call still pairs with its result, the preamble's own messages and the
/// last two rounds are whole, and no result is stubbed twice.
#[test]
fn two_hundred_rounds_of_20_kb_stay_under_100_000_characters() {
    const BUDGET: usize = 100_000;
    const FIXED: usize = 25_000;
    let layout = RunLayout::new("/runs/run_long");
    let stub = stubber(&layout, Some("workspace_read_file"));
    let (mut history, flags) = preamble(20, 500);
    let mut window = Window::new(BUDGET, flags);
    let mut stubbed = HashSet::new();
    let (mut dropped_history, mut dropped_rounds) = (0, 0);
    for n in 1..=200_usize {
        let id = format!("call_{n}");
        let mut reply = round(&[&id], 20_000);
        reply[0].parts.insert(
            0,
            AgentModelContentPart::Text {
                text: format!("第{n}轮：我再读一个文件。"),
            },
        );
        if n % 10 == 0 {
            reply.push(AgentModelMessage::user_text("Reminder: commit when ready."));
        }
        history.extend(reply);
        if let Some(trimmed) = window.fit(FIXED, &mut history, &stub).expect("fits") {
            assert_eq!(trimmed.chars_after, total(FIXED, &history));
            assert_eq!(trimmed.budget, BUDGET);
            for id in trimmed.stubbed_calls {
                assert!(stubbed.insert(id.clone()), "{id} stubbed twice");
            }
            dropped_history += trimmed.dropped_history;
            dropped_rounds += trimmed.dropped_rounds;
        }
        assert!(total(FIXED, &history) <= BUDGET, "round {n}");
        assert_pairs(&history);
        assert_eq!(history[0].role, AgentModelRole::System);
        assert!(history.iter().any(|m| m.text() == "the task"), "round {n}");
        for last in n.saturating_sub(1).max(1)..=n {
            let id = format!("call_{last}");
            assert_eq!(result_of(&history, &id).expect(&id).content.len(), 20_000);
        }
    }
    assert!(stubbed.len() >= 150, "{}", stubbed.len());
    assert_eq!(dropped_history, 20, "the chat history went before rounds");
    assert!(dropped_rounds > 0);
}
