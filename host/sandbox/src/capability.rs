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
}

impl Capability {
    pub const ALL: &'static [Capability] = &[Capability::Log, Capability::Random];

    /// The interface name without version, as it appears in WIT.
    pub fn name(self) -> &'static str {
        match self {
            Self::Log => "log",
            Self::Random => "random",
        }
    }

    /// The versioned import name a component uses for it.
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
pub const HOST_VERSION: &str = "0.1.0";
/// The export every tool component must provide.
pub const TOOL_EXPORT: &str = "toolhost:tool/tool@0.1.0";
/// Type-only interface that components import implicitly with the export.
const TOOL_TYPES: &str = "toolhost:tool/types@0.1.0";

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
    grant
        .iter()
        .any(|capability| capability.interface() == import)
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
        ];
        assert_eq!(
            ungranted_imports(imports, &grant),
            vec![
                "toolhost:host/random@0.1.0",
                "wasi:sockets/tcp@0.2.6",
                "wasi:http/outgoing-handler@0.2.6",
                "evil:exfil/upload@1.0.0",
                "toolhost:host/log@9.0.0",
            ]
        );
    }
}
