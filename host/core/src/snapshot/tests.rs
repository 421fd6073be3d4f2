use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::profile::Profile;
use crate::test_support::{catalog_with, descriptor, id, mcp, server};
use crate::{ToolCatalog, ToolProvider};

fn profile(patch: serde_json::Value) -> Profile {
    let mut document = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "tester",
        "tools": {"allow": []}
    });
    for (key, value) in patch.as_object().expect("object").clone() {
        document[key] = value;
    }
    Profile::from_json(&document.to_string()).expect("valid profile")
}

fn names() -> BTreeMap<uuid::Uuid, String> {
    BTreeMap::from([(server(), "my server".to_owned())])
}

fn compile_with(
    profile: &Profile,
    catalog: &ToolCatalog,
    exit_policy: ExitPolicy,
) -> CompiledSnapshot {
    let names = names();
    compile(
        profile,
        SnapshotSources::of(catalog, &names),
        "inv_root",
        exit_policy,
    )
    .expect("compiles")
}

fn aliases(snapshot: &InvocationToolSnapshot) -> Vec<(&str, &str)> {
    snapshot
        .bindings()
        .iter()
        .map(|binding| (binding.tool_id().as_str(), binding.model_alias.as_str()))
        .collect()
}

#[test]
fn bindings_follow_allow_order_and_deny_wins() {
    let catalog = catalog_with(&[mcp("issue.create")]);
    let mcp_id = mcp("issue.create").to_string();
    let profile = profile(json!({"tools": {
        "allow": ["workspace.write_file", mcp_id, "dice.roll", "workspace.read_file"],
        "deny": ["dice.roll"],
        "maxCallsPerRun": 12,
        "maxCallsPerTool": {"workspace.write_file": 3}
    }}));
    let compiled = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed);
    let snapshot = &compiled.snapshot;
    assert_eq!(
        aliases(snapshot),
        [
            ("builtin:workspace.write_file", "workspace_write_file"),
            (mcp_id.as_str(), "mcp__my_server__issue_create"),
            ("builtin:workspace.read_file", "workspace_read_file"),
        ]
    );
    assert_eq!(snapshot.max_calls_per_invocation(), 12);
    assert_eq!(snapshot.bindings()[0].max_calls, Some(3));
    assert_eq!(snapshot.bindings()[1].max_calls, None);
    assert_eq!(
        compiled.diagnostics,
        [SnapshotDiagnostic {
            tool_id: id("builtin:dice.roll"),
            reason: OmitReason::Denied,
            message: "denied by tools.deny".into(),
        }]
    );
    // Descriptors are copies of the catalog's.
    assert_eq!(
        snapshot.bindings()[0].descriptor,
        *catalog
            .get(&id("builtin:workspace.write_file"))
            .expect("in catalog")
    );
}

#[test]
fn tools_no_source_provides_are_omitted_with_a_diagnostic() {
    let catalog =
        ToolCatalog::from_descriptors([descriptor(&id("builtin:dice.roll"))]).expect("catalog");
    let gone = mcp("vanished").to_string();
    let profile = profile(json!({"tools": {"allow": ["dice.roll", "workspace.read_file", gone]}}));
    let compiled = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed);
    assert_eq!(
        aliases(&compiled.snapshot),
        [("builtin:dice.roll", "dice_roll")]
    );
    let reasons: Vec<_> = compiled
        .diagnostics
        .iter()
        .map(|diagnostic| (diagnostic.tool_id.native_name(), diagnostic.reason))
        .collect();
    assert_eq!(
        reasons,
        [
            ("workspace.read_file", OmitReason::Unavailable),
            ("vanished", OmitReason::Unavailable)
        ]
    );
    assert!(compiled.diagnostics[1].message.contains("MCP"));
}

