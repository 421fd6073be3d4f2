//! Extension conformance: hostile components packaged as extensions and put
//! through the real install path (`toolhost_runtime::extensions::install`),
//! the registry's grants, and a host's catalog and snapshots.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_conformance::{BuiltinComponent, guest};
use toolhost_core::limits::{HostPolicy, Limits};
use toolhost_core::snapshot::{ExitPolicy, compile};
use toolhost_core::{Capability, CapabilitySet, Profile, ToolCall, ToolId};
use toolhost_extensions::{ExtensionRegistry, GrantRequest, sha256_hex};
use toolhost_runtime::extensions::{InstallError, Installed, install};
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_sandbox::{CallEntropy, Sandbox, SandboxConfig};

/// A directory with an extension package: the component and its manifest.
struct Package {
    dir: tempfile::TempDir,
}

impl Package {
    /// `component` under `id`, declaring `tool`, with manifest lines
    /// `extra` (capabilities, wit, limits) and `sha256` (the real digest
    /// unless given).
    fn new(component: &BuiltinComponent, id: &str, tool: &str, extra: &str) -> Self {
        Self::with_sha(component, id, tool, extra, &sha256_hex(component.bytes))
    }

    fn with_sha(
        component: &BuiltinComponent,
        id: &str,
        tool: &str,
        extra: &str,
        sha256: &str,
    ) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("tool.wasm"), component.bytes).expect("component");
        let manifest = format!(
            "id = \"{id}\"\nversion = \"1.0.0\"\ndescription = \"A conformance extension.\"\n\
             component = \"tool.wasm\"\nsha256 = \"{sha256}\"\ntools = [\"{tool}\"]\n{extra}"
        );
        std::fs::write(dir.path().join("toolhost-extension.toml"), manifest).expect("manifest");
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Who calls a tool directly in these tests (`toolhost call`'s place).
const TESTER: toolhost_runtime::DirectCaller = toolhost_runtime::DirectCaller {
    requester: "test",
    call_id_prefix: "test",
};

const MINIMAL: &str = "capabilities = [\"log\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.3\"\n";

fn sandbox_config(cache: &Path, policy: HostPolicy) -> SandboxConfig {
    SandboxConfig {
        cache_dir: Some(cache.to_owned()),
        epoch_tick: Duration::from_millis(5),
        policy,
        ..toolhost_capabilities::sandbox_config()
    }
}

struct World {
    registry_dir: tempfile::TempDir,
    cache: tempfile::TempDir,
    policy: HostPolicy,
}

impl World {
    fn new() -> Self {
        Self::with_policy(HostPolicy::default())
    }

    fn with_policy(policy: HostPolicy) -> Self {
        Self {
            registry_dir: tempfile::tempdir().expect("tempdir"),
            cache: tempfile::tempdir().expect("tempdir"),
            policy,
        }
    }

    fn dir(&self) -> &Path {
        self.registry_dir.path()
    }

    async fn install(&self, package: &Package) -> Result<Installed, InstallError> {
        let sandbox =
            Sandbox::new(sandbox_config(self.cache.path(), self.policy)).expect("sandbox");
        install(&sandbox, self.dir(), package.path(), false, &|_| {}).await
    }

    /// Install a hostile guest as an extension, expecting it refused.
    async fn refuse_guest(&self, name: &str, id: &str, tool: &str, extra: &str) -> InstallError {
        match self
            .install(&Package::new(guest(name), id, tool, extra))
            .await
        {
            Ok(_) => panic!("{name} installed under {extra:?}"),
            Err(error) => error,
        }
    }

    /// Install a hostile guest as an extension, expecting success.
    async fn install_guest(&self, name: &str, id: &str, tool: &str, extra: &str) -> Installed {
        self.install(&Package::new(guest(name), id, tool, extra))
            .await
            .unwrap_or_else(|error| panic!("{name} installs: {error}"))
    }

    fn grant_with(&self, id: &str, request: GrantRequest) {
        ExtensionRegistry::update(self.dir(), |registry| {
            registry.grant(id, request).map(|_| ())
        })
        .expect("grant");
    }

    fn grant(&self, id: &str, profiles: Option<&[&Profile]>) {
        ExtensionRegistry::update(self.dir(), |registry| {
            registry
                .grant(
                    id,
                    GrantRequest {
                        profiles: profiles
                            .map(|p| p.iter().map(|profile| profile.version()).collect()),
                        ..GrantRequest::default()
                    },
                )
                .map(|_| ())
        })
        .expect("grant");
    }

    /// A host with no builtins and this registry's extensions.
    async fn host(&self) -> ToolHost {
        let config = ToolHostConfig {
            sandbox: sandbox_config(self.cache.path(), self.policy),
            ..ToolHostConfig::default()
        };
        let registry = ExtensionRegistry::load(self.dir()).expect("registry");
        ToolHost::with_components(config, &[], &|_| {})
            .await
            .expect("host")
            .with_extensions(&registry, &|_| {})
            .await
    }

    fn is_recorded(&self, id: &str) -> bool {
        ExtensionRegistry::load(self.dir())
            .expect("registry")
            .get(id)
            .is_ok()
    }
}

fn id(text: &str) -> ToolId {
    ToolId::parse(text).expect("tool id")
}

async fn call(host: &ToolHost, tool: &str, arguments: Value) -> toolhost_runtime::Execution {
    host.call(
        &ToolCall {
            call_id: "call_1".into(),
            tool_id: id(tool),
            arguments,
            provider_metadata: Value::Null,
        },
        CallEntropy::seeded(7),
    )
    .await
    .expect("executes")
}

fn profile(profile_id: &str, allow: &[&str]) -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": profile_id,
            "tools": {"allow": allow}
        })
        .to_string(),
    )
    .expect("profile")
}

/// The snapshot's tool ids, and each omitted tool's message.
/// A run at `root` with one invocation of `profile` open, for `tenant`
/// (`None`: the local use).
fn open_invocation(
    host: &ToolHost,
    profile: &Profile,
    root: &Path,
    tenant: Option<&str>,
) -> (
    std::sync::Arc<toolhost_runtime::Run>,
    toolhost_runtime::Invocation,
) {
    let run = toolhost_runtime::Run::create(root, profile, toolhost_journal::Durability::Batched)
        .expect("run");
    let session = run
        .start_invocation(
            profile,
            host.snapshot_sources_under(None, tenant),
            "inv_root",
            ExitPolicy::RunFinishAllowed,
        )
        .expect("session");
    (run, session)
}

fn snapshot(host: &ToolHost, profile: &Profile) -> (Vec<String>, Vec<String>) {
    let compiled = compile(
        profile,
        host.snapshot_sources(),
        "inv_root",
        ExitPolicy::RunFinishAllowed,
    )
    .expect("compiles");
    (
        compiled
            .snapshot
            .bindings()
            .iter()
            .map(|binding| binding.tool_id().to_string())
            .collect(),
        compiled
            .diagnostics
            .iter()
            .map(|diagnostic| diagnostic.message.clone())
            .collect(),
    )
}

#[tokio::test]
async fn a_wrong_sha256_is_refused_and_nothing_is_recorded() {
    let world = World::new();
    let package = Package::with_sha(
        guest("stateful"),
        "acme-stateful",
        "hostile.stateful",
        MINIMAL,
        &sha256_hex(b"some other component"),
    );
    let error = world.install(&package).await.expect_err("wrong digest");
    assert_eq!(error.code(), "ext.sha256_mismatch", "{error}");
    assert!(
        error
            .to_string()
            .contains(&sha256_hex(guest("stateful").bytes))
    );
    assert!(!world.is_recorded("acme-stateful"));
}

