//! Host capabilities as data: which interfaces each one is, since which
//! version, and sets of them. The sandbox links them; extension manifests
//! and grants name them. No wasmtime here.
//!
//! A capability is either an interface of `toolhost:host` (the first eight,
//! each added in some published version) or, from now on, a WIT package of
//! its own: `outbound-http` is the standard `wasi:http@0.2` package, so it
//! grows without a new copy of `toolhost:host`.

use std::collections::BTreeSet;
use std::fmt;

/// One host capability. Serialized as its name: a `toolhost:host` interface
/// name (`workspace-read`), or the name of a capability that is a package of
/// its own (`outbound-http`).
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
    /// `wasi:http/outgoing-handler@0.2` (and its `wasi:http/types`): HTTP
    /// requests to the hosts a user allowed, under the call's deadline and
    /// caps. An extension's only way out of the sandbox.
    OutboundHttp,
    /// `toolhost:control/effects@0.1.0`: request one change to the run
    /// (commit, finish, delegate, hand off, await, return a task). Only the
    /// builtin control tools have it; never granted to an extension.
    Control,
    /// `toolhost:clock/clock@0.1.0`: the time now and since the call
    /// started, every reading journalled with the call so a replay reads
    /// the same.
    Clock,
}

/// Where a capability's interfaces are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapabilityHome {
    /// One interface of `toolhost:host`, present since that version.
    Host(HostVersion),
    /// A package of its own: its interfaces in any version of the series.
    Package {
        package: &'static str,
        /// `MAJOR.MINOR.` (0.x) accepted: semver-compatible with the host's.
        series: &'static str,
        interfaces: &'static [&'static str],
    },
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
        Capability::OutboundHttp,
        Capability::Control,
        Capability::Clock,
    ];

    /// The name manifests and grants use: for a `toolhost:host` capability
    /// its interface name without version, as it appears in WIT.
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
            Self::OutboundHttp => "outbound-http",
            Self::Control => "control",
            Self::Clock => "clock",
        }
    }

    /// Where its interfaces are published.
    pub fn home(self) -> CapabilityHome {
        match self {
            Self::Log | Self::Random => CapabilityHome::Host(HostVersion::V0_1_0),
            Self::WorkspaceRead | Self::WorkspaceWrite => CapabilityHome::Host(HostVersion::V0_1_1),
            Self::ChatRead | Self::WorldinfoRead | Self::SkillRead => {
                CapabilityHome::Host(HostVersion::V0_1_2)
            }
            Self::AgentRead => CapabilityHome::Host(HostVersion::V0_1_3),
            Self::OutboundHttp => CapabilityHome::Package {
                package: "wasi:http",
                series: "0.2.",
                interfaces: &["outgoing-handler", "types"],
            },
            Self::Control => CapabilityHome::Package {
                package: CONTROL_PACKAGE,
                series: "0.1.",
                interfaces: &["effects"],
            },
            Self::Clock => CapabilityHome::Package {
                package: "toolhost:clock",
                series: "0.1.",
                interfaces: &["clock"],
            },
        }
    }

    /// The first version of `toolhost:host` that has this interface; `None`
    /// for a capability that is a package of its own (any targeted
    /// `toolhost:host` may ask for it).
    pub fn since(self) -> Option<HostVersion> {
        match self.home() {
            CapabilityHome::Host(since) => Some(since),
            CapabilityHome::Package { .. } => None,
        }
    }

    /// Whether the import `name` (`<package>/<interface>@<version>`) is one
    /// of this capability's interfaces in a version it can be linked at.
    pub fn provides(self, name: &str) -> bool {
        let Some((package, rest)) = name.split_once('/') else {
            return false;
        };
        let Some((interface, version)) = rest.split_once('@') else {
            return false;
        };
        match self.home() {
            CapabilityHome::Host(since) => {
                package == HOST_PACKAGE
                    && interface == self.name()
                    && HostVersion::parse(version).is_some_and(|version| since <= version)
            }
            CapabilityHome::Package {
                package: home,
                series,
                interfaces,
            } => package == home && interfaces.contains(&interface) && in_series(version, series),
        }
    }

    /// Why an extension may never be granted this capability, if it may not.
    pub fn refused_to_extensions(self) -> Option<&'static str> {
        match self {
            Self::WorkspaceWrite => Some(
                "extensions never write the workspace directly; they return text the model can write with the builtin tools",
            ),
            Self::Control => Some(
                "only the builtin control tools change the run (commit, finish, delegate, hand off, await, return a task)",
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
/// What the model calls each tool of the invocation: every component may
/// import it, like the WASI baseline (it tells a tool nothing the model is
/// not shown), so it is no capability to grant.
pub const CATALOG_INTERFACE: &str = "toolhost:catalog/tools@0.1.";

/// Whether `import` is an interface every component may import without a
/// grant (beyond the WASI baseline): `toolhost:catalog/tools@0.1.x`.
pub fn is_ungated(import: &str) -> bool {
    in_series(import, CATALOG_INTERFACE)
}

/// Whether `text` is `prefix` (ending in `MAJOR.MINOR.`) and a patch number.
fn in_series(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix)
        .is_some_and(|patch| !patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()))
}

/// The package of the builtin control tools' one capability.
pub const CONTROL_PACKAGE: &str = "toolhost:control";
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
            // `toolhost:control`'s world, for the builtin control tools.
            "control-tool" => Some(Self::new([Log, Control])),
            // Every `toolhost:host` interface; packages of their own are not in
            // that world.
            "all-capabilities" => Some(Self::new(
                Capability::ALL
                    .iter()
                    .copied()
                    .filter(|capability| capability.since().is_some()),
            )),
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