#[test]
fn return_mode_children_lose_control_tools_and_gain_task_return() {
    let catalog = catalog_with(&[]);
    let profile = profile(json!({
        "tools": {"allow": [
            "workspace.write_file", "workspace.commit", "workspace.finish",
            "agent.delegate", "agent.handoff", "agent.await", "agent.list", "chat.search"
        ]},
        "delegation": {"canDelegate": true, "canHandoff": true}
    }));
    let root = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed);
    assert_eq!(root.snapshot.bindings().len(), 8);
    assert!(!root.snapshot.contains(&id("builtin:task.return")));

    let child = compile_with(&profile, &catalog, ExitPolicy::TaskReturnRequired);
    let names: Vec<&str> = child
        .snapshot
        .bindings()
        .iter()
        .map(|binding| binding.tool_id().native_name())
        .collect();
    assert_eq!(
        names,
        [
            "workspace.write_file",
            "agent.list",
            "chat.search",
            "task.return"
        ]
    );
    assert_eq!(child.snapshot.bindings()[3].model_alias, "task_return");
    assert_eq!(
        child
            .diagnostics
            .iter()
            .filter(|diagnostic| diagnostic.reason == OmitReason::ExcludedForChild)
            .count(),
        5
    );
}

#[test]
fn a_child_without_a_task_return_component_says_so() {
    let catalog =
        ToolCatalog::from_descriptors([descriptor(&id("builtin:dice.roll"))]).expect("catalog");
    let profile = profile(json!({"tools": {"allow": ["dice.roll"]}}));
    let child = compile_with(&profile, &catalog, ExitPolicy::TaskReturnRequired);
    assert_eq!(
        aliases(&child.snapshot),
        [("builtin:dice.roll", "dice_roll")]
    );
    assert_eq!(child.diagnostics[0].tool_id, id("builtin:task.return"));
    assert_eq!(child.diagnostics[0].reason, OmitReason::Unavailable);
}

#[test]
fn external_aliases_collide_deterministically_and_never_shadow_builtins() {
    // Two servers with the same display name and a tool named like a builtin alias.
    let other = uuid::Uuid::parse_str("00000000-0000-4000-8000-000000000001").expect("uuid");
    let other_tool = ToolId::new(&ToolProvider::Mcp(other), "issue.create").expect("id");
    let sneaky = ToolId::new(&ToolProvider::Extension("x".into()), "roll").expect("id");
    let catalog = catalog_with(&[mcp("issue.create"), other_tool.clone(), sneaky.clone()]);
    let mut names = names();
    names.insert(other, "my server".into()); // same display name: a real collision
    let profile = profile(json!({"tools": {"allow": [
        mcp("issue.create").to_string(), other_tool.to_string(), "dice.roll", sneaky.to_string()
    ]}}));
    let sources = SnapshotSources::of(&catalog, &names);
    let first = compile(&profile, sources, "inv_a", ExitPolicy::RunFinishAllowed).expect("ok");
    let second = compile(&profile, sources, "inv_b", ExitPolicy::RunFinishAllowed).expect("ok");
    let got = aliases(&first.snapshot);
    assert_eq!(got[0].1, "mcp__my_server__issue_create");
    assert_eq!(got[1].1, "mcp__my_server__issue_create__2");
    assert_eq!(got[2].1, "dice_roll");
    assert_eq!(got[3].1, "ext__x__roll");
    assert_eq!(got, aliases(&second.snapshot), "same inputs, same aliases");
}

