//! A tool a registered server lists is off until allowed (the reference's
//! default): `add` offers nothing it lists until `grant … Allow`, and a
//! tool the server adds later stays off; `add_allowing_all` offers every
//! tool but those denied by name; a registration written before the
//! choice existed keeps every tool allowed. The call-time recheck reads
//! the same `permission`. No server: the tool lists are written as a
//! refresh would write them.

use serde_json::json;
use toolhost_mcp::{McpRegistry, NewTools, Permission, Transport, offered_tools};
use uuid::Uuid;

fn stdio() -> Transport {
    Transport::Stdio {
        command: "true".into(),
        args: vec![],
        env: Default::default(),
    }
}

/// The cached tool list of registration `id`, as a refresh writes it.
fn cache(dir: &std::path::Path, id: Uuid, tools: &[&str]) {
    let tools: Vec<_> = tools
        .iter()
        .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
        .collect();
    let cache = json!({
        "schemaVersion": 1, "kind": "toolhost.mcpToolCache", "registrationId": id,
        "refreshedAt": "2026-12-07T00:00:00Z", "server": null, "tools": tools
    });
    std::fs::create_dir_all(dir.join("cache")).expect("cache dir");
    std::fs::write(dir.join(format!("cache/{id}.json")), cache.to_string()).expect("cache");
}

fn offered(registry: &McpRegistry) -> Vec<String> {
    offered_tools(registry)
        .0
        .iter()
        .map(|tool| tool.tool.name.clone())
        .collect()
}

#[test]
fn a_listed_tool_is_off_until_allowed_and_a_new_one_stays_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    let id = registry.add("notes", stdio()).expect("add");
    cache(dir.path(), id, &["read", "write"]);

    let (offered_now, omitted) = offered_tools(&McpRegistry::load(dir.path()).expect("reload"));
    assert!(offered_now.is_empty());
    assert_eq!(omitted.len(), 2, "{omitted:?}");
    assert!(
        omitted.iter().all(|o| o.code == "mcp.tool_not_allowed"),
        "{omitted:?}"
    );
    assert!(
        omitted[0].reason.contains("toolhost mcp grant notes"),
        "{omitted:?}"
    );
    let notes = registry.find("notes").expect("found");
    assert_eq!(notes.new_tools, NewTools::Off);
    assert_eq!(notes.permission("read"), Permission::Deny);

    registry
        .grant("notes", "read", Permission::Allow)
        .expect("grant");
    assert_eq!(offered(&registry), ["read"]);
    // The server lists a third tool at its next refresh: off as well.
    cache(dir.path(), id, &["read", "write", "delete"]);
    assert_eq!(
        offered(&McpRegistry::load(dir.path()).expect("reload")),
        ["read"]
    );
}

#[test]
fn allowing_all_at_add_time_offers_every_tool_but_the_denied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut registry = McpRegistry::load(dir.path()).expect("registry");
    let id = registry.add_allowing_all("notes", stdio()).expect("add");
    cache(dir.path(), id, &["read", "write"]);
    assert_eq!(offered(&registry), ["read", "write"]);
    registry
        .grant("notes", "write", Permission::Deny)
        .expect("deny");
    let (offered_now, omitted) = offered_tools(&registry);
    assert_eq!(offered_now.len(), 1);
    assert_eq!(omitted[0].code, "mcp.tool_denied");
}

#[test]
fn a_registration_written_before_new_tools_existed_keeps_them_allowed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let id = Uuid::new_v4();
    let file = json!({"schemaVersion": 1, "kind": "toolhost.mcpRegistrations", "registrations": [
        {"id": id, "displayName": "old", "transport": {"kind": "stdio", "command": "true"},
         "state": "active", "permissions": {}}]});
    std::fs::write(dir.path().join("registrations.json"), file.to_string()).expect("file");
    cache(dir.path(), id, &["read"]);
    let registry = McpRegistry::load(dir.path()).expect("registry");
    assert_eq!(registry.registrations()[0].new_tools, NewTools::Allow);
    assert_eq!(offered(&registry), ["read"]);
}
