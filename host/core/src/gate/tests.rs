use std::sync::Arc;

use super::*;
use crate::snapshot::ToolBinding;
use crate::test_support::{descriptor, id, mcp};

fn snapshot(total: u32, tools: &[(&ToolId, &str, Option<u32>)]) -> Arc<InvocationToolSnapshot> {
    let bindings = tools
        .iter()
        .map(|(tool, alias, max_calls)| ToolBinding {
            descriptor: descriptor(tool),
            model_alias: (*alias).into(),
            max_calls: *max_calls,
            limits: None,
            approval: None,
        })
        .collect();
    Arc::new(InvocationToolSnapshot::new("inv_root", bindings, total).expect("snapshot"))
}

fn auto(snapshot: &InvocationToolSnapshot) -> ToolTurnContract {
    ToolTurnContract::all(snapshot, ToolChoice::Auto).expect("turn")
}

#[test]
fn reserves_until_the_total_budget_is_gone_then_answers_recoverably() {
    let dice = id("builtin:dice.roll");
    let snapshot = snapshot(2, &[(&dice, "dice_roll", None)]);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    assert_eq!(
        gate.authorize_and_reserve(&turn, &dice),
        Ok(Reservation {
            total_used: 1,
            tool_used: 1
        })
    );
    assert_eq!(
        gate.authorize_and_reserve(&turn, &dice),
        Ok(Reservation {
            total_used: 2,
            tool_used: 2
        })
    );
    let rejection = gate
        .authorize_and_reserve(&turn, &dice)
        .expect_err("exhausted");
    assert!(matches!(
        rejection,
        GateRejection::BudgetExhausted {
            scope: BudgetScope::Invocation,
            limit: 2,
            ..
        }
    ));
    assert_eq!(rejection.code(), "agent.tool_budget_exhausted");
    assert_eq!(
        rejection.class(),
        ErrorClass::PolicyDenied { fail_fast: false }
    );
    assert!(rejection.class().run_continues());
    let failure = rejection.to_tool_failure().expect("a result for the model");
    assert_eq!(failure.code, "agent.tool_budget_exhausted");
    assert_eq!(failure.structured["budget"]["limit"], 2);
    // A rejected call reserves nothing.
    assert_eq!(gate.total_used(), 2);
}

