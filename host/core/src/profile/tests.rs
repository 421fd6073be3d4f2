use serde_json::{Value, json};

use super::*;
use crate::test_support::{SERVER, id};

/// A minimal valid profile with `patch` merged into it (JSON merge: objects
/// merge, anything else replaces; `null` removes).
fn profile_json(patch: Value) -> String {
    let mut base = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "tester",
        "tools": {"allow": ["workspace.read_file", "dice.roll"]}
    });
    merge(&mut base, patch);
    base.to_string()
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch,
    }
}

fn error(patch: Value) -> ProfileError {
    Profile::from_json(&profile_json(patch)).expect_err("the profile must be refused")
}

fn field_error(patch: Value) -> (String, &'static str, String) {
    match error(patch) {
        ProfileError::Field {
            field,
            code,
            message,
        } => (field, code, message),
        other => panic!("expected a field error, got {other:?}"),
    }
}

#[test]
fn minimal_profile_gets_every_default() {
    let profile = Profile::from_json(&profile_json(json!({}))).expect("valid");
    assert_eq!(
        profile.tools.allow,
        vec![id("builtin:workspace.read_file"), id("builtin:dice.roll")]
    );
    assert_eq!(profile.tools.max_calls_per_run, 80);
    assert_eq!(profile.tools.max_rounds, 80);
    assert_eq!(profile.tools.mcp_result_inline_char_limit, 50_000);
    assert_eq!(profile.workspace.visible_roots, WORKSPACE_ROOTS);
    assert_eq!(profile.skills.visible, ["*"]);
    assert_eq!(profile.skills.max_read_chars_per_call, 20_000);
    assert_eq!(profile.skills.max_read_chars_per_run, 80_000);
    assert_eq!(profile.delegation.allowed_callers, ["*"]);
    assert_eq!(profile.delegation.max_handoff_depth, 8);
    assert_eq!(profile.run.presentation, Presentation::Foreground);
}

#[test]
fn resolved_form_round_trips() {
    let profile = Profile::from_json(&profile_json(json!({
        "tools": {"maxCallsPerTool": {"dice.roll": 2}},
        "sandbox": {"limits": {"dice.roll": {"deadlineMs": 200, "fuel": null}}}
    })))
    .expect("valid");
    let resolved = profile.to_resolved_json();
    assert!(resolved.contains("\"builtin:dice.roll\""), "{resolved}");
    assert_eq!(Profile::from_json(&resolved).expect("re-read"), profile);
}

#[test]
fn allow_order_is_kept_and_ids_or_bare_names_both_work() {
    let profile = Profile::from_json(&profile_json(json!({
        "tools": {"allow": [
            "workspace.write_file",
            format!("mcp/{SERVER}:search"),
            "builtin:agent.list",
            "ext/acme-weather:forecast",
        ]},
        "delegation": {"canDelegate": true}
    })))
    .expect("valid");
    let names: Vec<&str> = profile.tools.allow.iter().map(ToolId::as_str).collect();
    assert_eq!(
        names,
        [
            "builtin:workspace.write_file",
            &format!("mcp/{SERVER}:search"),
            "builtin:agent.list",
            "ext/acme-weather:forecast",
        ]
    );
}

#[test]
fn deny_beats_allow() {
    let profile = Profile::from_json(&profile_json(json!({
        "tools": {"deny": ["builtin:dice.roll"]}
    })))
    .expect("valid");
    assert!(!profile.is_visible(&id("builtin:dice.roll")));
    assert!(profile.is_visible(&id("builtin:workspace.read_file")));
    assert_eq!(
        profile.visible_tools().collect::<Vec<_>>(),
        [&id("builtin:workspace.read_file")]
    );
}

#[test]
fn unknown_fields_are_named() {
    let (field, code, message) = field_error(json!({"tools": {"alow": []}}));
    assert_eq!(code, "agent.profile_invalid");
    assert!(field.starts_with("tools"), "{field}");
    assert!(message.contains("alow"), "{message}");

    let (field, _, message) = field_error(json!({"colour": "blue"}));
    assert!(message.contains("colour"), "{field}: {message}");

    let (field, _, message) =
        field_error(json!({"sandbox": {"limits": {"dice.roll": {"fuell": 5}}}}));
    assert!(field.starts_with("sandbox.limits"), "{field}");
    assert!(message.contains("fuell"), "{message}");
}