#[test]
fn invariants_hold_on_construction() {
    let binding = |tool: &str, alias: &str, max_calls| ToolBinding {
        descriptor: descriptor(&id(tool)),
        model_alias: alias.into(),
        max_calls,
        limits: None,
        approval: None,
    };
    let ok = InvocationToolSnapshot::new(
        "inv_root",
        vec![binding("builtin:dice.roll", "dice_roll", None)],
        5,
    );
    assert!(ok.is_ok());
    assert_eq!(
        InvocationToolSnapshot::new("inv_root", vec![], 0),
        Err(SnapshotError::BudgetInvalid)
    );
    assert!(matches!(
        InvocationToolSnapshot::new(
            "inv_root",
            vec![
                binding("builtin:dice.roll", "a", None),
                binding("builtin:dice.roll", "b", None)
            ],
            5
        ),
        Err(SnapshotError::DuplicateId(_))
    ));
    assert!(matches!(
        InvocationToolSnapshot::new(
            "inv_root",
            vec![
                binding("builtin:dice.roll", "same", None),
                binding("builtin:chat.search", "same", None)
            ],
            5
        ),
        Err(SnapshotError::DuplicateAlias { .. })
    ));
    assert!(matches!(
        InvocationToolSnapshot::new("inv_root", vec![binding("builtin:dice.roll", "", None)], 5),
        Err(SnapshotError::AliasInvalid { .. })
    ));
    assert!(matches!(
        InvocationToolSnapshot::new(
            "inv_root",
            vec![binding("builtin:dice.roll", "has.dot", None)],
            5
        ),
        Err(SnapshotError::AliasInvalid { .. })
    ));
    assert!(matches!(
        InvocationToolSnapshot::new(
            "inv_root",
            vec![binding("builtin:dice.roll", "d", Some(0))],
            5
        ),
        Err(SnapshotError::ToolBudgetInvalid(_))
    ));
    assert!(matches!(
        InvocationToolSnapshot::new("../escape", vec![], 5),
        Err(SnapshotError::IdInvalid(_))
    ));
}

#[test]
fn invariants_hold_on_deserialization() {
    let catalog = catalog_with(&[]);
    let profile = profile(json!({
        "tools": {"allow": ["dice.roll", "chat.search"], "maxCallsPerTool": {"dice.roll": 2}},
        "sandbox": {"limits": {"dice.roll": {"deadlineMs": 300}}}
    }));
    let snapshot = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed).snapshot;
    let text = snapshot.to_json_pretty();
    let back: InvocationToolSnapshot = serde_json::from_str(&text).expect("round trip");
    assert_eq!(back, snapshot);

    let mut value: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(value["schemaVersion"], 2);
    assert_eq!(value["decisions"][0]["toolId"], "builtin:dice.roll");
    assert_eq!(value["decisions"][0]["budget"], 2);
    assert_eq!(back.decisions(), snapshot.decisions());
    assert_eq!(value["bindings"][0]["modelAlias"], "dice_roll");
    assert_eq!(value["bindings"][0]["maxCalls"], 2);
    assert!(value["bindings"][1].get("maxCalls").is_none());
    // Only what the profile set: an unset fuel stays metered.
    assert_eq!(value["bindings"][0]["limits"], json!({"deadlineMs": 300}));
    assert_eq!(
        back.bindings()[0].limits.and_then(|limits| limits.fuel),
        None
    );

    let refuse = |value: &serde_json::Value, code: &str| {
        let error = serde_json::from_value::<InvocationToolSnapshot>(value.clone())
            .expect_err("must be refused")
            .to_string();
        assert!(error.contains(code), "{error}");
    };
    let mut tampered = value.clone();
    tampered["schemaVersion"] = json!(3);
    refuse(&tampered, "tool.snapshot_schema_unsupported");
    // Decisions and bindings must agree: an approval only one of them
    // records, a bound tool decided hidden, a tool decided twice.
    let mut tampered = value.clone();
    tampered["bindings"][0]["approval"] = json!("someone asks");
    refuse(&tampered, "tool.snapshot_decision_mismatch");
    let mut tampered = value.clone();
    tampered["decisions"][0]["approvalRequired"] = json!(true);
    refuse(&tampered, "tool.snapshot_decision_mismatch");
    let mut tampered = value.clone();
    tampered["decisions"][0]["visible"] = json!(false);
    refuse(&tampered, "tool.snapshot_decision_mismatch");
    let mut tampered = value.clone();
    tampered["decisions"][1] = tampered["decisions"][0].clone();
    refuse(&tampered, "tool.snapshot_decision_mismatch");
    let mut tampered = value.clone();
    tampered["maxCallsPerInvocation"] = json!(0);
    refuse(&tampered, "tool.snapshot_budget_invalid");
    let mut tampered = value.clone();
    tampered["bindings"][1]["modelAlias"] = json!("dice_roll");
    refuse(&tampered, "tool.snapshot_duplicate_alias");
    let mut tampered = value.clone();
    tampered["bindings"][1] = tampered["bindings"][0].clone();
    tampered["bindings"][1]["modelAlias"] = json!("other");
    refuse(&tampered, "tool.snapshot_duplicate_id");
    let mut tampered = value.clone();
    tampered["bindings"][0]["descriptor"]["inputSchema"] = json!({"type": "array"});
    refuse(&tampered, "tool.snapshot_descriptor_invalid");
    value["extra"] = json!(true);
    refuse(&value, "unknown field");
}