#[tokio::test]
async fn imports_beyond_the_request_are_refused_and_listed() {
    let world = World::new();
    for (name, tool, import) in [
        ("overreach", "hostile.overreach", "toolhost:host/random@"),
        ("net-probe", "hostile.net_probe", "wasi:sockets/"),
        (
            "foreign-import",
            "hostile.foreign_import",
            "evil:exfil/upload@1.0.0",
        ),
    ] {
        let id = format!("acme-{name}");
        let error = world
            .install(&Package::new(guest(name), &id, tool, MINIMAL))
            .await
            .expect_err(name);
        assert_eq!(error.code(), "ext.imports_not_requested", "{name}: {error}");
        let text = error.to_string();
        assert!(text.contains(import), "{name}: {text}");
        assert!(text.contains("requests only log"), "{name}: {text}");
        assert!(!world.is_recorded(&id), "{name}");
    }
}

#[tokio::test]
async fn workspace_write_is_never_installed_or_granted() {
    let world = World::new();
    let extra = MINIMAL.replace(
        "[\"log\"]",
        "[\"log\", \"workspace-read\", \"workspace-write\"]",
    );
    let error = world
        .install(&Package::new(
            guest("reader-writes"),
            "acme-rw",
            "hostile.reader_writes",
            &extra,
        ))
        .await
        .expect_err("workspace-write");
    assert_eq!(error.code(), "ext.capability_refused", "{error}");
    // Installed with an honest request, it still cannot be granted more.
    let world = World::new();
    world
        .install_guest("stateful", "acme-stateful", "hostile.stateful", MINIMAL)
        .await;
    let error = ExtensionRegistry::update(world.dir(), |registry| {
        registry
            .grant(
                "acme-stateful",
                GrantRequest {
                    capabilities: Some(CapabilitySet::new([
                        Capability::Log,
                        Capability::WorkspaceWrite,
                    ])),
                    ..GrantRequest::default()
                },
            )
            .map(|_| ())
    })
    .expect_err("write");
    assert_eq!(error.code(), "ext.capability_refused");
}

#[tokio::test]
async fn limits_are_held_at_the_policy_cap_whatever_the_manifest_asks() {
    let policy = HostPolicy {
        caps: Limits {
            fuel: Some(100_000_000),
            deadline: Duration::from_secs(2),
            memory_bytes: 32 << 20,
            ..HostPolicy::default().caps
        },
    };
    let world = World::with_policy(policy);
    let greedy = format!(
        "{MINIMAL}[limits]\nfuel = 1_000_000_000_000\ndeadline-ms = 600_000\nmemory-bytes = 4_294_967_296\n"
    );
    let installed = world
        .install_guest("spin", "acme-spin", "hostile.spin", &greedy)
        .await;
    assert_eq!(installed.limits.fuel, Some(100_000_000));
    assert_eq!(installed.limits.deadline, Duration::from_secs(2));
    assert_eq!(installed.limits.memory_bytes, 32 << 20);
    let lowered: Vec<&str> = installed.clamped.iter().map(|c| c.limit).collect();
    assert_eq!(lowered, ["fuel", "deadlineMs", "memoryBytes"]);
    world
        .install_guest("membomb", "acme-membomb", "hostile.membomb", &greedy)
        .await;
    world.grant("acme-spin", None);
    world.grant("acme-membomb", None);

    let host = world.host().await;
    let spin = call(&host, "ext/acme-spin:hostile.spin", json!({})).await;
    assert_eq!(
        spin.result.error_code.as_deref(),
        Some("sandbox.out_of_fuel")
    );
    let report = spin.report.expect("sandbox report");
    assert!(
        (100_000_000..110_000_000).contains(&report.fuel_consumed),
        "{}",
        report.fuel_consumed
    );
    let bomb = call(&host, "ext/acme-membomb:hostile.membomb", json!({})).await;
    assert_eq!(
        bomb.result.error_code.as_deref(),
        Some("sandbox.memory_limit")
    );
    let bomb_report = bomb.report.expect("report");
    assert!(bomb_report.peak_memory_bytes <= 32 << 20);
    eprintln!(
        "extension kill: the fuel cap stopped the loop after {} µs, the memory cap the bomb after {} µs",
        report.elapsed_us, bomb_report.elapsed_us
    );
}

#[tokio::test]
async fn an_ungranted_extension_is_invisible_to_snapshots() {
    let world = World::new();
    world
        .install_guest("stateful", "acme-stateful", "hostile.stateful", MINIMAL)
        .await;
    let tool = "ext/acme-stateful:hostile.stateful";
    let writer = profile("writer", &[tool]);
    let researcher = profile("researcher", &[tool]);

    let host = world.host().await;
    assert!(
        host.catalog().get(&id(tool)).is_none(),
        "not in the catalog"
    );
    let (tools, omitted) = snapshot(&host, &writer);
    assert!(tools.is_empty());
    assert_eq!(omitted.len(), 1);
    assert!(
        omitted[0].starts_with("ext.not_granted: "),
        "{}",
        omitted[0]
    );
    assert_eq!(host.extension_omitted()[0].code, "ext.not_granted");

    world.grant("acme-stateful", Some(&[&researcher]));
    let host = world.host().await;
    assert_eq!(snapshot(&host, &researcher).0, [tool]);
    let (tools, omitted) = snapshot(&host, &writer);
    assert!(tools.is_empty());
    assert!(
        omitted[0].starts_with("ext.not_granted_to_profile"),
        "{}",
        omitted[0]
    );
    // Any profile declaring the id `researcher` used to be covered; now a
    // grant is for the profile's content, so another one is not.
    let impostor = {
        let mut changed = researcher.clone();
        changed.description = Some("declares the granted id, allows more".into());
        changed
    };
    let (tools, omitted) = snapshot(&host, &impostor);
    assert!(tools.is_empty());
    assert!(
        omitted[0].contains("its content has changed since"),
        "{}",
        omitted[0]
    );

    world.grant("acme-stateful", None);
    let host = world.host().await;
    assert_eq!(snapshot(&host, &writer).0, [tool]);
    let item = host
        .catalog_items()
        .into_iter()
        .find(|item| item.id.as_str() == tool)
        .expect("listed");
    assert_eq!(item.source.kind, "extension");
    assert_eq!(item.source.capabilities, ["log"]);

    ExtensionRegistry::update(world.dir(), |registry| {
        registry.revoke("acme-stateful").map(|_| ())
    })
    .expect("revoke");
    assert!(snapshot(&world.host().await, &writer).0.is_empty());
}

#[tokio::test]
async fn a_component_changed_after_install_is_left_out_and_the_rest_serves() {
    let world = World::new();
    world
        .install_guest("stateful", "acme-stateful", "hostile.stateful", MINIMAL)
        .await;
    world
        .install_guest("panic", "acme-panic", "hostile.panic", MINIMAL)
        .await;
    world.grant("acme-stateful", None);
    world.grant("acme-panic", None);
    let registry = ExtensionRegistry::load(world.dir()).expect("registry");
    let stored: PathBuf =
        registry.component_path(registry.get("acme-stateful").expect("installed"));
    std::fs::write(&stored, guest("spin").bytes).expect("swap the stored component");

    let host = world.host().await;
    let omitted = host.extension_omitted();
    assert_eq!(omitted.len(), 1);
    assert_eq!(
        (omitted[0].id.as_str(), omitted[0].code),
        ("acme-stateful", "ext.sha256_mismatch")
    );
    // A panicking extension is a typed failure; the host serves the next call.
    for _ in 0..2 {
        let panic = call(&host, "ext/acme-panic:hostile.panic", json!({})).await;
        assert_eq!(
            panic.result.error_code.as_deref(),
            Some("sandbox.guest_trap")
        );
    }
}