#[test]
fn wrong_types_are_named() {
    let (field, _, message) = field_error(json!({"tools": {"maxCallsPerRun": "80"}}));
    assert_eq!(field, "tools.maxCallsPerRun");
    assert!(message.contains("invalid type"), "{message}");

    let (field, _, _) = field_error(json!({"tools": {"allow": ["dice.roll", 7]}}));
    assert_eq!(field, "tools.allow[1]");

    let (field, _, _) = field_error(json!({"run": {"presentation": "sideways"}}));
    assert_eq!(field, "run.presentation");

    let (field, _, _) = field_error(json!({"tools": {"maxCallsPerRun": -1}}));
    assert_eq!(field, "tools.maxCallsPerRun");
}

#[test]
fn impossible_values_are_named() {
    for (patch, expected) in [
        (
            json!({"tools": {"maxCallsPerRun": 0}}),
            "tools.maxCallsPerRun",
        ),
        (json!({"tools": {"maxRounds": 0}}), "tools.maxRounds"),
        (
            json!({"tools": {"mcpResultInlineCharLimit": 0}}),
            "tools.mcpResultInlineCharLimit",
        ),
        (
            json!({"tools": {"maxCallsPerTool": {"dice.roll": 0}}}),
            "tools.maxCallsPerTool.builtin:dice.roll",
        ),
        (
            json!({"skills": {"maxReadCharsPerCall": 90000}}),
            "skills.maxReadCharsPerCall",
        ),
        (json!({"skills": {"visible": []}}), "skills.visible"),
        (json!({"skills": {"deny": ["Bad Name"]}}), "skills.deny[0]"),
        (json!({"model": {"temperature": 3.5}}), "model.temperature"),
        (
            json!({"model": {"maxOutputTokens": 0}}),
            "model.maxOutputTokens",
        ),
        (
            json!({"delegation": {"maxHandoffDepth": 0}}),
            "delegation.maxHandoffDepth",
        ),
        (json!({"id": "Has Spaces"}), "id"),
        (json!({"kind": "tauritavern.agentProfile"}), "kind"),
        (json!({"tools": {"allow": []}}), "tools.allow"),
    ] {
        let (field, _, message) = field_error(patch.clone());
        assert_eq!(field, expected, "{patch}: {message}");
    }
}

#[test]
fn unknown_builtins_and_bad_ids_are_refused() {
    let (field, code, message) =
        field_error(json!({"tools": {"allow": ["dice.roll", "dice.rol"]}}));
    assert_eq!(field, "tools.allow[1]");
    assert_eq!(code, "agent.profile_unknown_tool");
    assert!(message.contains("dice.rol"), "{message}");

    let (field, code, _) = field_error(json!({"tools": {"allow": ["builtin:shell.run"]}}));
    assert_eq!(
        (field.as_str(), code),
        ("tools.allow[0]", "agent.profile_unknown_tool")
    );

    let (field, code, _) = field_error(json!({"tools": {"deny": ["mcp/not-a-uuid:x"]}}));
    assert_eq!(
        (field.as_str(), code),
        ("tools.deny[0]", "agent.profile_invalid_tool_id")
    );
}

#[test]
fn duplicates_are_refused() {
    let (field, code, _) =
        field_error(json!({"tools": {"allow": ["dice.roll", "builtin:dice.roll"]}}));
    assert_eq!(field, "tools.allow[1]");
    assert_eq!(code, "agent.profile_tools_allow_duplicate");

    let (field, _, message) = field_error(json!({"tools": {"maxCallsPerTool": {
        "dice.roll": 1, "builtin:dice.roll": 2
    }}}));
    assert_eq!(field, "tools.maxCallsPerTool");
    assert!(message.contains("both name"), "{message}");
}

#[test]
fn task_return_is_runtime_only() {
    let (field, code, _) = field_error(json!({"tools": {"allow": ["dice.roll", "task.return"]}}));
    assert_eq!(field, "tools.allow[1]");
    assert_eq!(code, "agent.profile_task_return_not_allowed");
}

#[test]
fn limits_must_target_visible_tools() {
    let (field, code, message) = field_error(json!({"tools": {
        "deny": ["dice.roll"],
        "maxCallsPerTool": {"dice.roll": 3}
    }}));
    assert_eq!(field, "tools.maxCallsPerTool.builtin:dice.roll");
    assert_eq!(code, "agent.profile_tool_not_visible");
    assert!(message.contains("denied"), "{message}");

    let (field, code, message) =
        field_error(json!({"sandbox": {"limits": {"workspace.write_file": {"fuel": 10}}}}));
    assert_eq!(field, "sandbox.limits.builtin:workspace.write_file");
    assert_eq!(code, "agent.profile_tool_not_visible");
    assert!(message.contains("not in tools.allow"), "{message}");
}