#[test]
fn summary_is_compact() {
    let catalog = catalog_with(&[]);
    let profile = profile(json!({"tools": {"allow": ["dice.roll"]}}));
    let snapshot = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed).snapshot;
    assert_eq!(
        snapshot.summary(),
        json!({
            "id": "inv_root",
            "schemaVersion": 2,
            "maxCallsPerInvocation": 80,
            "tools": [{"toolId": "builtin:dice.roll", "alias": "dice_roll", "maxCalls": null,
                       "approvalRequired": false}]
        })
    );
}

#[test]
fn extension_grants_decide_visibility_per_profile() {
    let granted = ToolId::new(&ToolProvider::Extension("acme".into()), "count").expect("id");
    let narrow = ToolId::new(&ToolProvider::Extension("narrow".into()), "count").expect("id");
    let ungranted = ToolId::new(&ToolProvider::Extension("idle".into()), "count").expect("id");
    let catalog = catalog_with(&[granted.clone(), narrow.clone()]);
    let unavailable = BTreeMap::from([(
        "ext/idle".to_owned(),
        "ext.not_granted: installed but not granted".to_owned(),
    )]);
    let profile_for = |profile_id: &str, description: &str| {
        profile(
            json!({"id": profile_id, "description": description, "tools": {"allow": [
                granted.to_string(), narrow.to_string(), ungranted.to_string()
            ]}}),
        )
    };
    let restricted = BTreeMap::from([(
        "ext/narrow".to_owned(),
        std::collections::BTreeSet::from([profile_for("researcher", "v1").version()]),
    )]);
    let names = names();
    let compile_as = |profile: crate::Profile, tenant: Option<&str>| {
        let sources = SnapshotSources {
            unavailable: &unavailable,
            restricted_to_profiles: &restricted,
            ..SnapshotSources::of(&catalog, &names)
        }
        .for_tenant(tenant);
        compile(&profile, sources, "inv_root", ExitPolicy::RunFinishAllowed).expect("compiles")
    };
    let compile_with = |profile: crate::Profile| compile_as(profile, None);
    let compile_for = |profile_id: &str| compile_with(profile_for(profile_id, "v1"));
    let tester = compile_for("tester");
    assert_eq!(
        aliases(&tester.snapshot),
        vec![("ext/acme:count", "ext__acme__count")]
    );
    let messages: Vec<&str> = tester
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert_eq!(
        messages,
        vec![
            "ext.not_granted_to_profile: ext/narrow is granted to researcher only, not to profile `tester`",
            "ext.not_granted: installed but not granted",
        ]
    );
    let researcher = compile_for("researcher");
    assert_eq!(researcher.snapshot.bindings().len(), 2);
    assert_eq!(researcher.diagnostics.len(), 1);

    // The same id with other content is another profile: the grant was
    // for the profile as it was.
    let changed = compile_with(profile_for("researcher", "v2, with more tools"));
    assert_eq!(changed.snapshot.bindings().len(), 1);
    let message = &changed.diagnostics[0].message;
    assert!(
        message.contains("its content has changed since") && message.contains("grant it again"),
        "{message}"
    );

    // The same content run by a served tenant is that tenant's profile, not
    // the local one the grant names.
    let served = compile_as(profile_for("researcher", "v1"), Some("bob"));
    assert_eq!(served.snapshot.bindings().len(), 1);
    assert_eq!(
        served.diagnostics[0].message,
        "ext.not_granted_to_profile: ext/narrow is granted to no profile of tenant `bob`"
    );
}