#[tokio::test]
async fn wit_versions_old_minors_install_unknown_majors_are_refused() {
    let world = World::new();
    // Built against the frozen toolhost:host@0.1.0, not the SDK.
    let legacy =
        "capabilities = [\"log\", \"random\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.0\"\n";
    world
        .install_guest("legacy-v010", "acme-legacy", "legacy.draw", legacy)
        .await;
    world.grant("acme-legacy", None);
    let host = world.host().await;
    let draw = call(&host, "ext/acme-legacy:legacy.draw", json!({})).await;
    assert!(!draw.result.is_error, "{}", draw.result.content);

    // The manifest says 0.1.3, the component imports toolhost:host@1.0.0.
    let error = world
        .install(&Package::new(
            guest("future-major"),
            "acme-future",
            "hostile.future_major",
            MINIMAL,
        ))
        .await
        .expect_err("1.0.0");
    assert_eq!(error.code(), "ext.wit_unsupported", "{error}");
    let text = error.to_string();
    assert!(text.contains("toolhost:host/log@1.0.0"), "{text}");
    assert!(text.contains("toolhost:host@0.1.0..=0.1.4"), "{text}");
    // The manifest itself declaring a future major is refused before any load.
    let error = world
        .install(&Package::new(
            guest("stateful"),
            "acme-next",
            "hostile.stateful",
            &MINIMAL.replace("host = \"0.1.3\"", "host = \"2.0.0\""),
        ))
        .await
        .expect_err("2.0.0");
    assert_eq!(error.code(), "ext.wit_unsupported", "{error}");
}

#[tokio::test]
async fn the_manifest_must_name_the_tool_the_component_describes() {
    let world = World::new();
    let error = world
        .install(&Package::new(
            guest("stateful"),
            "acme-stateful",
            "hostile.counter",
            MINIMAL,
        ))
        .await
        .expect_err("mismatch");
    assert_eq!(error.code(), "ext.tools_mismatch", "{error}");
    assert!(error.to_string().contains("hostile.stateful"));
    assert!(!world.is_recorded("acme-stateful"));
}

#[tokio::test]
async fn a_revoke_or_an_upgrade_takes_effect_at_the_next_call_of_a_running_host() {
    let world = World::new();
    world
        .install_guest("stateful", "acme-stateful", "hostile.stateful", MINIMAL)
        .await;
    world.grant("acme-stateful", None);
    let host = world.host().await;
    let tool = "ext/acme-stateful:hostile.stateful";
    assert!(!call(&host, tool, json!({})).await.result.is_error);

    ExtensionRegistry::update(world.dir(), |registry| {
        registry.revoke("acme-stateful").map(|_| ())
    })
    .expect("revoke");
    let revoked = call(&host, tool, json!({})).await;
    assert_eq!(
        revoked.result.error_code.as_deref(),
        Some("ext.not_granted")
    );
    assert!(revoked.report.is_none(), "the component did not run");

    // Upgraded to other code and granted again: this host still holds the
    // old component, and refuses to run either.
    let upgraded = Package::new(guest("panic"), "acme-stateful", "hostile.panic", MINIMAL);
    let sandbox = Sandbox::new(sandbox_config(world.cache.path(), world.policy)).expect("sandbox");
    install(&sandbox, world.dir(), upgraded.path(), true, &|_| {})
        .await
        .expect("upgrade");
    world.grant("acme-stateful", None);
    let changed = call(&host, tool, json!({})).await;
    assert_eq!(changed.result.error_code.as_deref(), Some("ext.changed"));
}

/// A grant narrowed while a host runs (the same component, fewer
/// capabilities): the next call is refused before the component runs, not
/// left calling a capability it no longer has.
#[tokio::test]
async fn a_grant_narrowed_under_a_running_host_refuses_the_next_call() {
    let world = World::new();
    let extra =
        "capabilities = [\"log\", \"workspace-read\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.4\"\n";
    world
        .install_guest("snoop", "acme-snoop", "hostile.snoop", extra)
        .await;
    world.grant("acme-snoop", None);
    let host = world.host().await;
    // `ext grant` refuses a grant its component cannot load under; the
    // registry file edited by hand is not refused when read.
    let file = world
        .dir()
        .join(toolhost_extensions::registry::REGISTRY_FILE);
    let mut registry: Value =
        serde_json::from_slice(&std::fs::read(&file).expect("registry")).expect("json");
    let extension = registry["extensions"]
        .as_array_mut()
        .and_then(|all| all.iter_mut().find(|e| e["id"] == "acme-snoop"))
        .expect("the record");
    extension["grant"]["capabilities"] = json!(["log"]);
    std::fs::write(&file, serde_json::to_vec(&registry).expect("json")).expect("edit");
    let narrowed = call(
        &host,
        "ext/acme-snoop:hostile.snoop",
        json!({"action": "list"}),
    )
    .await;
    assert_eq!(
        narrowed.result.error_code.as_deref(),
        Some("ext.not_granted"),
        "{}",
        narrowed.result.content
    );
    assert!(
        narrowed.result.content.contains("workspace-read"),
        "{}",
        narrowed.result.content
    );
    assert!(narrowed.report.is_none(), "the component did not run");
}

#[tokio::test]
async fn a_component_outside_its_directory_or_not_a_file_is_refused() {
    let world = World::new();
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("evil.wasm"), guest("stateful").bytes).expect("write");
    let package = Package::new(guest("stateful"), "acme-link", "hostile.stateful", MINIMAL);
    std::fs::remove_file(package.path().join("tool.wasm")).expect("remove");
    std::os::unix::fs::symlink(
        outside.path().join("evil.wasm"),
        package.path().join("tool.wasm"),
    )
    .expect("symlink");
    let error = world.install(&package).await.expect_err("outside");
    assert_eq!(error.code(), "ext.manifest_invalid", "{error}");
    assert!(error.to_string().contains("outside"), "{error}");

    let package = Package::new(guest("stateful"), "acme-dir", "hostile.stateful", MINIMAL);
    std::fs::remove_file(package.path().join("tool.wasm")).expect("remove");
    std::fs::create_dir(package.path().join("tool.wasm")).expect("a directory");
    let error = world.install(&package).await.expect_err("directory");
    assert!(error.to_string().contains("not a regular file"), "{error}");
    assert!(!world.is_recorded("acme-link") && !world.is_recorded("acme-dir"));
}

#[tokio::test]
async fn the_manifest_cannot_claim_an_older_wit_than_the_component_imports() {
    let world = World::new();
    // `overreach` imports toolhost:host/random at the SDK's version.
    let claim = "capabilities = [\"log\", \"random\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.0\"\n";
    let error = world
        .install(&Package::new(
            guest("overreach"),
            "acme-old",
            "hostile.overreach",
            claim,
        ))
        .await
        .expect_err("older claim");
    assert_eq!(error.code(), "ext.wit_unsupported", "{error}");
    assert!(
        error
            .to_string()
            .contains("manifest targets toolhost:host@0.1.0"),
        "{error}"
    );
    let honest = claim.replace(
        "host = \"0.1.0\"",
        &format!("host = \"{}\"", toolhost_sandbox::capability::HOST_VERSION),
    );
    let installed = world
        .install(&Package::new(
            guest("overreach"),
            "acme-old",
            "hostile.overreach",
            &honest,
        ))
        .await
        .expect("honest claim");
    assert_eq!(
        installed.extension.host_wit,
        toolhost_sandbox::capability::HOST_VERSION
    );
}

/// Effects are requested through `toolhost:control`, which no extension is
/// granted; an effect left in a tool's output applies nothing.
#[tokio::test]
async fn an_extension_can_neither_request_nor_return_an_effect() {
    let world = World::new();
    let error = world
        .refuse_guest("forger", "acme-forger", "hostile.forger", MINIMAL)
        .await;
    assert_eq!(error.code(), "ext.imports_not_requested", "{error}");
    assert!(
        error.to_string().contains("toolhost:control/effects@0.1.0"),
        "{error}"
    );
    let asks = MINIMAL.replace("[\"log\"]", "[\"log\", \"control\"]");
    let error = world
        .refuse_guest("forger", "acme-forger", "hostile.forger", &asks)
        .await;
    assert_eq!(error.code(), "ext.capability_refused", "{error}");
    assert!(!world.is_recorded("acme-forger"));

    world
        .install_guest("liar", "acme-liar", "hostile.liar", MINIMAL)
        .await;
    world.grant("acme-liar", None);
    let host = world.host().await;
    let forged = call(
        &host,
        "ext/acme-liar:hostile.liar",
        json!({"mode": "effect"}),
    )
    .await;
    assert_eq!(
        forged.result.error_code.as_deref(),
        Some("sandbox.invalid_output")
    );
    assert!(
        forged
            .result
            .content
            .contains("only a builtin control tool"),
        "{}",
        forged.result.content
    );
    assert!(forged.effect.is_none(), "nothing for the host to apply");
}