#[test]
fn sandbox_overrides_are_checked() {
    let profile = Profile::from_json(&profile_json(json!({
        "sandbox": {"limits": {"builtin:dice.roll": {"deadlineMs": 250, "memoryBytes": 1048576}}}
    })))
    .expect("valid");
    let overrides = profile.sandbox.limits[&id("builtin:dice.roll")];
    assert_eq!(
        overrides.deadline,
        Some(std::time::Duration::from_millis(250))
    );
    assert_eq!(overrides.memory_bytes, Some(1_048_576));

    let (field, _, _) =
        field_error(json!({"sandbox": {"limits": {"dice.roll": {"deadlineMs": 0}}}}));
    assert_eq!(field, "sandbox.limits.builtin:dice.roll.deadlineMs");

    let mcp_tool = format!("mcp/{SERVER}:search");
    let (field, _, message) = field_error(json!({
        "tools": {"allow": ["dice.roll", mcp_tool.clone()]},
        "sandbox": {"limits": {mcp_tool.clone(): {"fuel": 10}}}
    }));
    assert_eq!(field, format!("sandbox.limits.{mcp_tool}"));
    assert!(message.contains("MCP"), "{message}");
}

#[test]
fn workspace_roots_only_narrow() {
    let profile = Profile::from_json(&profile_json(json!({
        "workspace": {"visibleRoots": ["output", "plan"], "writableRoots": ["output"]}
    })))
    .expect("valid");
    assert_eq!(profile.workspace.writable_roots, ["output"]);

    let (field, _, _) = field_error(json!({"workspace": {"visibleRoots": ["output", "input"]}}));
    assert_eq!(field, "workspace.visibleRoots[1]");
    let (field, _, _) = field_error(json!({
        "workspace": {"visibleRoots": ["output"], "writableRoots": ["output", "plan"]}
    }));
    assert_eq!(field, "workspace.writableRoots[1]");
    let (field, _, _) =
        field_error(json!({"workspace": {"visibleRoots": [], "writableRoots": []}}));
    assert_eq!(field, "workspace.visibleRoots");
}

#[test]
fn delegation_tools_need_their_policy() {
    let (field, code, _) = field_error(json!({"tools": {"allow": ["agent.delegate"]}}));
    assert_eq!(
        (field.as_str(), code),
        ("delegation.canDelegate", "agent.profile_cannot_delegate")
    );
    let (field, code, _) = field_error(json!({"tools": {"allow": ["agent.handoff"]}}));
    assert_eq!(
        (field.as_str(), code),
        ("delegation.canHandoff", "agent.profile_cannot_handoff")
    );
    let (field, _, _) = field_error(json!({"tools": {"allow": ["agent.list"]}}));
    assert_eq!(field, "delegation.canDelegate");
    assert!(
        Profile::from_json(&profile_json(json!({
            "tools": {"allow": ["agent.list"]}, "delegation": {"canHandoff": true}
        })))
        .is_ok()
    );

    let (field, _, _) = field_error(json!({"delegation": {"allowAsSubagent": true}}));
    assert_eq!(field, "delegation.callable");
    let (field, _, _) = field_error(json!({"delegation": {"callable": true}}));
    assert_eq!(field, "delegation.callable");
    let (field, _, _) = field_error(json!({"run": {"directRunnable": false}}));
    assert_eq!(field, "run.directRunnable");
    let (field, _, _) = field_error(json!({"delegation": {"allowedCallers": ["ok", "Not Ok"]}}));
    assert_eq!(field, "delegation.allowedCallers[1]");
}

#[test]
fn version_is_checked_first() {
    let text = profile_json(json!({"schemaVersion": 2, "tools": "whatever"}));
    assert!(matches!(
        Profile::from_json(&text),
        Err(ProfileError::UnsupportedVersion { .. })
    ));
    let (field, _, _) = field_error(json!({"schemaVersion": null}));
    assert_eq!(field, "schemaVersion");
    assert!(matches!(
        Profile::from_json("{ not json"),
        Err(ProfileError::Syntax(_))
    ));
    assert!(matches!(
        Profile::from_json("[1]"),
        Err(ProfileError::Field { .. })
    ));
}

