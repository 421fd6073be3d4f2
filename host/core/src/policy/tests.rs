use serde_json::json;

use super::*;

fn id(text: &str) -> ToolId {
    crate::profile::resolve_tool_ref(text).expect("tool id")
}

fn policy(deny: &[&str], ask: &[&str]) -> ToolPolicy {
    let text = json!({
        "schemaVersion": 1,
        "kind": "toolhost.toolPolicy",
        "deny": deny,
        "requireApproval": ask,
    })
    .to_string();
    ToolPolicy::from_json(&text, "test").expect("policy")
}

fn allowed(tool: &ToolId) -> ToolFacts<'_> {
    ToolFacts {
        tool,
        allowed_by_profile: true,
        denied_by_profile: false,
        excluded_for_child: false,
        unavailable: None,
        source_approval: None,
        destructive: false,
        budget: None,
    }
}

#[test]
fn the_users_deny_is_highest() {
    let commit = id("workspace.commit");
    let policies = Policies {
        user: Some(policy(&["workspace.commit"], &[])),
        platform: Some(policy(&["builtin:*"], &["*"])),
    };
    let (decision, omitted) = decide(&policies, &allowed(&commit));
    assert!(!decision.visible && !decision.callable);
    assert_eq!(omitted, Some(OmitReason::DeniedByUser));
    assert!(
        decision.reason.contains("user's policy"),
        "{}",
        decision.reason
    );
}

#[test]
fn a_platform_deny_cannot_be_overridden_by_a_profile() {
    let tool = id("mcp/0b0e4c3e-6a55-4a8e-9a43-3f0b36c0d7a1:delete_all");
    let policies = Policies {
        user: None,
        platform: Some(policy(&["mcp/*"], &[])),
    };
    let (decision, omitted) = decide(&policies, &allowed(&tool));
    assert!(!decision.visible);
    assert_eq!(omitted, Some(OmitReason::DeniedByPlatform));
    assert!(decision.reason.contains("`mcp/*`"), "{}", decision.reason);
}

#[test]
fn deny_beats_allow_in_the_profile() {
    let dice = id("dice.roll");
    let facts = ToolFacts {
        denied_by_profile: true,
        ..allowed(&dice)
    };
    let (decision, omitted) = decide(&NO_POLICIES, &facts);
    assert!(!decision.visible);
    assert_eq!(omitted, Some(OmitReason::Denied));
    assert_eq!(decision.reason, "denied by tools.deny");
}

#[test]
fn a_tool_not_allowed_is_not_visible_whatever_else_says() {
    let dice = id("dice.roll");
    let facts = ToolFacts {
        allowed_by_profile: false,
        source_approval: Some("asked"),
        ..allowed(&dice)
    };
    let policies = Policies {
        user: Some(policy(&[], &["dice.roll"])),
        platform: None,
    };
    let (decision, omitted) = decide(&policies, &facts);
    assert!(!decision.visible && !decision.callable && !decision.approval_required);
    assert_eq!(omitted, Some(OmitReason::NotAllowed));
}

#[test]
fn approval_is_not_deny() {
    let commit = id("workspace.commit");
    let policies = Policies {
        user: Some(policy(&[], &["workspace.commit"])),
        platform: None,
    };
    let (decision, omitted) = decide(
        &policies,
        &ToolFacts {
            budget: Some(2),
            ..allowed(&commit)
        },
    );
    assert!(decision.visible && decision.callable && decision.approval_required);
    assert_eq!(omitted, None);
    assert_eq!(decision.budget, Some(2));
    assert!(
        decision.reason.contains("user's policy asks"),
        "{}",
        decision.reason
    );
}

#[test]
fn every_reason_for_an_approval_is_named_and_none_waives_another() {
    let tool = id("ext/acme-http:fetch");
    let policies = Policies {
        user: None,
        platform: Some(policy(&[], &["ext/acme-http:*"])),
    };
    let facts = ToolFacts {
        source_approval: Some("the MCP registration asks (permission Ask)"),
        destructive: true,
        ..allowed(&tool)
    };
    let (decision, omitted) = decide(&policies, &facts);
    assert!(decision.approval_required && decision.visible && omitted.is_none());
    for part in ["platform policy asks", "permission Ask", "destructiveHint"] {
        assert!(decision.reason.contains(part), "{}", decision.reason);
    }
    // Annotations that say nothing, or say the tool is not destructive,
    // take away no approval the policy asked for.
    let quiet = ToolFacts {
        source_approval: None,
        destructive: explicitly_destructive(&json!({"destructiveHint": false})),
        ..allowed(&tool)
    };
    assert!(decide(&policies, &quiet).0.approval_required);
    assert!(!decide(&NO_POLICIES, &quiet).0.approval_required);
}

