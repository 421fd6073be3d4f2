use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::snapshot::{InvocationToolSnapshot, ToolBinding};
use crate::test_support::{descriptor, id};

fn snapshot(id_: &str, tools: &[(&str, &str)]) -> Arc<InvocationToolSnapshot> {
    let bindings = tools
        .iter()
        .map(|(tool, alias)| ToolBinding {
            descriptor: descriptor(&id(tool)),
            model_alias: (*alias).into(),
            max_calls: None,
            limits: None,
            approval: None,
        })
        .collect();
    Arc::new(InvocationToolSnapshot::new(id_, bindings, 10).expect("snapshot"))
}

fn turn(snapshot: &InvocationToolSnapshot) -> ModelTurn {
    let contract = ToolTurnContract::all(snapshot, ToolChoice::Auto).expect("contract");
    ModelTurn::new(snapshot, contract).expect("turn")
}

fn call(call_id: Option<&str>, name: Option<&str>, arguments: Option<Value>) -> ProviderToolCall {
    ProviderToolCall {
        call_id: call_id.map(Into::into),
        name: name.map(Into::into),
        arguments,
        provider_metadata: json!({"signature": "abc"}),
    }
}

#[test]
fn contract_rules() {
    let dice = id("builtin:dice.roll");
    assert_eq!(
        ToolTurnContract::new("s", vec![dice.clone(), dice.clone()], ToolChoice::Auto),
        Err(TurnError::DuplicateId(dice.clone()))
    );
    assert_eq!(
        ToolTurnContract::new("s", vec![], ToolChoice::Required),
        Err(TurnError::RequiredEmpty)
    );
    assert_eq!(
        ToolTurnContract::new("s", vec![], ToolChoice::Specific(dice.clone())),
        Err(TurnError::SpecificNotAvailable(dice.clone()))
    );
    assert!(ToolTurnContract::new("s", vec![], ToolChoice::Auto).is_ok());
    assert!(ToolTurnContract::new("s", vec![], ToolChoice::None).is_ok());
}

#[test]
fn choice_serializes_snake_case() {
    assert_eq!(
        serde_json::to_value(ToolChoice::Auto).expect("json"),
        json!("auto")
    );
    assert_eq!(
        serde_json::to_value(ToolChoice::Specific(id("builtin:dice.roll"))).expect("json"),
        json!({"specific": "builtin:dice.roll"})
    );
    let contract =
        ToolTurnContract::new("inv_root", vec![id("builtin:dice.roll")], ToolChoice::Auto)
            .expect("contract");
    assert_eq!(
        serde_json::to_value(&contract).expect("json"),
        json!({"snapshotId": "inv_root", "tools": ["builtin:dice.roll"], "choice": "auto"})
    );
}

#[test]
fn projection_keeps_turn_order_and_carries_alias_and_schema() {
    let snapshot = snapshot(
        "inv_root",
        &[
            ("builtin:dice.roll", "dice_roll"),
            ("builtin:chat.search", "chat_search"),
        ],
    );
    let contract = ToolTurnContract::new(
        "inv_root",
        vec![id("builtin:chat.search"), id("builtin:dice.roll")],
        ToolChoice::Auto,
    )
    .expect("contract");
    let tools = project_agent_model_tools(&snapshot, &contract).expect("projection");
    assert_eq!(tools[0].model_alias, "chat_search");
    assert_eq!(tools[1].tool_id, id("builtin:dice.roll"));
    assert_eq!(tools[1].description, "The dice.roll tool.");
    assert_eq!(tools[1].input_schema["type"], "object");
}

#[test]
fn projection_refuses_a_foreign_turn() {
    let ours = snapshot("inv_root", &[("builtin:dice.roll", "dice_roll")]);
    let theirs = snapshot("inv_child", &[("builtin:chat.search", "chat_search")]);
    let contract = ToolTurnContract::all(&theirs, ToolChoice::Auto).expect("contract");
    assert!(matches!(
        project_agent_model_tools(&ours, &contract),
        Err(TurnError::SnapshotMismatch { .. })
    ));
    let wrong_tool = ToolTurnContract::new(
        "inv_root",
        vec![id("builtin:chat.search")],
        ToolChoice::Auto,
    )
    .expect("contract");
    assert_eq!(
        project_agent_model_tools(&ours, &wrong_tool),
        Err(TurnError::ToolNotInSnapshot(id("builtin:chat.search")))
    );
}

#[test]
fn decodes_through_this_turns_aliases() {
    let snapshot = snapshot(
        "inv_root",
        &[("builtin:workspace.write_file", "workspace_write_file")],
    );
    let turn = turn(&snapshot);
    let invocation = turn
        .decode_call(call(
            Some("call_1"),
            Some("workspace_write_file"),
            Some(json!({"path": "output/a.md"})),
        ))
        .expect("decodes");
    assert_eq!(invocation.call_id, "call_1");
    assert_eq!(invocation.tool_id, id("builtin:workspace.write_file"));
    assert_eq!(invocation.arguments, json!({"path": "output/a.md"}));
    assert_eq!(invocation.provider_metadata, json!({"signature": "abc"}));
    assert_eq!(
        turn.alias_of(&id("builtin:workspace.write_file")),
        Some("workspace_write_file")
    );
}