#[test]
fn a_grant_to_a_tenants_profile_is_not_another_tenants_with_the_same_content() {
    let narrow = ToolId::new(&ToolProvider::Extension("narrow".into()), "lookup").expect("id");
    let catalog = catalog_with(std::slice::from_ref(&narrow));
    let profile = profile(json!({"id": "researcher", "tools": {"allow": [narrow.to_string()]}}));
    let restricted = BTreeMap::from([(
        "ext/narrow".to_owned(),
        std::collections::BTreeSet::from([profile.version_for(Some("alice"))]),
    )]);
    let names = names();
    let compile_for = |tenant: Option<&str>| {
        let sources = SnapshotSources {
            restricted_to_profiles: &restricted,
            tenant,
            ..SnapshotSources::of(&catalog, &names)
        };
        compile(&profile, sources, "inv_root", ExitPolicy::RunFinishAllowed).expect("compiles")
    };
    assert_eq!(compile_for(Some("alice")).snapshot.bindings().len(), 1);
    for other in [Some("bob"), None] {
        let compiled = compile_for(other);
        assert!(compiled.snapshot.bindings().is_empty(), "{other:?}");
        assert_eq!(
            compiled.diagnostics[0].message,
            format!(
                "ext.not_granted_to_profile: ext/narrow is granted to no profile of {}",
                other.map_or("the local use".to_owned(), |t| format!("tenant `{t}`"))
            )
        );
    }
}

#[test]
fn builtin_text_names_other_builtins_by_their_alias_here_and_third_party_text_is_kept() {
    let marked = |tool: &ToolId| {
        let mut described = descriptor(tool);
        described.description = Some("Then call {tool:workspace.read_file}.".into());
        described.input_schema = json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "As {tool:workspace.list_files} shows it."}
        }});
        described
    };
    let catalog = ToolCatalog::from_descriptors([
        marked(&ToolId::builtin("workspace.search_files").unwrap()),
        marked(&mcp("search")),
    ])
    .unwrap();
    let mcp_id = mcp("search").to_string();
    let profile = profile(json!({"tools": {"allow": ["workspace.search_files", mcp_id]}}));
    let compiled = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed);
    let [builtin, server] = compiled.snapshot.bindings() else {
        panic!("two bindings");
    };
    assert_eq!(
        builtin.descriptor.description.as_deref(),
        Some("Then call workspace_read_file.")
    );
    assert_eq!(
        builtin.descriptor.input_schema["properties"]["path"]["description"],
        "As workspace_list_files shows it."
    );
    assert_eq!(
        server.descriptor.description.as_deref(),
        Some("Then call {tool:workspace.read_file}.")
    );
}