#[test]
fn concurrent_registry_changes_never_lose_each_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let checked = |id: &str| {
        let manifest: toolhost_extensions::Manifest = toml_manifest(id);
        manifest.check(dir.path().to_owned()).expect("valid")
    };
    std::thread::scope(|scope| {
        for n in 0..8 {
            let checked = checked(&format!("acme-{n}"));
            let dir = dir.path();
            scope.spawn(move || {
                ExtensionRegistry::update(dir, |registry| {
                    registry
                        .install(
                            &checked,
                            format!("component {n}").as_bytes(),
                            vec!["hostile.stateful".into()],
                            &CapabilitySet::new([Capability::Log]),
                            false,
                        )
                        .map(|_| ())
                })
                .expect("install");
            });
        }
    });
    let registry = ExtensionRegistry::load(dir.path()).expect("registry");
    assert_eq!(registry.extensions().len(), 8, "every install was kept");
}

fn toml_manifest(id: &str) -> toolhost_extensions::Manifest {
    toml::from_str(&format!(
        "id = \"{id}\"\nversion = \"1.0.0\"\ndescription = \"d\"\ncomponent = \"c.wasm\"\n\
         sha256 = \"{}\"\ntools = [\"hostile.stateful\"]\n{MINIMAL}",
        sha256_hex(b"x")
    ))
    .expect("manifest")
}

#[tokio::test]
async fn an_extension_is_charged_for_every_skill_character_it_reads() {
    use std::sync::Arc;
    use toolhost_capabilities::{BindInputs, CallGrant, CallScope, InvocationBound, RunContext};
    use toolhost_sandbox::{ComponentSpec, LimitOverrides, Trust};
    use toolhost_skills::{Scope, SkillLibrary, SkillSource};

    // The builtin `skill.read` component, installed as a third-party extension.
    let component = toolhost_conformance::builtin("skill-read");
    let world = World::new();
    let extra =
        "capabilities = [\"log\", \"skill-read\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.4\"\n";
    world
        .install(&Package::new(component, "acme-skills", "skill.read", extra))
        .await
        .expect("skill-read is grantable");
    world.grant("acme-skills", None);
    let host = world.host().await;
    let as_extension = host
        .component(&id("ext/acme-skills:skill.read"))
        .await
        .expect("loads")
        .expect("loaded");
    let as_builtin = host
        .sandbox()
        .load(
            ComponentSpec {
                label: "skill-read",
                bytes: component.bytes,
                expected_sha256: Some(component.sha256_hex),
                provider: toolhost_core::ToolProvider::Builtin,
                grant: CapabilitySet::for_world(component.world).expect("world"),
                limits: LimitOverrides::default(),
                trust: Trust::Builtin,
            },
            &|_| {},
        )
        .await
        .expect("builtin");

    let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/skills/global");
    let library = Arc::new(
        SkillLibrary::load(&[SkillSource::new(Scope::Global, skills.clone())]).expect("library"),
    );
    let whole = std::fs::read_to_string(skills.join("prose-style/SKILL.md"))
        .expect("skill")
        .chars()
        .count() as u64;
    async fn charged_by(
        sandbox: &Sandbox,
        tool: &toolhost_sandbox::ToolComponent,
        library: Arc<SkillLibrary>,
    ) -> u64 {
        let profile = Profile::from_json(
            &json!({
                "schemaVersion": 1,
                "kind": "toolhost.agentProfile",
                "id": "reader",
                "tools": {"allow": ["skill.read"]},
                "skills": {"visible": ["*"], "maxReadCharsPerCall": 100_000,
                           "maxReadCharsPerRun": 100_000}
            })
            .to_string(),
        )
        .expect("profile");
        let bound = InvocationBound::bind(&BindInputs {
            run: Some(Arc::new(RunContext::none().with_skills(library))),
            profile: Some(Arc::new(profile)),
            ..BindInputs::default()
        });
        let grant = CallGrant::of(tool, true);
        bound.begin(&CallScope::default());
        let capabilities = bound.prepare(&grant).expect("prepared");
        let report = sandbox
            .call_under(
                tool,
                tool.limits(),
                &json!({"name": "prose-style", "line_count": 1}),
                CallEntropy::seeded(1),
                capabilities,
            )
            .await;
        assert!(report.result.is_ok(), "{:?}", report.result);
        bound.settle().skill_read_chars
    }
    let builtin_charge = charged_by(host.sandbox(), &as_builtin, Arc::clone(&library)).await;
    let extension_charge = charged_by(host.sandbox(), as_extension, library).await;
    assert!(
        builtin_charge > 0 && builtin_charge < whole,
        "a builtin is charged what it shows: {builtin_charge}"
    );
    assert_eq!(
        extension_charge, whole,
        "an extension is charged all it read"
    );
}

/// The review's two findings about `workspace-read` for extensions: it
/// showed `tool-results/` (other calls' chat text, skill text, MCP output),
/// and `record-read` let an extension forge the read-state that authorizes
/// `workspace.write_file` to replace a file.
#[tokio::test]
async fn an_extension_sees_tool_results_only_when_granted_and_never_records_reads() {
    use std::sync::Arc;
    use toolhost_capabilities::{BindInputs, InvocationBound};
    use toolhost_runtime::ToolExecutor;
    use toolhost_workspace::{Workspace, WorkspaceLimits, WorkspaceRoots, WorkspaceSession};

    let world = World::new();
    let extra =
        "capabilities = [\"log\", \"workspace-read\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.4\"\n";
    world
        .install(&Package::new(
            guest("snoop"),
            "acme-snoop",
            "hostile.snoop",
            extra,
        ))
        .await
        .expect("installs");
    world.grant("acme-snoop", None);

    let run = tempfile::tempdir().expect("run dir");
    for dir in ["output", "tool-results", ".tmp"] {
        std::fs::create_dir_all(run.path().join(dir)).expect("root");
    }
    std::fs::write(
        run.path().join("tool-results/call_secret.json"),
        "{\"content\":\"the chat's private text\"}",
    )
    .expect("a stored result");
    std::fs::write(run.path().join("output/draft.md"), "the model's draft\n").expect("draft");
    let workspace = Workspace::open(
        run.path(),
        WorkspaceRoots::default_run(),
        WorkspaceLimits::default(),
    )
    .expect("workspace");
    // The model's invocation session: what it has read authorizes writes.
    let session = Arc::new(WorkspaceSession::new(Arc::new(workspace)));

    let host = world.host().await;
    let tool = "ext/acme-snoop:hostile.snoop";
    let snapshot = compile(
        &profile("writer", &[tool]),
        host.snapshot_sources(),
        "inv_root",
        ExitPolicy::RunFinishAllowed,
    )
    .expect("snapshot")
    .snapshot;
    let binding = snapshot.bindings()[0].clone();
    let snoop = |arguments: Value| {
        let (host, binding, session) = (&host, &binding, Arc::clone(&session));
        async move {
            let execution = ToolExecutor::execute(
                host,
                &ToolCall {
                    call_id: "call_1".into(),
                    tool_id: id(tool),
                    arguments,
                    provider_metadata: Value::Null,
                },
                binding,
                CallEntropy::seeded(1),
                toolhost_runtime::CallContext {
                    bound: Arc::new(InvocationBound::bind(&BindInputs {
                        workspace: Some(session),
                        ..BindInputs::default()
                    })),
                    views: None,
                    replaying: false,
                },
            )
            .await
            .expect("executes");
            execution.result.content
        }
    };

    let read = snoop(json!({"action": "read", "path": "tool-results/call_secret.json"})).await;
    assert!(
        read.contains("refused: workspace.path_not_visible"),
        "{read}"
    );
    let listed = snoop(json!({"action": "list"})).await;
    assert!(listed.contains("output/draft.md"), "{listed}");
    assert!(!listed.contains("tool-results"), "{listed}");

    let forged = snoop(json!({"action": "record", "path": "output/draft.md"})).await;
    assert!(
        forged.contains("refused: workspace.read_state_refused"),
        "{forged}"
    );
    assert_eq!(session.read_state("output/draft.md"), None);
    // So the model still cannot replace a file it never read.
    let error = session
        .write(
            "output/draft.md",
            "overwritten",
            toolhost_workspace::WriteMode::Replace,
        )
        .expect_err("not read by the model");
    assert_eq!(error.code(), "workspace.write_requires_read");

    // Granted explicitly, the results are readable (the grant is read at
    // every call: no new host needed).
    world.grant_with(
        "acme-snoop",
        GrantRequest {
            tool_results: true,
            ..GrantRequest::default()
        },
    );
    let read = snoop(json!({"action": "read", "path": "tool-results/call_secret.json"})).await;
    assert!(read.contains("the chat's private text"), "{read}");
    // Now it shares the model's own session: its reads still never count.
    let forged = snoop(json!({"action": "record", "path": "output/draft.md"})).await;
    assert!(
        forged.contains("refused: workspace.read_state_refused"),
        "{forged}"
    );
    assert_eq!(session.read_state("output/draft.md"), None);
}

