//! The registry's life cycle on a real directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use toolhost_core::{Capability, CapabilitySet, ProfileVersion};

use crate::{ExtensionError, ExtensionRegistry, GrantRequest, Manifest, sha256_hex};

fn checked(requested: &[&str]) -> crate::CheckedManifest {
    let capabilities = requested
        .iter()
        .map(|name| format!("\"{name}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let text = format!(
        r#"
id = "acme-wordcount"
version = "0.2.0"
description = "Count words."
component = "c.wasm"
sha256 = "{}"
tools = ["text.word_count"]
capabilities = [{capabilities}]
[wit]
tool = "0.1.0"
host = "0.1.3"
"#,
        sha256_hex(b"component v2")
    );
    let manifest: Manifest = toml::from_str(&text).expect("manifest");
    manifest.check(PathBuf::from(".")).expect("valid")
}

fn install(
    dir: &Path,
    requested: &[&str],
    imports: &[Capability],
    bytes: &[u8],
    upgrade: bool,
) -> Result<(), ExtensionError> {
    ExtensionRegistry::update(dir, |registry| {
        registry
            .install(
                &checked(requested),
                bytes,
                vec!["text.word_count".into()],
                &CapabilitySet::new(imports.iter().copied()),
                upgrade,
            )
            .map(|_| ())
    })
}

/// Install `bytes` as an extension requesting and importing only `log`.
fn install_logger(dir: &Path, bytes: &[u8], upgrade: bool) -> Result<(), ExtensionError> {
    install(dir, &["log"], &[Capability::Log], bytes, upgrade)
}

fn version(id: &str, content: &str) -> ProfileVersion {
    ProfileVersion {
        id: id.to_owned(),
        sha256: sha256_hex(content.as_bytes()),
        tenant: None,
    }
}

fn grant_whole_request(dir: &Path) {
    ExtensionRegistry::update(dir, |registry| {
        registry
            .grant("acme-wordcount", GrantRequest::default())
            .map(|_| ())
    })
    .expect("grant");
}

#[test]
fn install_records_disabled_and_stores_the_component_by_digest() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(
        dir.path(),
        &["log", "random"],
        &[Capability::Log],
        b"component v2",
        false,
    )
    .expect("install");
    let registry = ExtensionRegistry::load(dir.path()).expect("load");
    let extension = registry.get("acme-wordcount").expect("installed");
    assert_eq!(extension.grant, None);
    assert!(!extension.visible_to(&version("default", "a")));
    assert_eq!(extension.sha256, sha256_hex(b"component v2"));
    assert_eq!(
        registry.component_bytes(extension).expect("bytes"),
        b"component v2"
    );
    assert!(
        std::fs::read_to_string(dir.path().join("extensions.json"))
            .expect("file")
            .contains("\"requested\": [\n        \"log\",\n        \"random\"")
    );

    let again = install_logger(dir.path(), b"component v2", false).expect_err("twice");
    assert_eq!(again.code(), "ext.already_installed");
}

#[test]
fn a_component_changed_on_disk_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    install_logger(dir.path(), b"component v2", false).expect("install");
    let registry = ExtensionRegistry::load(dir.path()).expect("load");
    let extension = registry.get("acme-wordcount").expect("installed");
    std::fs::write(registry.component_path(extension), b"evil").expect("tamper");
    let error = registry.component_bytes(extension).expect_err("tampered");
    assert_eq!(error.code(), "ext.sha256_mismatch");
}

#[test]
fn grants_stay_within_the_request_and_cover_the_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(
        dir.path(),
        &["log", "random", "workspace-read"],
        &[Capability::Log, Capability::WorkspaceRead],
        b"component v2",
        false,
    )
    .expect("install");
    let grant = |capabilities: Option<&[Capability]>, profiles: Option<&[&str]>| {
        ExtensionRegistry::update(dir.path(), |registry| {
            registry
                .grant(
                    "acme-wordcount",
                    GrantRequest {
                        capabilities: capabilities.map(|c| CapabilitySet::new(c.iter().copied())),
                        profiles: profiles
                            .map(|p| p.iter().map(|id| version(id, "a")).collect::<BTreeSet<_>>()),
                        tool_results: false,
                        allowed_hosts: None,
                        secrets: Vec::new(),
                    },
                )
                .cloned()
        })
    };
    let error = grant(Some(&[Capability::Log, Capability::ChatRead]), None).expect_err("beyond");
    assert_eq!(error.code(), "ext.grant_invalid");
    assert!(
        error.to_string().contains("chat-read not requested"),
        "{error}"
    );
    let error = grant(Some(&[Capability::Log]), None).expect_err("short of imports");
    assert!(
        error.to_string().contains("imports workspace-read"),
        "{error}"
    );
    let error =
        grant(Some(&[Capability::Log, Capability::WorkspaceWrite]), None).expect_err("write");
    assert_eq!(error.code(), "ext.capability_refused");
    assert_eq!(
        grant(None, Some(&[])).expect_err("no profile").code(),
        "ext.grant_invalid"
    );

    // Nothing of the refused grants was written.
    let unchanged = ExtensionRegistry::load(dir.path()).expect("load");
    assert_eq!(
        unchanged.get("acme-wordcount").expect("installed").grant,
        None
    );

    let all = grant(None, None).expect("whole request");
    assert_eq!(
        all.granted_set().expect("granted").to_string(),
        "log, random, workspace-read"
    );
    assert!(all.visible_to(&version("anyone", "a")));
    let narrow = grant(
        Some(&[Capability::Log, Capability::WorkspaceRead]),
        Some(&["researcher"]),
    )
    .expect("narrow");
    assert!(narrow.visible_to(&version("researcher", "a")));
    assert!(!narrow.visible_to(&version("default", "a")));
    // Another profile declaring the same id, or this one changed: not
    // covered.
    assert!(!narrow.visible_to(&version("researcher", "b")));

    let revoked = ExtensionRegistry::update(dir.path(), |registry| {
        registry.revoke("acme-wordcount").cloned()
    })
    .expect("revoke");
    assert_eq!(revoked.grant, None);
}