/// A snapshot written before decisions existed (schema 1) still loads as
/// it was written, and writes back the same; one claiming an approval is
/// refused (version 1 had none).
#[test]
fn a_version_one_snapshot_loads_as_written() {
    let written = json!({
        "schemaVersion": 1,
        "id": "inv_root",
        "bindings": [{
            "descriptor": descriptor(&ToolId::builtin("dice.roll").expect("id")),
            "modelAlias": "dice_roll",
            "maxCalls": 2
        }],
        "maxCallsPerInvocation": 80
    });
    let snapshot: InvocationToolSnapshot =
        serde_json::from_value(written.clone()).expect("version 1 loads");
    assert_eq!(snapshot.schema_version(), 1);
    assert!(snapshot.decisions().is_empty());
    assert_eq!(snapshot.bindings()[0].approval, None);
    let again: serde_json::Value = serde_json::from_str(&snapshot.to_json_pretty()).expect("json");
    assert_eq!(again, written);

    let mut claiming = written;
    claiming["bindings"][0]["approval"] = json!("asked");
    let error = serde_json::from_value::<InvocationToolSnapshot>(claiming)
        .expect_err("no approvals in version 1")
        .to_string();
    assert!(error.contains("tool.snapshot_decision_mismatch"), "{error}");
}

/// The policy layers reach the snapshot: the user's and the platform's
/// denials leave tools out with their own reasons, approvals from every
/// layer are frozen into the bindings, and every allowed tool has its
/// decision.
#[test]
fn policies_decide_what_the_snapshot_offers_and_what_needs_approval() {
    use crate::policy::{Policies, ToolPolicy};

    let ask_tool = mcp("issue.create");
    let wipe = mcp("issue.wipe");
    let mut catalog = catalog_with(std::slice::from_ref(&ask_tool));
    let mut destructive = descriptor(&wipe);
    destructive.annotations = json!({"destructiveHint": true});
    catalog.insert(destructive).expect("insert");
    let policy = |deny: &[&str], ask: &[&str]| {
        ToolPolicy::from_json(
            &json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
                    "deny": deny, "requireApproval": ask})
            .to_string(),
            "test",
        )
        .expect("policy")
    };
    let policies = Policies {
        user: Some(policy(&["dice.roll"], &["workspace.commit"])),
        platform: Some(policy(&["chat.search"], &[])),
    };
    let approvals = BTreeMap::from([(ask_tool.clone(), "the server asks".to_owned())]);
    let profile = profile(json!({"tools": {"allow": [
        "dice.roll", "chat.search", "workspace.commit", ask_tool.to_string(),
        wipe.to_string(), "workspace.read_file"
    ]}}));
    let names = names();
    let compiled = compile(
        &profile,
        SnapshotSources {
            policies: &policies,
            source_approvals: &approvals,
            ..SnapshotSources::of(&catalog, &names)
        },
        "inv_root",
        ExitPolicy::RunFinishAllowed,
    )
    .expect("compiles");
    let omitted: Vec<(&str, OmitReason)> = compiled
        .diagnostics
        .iter()
        .map(|d| (d.tool_id.as_str(), d.reason))
        .collect();
    assert_eq!(
        omitted,
        [
            ("builtin:dice.roll", OmitReason::DeniedByUser),
            ("builtin:chat.search", OmitReason::DeniedByPlatform)
        ]
    );
    let snapshot = compiled.snapshot;
    let approval = |tool: &ToolId| snapshot.binding(tool).expect("bound").approval.clone();
    let commit = ToolId::builtin("workspace.commit").expect("id");
    assert!(approval(&commit).is_some_and(|why| why.contains("user's policy asks")));
    assert!(approval(&ask_tool).is_some_and(|why| why.contains("the server asks")));
    assert!(approval(&wipe).is_some_and(|why| why.contains("destructiveHint")));
    assert_eq!(
        approval(&ToolId::builtin("workspace.read_file").expect("id")),
        None
    );
    assert_eq!(snapshot.decisions().len(), 6, "one per allowed tool");
    assert!(
        snapshot
            .decisions()
            .iter()
            .all(|d| d.visible == snapshot.contains(&d.tool_id))
    );
    let back: InvocationToolSnapshot =
        serde_json::from_str(&snapshot.to_json_pretty()).expect("round trip");
    assert_eq!(back, snapshot);
}