/// Outbound HTTP: an extension granted `outbound-http` reaches the hosts
/// its grant lists, through a real loopback server, and nothing else.
mod outbound_http {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use toolhost_core::allowed_hosts::AllowedHosts;

    use super::*;

    /// Each request's path and `authorization` header, as a server got them.
    type Seen = std::sync::Mutex<Vec<(String, Option<String>)>>;

    /// A loopback HTTP/1.1 server for one test; it stops when dropped.
    struct Server {
        port: u16,
        stop: Arc<AtomicBool>,
        /// Each request's path and `authorization` header, as received.
        seen: Arc<Seen>,
    }

    impl Server {
        fn start() -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
            let port = listener.local_addr().expect("address").port();
            let stop = Arc::new(AtomicBool::new(false));
            let stopped = Arc::clone(&stop);
            let seen = Arc::default();
            let log = Arc::clone(&seen);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let log = Arc::clone(&log);
                        std::thread::spawn(move || answer(stream, port, &log));
                    }
                }
            });
            Self { port, stop, seen }
        }

        fn seen(&self) -> Vec<(String, Option<String>)> {
            self.seen.lock().expect("log").clone()
        }

        fn url(&self, path: &str) -> String {
            format!("http://127.0.0.1:{}{path}", self.port)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            // Wake the accept loop so it sees the flag.
            let _ = TcpStream::connect(("127.0.0.1", self.port));
        }
    }

    fn answer(stream: TcpStream, port: u16, seen: &Seen) {
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).is_err() {
            return;
        }
        let mut line = String::new();
        let mut authorization = None;
        while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("authorization")
            {
                authorization = Some(value.trim().to_owned());
            }
            line.clear();
        }
        let path = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
        seen.lock()
            .expect("log")
            .push((path.clone(), authorization));
        let mut stream = stream;
        if let Some(to) = path.strip_prefix("/to-port-") {
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{to}/hello\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
            return;
        }
        let _ = match path.as_str() {
            "/hello" => stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 19\r\nconnection: close\r\n\r\nhello from loopback",
            ),
            "/to-hello" => stream.write_all(
                format!(
                    "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{port}/hello\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                )
                .as_bytes(),
            ),
            "/to-unlisted" => stream.write_all(
                b"HTTP/1.1 302 Found\r\nlocation: http://unlisted.example/steal\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            ),
            // No length: the body runs until the connection closes, so
            // only counting the bytes can stop it.
            "/huge" => (|| {
                stream.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n")?;
                let chunk = vec![b'x'; 64 * 1024];
                for _ in 0..(9 * 16) {
                    stream.write_all(&chunk)?;
                }
                Ok(())
            })(),
            "/slow" => {
                std::thread::sleep(Duration::from_secs(3));
                stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nlate")
            }
            _ => stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"),
        };
    }

    const TOOL: &str = "ext/acme-fetch:hostile.http_fetch";

    fn manifest(hosts: &[&str]) -> String {
        let hosts: Vec<String> = hosts.iter().map(|host| format!("\"{host}\"")).collect();
        format!(
            "capabilities = [\"log\", \"outbound-http\"]\nallowed-hosts = [{}]\n\
             [wit]\ntool = \"0.1.0\"\nhost = \"0.1.3\"\n[limits]\ndeadline-ms = 1_000\n",
            hosts.join(", ")
        )
    }

    async fn granted(hosts: &[&str], grant: Option<&[&str]>) -> (World, ToolHost) {
        let world = World::new();
        world
            .install_guest(
                "http-fetch",
                "acme-fetch",
                "hostile.http_fetch",
                &manifest(hosts),
            )
            .await;
        world.grant_with(
            "acme-fetch",
            GrantRequest {
                allowed_hosts: grant.map(|hosts| {
                    AllowedHosts::new(hosts.iter().map(|host| host.parse().expect("pattern")))
                }),
                ..GrantRequest::default()
            },
        );
        let host = world.host().await;
        (world, host)
    }

    async fn fetch(host: &ToolHost, arguments: Value) -> (Option<String>, String) {
        let execution = call(host, TOOL, arguments).await;
        (execution.result.error_code, execution.result.content)
    }

    #[tokio::test]
    async fn wasi_http_is_refused_unless_requested_and_sockets_always() {
        let world = World::new();
        let error = world
            .refuse_guest("http-fetch", "acme-fetch", "hostile.http_fetch", MINIMAL)
            .await;
        assert_eq!(error.code(), "ext.imports_not_requested", "{error}");
        assert!(
            error.to_string().contains("wasi:http/outgoing-handler@0.2"),
            "{error}"
        );
        // Asking for outbound-http does not bring wasi:sockets with it.
        let error = world
            .refuse_guest(
                "net-probe",
                "acme-net",
                "hostile.net_probe",
                &manifest(&["http://127.0.0.1:*"]),
            )
            .await;
        assert!(error.to_string().contains("wasi:sockets/"), "{error}");
        // Hosts go with the capability, and the capability with hosts.
        for extra in [
            "capabilities = [\"log\", \"outbound-http\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.3\"\n",
            "capabilities = [\"log\"]\nallowed-hosts = [\"api.example.com\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.3\"\n",
            "capabilities = [\"log\", \"outbound-http\"]\nallowed-hosts = [\"api.example.com/path\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.3\"\n",
        ] {
            let error = world
                .refuse_guest("http-fetch", "acme-fetch", "hostile.http_fetch", extra)
                .await;
            assert_eq!(error.code(), "ext.manifest_invalid", "{error}");
        }
    }

    #[tokio::test]
    async fn a_grant_gives_a_subset_of_the_requested_hosts() {
        let world = World::new();
        world
            .install_guest(
                "http-fetch",
                "acme-fetch",
                "hostile.http_fetch",
                &manifest(&["*.example.com", "http://127.0.0.1:*"]),
            )
            .await;
        let grant = |hosts: &[&str]| {
            ExtensionRegistry::update(world.dir(), |registry| {
                registry
                    .grant(
                        "acme-fetch",
                        GrantRequest {
                            allowed_hosts: Some(AllowedHosts::new(
                                hosts.iter().map(|host| host.parse().expect("pattern")),
                            )),
                            ..GrantRequest::default()
                        },
                    )
                    .map(|extension| extension.grant.clone())
            })
        };
        let narrowed = grant(&["api.example.com", "http://127.0.0.1:8080"])
            .expect("a subset")
            .expect("granted");
        assert_eq!(
            narrowed.allowed_hosts().to_string(),
            "http://127.0.0.1:8080, https://api.example.com"
        );
        for beyond in [&["example.com"][..], &["http://10.0.0.1:80"], &[]] {
            let error = grant(beyond).expect_err("beyond the request");
            assert_eq!(error.code(), "ext.grant_invalid", "{error}");
        }
    }

    /// The seed's network case: a policy can make every call of an
    /// extension granted outbound HTTP wait for a person. The decision is
    /// frozen into the snapshot; with no one to ask the call is denied and
    /// never reaches the network, approved it fetches.
    #[tokio::test]
    async fn a_policy_makes_an_http_extensions_calls_wait_for_approval() {
        use toolhost_core::policy::{Policies, ToolPolicy};
        use toolhost_runtime::Run;
        use toolhost_runtime::approval::Answer;

        let server = Server::start();
        let (_world, host) = granted(&["http://127.0.0.1:*"], None).await;
        let platform = ToolPolicy::from_json(
            r#"{"schemaVersion":1,"kind":"toolhost.toolPolicy","requireApproval":["ext/acme-fetch:*"]}"#,
            "platform",
        )
        .expect("policy");
        let host = host.with_policies(Policies {
            user: None,
            platform: Some(platform),
        });
        let profile = profile("fetcher", &[TOOL]);
        let dir = tempfile::tempdir().expect("tempdir");
        let mut fetches = Vec::new();
        for (name, approve) in [("nobody", false), ("approved", true)] {
            let run = Run::create(
                &dir.path().join(name),
                &profile,
                toolhost_journal::Durability::Batched,
            )
            .expect("run");
            if approve {
                run.set_approver(Arc::new(Answer::allow("the test")));
            }
            let mut session = run
                .start_invocation(
                    &profile,
                    host.snapshot_sources(),
                    "inv_root",
                    ExitPolicy::RunFinishAllowed,
                )
                .expect("session");
            let binding = session.snapshot().binding(&id(TOOL)).expect("offered");
            assert!(
                binding
                    .approval
                    .as_deref()
                    .is_some_and(|why| why.contains("platform policy asks")),
                "{binding:?}"
            );
            let outcome = session
                .call_directly(
                    &host,
                    TESTER,
                    &id(TOOL),
                    Some(json!({"url": server.url("/hello")})),
                    CallEntropy::seeded(1),
                )
                .await
                .expect("a call");
            let journal = std::fs::read_to_string(dir.path().join(name).join("events.jsonl"))
                .expect("journal");
            fetches.push((
                outcome.result.error_code.clone(),
                journal.contains("tool_call_started"),
            ));
        }
        assert_eq!(
            fetches,
            [
                (Some("agent.tool_denied_by_user".to_owned()), false),
                (None, true)
            ]
        );
    }

    #[tokio::test]
    async fn a_granted_host_answers_and_every_other_way_out_is_a_clear_error() {
        let server = Server::start();
        let (_world, host) = granted(&["http://127.0.0.1:*", "http://localhost:*"], None).await;

        let (error, text) = fetch(&host, json!({"url": server.url("/hello")})).await;
        assert_eq!(error, None, "{text}");
        assert!(text.contains("200 19 bytes"), "{text}");
        assert!(text.contains("hello from loopback"), "{text}");

        // A redirect within the grant is followed, hop by hop.
        let (error, text) = fetch(&host, json!({"url": server.url("/to-hello")})).await;
        assert_eq!(error, None, "{text}");
        assert!(text.contains("hello from loopback"), "{text}");

        for (arguments, code, says) in [
            // Not granted at all.
            (
                json!({"url": "http://unlisted.example/"}),
                "http.denied",
                "unlisted.example",
            ),
            // Granted by scheme and host, not by this scheme.
            (
                json!({"url": format!("https://127.0.0.1:{}/hello", server.port)}),
                "http.denied",
                "https://127.0.0.1",
            ),
            // A redirect out of the grant is refused at its hop.
            (
                json!({"url": server.url("/to-unlisted")}),
                "http.denied",
                "unlisted.example/steal",
            ),
            (
                json!({"url": server.url("/huge")}),
                "http.response_too_large",
                "larger than the host allows",
            ),
            (
                json!({"url": server.url("/hello"), "times": 17}),
                "http.too_many_requests",
                "16 HTTP requests",
            ),
            (
                json!({"url": server.url("/slow")}),
                "sandbox.deadline_exceeded",
                "",
            ),
        ] {
            let (error, text) = fetch(&host, arguments.clone()).await;
            assert_eq!(error.as_deref(), Some(code), "{arguments}: {text}");
            assert!(text.contains(says), "{arguments}: {text}");
        }
    }

    /// The rolling hash the http-fetch guest computes over its memory.
    fn rolling_hash(bytes: &[u8]) -> u64 {
        bytes.iter().fold(0u64, |h, b| {
            h.wrapping_mul(1_000_003).wrapping_add(u64::from(*b))
        })
    }

    /// Issue 42's secrets: a stored secret reaches only its host's requests,
    /// in the header named, after admission; a redirect elsewhere carries
    /// none; the guest's memory, the run's files and the journal never hold
    /// the value, and the journal names the secret.
    #[tokio::test]
    async fn a_secret_reaches_only_its_hosts_requests_and_nothing_the_run_wrote() {
        use toolhost_extensions::{SecretBinding, SecretStore, SecretValue};

        let api = Server::start();
        let elsewhere = Server::start();
        // Unguessable, so no other byte sequence in a file matches it by chance.
        let nonce = format!("{:?} {}", std::time::SystemTime::now(), std::process::id());
        let value = format!("thsk-{}", &sha256_hex(nonce.as_bytes())[..32]);
        let world = World::new();
        let extra = format!(
            "{}[secrets.API_KEY]\ndescription = \"The API's key\"\nhost = \"http://127.0.0.1:{}\"\nheader = \"authorization\"\nformat = \"Bearer {{}}\"\n",
            manifest(&["http://127.0.0.1:*"]),
            api.port
        );
        world
            .install_guest("http-fetch", "acme-fetch", "hostile.http_fetch", &extra)
            .await;
        SecretStore::of_registry(world.dir())
            .set(
                None,
                "acme-key",
                &SecretValue::new(value.as_bytes()).expect("value"),
            )
            .expect("stored");
        let binding = SecretBinding {
            key: "API_KEY".into(),
            secret: "acme-key".into(),
            host: format!("http://127.0.0.1:{}", api.port)
                .parse()
                .expect("pattern"),
            header: "authorization".into(),
            format: "Bearer {}".into(),
        };
        // A key the manifest does not ask for, a header that routes the
        // request, a host beyond the grant, any port: refused.
        for bad in [
            SecretBinding {
                key: "OTHER".into(),
                ..binding.clone()
            },
            SecretBinding {
                host: "http://127.0.0.1:*".parse().expect("pattern"),
                ..binding.clone()
            },
            SecretBinding {
                header: "host".into(),
                ..binding.clone()
            },
            SecretBinding {
                host: "api.example.com".parse().expect("pattern"),
                ..binding.clone()
            },
        ] {
            let error = ExtensionRegistry::update(world.dir(), |registry| {
                registry
                    .grant(
                        "acme-fetch",
                        GrantRequest {
                            secrets: vec![bad.clone()],
                            ..GrantRequest::default()
                        },
                    )
                    .map(|_| ())
            })
            .expect_err("refused");
            assert_eq!(error.code(), "ext.grant_invalid", "{bad:?}: {error}");
        }
        // First granted with no secret: a run whose call to the API
        // carries none, for the replay below.
        world.grant_with("acme-fetch", GrantRequest::default());
        let host = world.host().await;
        let profile = profile("fetcher", &[TOOL]);
        let dir = tempfile::tempdir().expect("tempdir");
        let before_binding = dir.path().join("before-binding");
        let (unbound, mut session) = open_invocation(&host, &profile, &before_binding, None);
        let outcome = session
            .call_directly(
                &host,
                TESTER,
                &id(TOOL),
                Some(json!({"url": api.url("/hello")})),
                CallEntropy::seeded(1),
            )
            .await
            .expect("a call");
        assert!(!outcome.result.is_error, "{}", outcome.result.content);
        drop(session);
        unbound.complete().expect("ended");
        let _ = api.seen.lock().expect("log").drain(..);
        world.grant_with(
            "acme-fetch",
            GrantRequest {
                secrets: vec![binding],
                ..GrantRequest::default()
            },
        );
        let root = dir.path().join("run");
        let (run, mut session) = open_invocation(&host, &profile, &root, None);
        let scan = json!({"len": value.len(), "hash": rolling_hash(value.as_bytes())});
        let mut answers = Vec::new();
        for url in [
            api.url("/hello"),
            api.url(&format!("/to-port-{}", elsewhere.port)),
        ] {
            let outcome = session
                .call_directly(
                    &host,
                    TESTER,
                    &id(TOOL),
                    Some(json!({"url": url, "scan": scan})),
                    CallEntropy::seeded(1),
                )
                .await
                .expect("a call");
            answers.push(outcome.result.content.clone());
        }
        drop(session);
        run.complete().expect("ended");

        let bearer = format!("Bearer {value}");
        assert_eq!(
            api.seen(),
            [
                ("/hello".to_owned(), Some(bearer.clone())),
                (format!("/to-port-{}", elsewhere.port), Some(bearer)),
            ],
            "the secret's host got it, in its header"
        );
        assert_eq!(
            elsewhere.seen(),
            [("/hello".to_owned(), None)],
            "the redirect's target got none"
        );
        for answer in &answers {
            assert!(answer.contains("hello from loopback"), "{answer}");
            assert!(
                answer.ends_with("memory matches: 0"),
                "the guest never held it: {answer}"
            );
        }
        // The scan can find what is there: the guest's own response text.
        let probe = b"hello from loopback";
        let outcome = call(&host, TOOL, json!({"url": api.url("/hello"), "scan": {"len": probe.len(), "hash": rolling_hash(probe)}})).await;
        assert!(
            !outcome.result.content.ends_with("memory matches: 0"),
            "{}",
            outcome.result.content
        );

        let mut files = 0;
        for path in walk(&root) {
            files += 1;
            let bytes = std::fs::read(&path).expect("read");
            assert!(
                !contains(&bytes, value.as_bytes()),
                "{} holds the secret",
                path.display()
            );
        }
        assert!(files > 2, "the run wrote files");
        let registry = std::fs::read(world.dir().join("extensions.json")).expect("registry");
        assert!(!contains(&registry, value.as_bytes()));
        let journal = std::fs::read_to_string(root.join("events.jsonl")).expect("journal");
        assert!(
            journal.contains("\"secret\":\"acme-key\""),
            "the journal names the secret: {journal}"
        );

        // A replay takes those calls from the record: nothing is sent
        // again, with this machine's secret or any other.
        let before = api.seen().len();
        std::thread::sleep(Duration::from_millis(5));
        let report = toolhost_runtime::replay_run(&host, &root, &dir.path().join("scratch"))
            .await
            .expect("replayed");
        assert_eq!(report.from_record, 2, "{report:?}");
        assert_eq!(api.seen().len(), before, "the replay sent a request again");
        // A call that carried no secret is run again, with none bound now:
        // a replay acts with nobody's credential.
        toolhost_runtime::replay_run(&host, &before_binding, &dir.path().join("scratch-2"))
            .await
            .expect("replayed");
        assert_eq!(
            api.seen()[before..],
            [("/hello".to_owned(), None)],
            "the replay's request carried no secret"
        );

        // A served tenant's run reads the tenant's own value, never the
        // local one: none stored is a recoverable refusal naming the fix.
        let tenant_call = |name: &'static str| {
            let host = &host;
            let profile = &profile;
            let root = dir.path().join(name);
            let url = api.url("/hello");
            async move {
                let (_run, mut session) = open_invocation(host, profile, &root, Some("acme"));
                let outcome = session
                    .call_directly(
                        host,
                        TESTER,
                        &id(TOOL),
                        Some(json!({"url": url})),
                        CallEntropy::seeded(1),
                    )
                    .await
                    .expect("a call");
                (
                    outcome.result.error_code.clone(),
                    outcome.result.content.clone(),
                )
            }
        };
        let (code, text) = tenant_call("acme-unset").await;
        assert_eq!(code.as_deref(), Some("secret.not_set"), "{text}");
        assert!(
            text.contains("--tenant acme") && !text.contains(&value),
            "{text}"
        );
        let acme_value = format!("{value}-acme");
        SecretStore::of_registry(world.dir())
            .set(
                Some("acme"),
                "acme-key",
                &SecretValue::new(acme_value.as_bytes()).expect("value"),
            )
            .expect("stored");
        let (code, text) = tenant_call("acme-set").await;
        assert_eq!(code, None, "{text}");
        assert_eq!(
            api.seen()
                .last()
                .and_then(|(_, authorization)| authorization.clone()),
            Some(format!("Bearer {acme_value}")),
            "the tenant's own value"
        );
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack
            .windows(needle.len())
            .any(|window| window == needle)
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }

    /// A name reaches only public addresses; the loopback address a name
    /// resolves (or rebinds) to is reachable only when granted as a literal.
    #[tokio::test]
    async fn a_name_resolving_to_loopback_reaches_it_only_when_the_address_is_granted() {
        let server = Server::start();
        let by_name = format!("http://localhost:{}/hello", server.port);
        let (_world, host) = granted(&["http://localhost:*"], None).await;
        let (error, text) = fetch(&host, json!({"url": by_name})).await;
        assert_eq!(error.as_deref(), Some("http.denied"), "{text}");
        assert!(text.contains("localhost"), "{text}");

        let (_world, host) = granted(&["http://localhost:*", "http://127.0.0.1:*"], None).await;
        let (error, text) = fetch(&host, json!({"url": by_name})).await;
        assert_eq!(error, None, "{text}");
        assert!(text.contains("hello from loopback"), "{text}");
    }

    #[tokio::test]
    async fn a_grant_narrowed_by_hand_takes_effect_at_the_next_call() {
        let server = Server::start();
        let (world, host) = granted(&["http://127.0.0.1:*"], None).await;
        let (error, text) = fetch(&host, json!({"url": server.url("/hello")})).await;
        assert_eq!(error, None, "{text}");
        // The registry file edited by hand to another port.
        let file = world
            .dir()
            .join(toolhost_extensions::registry::REGISTRY_FILE);
        let mut registry: Value =
            serde_json::from_slice(&std::fs::read(&file).expect("registry")).expect("json");
        registry["extensions"][0]["grant"]["allowedHosts"] = json!(["http://127.0.0.1:1"]);
        std::fs::write(&file, serde_json::to_vec(&registry).expect("json")).expect("edit");
        let (error, text) = fetch(&host, json!({"url": server.url("/hello")})).await;
        assert_eq!(error.as_deref(), Some("http.denied"), "{text}");
    }
}