#[test]
fn upgrade_drops_the_grant_and_remove_deletes_the_component() {
    let dir = tempfile::tempdir().expect("tempdir");
    install_logger(dir.path(), b"component v1", false).expect("v1");
    grant_whole_request(dir.path());
    install_logger(dir.path(), b"component v2", true).expect("upgrade");
    let registry = ExtensionRegistry::load(dir.path()).expect("load");
    let extension = registry.get("acme-wordcount").expect("installed").clone();
    assert_eq!(extension.grant, None, "new code is authorized anew");
    assert_eq!(extension.sha256, sha256_hex(b"component v2"));
    assert!(
        !dir.path()
            .join(format!("components/{}.wasm", sha256_hex(b"component v1")))
            .exists(),
        "the old component is gone"
    );
    let path = registry.component_path(&extension);
    let removed =
        ExtensionRegistry::update(dir.path(), |registry| registry.remove("acme-wordcount"))
            .expect("remove");
    assert_eq!(removed.id, "acme-wordcount");
    assert!(!path.exists());
    let error = ExtensionRegistry::update(dir.path(), |registry| registry.remove("acme-wordcount"))
        .expect_err("gone");
    assert_eq!(error.code(), "ext.not_installed");
}

#[test]
fn a_broken_registry_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("extensions.json"),
        "{\"schemaVersion\":1,\"kind\":\"toolhost.extensions\",\"extensions\":[{\"id\":3}]}",
    )
    .expect("write");
    let error = ExtensionRegistry::load(dir.path()).expect_err("broken");
    assert_eq!(error.code(), "ext.registry_invalid");
    assert!(error.to_string().contains("extensions[0].id"), "{error}");
    // A change never overwrites a file it could not read.
    let error = ExtensionRegistry::update(dir.path(), |_| Ok(())).expect_err("still broken");
    assert_eq!(error.code(), "ext.registry_invalid");
    assert!(
        std::fs::read_to_string(dir.path().join("extensions.json"))
            .expect("kept")
            .contains("\"id\":3")
    );
}

#[test]
fn a_hand_edited_registry_is_never_trusted_beyond_install_and_grant() {
    let dir = tempfile::tempdir().expect("tempdir");
    install_logger(dir.path(), b"component v2", false).expect("install");
    grant_whole_request(dir.path());
    let path = dir.path().join("extensions.json");
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("registry")).expect("json");
    let edited = |pointer: &str, value: serde_json::Value| {
        let mut document = good.clone();
        *document.pointer_mut(pointer).expect(pointer) = value;
        document.to_string()
    };
    for (edit, expected) in [
        (
            edited(
                "/extensions/0/grant/capabilities",
                serde_json::json!(["log", "workspace-write"]),
            ),
            "never be granted workspace-write",
        ),
        (
            edited(
                "/extensions/0/grant/capabilities",
                serde_json::json!(["log", "random"]),
            ),
            "random, which was never requested",
        ),
        (
            edited("/extensions/0/sha256", serde_json::json!("../../../etc/x")),
            "sha256 must be 64 lowercase hex digits",
        ),
    ] {
        std::fs::write(&path, &edit).expect("edit");
        let error = ExtensionRegistry::load(dir.path()).expect_err(expected);
        assert_eq!(error.code(), "ext.registry_invalid");
        assert!(error.to_string().contains(expected), "{error}");
    }
}

#[test]
fn a_grant_by_bare_profile_id_from_an_older_registry_covers_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    install_logger(dir.path(), b"component v2", false).expect("install");
    grant_whole_request(dir.path());
    let path = dir.path().join("extensions.json");
    let mut document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("registry")).expect("json");
    document["extensions"][0]["grant"]["profiles"] = serde_json::json!(["researcher"]);
    std::fs::write(&path, document.to_string()).expect("edit");
    let registry = ExtensionRegistry::load(dir.path()).expect("an older registry loads");
    let extension = registry.get("acme-wordcount").expect("installed");
    assert!(!extension.visible_to(&version("researcher", "a")));
    let granted = extension.grant.as_ref().and_then(|g| g.profiles.as_ref());
    assert_eq!(
        granted.map(|p| p.iter().map(|v| v.sha256.as_str()).collect::<Vec<_>>()),
        Some(vec![""])
    );
}

