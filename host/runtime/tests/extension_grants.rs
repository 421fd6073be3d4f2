//! An extension granted to some profiles, through the whole runtime path:
//! the grant names a tenant's profile (id, content and tenant), the
//! snapshot offers its tools only to that tenant's runs of it, and every
//! call checks the registry on disk again.
//!
//! The extension is the builtin `dice-roll` component installed under
//! another id: a real component, nothing to build.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolhost_core::snapshot::ExitPolicy;
use toolhost_core::{Profile, ProfileVersion, ToolCall, ToolId};
use toolhost_extensions::{ExtensionRegistry, GrantRequest, sha256_hex};
use toolhost_journal::Durability;
use toolhost_runtime::{DirectCaller, Invocation, Run, ToolExecutor, ToolHost, ToolHostConfig};
use toolhost_sandbox::CallEntropy;

const CALLER: DirectCaller = DirectCaller {
    requester: "test",
    call_id_prefix: "test",
};

fn tool() -> ToolId {
    ToolId::parse("ext/acme-dice:dice.roll").expect("id")
}

fn profile() -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "researcher",
            "tools": {"allow": [tool().to_string()]}
        })
        .to_string(),
    )
    .expect("profile")
}

/// Install the dice component as `acme-dice`, disabled.
async fn install(registry: &Path) {
    let dice = toolhost_builtins::components()
        .iter()
        .find(|component| component.package == "dice-roll")
        .expect("dice-roll is built");
    let source = registry.join("source");
    std::fs::create_dir_all(&source).expect("source dir");
    std::fs::write(source.join("c.wasm"), dice.bytes).expect("component");
    std::fs::write(
        source.join("toolhost-extension.toml"),
        format!(
            r#"
id = "acme-dice"
version = "1.0.0"
description = "Dice, as an extension."
component = "c.wasm"
sha256 = "{}"
tools = ["dice.roll"]
capabilities = ["log", "random"]
[wit]
tool = "0.1.0"
host = "0.1.4"
"#,
            sha256_hex(dice.bytes)
        ),
    )
    .expect("manifest");
    let host = ToolHost::with_builtins(ToolHostConfig::default()).expect("host");
    toolhost_runtime::extensions::install(host.sandbox(), registry, &source, false, &|_| {})
        .await
        .expect("installed");
}

fn grant_to(registry: &Path, profiles: impl IntoIterator<Item = ProfileVersion>) {
    ExtensionRegistry::update(registry, |extensions| {
        extensions
            .grant(
                "acme-dice",
                GrantRequest {
                    profiles: Some(profiles.into_iter().collect::<BTreeSet<_>>()),
                    ..GrantRequest::default()
                },
            )
            .map(|_| ())
    })
    .expect("granted");
}

async fn host_with(registry: &Path) -> ToolHost {
    let extensions = ExtensionRegistry::load(registry).expect("registry");
    ToolHost::with_builtins(ToolHostConfig::default())
        .expect("host")
        .with_extensions(&extensions, &|_| {})
        .await
}

/// A new run of `profile` for `tenant` and its root invocation.
fn session(dir: &Path, host: &ToolHost, tenant: Option<&str>) -> (Arc<Run>, Invocation) {
    let profile = profile();
    let run = Run::create(dir, &profile, Durability::Batched).expect("run");
    let session = run
        .start_invocation(
            &profile,
            host.snapshot_sources_under(None, tenant),
            "inv_root",
            ExitPolicy::RunFinishAllowed,
        )
        .expect("invocation");
    (run, session)
}

async fn roll(host: &ToolHost, session: &mut Invocation) -> toolhost_runtime::CallOutcome {
    session
        .call_directly(
            host,
            CALLER,
            &tool(),
            Some(json!({"formula": "2d6"})),
            CallEntropy::seeded(7),
        )
        .await
        .expect("the call ends")
}

#[tokio::test]
async fn another_tenant_with_the_same_profile_neither_sees_nor_calls_the_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = dir.path().join("extensions");
    install(&registry).await;
    grant_to(&registry, [profile().version_for(Some("alice"))]);
    let host = host_with(&registry).await;

    let (_, mut alice) = session(&dir.path().join("alice"), &host, Some("alice"));
    assert!(alice.snapshot().contains(&tool()));
    let rolled = roll(&host, &mut alice).await;
    assert!(!rolled.result.is_error, "{}", rolled.model_text());

    // Bob sends the very same profile: same id, same content digest.
    let (_, bob) = session(&dir.path().join("bob"), &host, Some("bob"));
    assert!(!bob.snapshot().contains(&tool()));
    let why = &bob.diagnostics()[0].message;
    assert!(
        why.starts_with("ext.not_granted_to_profile") && why.contains("tenant `bob`"),
        "{why}"
    );
    // Nor the local use: the grant names alice's profile only.
    let (_, local) = session(&dir.path().join("local"), &host, None);
    assert!(!local.snapshot().contains(&tool()));

    // Even holding the binding alice's snapshot made, a call made for
    // bob's profile is refused by the executor's own recheck.
    let binding = alice.snapshot().binding(&tool()).expect("bound").clone();
    let invocation = ToolCall {
        call_id: "call_bob".into(),
        tool_id: tool(),
        arguments: json!({"formula": "2d6"}),
        provider_metadata: serde_json::Value::Null,
    };
    let inputs = toolhost_runtime::CallContext {
        bound: Arc::new(toolhost_capabilities::InvocationBound::bind(
            &toolhost_capabilities::BindInputs {
                grant_profile: Some(Arc::new(profile().version_for(Some("bob")))),
                ..Default::default()
            },
        )),
        views: None,
        replaying: false,
    };
    let refused =
        ToolExecutor::execute(&host, &invocation, &binding, CallEntropy::seeded(7), inputs)
            .await
            .expect("answered");
    assert_eq!(
        refused.result.error_code.as_deref(),
        Some("ext.not_granted_to_profile"),
        "{}",
        refused.result.content
    );
}

#[tokio::test]
async fn a_grant_taken_from_a_profile_after_its_snapshot_is_refused_at_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = dir.path().join("extensions");
    install(&registry).await;
    let alice = profile().version_for(Some("alice"));
    grant_to(&registry, [alice.clone()]);
    let host = host_with(&registry).await;
    let (_, mut session) = session(&dir.path().join("run"), &host, Some("alice"));
    assert!(session.snapshot().contains(&tool()));

    // Granted again, to another tenant's profile only: still granted,
    // still the same component, but no longer to this profile.
    grant_to(
        &registry,
        [ProfileVersion {
            tenant: Some("carol".into()),
            ..alice.clone()
        }],
    );
    let refused = roll(&host, &mut session).await;
    assert_eq!(
        refused.result.error_code.as_deref(),
        Some("ext.not_granted_to_profile"),
        "{}",
        refused.model_text()
    );

    // Given back to it: the next call runs.
    grant_to(&registry, [alice]);
    let rolled = roll(&host, &mut session).await;
    assert!(!rolled.result.is_error, "{}", rolled.model_text());
}
