//! Capability = import. A component may import only the WASI baseline (linked
//! with an empty context) and the host interfaces it was granted; anything
//! else is refused at load with the list of offending imports.

pub use toolhost_core::capability::{
    Capability, CapabilitySet, HOST_PACKAGE, HOST_VERSION, HostVersion, TOOL_PACKAGE, TOOL_VERSION,
};

/// The export every tool component must provide.
pub const TOOL_EXPORT: &str = "toolhost:tool/tool@0.1.0";
/// Type-only interface that components import implicitly with the export.
const TOOL_TYPES: &str = "toolhost:tool/types@0.1.0";
/// Type-only interface of the workspace capabilities (since 0.1.1).
const WORKSPACE_TYPES: &str = "workspace-types";
/// Type-only interface of the capabilities added in 0.1.2 (and later).
const CAPABILITY_TYPES: &str = "capability-types";

/// WASI p2 interfaces a Rust guest's standard library imports even when it
/// never does I/O. They are linked with an empty context: no preopened
/// directory, no environment, no arguments, stdin closed, stdout/stderr
/// captured with a cap. `wasi:sockets` and `wasi:http` are not in the
/// baseline: `wasi:http` is the `outbound-http` capability, linked only when
/// granted; `wasi:sockets` is refused always.
const WASI_BASELINE: &[&str] = &[
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
];

/// The imports of a component that its grant does not cover, in order.
pub fn ungranted_imports<'a>(
    imports: impl IntoIterator<Item = &'a str>,
    grant: &CapabilitySet,
) -> Vec<String> {
    imports
        .into_iter()
        .filter(|import| !is_permitted(import, grant))
        .map(str::to_owned)
        .collect()
}

fn is_permitted(import: &str, grant: &CapabilitySet) -> bool {
    if WASI_BASELINE
        .iter()
        .any(|prefix| import.starts_with(prefix))
    {
        return true;
    }
    if import == TOOL_TYPES || toolhost_core::capability::is_ungated(import) {
        return true;
    }
    // Type-only interfaces of `toolhost:host` come in with the interfaces
    // that use them; they declare no function, so they grant nothing.
    if let Some((name, version)) = interface_of(import, HOST_PACKAGE)
        && let Some(version) = HostVersion::parse(version)
        && ((name == WORKSPACE_TYPES && version >= HostVersion::V0_1_1)
            || (name == CAPABILITY_TYPES && version >= HostVersion::V0_1_2))
    {
        return true;
    }
    // An interface of a granted capability, in a version it is linked at.
    grant.iter().any(|capability| capability.provides(import))
}

/// The host capabilities among a component's imports.
pub fn imported_capabilities<'a>(imports: impl IntoIterator<Item = &'a str>) -> CapabilitySet {
    let imports: Vec<&str> = imports.into_iter().collect();
    Capability::ALL
        .iter()
        .copied()
        .filter(|capability| imports.iter().any(|import| capability.provides(import)))
        .collect()
}

/// The newest published `toolhost:host` version among a component's imports.
pub fn newest_host_import<'a>(imports: impl IntoIterator<Item = &'a str>) -> Option<HostVersion> {
    imports
        .into_iter()
        .filter_map(|import| HostVersion::parse(interface_of(import, HOST_PACKAGE)?.1))
        .max()
}

/// `<package>/<interface>@<version>` split into interface and version.
fn interface_of<'a>(name: &'a str, package: &str) -> Option<(&'a str, &'a str)> {
    name.strip_prefix(package)?
        .strip_prefix('/')?
        .split_once('@')
}