#[test]
fn per_tool_budgets_count_by_canonical_id() {
    let builtin = id("builtin:workspace.search_files");
    let external = mcp("search");
    let snapshot = snapshot(
        10,
        &[
            (&builtin, "workspace_search_files", Some(1)),
            (&external, "mcp__srv__search", Some(2)),
        ],
    );
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    assert!(gate.authorize_and_reserve(&turn, &builtin).is_ok());
    let rejection = gate
        .authorize_and_reserve(&turn, &builtin)
        .expect_err("per tool");
    match &rejection {
        GateRejection::BudgetExhausted {
            scope: BudgetScope::Tool(tool),
            limit: 1,
            message,
        } => {
            assert_eq!(tool, &builtin);
            assert!(
                message.contains("`workspace_search_files`"),
                "the model's name: {message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    // The same native name under another provider has its own budget.
    assert!(gate.authorize_and_reserve(&turn, &external).is_ok());
    assert!(gate.authorize_and_reserve(&turn, &external).is_ok());
    assert!(gate.authorize_and_reserve(&turn, &external).is_err());
    assert_eq!(gate.tool_used(&builtin), 1);
    assert_eq!(gate.tool_used(&external), 2);
    assert_eq!(gate.total_used(), 3);
}

#[test]
fn tools_outside_the_snapshot_are_charged_and_answered() {
    let dice = id("builtin:dice.roll");
    let snapshot = snapshot(2, &[(&dice, "dice_roll", None)]);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    let stranger = id("builtin:chat.search");
    let rejection = gate
        .authorize_and_reserve(&turn, &stranger)
        .expect_err("unknown");
    assert!(matches!(
        &rejection,
        GateRejection::NotInSnapshot { tool, .. } if *tool == stranger
    ));
    assert_eq!(rejection.code(), "model.unknown_tool_call");
    assert!(rejection.class().run_continues());
    let failure = rejection.to_tool_failure().expect("the model reads it");
    assert!(
        failure
            .message
            .contains("the tools you can call are `dice_roll`"),
        "{}",
        failure.message
    );
    assert_eq!(gate.total_used(), 1, "no free retries");
    assert!(gate.authorize_and_reserve(&turn, &dice).is_ok());
    // Spent: refused like any call, and not charged past the limit.
    let rejection = gate
        .authorize_and_reserve(&turn, &stranger)
        .expect_err("spent");
    assert_eq!(rejection.code(), "agent.tool_budget_exhausted");
    assert_eq!(gate.total_used(), 2);
}

#[test]
fn the_turn_must_belong_to_this_snapshot_and_offer_the_tool() {
    let dice = id("builtin:dice.roll");
    let search = id("builtin:chat.search");
    let snapshot = snapshot(
        5,
        &[(&dice, "dice_roll", None), (&search, "chat_search", None)],
    );
    let mut gate = ToolRequestGate::new(Arc::clone(&snapshot));

    let foreign =
        ToolTurnContract::new("inv_other", vec![dice.clone()], ToolChoice::Auto).expect("turn");
    let rejection = gate
        .authorize_and_reserve(&foreign, &dice)
        .expect_err("mismatch");
    assert_eq!(rejection.code(), "tool.turn_snapshot_mismatch");
    assert_eq!(rejection.class(), ErrorClass::SystemFailure);

    let narrow =
        ToolTurnContract::new("inv_root", vec![dice.clone()], ToolChoice::Auto).expect("turn");
    assert_eq!(
        gate.authorize_and_reserve(&narrow, &search),
        Err(GateRejection::NotInTurn(search.clone()))
    );
    assert_eq!(gate.total_used(), 0);
}

#[test]
fn typed_choice_is_enforced_before_budgets() {
    let dice = id("builtin:dice.roll");
    let search = id("builtin:chat.search");
    // A budget of one, already used: the choice error must still win.
    let snapshot = snapshot(
        1,
        &[(&dice, "dice_roll", None), (&search, "chat_search", None)],
    );
    let mut gate = ToolRequestGate::resume(Arc::clone(&snapshot), [&dice]);
    let none = ToolTurnContract::all(&snapshot, ToolChoice::None).expect("turn");
    let rejection = gate.authorize_and_reserve(&none, &dice).expect_err("none");
    assert_eq!(rejection.code(), "model.tool_choice_violation");

    let only_search =
        ToolTurnContract::all(&snapshot, ToolChoice::Specific(search.clone())).expect("turn");
    let rejection = gate
        .authorize_and_reserve(&only_search, &dice)
        .expect_err("specific");
    assert!(matches!(rejection, GateRejection::ChoiceViolation { .. }));
    // Allowed by the choice, refused by the (spent) budget.
    let rejection = gate
        .authorize_and_reserve(&only_search, &search)
        .expect_err("budget");
    assert_eq!(rejection.code(), "agent.tool_budget_exhausted");

    let required = ToolTurnContract::all(&snapshot, ToolChoice::Required).expect("turn");
    let mut fresh = ToolRequestGate::new(snapshot);
    assert!(fresh.authorize_and_reserve(&required, &dice).is_ok());
}

#[test]
fn resume_restores_counters() {
    let dice = id("builtin:dice.roll");
    let snapshot = snapshot(3, &[(&dice, "dice_roll", Some(2))]);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::resume(snapshot, [&dice, &dice]);
    assert_eq!(gate.total_used(), 2);
    let rejection = gate
        .authorize_and_reserve(&turn, &dice)
        .expect_err("per tool spent");
    assert!(matches!(
        rejection,
        GateRejection::BudgetExhausted {
            scope: BudgetScope::Tool(_),
            ..
        }
    ));
}

/// A foreground invocation's tools: two work tools and the two end tools it
/// is offered (`task.return` is a child's), under aliases that differ from
/// the native names, as a profile's aliases may.
fn foreground(total: u32, commit_calls: Option<u32>) -> Arc<InvocationToolSnapshot> {
    snapshot(
        total,
        &[
            (&id("builtin:dice.roll"), "dice_roll", None),
            (&id("builtin:workspace.commit"), "commit", commit_calls),
            (&id("builtin:workspace.finish"), "finish", None),
            (&mcp("search"), "mcp__srv__search", None),
        ],
    )
}

#[test]
fn end_tools_stay_callable_after_the_total_is_spent_and_are_never_counted() {
    let dice = id("builtin:dice.roll");
    let commit = id("builtin:workspace.commit");
    let finish = id("builtin:workspace.finish");
    let snapshot = foreground(2, None);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    // An end tool before the total is spent does not use it up either.
    assert_eq!(
        gate.authorize_and_reserve(&turn, &commit),
        Ok(Reservation {
            total_used: 0,
            tool_used: 1
        })
    );
    assert!(gate.authorize_and_reserve(&turn, &dice).is_ok());
    assert!(gate.authorize_and_reserve(&turn, &dice).is_ok());
    let rejection = gate.authorize_and_reserve(&turn, &dice).expect_err("spent");
    let GateRejection::BudgetExhausted {
        scope: BudgetScope::Invocation,
        message,
        ..
    } = &rejection
    else {
        panic!("unexpected {rejection:?}");
    };
    // Exactly the end tools offered, by this snapshot's aliases.
    assert!(
        message.contains("only `commit`, `finish` can still be called"),
        "{message}"
    );
    assert!(!message.contains("no tool can be called"), "{message}");
    assert!(!message.contains("workspace"), "aliases only: {message}");
    assert!(!message.contains("task"), "not offered here: {message}");
    assert!(
        rejection.to_tool_failure().is_some(),
        "the model reads it, the run goes on"
    );
    // Commit again, then finish: both pass, the total stays where it was.
    assert_eq!(
        gate.authorize_and_reserve(&turn, &commit),
        Ok(Reservation {
            total_used: 2,
            tool_used: 2
        })
    );
    assert_eq!(
        gate.authorize_and_reserve(&turn, &finish),
        Ok(Reservation {
            total_used: 2,
            tool_used: 1
        })
    );
    assert_eq!(gate.total_used(), 2);
    // Any other tool, MCP included, is still refused.
    let search = mcp("search");
    assert!(gate.authorize_and_reserve(&turn, &search).is_err());
}

#[test]
fn an_end_tool_keeps_its_own_budget_after_the_total_is_spent() {
    let dice = id("builtin:dice.roll");
    let commit = id("builtin:workspace.commit");
    let finish = id("builtin:workspace.finish");
    let snapshot = foreground(1, Some(1));
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    assert!(gate.authorize_and_reserve(&turn, &dice).is_ok());
    assert!(gate.authorize_and_reserve(&turn, &commit).is_ok());
    let rejection = gate
        .authorize_and_reserve(&turn, &commit)
        .expect_err("its own budget");
    assert!(matches!(
        rejection,
        GateRejection::BudgetExhausted {
            scope: BudgetScope::Tool(ref tool),
            limit: 1,
            ..
        } if *tool == commit
    ));
    // A spent end tool is no longer named as a way to end.
    match gate.authorize_and_reserve(&turn, &dice) {
        Err(GateRejection::BudgetExhausted { message, .. }) => {
            assert!(message.contains("only `finish` can"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(gate.authorize_and_reserve(&turn, &finish).is_ok());
}

#[test]
fn with_no_end_tool_offered_the_spent_total_says_nothing_can_be_called() {
    // A child's snapshot without `task.return` (hidden), and a choice that
    // is no way around the total either.
    let dice = id("builtin:dice.roll");
    let snapshot = snapshot(1, &[(&dice, "dice_roll", None)]);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    assert!(gate.authorize_and_reserve(&turn, &dice).is_ok());
    match gate.authorize_and_reserve(&turn, &dice) {
        Err(GateRejection::BudgetExhausted { message, .. }) => {
            assert!(message.contains("no tool can be called"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // A child: `task.return` is its end tool, named by its alias.
    let child = snapshot_with_return();
    let turn = auto(&child);
    let mut gate = ToolRequestGate::resume(Arc::clone(&child), [&dice]);
    match gate.authorize_and_reserve(&turn, &dice) {
        Err(GateRejection::BudgetExhausted { message, .. }) => {
            assert!(message.contains("only `task_return` can"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        gate.authorize_and_reserve(&turn, &id("builtin:task.return"))
            .is_ok()
    );
}

fn snapshot_with_return() -> Arc<InvocationToolSnapshot> {
    snapshot(
        1,
        &[
            (&id("builtin:dice.roll"), "dice_roll", None),
            (&id("builtin:task.return"), "task_return", None),
        ],
    )
}

#[test]
fn a_resumed_gate_does_not_count_end_tools_against_the_total() {
    let dice = id("builtin:dice.roll");
    let commit = id("builtin:workspace.commit");
    let snapshot = foreground(2, None);
    let gate = ToolRequestGate::resume(snapshot, [&dice, &commit, &commit]);
    assert_eq!(gate.total_used(), 1);
    assert_eq!(gate.tool_used(&commit), 2);
}

#[test]
fn unknown_names_are_charged_to_the_total_until_it_is_spent() {
    let dice = id("builtin:dice.roll");
    let snapshot = foreground(2, None);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    assert_eq!(gate.charge_unknown(), Ok(1));
    assert!(gate.authorize_and_reserve(&turn, &dice).is_ok());
    let rejection = gate.charge_unknown().expect_err("spent");
    assert_eq!(rejection.code(), "agent.tool_budget_exhausted");
    assert!(rejection.to_tool_failure().is_some());
    assert_eq!(gate.total_used(), 2);
    // The end tools still pass, and a reopened gate counts the charge.
    assert!(
        gate.authorize_and_reserve(&turn, &id("builtin:workspace.finish"))
            .is_ok()
    );
    let reopened = ToolRequestGate::resume(foreground(2, None), [&dice]).with_unknown_charged(1);
    assert_eq!(reopened.total_used(), 2);
}

#[test]
fn end_tools_have_a_pool_of_their_own() {
    // Outside the total is not unbounded: a model calling commit without
    // end is stopped after as many calls as the pool allows (the total,
    // at least END_CALLS_FLOOR).
    let commit = id("builtin:workspace.commit");
    let finish = id("builtin:workspace.finish");
    let snapshot = foreground(2, None);
    let turn = auto(&snapshot);
    let mut gate = ToolRequestGate::new(snapshot);
    assert_eq!(gate.end_pool(), END_CALLS_FLOOR);
    for _ in 0..END_CALLS_FLOOR {
        assert!(gate.authorize_and_reserve(&turn, &commit).is_ok());
    }
    let rejection = gate
        .authorize_and_reserve(&turn, &finish)
        .expect_err("the pool is spent");
    assert_eq!(rejection.code(), "agent.tool_budget_exhausted");
    match &rejection {
        GateRejection::BudgetExhausted {
            scope: BudgetScope::EndTools,
            limit,
            message,
        } => {
            assert_eq!(*limit, END_CALLS_FLOOR);
            // Only the end tools are spent, named as the model knows them;
            // ordinary tools still pass, so it must not say none can be called.
            assert!(message.contains("`commit`"), "{message}");
            assert!(message.contains("`finish`"), "{message}");
            assert!(!message.contains("no tool can be called"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let failure = rejection.to_tool_failure().expect("a result for the model");
    assert_eq!(failure.structured["budget"]["scope"]["scope"], "endTools");
    assert_eq!(failure.structured["budget"]["limit"], END_CALLS_FLOOR);
    // The total is untouched: an ordinary tool still passes.
    assert!(
        gate.authorize_and_reserve(&turn, &id("builtin:dice.roll"))
            .is_ok()
    );
    assert_eq!(gate.total_used(), 1);
    assert_eq!(gate.tool_used(&finish), 0);
    let spent = vec![&commit; END_CALLS_FLOOR as usize];
    let mut resumed = ToolRequestGate::resume(foreground(2, None), spent);
    assert!(resumed.authorize_and_reserve(&turn, &finish).is_err());
    assert_eq!(
        ToolRequestGate::new(foreground(100, None)).end_pool(),
        100,
        "as large as the total"
    );
}
