//! Hostile guest components (built from `tests/guests/` by `build.rs`) and
//! helpers for the conformance suite.

use toolhost_core::ToolProvider;
use toolhost_sandbox::{CapabilitySet, ComponentSpec, LimitOverrides};

/// One hostile component.
#[derive(Debug, Clone, Copy)]
pub struct Guest {
    pub package: &'static str,
    pub world: &'static str,
    pub sha256_hex: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// The guest built from `tests/guests/<name>`.
pub fn guest(name: &str) -> &'static Guest {
    let package = format!("hostile-{name}");
    GUESTS
        .iter()
        .find(|guest| guest.package == package)
        .unwrap_or_else(|| panic!("no hostile guest `{name}`"))
}

impl Guest {
    /// Load spec granting exactly the world the guest declares.
    pub fn spec(&self) -> ComponentSpec<'static> {
        ComponentSpec {
            label: self.package,
            bytes: self.bytes,
            expected_sha256: Some(self.sha256_hex),
            provider: ToolProvider::Builtin,
            grant: CapabilitySet::for_world(self.world).expect("known world"),
            limits: LimitOverrides::default(),
            allow_effects: false,
        }
    }
}