#[test]
fn unknown_names_fail_fast_without_guessing() {
    let ours = snapshot(
        "inv_root",
        &[("builtin:workspace.write_file", "workspace_write_file")],
    );
    let other = snapshot("inv_child", &[("builtin:chat.search", "chat_search")]);
    let turn = turn(&ours);
    for name in [
        "workspace.write_file",         // native name
        "builtin:workspace.write_file", // canonical id
        "chat_search",                  // another snapshot's alias
        "Workspace_Write_File",         // near miss
    ] {
        let error = turn
            .decode_call(call(Some("c"), Some(name), None))
            .expect_err(name);
        assert_eq!(error.code(), "model.unknown_tool_call", "{name}");
        assert_eq!(error.class(), ErrorClass::PolicyDenied { fail_fast: true });
    }
    let hint = turn
        .decode_call(call(Some("c"), Some("workspace.write_file"), None))
        .expect_err("canonical")
        .to_string();
    assert!(hint.contains("calls it `workspace_write_file`"), "{hint}");
    // The other snapshot's own turn does resolve it.
    assert!(
        super::ModelTurn::new(
            &other,
            ToolTurnContract::all(&other, ToolChoice::Auto).expect("c")
        )
        .expect("turn")
        .resolve("chat_search")
        .is_ok()
    );
}

#[test]
fn a_call_needs_an_id_and_a_name() {
    let snapshot = snapshot("inv_root", &[("builtin:dice.roll", "dice_roll")]);
    let turn = turn(&snapshot);
    for bad in [
        call(None, Some("dice_roll"), None),
        call(Some("  "), Some("dice_roll"), None),
        call(Some("c"), None, None),
        call(Some("c"), Some(""), None),
    ] {
        let error = turn.decode_call(bad).expect_err("invalid");
        assert_eq!(error.code(), "model.invalid_tool_call");
    }
}

#[test]
fn arguments_are_normalized_like_the_reference() {
    assert_eq!(normalize_arguments(None), json!({}));
    assert_eq!(normalize_arguments(Some(Value::Null)), json!({}));
    assert_eq!(normalize_arguments(Some(json!("null"))), json!({}));
    assert_eq!(
        normalize_arguments(Some(json!("{\"a\":1}"))),
        json!({"a": 1})
    );
    // Not JSON: kept as a string, so the tool answers tool.invalid_arguments.
    assert_eq!(
        normalize_arguments(Some(json!("{\"a\":"))),
        json!("{\"a\":")
    );
    assert_eq!(normalize_arguments(Some(json!([1, 2]))), json!([1, 2]));
}

#[test]
fn a_models_unknown_name_is_kept_typed_never_resolved() {
    let ours = snapshot(
        "inv_root",
        &[
            ("builtin:workspace.write_file", "workspace_write_file"),
            ("builtin:dice.roll", "dice_roll"),
        ],
    );
    let turn = turn(&ours);
    for (name, hinted) in [
        ("summon_dragon", false),               // invented
        ("builtin:workspace.write_file", true), // canonical id
        ("Workspace_Write_File", false),        // near miss: not guessed
    ] {
        let part = turn
            .decode_part(call(Some("c7"), Some(name), Some(json!("{\"x\":1}"))))
            .expect(name);
        let AgentModelContentPart::UnknownToolCall { call: unknown } = part else {
            panic!("{name}: {part:?}");
        };
        assert_eq!(unknown.call_id, "c7");
        assert_eq!(unknown.name, name);
        assert_eq!(unknown.arguments, json!({"x": 1}));
        assert_eq!(unknown.provider_metadata, json!({"signature": "abc"}));
        assert_eq!(unknown.error().code(), "model.unknown_tool_call");
        let message = turn.unknown_call_message(&unknown);
        assert!(
            message.contains("the tools you can call are `workspace_write_file`, `dice_roll`"),
            "{message}"
        );
        assert_eq!(
            message.contains("this request calls it `workspace_write_file`"),
            hinted,
            "{message}"
        );
    }
    // A known alias decodes as before; a call without an id still fails.
    assert!(matches!(
        turn.decode_part(call(Some("c8"), Some("dice_roll"), None)),
        Ok(AgentModelContentPart::ToolCall { .. })
    ));
    assert_eq!(
        turn.decode_part(call(None, Some("summon_dragon"), None))
            .expect_err("no id")
            .code(),
        "model.invalid_tool_call"
    );
}

/// A direct call's turn names the one tool called, however many the
/// snapshot binds: what it builds, projects and journals does not grow with
/// the profile.
#[test]
fn a_direct_calls_turn_names_only_its_tool() {
    let wide: Vec<(String, String)> = (0..30)
        .map(|n| (format!("builtin:tool.n{n}"), format!("tool_n{n}")))
        .collect();
    let tools: Vec<(&str, &str)> = wide.iter().map(|(t, a)| (t.as_str(), a.as_str())).collect();
    let snapshot = snapshot("inv_root", &tools);
    let called = id("builtin:tool.n29");
    let contract = ToolTurnContract::only(&snapshot, &called).expect("contract");
    assert_eq!(contract.tools(), std::slice::from_ref(&called));
    assert_eq!(contract.choice(), &ToolChoice::Specific(called.clone()));
    let turn = ModelTurn::new(&snapshot, contract).expect("turn");
    assert_eq!(turn.tools().len(), 1);
    assert_eq!(turn.alias_of(&called), Some("tool_n29"));
    // Any other tool of the snapshot is not this turn's.
    assert!(turn.resolve("tool_n0").is_err());
    // A tool outside the snapshot: refused as `all` refuses it.
    let absent = id("builtin:dice.roll");
    assert_eq!(
        ToolTurnContract::only(&snapshot, &absent),
        Err(TurnError::SpecificNotAvailable(absent.clone()))
    );
    assert_eq!(
        ToolTurnContract::all(&snapshot, ToolChoice::Specific(absent.clone())),
        Err(TurnError::SpecificNotAvailable(absent))
    );
}