#[test]
fn a_grant_to_a_tenants_profile_covers_that_tenant_only_and_an_older_one_only_the_local_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    install_logger(dir.path(), b"component v2", false).expect("install");
    let for_tenant = |tenant: Option<&str>| ProfileVersion {
        tenant: tenant.map(str::to_owned),
        ..version("researcher", "a")
    };
    let grant = |profiles: BTreeSet<ProfileVersion>| {
        ExtensionRegistry::update(dir.path(), |registry| {
            registry
                .grant(
                    "acme-wordcount",
                    GrantRequest {
                        profiles: Some(profiles),
                        ..GrantRequest::default()
                    },
                )
                .map(|_| ())
        })
    };
    grant(BTreeSet::from([for_tenant(Some("alice"))])).expect("grant");
    let registry = ExtensionRegistry::load(dir.path()).expect("load");
    let extension = registry.get("acme-wordcount").expect("installed");
    assert!(extension.visible_to(&for_tenant(Some("alice"))));
    assert!(!extension.visible_to(&for_tenant(Some("bob"))));
    assert!(!extension.visible_to(&for_tenant(None)));
    let written = std::fs::read_to_string(dir.path().join("extensions.json")).expect("file");
    assert!(written.contains("\"tenant\": \"alice\""), "{written}");

    let refused = grant(BTreeSet::from([for_tenant(Some("Not A Tenant"))])).expect_err("name");
    assert_eq!(refused.code(), "ext.grant_invalid");

    // A version written before grants named a tenant stays valid for the
    // local use, and for no served tenant.
    let path = dir.path().join("extensions.json");
    let mut document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("registry")).expect("json");
    let sha256 = for_tenant(None).sha256;
    document["extensions"][0]["grant"]["profiles"] =
        serde_json::json!([{"id": "researcher", "sha256": sha256}]);
    std::fs::write(&path, document.to_string()).expect("edit");
    let registry = ExtensionRegistry::load(dir.path()).expect("an older registry loads");
    let extension = registry.get("acme-wordcount").expect("installed");
    assert!(extension.visible_to(&for_tenant(None)));
    assert!(!extension.visible_to(&for_tenant(Some("local"))));
    assert!(!extension.visible_to(&for_tenant(Some("alice"))));

    // A hand-edited tenant is checked like a granted one.
    document["extensions"][0]["grant"]["profiles"] =
        serde_json::json!([{"id": "researcher", "sha256": sha256, "tenant": "../x"}]);
    std::fs::write(&path, document.to_string()).expect("edit");
    let error = ExtensionRegistry::load(dir.path()).expect_err("bad tenant");
    assert_eq!(error.code(), "ext.registry_invalid");
}

/// `ext install` on a fifo used to wait forever for a writer.
#[test]
fn a_fifo_manifest_is_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join(crate::MANIFEST_FILE);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("mkfifo");
    let error = Manifest::load(dir.path()).expect_err("a fifo");
    assert_eq!(error.code(), "ext.manifest_invalid");
    assert!(error.to_string().contains("a fifo"), "{error}");
}

#[test]
fn tool_results_are_a_separate_grant_that_needs_workspace_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    install(
        dir.path(),
        &["log", "workspace-read"],
        &[Capability::Log],
        b"component v2",
        false,
    )
    .expect("install");
    let grant = |capabilities: &[Capability], tool_results: bool| {
        ExtensionRegistry::update(dir.path(), |registry| {
            registry
                .grant(
                    "acme-wordcount",
                    GrantRequest {
                        capabilities: Some(CapabilitySet::new(capabilities.iter().copied())),
                        tool_results,
                        ..GrantRequest::default()
                    },
                )
                .cloned()
        })
    };
    let error = grant(&[Capability::Log], true).expect_err("without workspace-read");
    assert_eq!(error.code(), "ext.grant_invalid");
    let plain = grant(&[Capability::Log, Capability::WorkspaceRead], false).expect("grant");
    assert!(!plain.grant.expect("granted").tool_results);
    let with = grant(&[Capability::Log, Capability::WorkspaceRead], true).expect("grant");
    assert!(with.grant.expect("granted").tool_results);
    // A hand edit giving tool-results without workspace-read is refused.
    let path = dir.path().join("extensions.json");
    let mut document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("registry")).expect("json");
    document["extensions"][0]["grant"]["capabilities"] = serde_json::json!(["log"]);
    std::fs::write(&path, document.to_string()).expect("edit");
    let error = ExtensionRegistry::load(dir.path()).expect_err("edited");
    assert!(
        error.to_string().contains("without workspace-read"),
        "{error}"
    );
}
