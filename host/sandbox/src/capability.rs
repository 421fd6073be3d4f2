//! Capability = import. A component may import only the WASI baseline (linked
//! with an empty context) and the host interfaces it was granted; anything
//! else is refused at load with the list of offending imports.

use std::collections::BTreeSet;
use std::fmt;

/// One host capability: one interface of `toolhost:host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// `toolhost:host/log`: diagnostics to the host's log.
    Log,
    /// `toolhost:host/random`: recorded randomness.
    Random,
    /// `toolhost:host/workspace-read` (0.1.1): list, read and search the
    /// run's visible workspace roots.
    WorkspaceRead,
    /// `toolhost:host/workspace-write` (0.1.1): change the run's writable
    /// roots under compare-and-swap. Never granted to an extension.
    WorkspaceWrite,
    /// `toolhost:host/chat-read` (0.1.2): the run's chat, up to its frozen
    /// input prefix.
    ChatRead,
    /// `toolhost:host/worldinfo-read` (0.1.2): the run's activated world info.
    WorldinfoRead,
    /// `toolhost:host/skill-read` (0.1.2): visible installed skills, under
    /// the profile's read budgets.
    SkillRead,
    /// `toolhost:host/agent-read` (0.1.3): the agents this agent may
    /// delegate to or hand off to.
    AgentRead,
}

impl Capability {
    pub const ALL: &'static [Capability] = &[
        Capability::Log,
        Capability::Random,
        Capability::WorkspaceRead,
        Capability::WorkspaceWrite,
        Capability::ChatRead,
        Capability::WorldinfoRead,
        Capability::SkillRead,
        Capability::AgentRead,
    ];

    /// The interface name without version, as it appears in WIT.
    pub fn name(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Random => "random",
            Self::WorkspaceRead => "workspace-read",
            Self::WorkspaceWrite => "workspace-write",
            Self::ChatRead => "chat-read",
            Self::WorldinfoRead => "worldinfo-read",
            Self::SkillRead => "skill-read",
            Self::AgentRead => "agent-read",
        }
    }

    /// The first version of `toolhost:host` that has this interface.
    pub fn since(self) -> HostVersion {
        match self {
            Self::Log | Self::Random => HostVersion::V0_1_0,
            Self::WorkspaceRead | Self::WorkspaceWrite => HostVersion::V0_1_1,
            Self::ChatRead | Self::WorldinfoRead | Self::SkillRead => HostVersion::V0_1_2,
            Self::AgentRead => HostVersion::V0_1_3,
        }
    }

    /// The import name a component built against the current version uses.
    pub fn interface(self) -> String {
        format!("{HOST_PACKAGE}/{}@{HOST_VERSION}", self.name())
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|capability| capability.name() == name)
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub const HOST_PACKAGE: &str = "toolhost:host";
/// The newest version of `toolhost:host`; every older 0.1.x links against it.
pub const HOST_VERSION: &str = "0.1.3";

/// A published version of `toolhost:host`. Landed versions never change;
/// a component may import any of them (wasmtime links 0.1.x imports to the
/// newest 0.1.x semver-compatibly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostVersion {
    V0_1_0,
    V0_1_1,
    V0_1_2,
    V0_1_3,
}

impl HostVersion {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "0.1.0" => Some(Self::V0_1_0),
            "0.1.1" => Some(Self::V0_1_1),
            "0.1.2" => Some(Self::V0_1_2),
            "0.1.3" => Some(Self::V0_1_3),
            _ => None,
        }
    }
}
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
/// baseline: a component importing them is refused.
const WASI_BASELINE: &[&str] = &[
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:filesystem/",
];

/// A set of granted capabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CapabilitySet(BTreeSet<Capability>);

impl CapabilitySet {
    pub fn new(capabilities: impl IntoIterator<Item = Capability>) -> Self {
        Self(capabilities.into_iter().collect())
    }

    /// The capability set a world of `wit/host/worlds.wit` names.
    pub fn for_world(world: &str) -> Option<Self> {
        use Capability::*;
        match world {
            "minimal-tool" => Some(Self::new([Log])),
            "pure-tool" => Some(Self::new([Log, Random])),
            "workspace-reader" => Some(Self::new([Log, WorkspaceRead])),
            "workspace-writer" => Some(Self::new([Log, WorkspaceRead, WorkspaceWrite])),
            "chat-reader" => Some(Self::new([Log, ChatRead])),
            "worldinfo-reader" => Some(Self::new([Log, WorldinfoRead])),
            "skill-reader" => Some(Self::new([Log, SkillRead])),
            "agent-reader" => Some(Self::new([Log, AgentRead])),
            "all-capabilities" => Some(Self::new(Capability::ALL.iter().copied())),
            _ => None,
        }
    }

    pub fn contains(&self, capability: Capability) -> bool {
        self.0.contains(&capability)
    }

    pub fn iter(&self) -> impl Iterator<Item = Capability> + '_ {
        self.0.iter().copied()
    }
}

impl fmt::Display for CapabilitySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.iter().map(Capability::name).collect();
        f.write_str(&names.join(", "))
    }
}

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
    if import == TOOL_TYPES {
        return true;
    }
    // `toolhost:host/<interface>@<version>`, the interface granted and
    // present in that published version.
    let Some((name, version)) = import
        .strip_prefix(HOST_PACKAGE)
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.split_once('@'))
    else {
        return false;
    };
    let Some(version) = HostVersion::parse(version) else {
        return false;
    };
    // Type-only interfaces come in with the interfaces that use them; they
    // declare no function, so they grant nothing.
    let type_only = (name == WORKSPACE_TYPES && version >= HostVersion::V0_1_1)
        || (name == CAPABILITY_TYPES && version >= HostVersion::V0_1_2);
    if type_only {
        return true;
    }
    grant
        .iter()
        .any(|capability| capability.name() == name && capability.since() <= version)
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
        assert!(writer.contains(Capability::WorkspaceWrite));
        assert!(ungranted_imports(["toolhost:host/workspace-write@0.1.1"], &writer).is_empty());
    }
}