/// The `clock` capability (`toolhost:clock`): granted like any other, and
/// every reading recorded with the call so a replay reads the same.
mod clock {
    use std::time::{SystemTime, UNIX_EPOCH};

    use toolhost_capabilities::{BindInputs, CallGrant, CallScope, InvocationBound};
    use toolhost_core::ToolOutcome;

    use super::*;

    const TOOL: &str = "ext/acme-clock:hostile.clock_reader";
    const GRANTED: &str =
        "capabilities = [\"log\", \"clock\"]\n[wit]\ntool = \"0.1.0\"\nhost = \"0.1.4\"\n";

    /// A host with the clock reader installed and granted.
    async fn granted() -> (World, ToolHost) {
        let world = World::new();
        world
            .install_guest(
                "clock-reader",
                "acme-clock",
                "hostile.clock_reader",
                GRANTED,
            )
            .await;
        world.grant("acme-clock", None);
        let host = world.host().await;
        (world, host)
    }

    /// What the journal records of the reader's four readings (now,
    /// elapsed, elapsed, now): each function's in order.
    fn recorded(read: &[u64]) -> Value {
        json!({"nowMs": [read[0], read[3]], "elapsedNs": [read[1], read[2]]})
    }

    fn readings(outcome: ToolOutcome) -> Vec<u64> {
        let ToolOutcome::Success(success) = outcome else {
            panic!("the clock reader failed: {outcome:?}");
        };
        serde_json::from_str(&success.content).expect("readings")
    }

