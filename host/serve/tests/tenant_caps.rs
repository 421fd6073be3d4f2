//! What one tenant may ask for and see: the operator's caps in the tokens
//! file, and a catalog filtered by the tenant's policies.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;
use serde_json::{Value, json};
use toolhost_serve::{Limits, TenantAccess, TenantDirs, Tokens, token_digest};

/// `acme` (`acme-secret`) capped at 5 rounds and 1000 fuel per call;
/// `globex` (`globex-secret`) without caps.
fn capped_tokens(dir: &Path) -> TenantAccess {
    let path = dir.join("tokens.json");
    let text = json!({"schemaVersion": 1, "kind": "toolhost.tokens", "tokens": [
        {"tenant": "acme", "sha256": token_digest("acme-secret"),
         "caps": {"maxRounds": 5, "fuel": 1000}},
        {"tenant": "globex", "sha256": token_digest("globex-secret")}
    ]});
    std::fs::write(&path, text.to_string()).expect("tokens");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    TenantAccess::Tokens(Tokens::load(&path).expect("tokens load"))
}

async fn start(dir: &Path) -> Server {
    let data = dir.join("data");
    for tenant in ["acme", "globex"] {
        let dirs = TenantDirs::new(&data, tenant);
        dirs.ensure().expect("dirs");
        seed_chat(&dirs, "chat");
    }
    let models = script_models(
        dir,
        &json!({"schemaVersion": 1, "kind": "toolhost.modelScript",
               "replies": [{"text": "A reply without a tool call."}]}),
    );
    start_with(
        capped_tokens(dir),
        options(&data, models, Limits::default()),
    )
    .await
}

fn profile(tools: Value, sandbox: Value) -> Value {
    json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
           "tools": tools, "sandbox": sandbox})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_asking_beyond_its_tenants_caps_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let post = |token: &str, body: Value| {
        client()
            .post(server.url("/v1/runs"))
            .bearer_auth(token)
            .json(&body)
    };
    let run = |profile: Value, max_rounds: Option<u32>| {
        let mut body = json!({"profile": profile, "model": "demo", "chat": "chat"});
        if let Some(rounds) = max_rounds {
            body["maxRounds"] = json!(rounds);
        }
        body
    };
    let refused = [
        // The profile's default: 80 rounds.
        (
            run(profile(json!({"allow": ["dice.roll"]}), json!({})), None),
            "`profile.tools.maxRounds` asks for 80",
        ),
        (
            run(profile(json!({"allow": ["dice.roll"]}), json!({})), Some(6)),
            "`maxRounds` asks for 6",
        ),
        (
            run(
                profile(
                    json!({"allow": ["dice.roll"], "maxRounds": 5}),
                    json!({"limits": {"dice.roll": {"fuel": 1001}}}),
                ),
                None,
            ),
            "`profile.sandbox.limits.builtin:dice.roll.fuel` asks for 1001",
        ),
        (
            run(
                profile(
                    json!({"allow": ["dice.roll"], "maxRounds": 5}),
                    json!({"limits": {"dice.roll": {"fuel": null}}}),
                ),
                None,
            ),
            "`profile.sandbox.limits.builtin:dice.roll.fuel` asks for unmetered fuel",
        ),
    ];
    for (body, field) in refused {
        let (status, error) = send(post("acme-secret", body)).await;
        assert_eq!(status, 400, "{error}");
        assert_eq!(error["code"], "serve.cap_exceeded", "{error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(field), "{message}");
    }
    // Nothing was made for a refused run.
    let runs = TenantDirs::new(&dir.path().join("data"), "acme").runs();
    assert_eq!(std::fs::read_dir(&runs).map_or(0, Iterator::count), 0);

    // Within the caps, the run starts; another tenant has no caps.
    let within = run(
        profile(
            json!({"allow": ["dice.roll"], "maxRounds": 5}),
            json!({"limits": {"dice.roll": {"fuel": 1000}}}),
        ),
        None,
    );
    let (status, started) = send(post("acme-secret", within)).await;
    assert_eq!(status, 201, "{started}");
    let uncapped = run(profile(json!({"allow": ["dice.roll"]}), json!({})), None);
    let (status, started) = send(post("globex-secret", uncapped)).await;
    assert_eq!(status, 201, "{started}");
}

#[tokio::test]
async fn the_catalog_leaves_out_what_the_tenants_policy_hides() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = start(dir.path()).await;
    let acme = TenantDirs::new(&dir.path().join("data"), "acme");
    std::fs::write(
        acme.policy(),
        json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
               "deny": ["builtin:dice.roll"]})
        .to_string(),
    )
    .expect("policy");
    let listed = |token: &'static str| {
        let request = client().get(server.url("/v1/tools")).bearer_auth(token);
        async move {
            let (status, tools) = send(request).await;
            assert_eq!(status, 200, "{tools}");
            tool_ids(&tools)
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        }
    };
    let for_acme = listed("acme-secret").await;
    assert!(
        !for_acme.iter().any(|id| id == "builtin:dice.roll"),
        "{for_acme:?}"
    );
    assert!(
        for_acme.iter().any(|id| id == "builtin:chat.search"),
        "{for_acme:?}"
    );
    let for_globex = listed("globex-secret").await;
    assert!(
        for_globex.iter().any(|id| id == "builtin:dice.roll"),
        "{for_globex:?}"
    );
}