#[test]
fn only_an_explicit_destructive_hint_counts() {
    assert!(explicitly_destructive(&json!({"destructiveHint": true})));
    assert!(!explicitly_destructive(&json!({"readOnlyHint": false})));
    assert!(!explicitly_destructive(&json!({"destructiveHint": "true"})));
    assert!(!explicitly_destructive(&json!(null)));
}

#[test]
fn a_tool_no_source_offers_is_not_visible_with_the_sources_reason() {
    let tool = id("ext/acme:tool");
    let facts = ToolFacts {
        unavailable: Some("ext.not_granted_to_profile: granted to writer only".into()),
        ..allowed(&tool)
    };
    let (decision, omitted) = decide(&NO_POLICIES, &facts);
    assert!(!decision.visible);
    assert_eq!(omitted, Some(OmitReason::Unavailable));
    assert!(decision.reason.starts_with("ext.not_granted_to_profile"));
}

#[test]
fn patterns_name_one_tool_a_source_a_kind_or_all() {
    let dice = id("dice.roll");
    let mcp = id("mcp/0b0e4c3e-6a55-4a8e-9a43-3f0b36c0d7a1:echo");
    let ext = id("ext/acme:fetch");
    let pattern = |text: &str| ToolPattern::try_from(text.to_owned()).expect(text);
    assert!(pattern("*").matches(&dice) && pattern("*").matches(&mcp));
    assert!(pattern("dice.roll").matches(&dice));
    assert!(pattern("builtin:dice.roll").matches(&dice));
    assert!(pattern("builtin:*").matches(&dice) && !pattern("builtin:*").matches(&ext));
    assert!(pattern("mcp/*").matches(&mcp) && !pattern("mcp/*").matches(&ext));
    assert!(pattern("ext/acme:*").matches(&ext));
    assert!(!pattern("ext/acme:*").matches(&id("ext/acme-two:fetch")));
    assert!(pattern("mcp/0b0e4c3e-6a55-4a8e-9a43-3f0b36c0d7a1:*").matches(&mcp));
    for bad in [
        "dice.*",
        "ext/*:fetch",
        "mcp/:*",
        "no.such_tool",
        "ext/:x",
        "mcp/0B0E4C3E-6A55-4A8E-9A43-3F0B36C0D7A1:*",
        "mcp/not-a-uuid:*",
        "ext/Bad Id:*",
    ] {
        let error = ToolPattern::try_from(bad.to_owned()).expect_err(bad);
        assert!(error.starts_with("policy.pattern_"), "{bad}: {error}");
    }
    assert_eq!(String::from(pattern("ext/acme:*")), "ext/acme:*");
}

#[test]
fn a_policy_file_is_checked_and_its_errors_name_the_entry() {
    let error = ToolPolicy::from_json(
        r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","deny":["dice.roll","no.such_tool"]}"#,
        "policy.json",
    )
    .expect_err("unknown builtin");
    let text = error.to_string();
    assert!(
        text.contains("policy.json") && text.contains("deny[1]"),
        "{text}"
    );
    for (bad, needle) in [
        (
            r#"{"schemaVersion":2,"kind":"toolhost.toolPolicy"}"#,
            "schemaVersion 2",
        ),
        (
            r#"{"schemaVersion":1,"kind":"toolhost.agentProfile"}"#,
            "kind",
        ),
        (
            r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","allow":[]}"#,
            "allow",
        ),
        ("not json", "policy.invalid"),
    ] {
        let text = ToolPolicy::from_json(bad, "p").expect_err(bad).to_string();
        assert!(text.contains(needle), "{bad}: {text}");
    }
    let empty = ToolPolicy::from_json(r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy"}"#, "p")
        .expect("empty");
    assert_eq!(empty, ToolPolicy::empty());
}