/// A profile's `toolDescriptions` replace the source's text in the frozen
/// binding — an MCP tool's too, rendered like a builtin's since it is the
/// profile's text — and the snapshot read back keeps them.
#[test]
fn a_profiles_tool_descriptions_are_frozen_into_the_snapshot() {
    let catalog = catalog_with(&[mcp("search")]);
    let mcp_id = mcp("search").to_string();
    let profile = profile(json!({"tools": {
        "allow": ["dice.roll", "workspace.read_file", mcp_id.clone()],
        "toolDescriptions": {
            "dice.roll": "Roll only for combat; then {tool:workspace.read_file}.",
            mcp_id.clone(): "Search the lore wiki."
        }
    }}));
    let compiled = compile_with(&profile, &catalog, ExitPolicy::RunFinishAllowed);
    let description = |tool: &str| {
        compiled
            .snapshot
            .binding(&id(tool))
            .and_then(|binding| binding.descriptor.description.clone())
    };
    assert_eq!(
        description("builtin:dice.roll").as_deref(),
        Some("Roll only for combat; then workspace_read_file.")
    );
    assert_eq!(
        description(&mcp_id).as_deref(),
        Some("Search the lore wiki.")
    );
    assert_eq!(
        description("builtin:workspace.read_file"),
        catalog
            .get(&id("builtin:workspace.read_file"))
            .and_then(|descriptor| descriptor.description.clone()),
        "a tool the profile does not describe keeps its source's text"
    );

    let stored = compiled.snapshot.to_json_pretty();
    let loaded: InvocationToolSnapshot = serde_json::from_str(&stored).expect("loads");
    assert_eq!(loaded, compiled.snapshot);
    assert_eq!(
        loaded
            .binding(&id("builtin:dice.roll"))
            .and_then(|binding| binding.descriptor.description.as_deref()),
        Some("Roll only for combat; then workspace_read_file.")
    );
}

/// `workspace.commit` says which file a commit with no path publishes: the
/// profile's message body, never a default the host does not use.
#[test]
fn the_commit_tool_names_the_profiles_message_body() {
    let commit = id("builtin:workspace.commit");
    let mut own = descriptor(&commit);
    own.description = Some("With no arguments, {messageBody} replaces your message.".into());
    own.input_schema = json!({"type": "object", "properties": {"path": {
        "type": "string", "description": "Workspace file to publish. Default: {messageBody}."}}});
    let catalog = ToolCatalog::from_descriptors(
        crate::builtin::names()
            .map(|name| ToolId::builtin(name).expect("builtin"))
            .filter(|tool| *tool != commit)
            .map(|tool| descriptor(&tool))
            .chain([own]),
    )
    .expect("catalog");
    let texts = |profile: &Profile| {
        let compiled = compile_with(profile, &catalog, ExitPolicy::RunFinishAllowed);
        let binding = compiled
            .snapshot
            .binding(&id("builtin:workspace.commit"))
            .expect("offered")
            .clone();
        (
            binding.descriptor.description.unwrap_or_default(),
            binding.descriptor.input_schema["properties"]["path"]["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };
    let drafts = profile(json!({
        "tools": {"allow": ["workspace.commit", "workspace.finish"]},
        "workspace": {"visibleRoots": ["output", "scratch"], "writableRoots": ["output", "scratch"]},
        "output": {"messageBody": "scratch/reply.md"}
    }));
    let (description, path) = texts(&drafts);
    assert!(description.contains("scratch/reply.md"), "{description}");
    assert!(!description.contains("output/main.md"), "{description}");
    assert!(!description.contains("{messageBody}"), "{description}");
    assert_eq!(
        path,
        "Workspace file to publish. Default: scratch/reply.md."
    );

    let plain = profile(json!({"tools": {"allow": ["workspace.commit", "workspace.finish"]}}));
    let (description, path) = texts(&plain);
    assert!(description.contains("output/main.md"), "{description}");
    assert_eq!(path, "Workspace file to publish. Default: output/main.md.");
}