#[test]
fn shipped_default_profile_is_valid_and_leaves_dice_off() {
    let profile = Profile::default_writer().expect("profiles/default.json is valid");
    assert_eq!(profile.id, "default-writer");
    assert!(!profile.is_visible(&id("builtin:dice.roll")));
    assert!(profile.is_visible(&id("builtin:workspace.write_file")));
    assert!(profile.is_visible(&id("builtin:workspace.finish")));
    assert!(!profile.is_visible(&id("builtin:task.return")));
}

#[test]
fn tool_descriptions_must_describe_visible_tools_with_bounded_text() {
    let profile = Profile::from_json(&profile_json(json!({
        "tools": {"toolDescriptions": {"dice.roll": "Roll for initiative only."}}
    })))
    .expect("valid");
    assert_eq!(
        profile.tools.tool_descriptions[&id("builtin:dice.roll")],
        "Roll for initiative only."
    );

    let (field, code, message) = field_error(json!({
        "tools": {"toolDescriptions": {"workspace.write_file": "Write."}}
    }));
    assert_eq!(field, "tools.toolDescriptions.builtin:workspace.write_file");
    assert_eq!(code, "agent.profile_tool_not_visible");
    assert!(message.contains("not in tools.allow"), "{message}");

    let (field, code, message) = field_error(json!({
        "tools": {"deny": ["dice.roll"], "toolDescriptions": {"dice.roll": "Roll."}}
    }));
    assert_eq!(field, "tools.toolDescriptions.builtin:dice.roll");
    assert_eq!(code, "agent.profile_tool_not_visible");
    assert!(message.contains("denied"), "{message}");

    for text in ["", "  \n"] {
        let (field, code, _) = field_error(json!({
            "tools": {"toolDescriptions": {"dice.roll": text}}
        }));
        assert_eq!(field, "tools.toolDescriptions.builtin:dice.roll");
        assert_eq!(code, "agent.profile_tool_description_invalid");
    }
    let long = "é".repeat(MAX_TOOL_DESCRIPTION_CHARS + 1);
    let (field, code, message) = field_error(json!({
        "tools": {"toolDescriptions": {"dice.roll": long}}
    }));
    assert_eq!(field, "tools.toolDescriptions.builtin:dice.roll");
    assert_eq!(code, "agent.profile_tool_description_invalid");
    assert!(message.contains("4097 characters"), "{message}");
    // Counted in characters, not bytes.
    let at_limit = "é".repeat(MAX_TOOL_DESCRIPTION_CHARS);
    Profile::from_json(&profile_json(json!({
        "tools": {"toolDescriptions": {"dice.roll": at_limit}}
    })))
    .expect("at the limit");

    let (field, code, _) = field_error(json!({
        "tools": {"toolDescriptions": {"dice.rol": "Roll."}}
    }));
    assert_eq!(field, "tools.toolDescriptions");
    assert_eq!(code, "agent.profile_unknown_tool");
}

#[test]
fn new_optional_sections_leave_the_digest_of_older_profiles_alone() {
    let plain = Profile::from_json(&profile_json(json!({}))).expect("valid");
    let resolved: Value = serde_json::from_str(&plain.to_resolved_json()).expect("json");
    assert!(resolved.get("output").is_none(), "{resolved}");
    assert!(resolved["tools"].get("toolDescriptions").is_none());
    assert!(resolved.get("context").is_none(), "{resolved}");
    assert!(resolved.get("instructions").is_none(), "{resolved}");
    let spelled = Profile::from_json(&profile_json(json!({
        "output": {"messageBody": "output/main.md"},
        "tools": {"toolDescriptions": {}},
        "context": {"includeActivatedWorldInfo": true},
        "instructions": {}
    })))
    .expect("valid");
    assert_eq!(spelled.digest(), plain.digest());
}