    #[tokio::test]
    async fn the_clock_is_refused_unless_requested() {
        let world = World::new();
        let error = world
            .refuse_guest(
                "clock-reader",
                "acme-clock",
                "hostile.clock_reader",
                MINIMAL,
            )
            .await;
        assert_eq!(error.code(), "ext.imports_not_requested", "{error}");
    }

    #[tokio::test]
    async fn a_granted_tool_reads_the_time_and_a_replay_reads_it_again() {
        let (_world, host) = granted().await;

        // Outside an invocation: the machine's time, nothing recorded.
        let execution = call(&host, TOOL, json!({})).await;
        assert_eq!(
            execution.result.error_code, None,
            "{}",
            execution.result.content
        );
        let read: Vec<u64> = serde_json::from_str(&execution.result.content).expect("readings");
        let [now, first, second, later] = read[..] else {
            panic!("four readings: {read:?}");
        };
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as u64;
        assert!(
            now <= later && later <= wall && wall - now < 60_000,
            "{now} {later} {wall}"
        );
        assert!(first <= second, "elapsed never decreases: {first} {second}");

        // In an invocation: the readings settle into what the journal keeps.
        let component = host
            .component(&id(TOOL))
            .await
            .expect("loads")
            .expect("loaded");
        let bound = InvocationBound::bind(&BindInputs::default());
        let run = |scope: CallScope| {
            bound.begin(&scope);
            let capabilities = bound
                .prepare(&CallGrant::of(component, true))
                .expect("prepared");
            async {
                let report = host
                    .sandbox()
                    .call_under(
                        component,
                        component.limits(),
                        &json!({}),
                        CallEntropy::seeded(3),
                        capabilities,
                    )
                    .await;
                (readings(report.outcome()), bound.settle())
            }
        };
        let (read, settled) = run(CallScope::default()).await;
        assert_eq!(settled.recorded["clock"], recorded(&read));
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (again, _) = run(CallScope {
            recorded: settled.recorded.clone(),
            ..CallScope::default()
        })
        .await;
        assert_eq!(again, read, "a replay reads the recorded time");
    }