/// Imports and exports naming a `toolhost:` package version this host does
/// not publish (a newer or another major version): the component was built
/// for a different toolhost, whatever its grant.
pub fn unsupported_wit<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names
        .into_iter()
        .filter(|name| {
            if let Some((_, version)) = interface_of(name, HOST_PACKAGE) {
                HostVersion::parse(version).is_none()
            } else if let Some((_, version)) = interface_of(name, TOOL_PACKAGE) {
                version != TOOL_VERSION
            } else {
                false
            }
        })
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worlds_name_capability_sets() {
        let pure = CapabilitySet::for_world("pure-tool").expect("known world");
        assert!(pure.contains(Capability::Random));
        let minimal = CapabilitySet::for_world("minimal-tool").expect("known world");
        assert!(!minimal.contains(Capability::Random));
        assert_eq!(minimal.to_string(), "log");
        assert!(CapabilitySet::for_world("superuser").is_none());
    }

    #[test]
    fn only_the_baseline_and_the_grant_pass() {
        let grant = CapabilitySet::new([Capability::Log]);
        let imports = [
            "wasi:io/streams@0.2.6",
            "wasi:cli/environment@0.2.6",
            "wasi:filesystem/preopens@0.2.6",
            "toolhost:tool/types@0.1.0",
            "toolhost:host/log@0.1.0",
            "toolhost:host/random@0.1.0",
            "wasi:sockets/tcp@0.2.6",
            "wasi:http/outgoing-handler@0.2.6",
            "evil:exfil/upload@1.0.0",
            "toolhost:host/log@9.0.0",
            "toolhost:host/log@0.1.1",
            "toolhost:host/workspace-read@0.1.1",
            "toolhost:host/workspace-read@0.1.0",
        ];
        assert_eq!(
            ungranted_imports(imports, &grant),
            vec![
                "toolhost:host/random@0.1.0",
                "wasi:sockets/tcp@0.2.6",
                "wasi:http/outgoing-handler@0.2.6",
                "evil:exfil/upload@1.0.0",
                "toolhost:host/log@9.0.0",
                "toolhost:host/workspace-read@0.1.1",
                "toolhost:host/workspace-read@0.1.0",
            ]
        );
    }

    #[test]
    fn outbound_http_is_wasi_http_when_granted_and_sockets_never() {
        let imports = [
            "wasi:http/outgoing-handler@0.2.0",
            "wasi:http/types@0.2.12",
            "wasi:http/incoming-handler@0.2.6",
            "wasi:http/outgoing-handler@0.3.0",
            "wasi:http/outgoing-handler@0.2.",
            "wasi:http/outgoing-handler@0.2.x",
            "wasi:sockets/tcp@0.2.6",
            "wasi:sockets/ip-name-lookup@0.2.6",
        ];
        // What the model calls a tool: anyone may ask, in a published series.
        assert!(
            ungranted_imports(["toolhost:catalog/tools@0.1.0"], &CapabilitySet::default())
                .is_empty()
        );
        assert_eq!(
            ungranted_imports(
                [
                    "toolhost:catalog/tools@0.2.0",
                    "toolhost:catalog/other@0.1.0"
                ],
                &CapabilitySet::default()
            )
            .len(),
            2
        );
        let granted = CapabilitySet::new([Capability::Log, Capability::OutboundHttp]);
        assert_eq!(
            ungranted_imports(imports, &granted),
            vec![
                "wasi:http/incoming-handler@0.2.6",
                "wasi:http/outgoing-handler@0.3.0",
                "wasi:http/outgoing-handler@0.2.",
                "wasi:http/outgoing-handler@0.2.x",
                "wasi:sockets/tcp@0.2.6",
                "wasi:sockets/ip-name-lookup@0.2.6",
            ]
        );
        let without = CapabilitySet::new([Capability::Log]);
        assert_eq!(ungranted_imports(imports, &without).len(), imports.len());
        assert_eq!(
            imported_capabilities(["wasi:http/types@0.2.12", "toolhost:host/log@0.1.3"])
                .to_string(),
            "log, outbound-http"
        );
        // Not a `toolhost:host` interface, so never in its worlds.
        let all = CapabilitySet::for_world("all-capabilities").expect("known world");
        assert!(!all.contains(Capability::OutboundHttp));
    }

    #[test]
    fn readers_never_get_write_and_versions_must_exist() {
        let reader = CapabilitySet::for_world("workspace-reader").expect("known world");
        let imports = [
            "toolhost:host/log@0.1.0",
            "toolhost:host/workspace-read@0.1.1",
            "toolhost:host/workspace-write@0.1.1",
            // Not published in 0.1.0, nor any 0.2 yet.
            "toolhost:host/workspace-read@0.1.0",
            "toolhost:host/workspace-read@0.2.0",
            "toolhost:host/workspace-read",
            "toolhost:host/workspace-types@0.1.1",
            "toolhost:host/workspace-types@0.1.0",
        ];
        assert_eq!(
            ungranted_imports(imports, &reader),
            vec![
                "toolhost:host/workspace-write@0.1.1",
                "toolhost:host/workspace-read@0.1.0",
                "toolhost:host/workspace-read@0.2.0",
                "toolhost:host/workspace-read",
                "toolhost:host/workspace-types@0.1.0",
            ]
        );
        let chat = CapabilitySet::for_world("chat-reader").expect("known world");
        assert_eq!(
            ungranted_imports(
                [
                    "toolhost:host/chat-read@0.1.2",
                    "toolhost:host/capability-types@0.1.2",
                    "toolhost:host/chat-read@0.1.1",
                    "toolhost:host/skill-read@0.1.2",
                ],
                &chat
            ),
            vec![
                "toolhost:host/chat-read@0.1.1",
                "toolhost:host/skill-read@0.1.2"
            ]
        );
        let agents = CapabilitySet::for_world("agent-reader").expect("known world");
        assert_eq!(
            ungranted_imports(
                [
                    "toolhost:host/agent-read@0.1.3",
                    "toolhost:host/agent-read@0.1.2",
                    "toolhost:host/chat-read@0.1.3",
                ],
                &agents
            ),
            vec![
                "toolhost:host/agent-read@0.1.2",
                "toolhost:host/chat-read@0.1.3"
            ]
        );
        let writer = CapabilitySet::for_world("workspace-writer").expect("known world");
        assert_eq!(
            imported_capabilities([
                "wasi:io/streams@0.2.6",
                "toolhost:host/log@0.1.0",
                "toolhost:host/workspace-read@0.1.1",
                "toolhost:host/workspace-types@0.1.1",
            ])
            .to_string(),
            "log, workspace-read"
        );
        assert_eq!(
            newest_host_import([
                "toolhost:host/log@0.1.0",
                "toolhost:host/random@0.1.4",
                "toolhost:host/log@9.0.0",
                "wasi:io/streams@0.2.6",
            ]),
            Some(HostVersion::V0_1_4)
        );
        assert_eq!(newest_host_import(["wasi:io/streams@0.2.6"]), None);
        assert_eq!(
            unsupported_wit([
                "toolhost:host/log@0.1.3",
                "toolhost:host/log@1.0.0",
                "toolhost:host/log@0.1.9",
                "toolhost:tool/tool@0.1.0",
                "toolhost:tool/tool@0.2.0",
                "wasi:io/streams@0.2.6",
            ]),
            vec![
                "toolhost:host/log@1.0.0",
                "toolhost:host/log@0.1.9",
                "toolhost:tool/tool@0.2.0"
            ]
        );
        assert!(writer.contains(Capability::WorkspaceWrite));
        assert!(ungranted_imports(["toolhost:host/workspace-write@0.1.1"], &writer).is_empty());
    }
}
