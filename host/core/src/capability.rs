//! Host capabilities as data: which `toolhost:host` interfaces exist, since
//! which version, and sets of them. The sandbox links them; extension
//! manifests and grants name them. No wasmtime here.

use std::collections::BTreeSet;
use std::fmt;

/// One host capability: one interface of `toolhost:host`. Serialized as its
/// interface name (`workspace-read`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
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
    /// the profile's read budgets (an extension is charged by the host for
    /// all it reads; a builtin charges what it shows).
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

    /// Why an extension may never be granted this capability, if it may not.
    pub fn refused_to_extensions(self) -> Option<&'static str> {
        match self {
            Self::WorkspaceWrite => Some(
                "extensions never write the workspace directly; they return text the model can write with the builtin tools",
            ),
            _ => None,
        }
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
pub const TOOL_PACKAGE: &str = "toolhost:tool";
/// The one published version of `toolhost:tool`, the contract every tool exports.
pub const TOOL_VERSION: &str = "0.1.0";
/// The newest version of `toolhost:host`; every older 0.1.x links against it.
pub const HOST_VERSION: &str = "0.1.4";

/// A published version of `toolhost:host`. Landed versions never change;
/// a component may import any of them (wasmtime links 0.1.x imports to the
/// newest 0.1.x semver-compatibly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HostVersion {
    V0_1_0,
    V0_1_1,
    V0_1_2,
    V0_1_3,
    /// `chat-read.scan`.
    V0_1_4,
}

impl HostVersion {
    pub const ALL: &'static [HostVersion] = &[
        HostVersion::V0_1_0,
        HostVersion::V0_1_1,
        HostVersion::V0_1_2,
        HostVersion::V0_1_3,
        HostVersion::V0_1_4,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V0_1_0 => "0.1.0",
            Self::V0_1_1 => "0.1.1",
            Self::V0_1_2 => "0.1.2",
            Self::V0_1_3 => "0.1.3",
            Self::V0_1_4 => "0.1.4",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "0.1.0" => Some(Self::V0_1_0),
            "0.1.1" => Some(Self::V0_1_1),
            "0.1.2" => Some(Self::V0_1_2),
            "0.1.3" => Some(Self::V0_1_3),
            "0.1.4" => Some(Self::V0_1_4),
            _ => None,
        }
    }
}

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

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn is_subset(&self, other: &CapabilitySet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// The capabilities of `self` that `other` lacks.
    pub fn without(&self, other: &CapabilitySet) -> CapabilitySet {
        Self(self.0.difference(&other.0).copied().collect())
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

impl fmt::Display for HostVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromIterator<Capability> for CapabilitySet {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        Self::new(iter)
    }
}