    #[tokio::test]
    async fn a_run_journals_its_clock_readings_and_its_replay_is_identical() {
        use toolhost_journal::Event as _;
        use toolhost_runtime::replay_run;

        let (_world, host) = granted().await;
        let profile = profile("timekeeper", &[TOOL]);
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("run");
        let (run, mut session) = open_invocation(&host, &profile, &root, None);
        let caller = TESTER;
        let outcome = session
            .call_directly(
                &host,
                caller,
                &id(TOOL),
                Some(json!({})),
                CallEntropy::seeded(3),
            )
            .await
            .expect("a call");
        assert!(!outcome.result.is_error, "{}", outcome.model_text());
        let read: Vec<u64> = serde_json::from_str(&outcome.result.content).expect("readings");
        drop(session);
        run.complete().expect("ended");

        let events = toolhost_journal::read_events(root.join("events.jsonl")).expect("journal");
        let completed = events
            .iter()
            .find(|event| event.r#type == toolhost_journal::ToolCallCompleted::TYPE)
            .expect("the call completed");
        assert_eq!(completed.payload["recorded"]["clock"], recorded(&read));

        std::thread::sleep(std::time::Duration::from_millis(5));
        let report = replay_run(&host, &root, &dir.path().join("scratch"))
            .await
            .expect("replayed");
        assert_eq!((report.identical, report.different), (1, 0), "{report:?}");
    }
}

/// Guests written in JavaScript (tests/guests-js, built with jco and QuickJS,
/// the `ext new --lang js` default engine): the default limits stop a
/// runaway loop and a memory bomb with the typed errors every other guest
/// gets, and the build's pre-initialized snapshot keeps top-level work out
/// of every call.
mod javascript {
    use std::sync::OnceLock;

    use super::*;

    /// The guests, built once per test binary into the target's temp dir;
    /// `None` (the tests skip) where npm's packages are not installed,
    /// which CI's `make setup` always does.
    fn built() -> Option<&'static Path> {
        static BUILT: OnceLock<Option<PathBuf>> = OnceLock::new();
        BUILT
            .get_or_init(|| {
                let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
                let jco = root.join("examples/extensions/fetch-js/node_modules/.bin/jco");
                if !jco.is_file() {
                    assert!(
                        std::env::var_os("CI").is_none(),
                        "{} is missing although CI ran make setup",
                        jco.display()
                    );
                    eprintln!("SKIPPED: {} is missing (run `make setup`)", jco.display());
                    return None;
                }
                let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("js-guests");
                let status = std::process::Command::new("sh")
                    .arg(root.join("tests/guests-js/build.sh"))
                    .arg(&out)
                    .env("JCO", &jco)
                    .status()
                    .expect("run build.sh");
                assert!(status.success(), "the JS guests build");
                Some(out)
            })
            .as_deref()
    }

    /// One built guest installed as its manifest says, sealed with its
    /// digest, and granted.
    async fn installed(name: &str) -> Option<(World, ToolHost)> {
        let dir = built()?.join(name);
        let bytes = std::fs::read(dir.join("tool.wasm")).expect("component");
        let manifest = std::fs::read_to_string(dir.join("toolhost-extension.toml"))
            .expect("manifest")
            .replace(&"0".repeat(64), &sha256_hex(&bytes));
        let package = tempfile::tempdir().expect("tempdir");
        std::fs::write(package.path().join("tool.wasm"), &bytes).expect("component");
        std::fs::write(package.path().join("toolhost-extension.toml"), manifest).expect("manifest");
        let world = World::new();
        let sandbox =
            Sandbox::new(sandbox_config(world.cache.path(), world.policy)).expect("sandbox");
        let installed = install(&sandbox, world.dir(), package.path(), false, &|_| {})
            .await
            .unwrap_or_else(|error| panic!("{name} installs: {error}"));
        world.grant(&installed.extension.id, None);
        let host = world.host().await;
        Some((world, host))
    }

    #[tokio::test]
    async fn a_runaway_js_loop_is_stopped_by_fuel_and_the_host_serves_on() {
        let Some((_world, host)) = installed("spin").await else {
            return;
        };
        for _ in 0..2 {
            let execution = call(&host, "ext/js-spin:hostile.spin", json!({})).await;
            assert_eq!(
                execution.result.error_code.as_deref(),
                Some("sandbox.out_of_fuel"),
                "{}",
                execution.result.content
            );
        }
    }

    #[tokio::test]
    async fn a_js_memory_bomb_is_stopped_at_the_memory_limit() {
        let Some((_world, host)) = installed("membomb").await else {
            return;
        };
        let execution = call(&host, "ext/js-membomb:hostile.membomb", json!({})).await;
        assert_eq!(
            execution.result.error_code.as_deref(),
            Some("sandbox.memory_limit"),
            "{}",
            execution.result.content
        );
        let report = execution.report.expect("a sandbox report");
        assert!(
            report.peak_memory_bytes <= Limits::default().memory_bytes,
            "{report:?}"
        );
    }

    #[tokio::test]
    async fn top_level_work_runs_at_build_time_not_in_every_call() {
        let Some((_world, host)) = installed("preinit").await else {
            return;
        };
        let fuel = |arguments: Value| {
            let host = &host;
            async move {
                let execution = call(host, "ext/js-preinit:bench.preinit", arguments).await;
                assert!(!execution.result.is_error, "{}", execution.result.content);
                (
                    execution.result.content,
                    execution.report.expect("report").fuel_consumed,
                )
            }
        };
        let (read, from_snapshot) = fuel(json!({"i": 7})).await;
        let (rebuilt, in_the_call) = fuel(json!({"i": 7, "rebuild": true})).await;
        assert_eq!(
            read, rebuilt,
            "the snapshot holds the table the module built"
        );
        // Building the table costs far more than a call that reads it: the
        // build ran once, when the component was made.
        assert!(
            in_the_call > 10 * from_snapshot,
            "a call reading the snapshot spent {from_snapshot} fuel, one rebuilding {in_the_call}"
        );
    }
}