#[test]
fn the_message_body_is_a_file_in_a_visible_root() {
    let profile = Profile::from_json(&profile_json(json!({}))).expect("valid");
    assert_eq!(profile.output.message_body, "output/main.md");
    assert_eq!(profile.visible_message_body(), Some("output/main.md"));
    assert_eq!(
        profile.output.direct_output_path(),
        "output/direct_output.md"
    );

    let notes = Profile::from_json(&profile_json(json!({
        "output": {"messageBody": "scratch/reply.md"}
    })))
    .expect("valid");
    assert_eq!(notes.visible_message_body(), Some("scratch/reply.md"));
    assert_eq!(
        notes.output.direct_output_path(),
        "scratch/direct_output.md"
    );
    let resolved: Value = serde_json::from_str(&notes.to_resolved_json()).expect("json");
    assert_eq!(resolved["output"]["messageBody"], "scratch/reply.md");

    // The default in a hidden root: no message body in view, not an error.
    let hidden = Profile::from_json(&profile_json(json!({
        "workspace": {"visibleRoots": ["scratch"], "writableRoots": ["scratch"]}
    })))
    .expect("valid");
    assert_eq!(hidden.visible_message_body(), None);

    for body in [
        "main.md",
        "output",
        "elsewhere/main.md",
        "/output/main.md",
        "output/../main.md",
        "./output/main.md",
        "output/direct_output.md",
    ] {
        let (field, code, _) = field_error(json!({"output": {"messageBody": body}}));
        assert_eq!(field, "output.messageBody", "{body}");
        assert_eq!(code, "agent.profile_invalid", "{body}");
    }
    let (field, _, message) = field_error(json!({
        "workspace": {"visibleRoots": ["output"], "writableRoots": ["output"]},
        "output": {"messageBody": "scratch/reply.md"}
    }));
    assert_eq!(field, "output.messageBody");
    assert!(message.contains("visibleRoots"), "{message}");

    // Visible but read-only: the model would be told to write its reply
    // where it cannot.
    let (field, code, message) = field_error(json!({
        "workspace": {"visibleRoots": ["output", "scratch"], "writableRoots": ["output"]},
        "output": {"messageBody": "scratch/reply.md"}
    }));
    assert_eq!(field, "output.messageBody");
    assert_eq!(code, "agent.profile_invalid");
    assert!(message.contains("writableRoots"), "{message}");
    assert!(message.contains("`scratch/reply.md`"), "{message}");
}

#[test]
fn context_and_instructions_read_the_reference_fields_with_its_defaults() {
    let plain = Profile::from_json(&profile_json(json!({}))).expect("valid");
    assert_eq!(plain.context.history(false), HistoryCut::All);
    assert_eq!(plain.context.history(true), HistoryCut::Last(0));
    assert!(plain.context.include_activated_world_info);
    let set = Profile::from_json(&profile_json(json!({
        "context": {
            "initialChatHistoryMessages": 3,
            "includeActivatedWorldInfo": false,
            "maxInputChars": 100_000
        },
        "instructions": {"agentSystemPrompt": "你是米蕾尔的写手。"}
    })))
    .expect("valid");
    assert_eq!(set.context.history(true), HistoryCut::Last(3));
    assert_eq!(set.context.max_input_chars, Some(100_000));
    assert_ne!(set.digest(), plain.digest());
    let all = Profile::from_json(&profile_json(
        json!({"context": {"initialChatHistoryMessages": -1}}),
    ))
    .expect("valid");
    assert_eq!(all.context.history(true), HistoryCut::All);
    let round_trip = Profile::from_json(&set.to_resolved_json()).expect("resolved form reads");
    assert_eq!(round_trip, set);
}

#[test]
fn impossible_context_and_instructions_are_named() {
    for (patch, field) in [
        (
            json!({"context": {"initialChatHistoryMessages": -2}}),
            "context.initialChatHistoryMessages",
        ),
        (
            json!({"context": {"initialChatHistoryMessages": 100_001}}),
            "context.initialChatHistoryMessages",
        ),
        (
            json!({"context": {"maxInputChars": 100}}),
            "context.maxInputChars",
        ),
        (json!({"context": {"foo": 1}}), "context.foo"),
        (
            json!({"context": {"includeActivatedWorldInfo": "yes"}}),
            "context.includeActivatedWorldInfo",
        ),
        (
            json!({"instructions": {"agentSystemPrompt": "  "}}),
            "instructions.agentSystemPrompt",
        ),
        (
            json!({"instructions": {"agentSystemPrompt": "x".repeat(100_001)}}),
            "instructions.agentSystemPrompt",
        ),
    ] {
        let (found, code, message) = field_error(patch.clone());
        assert_eq!(found, field, "{patch}: {message}");
        assert!(code.starts_with("agent.profile"), "{code}");
    }
}
