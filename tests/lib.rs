//! Hostile guest components (built from `tests/guests/` by `build.rs`) and
//! helpers for the conformance suite and the benchmark.

use toolhost_core::ToolProvider;
use toolhost_sandbox::{CapabilitySet, ComponentSpec, LimitOverrides, Trust};

/// Hostile guests are embedded exactly like builtins.
pub use toolhost_builtins::BuiltinComponent;

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// The guest built from `tests/guests/<name>`.
pub fn guest(name: &str) -> &'static BuiltinComponent {
    let package = format!("hostile-{name}");
    GUESTS
        .iter()
        .find(|guest| guest.package == package)
        .unwrap_or_else(|| panic!("no hostile guest `{name}`"))
}

/// The builtin built from `guest-tools/<package>`.
pub fn builtin(package: &str) -> &'static BuiltinComponent {
    toolhost_builtins::components()
        .iter()
        .find(|component| component.package == package)
        .unwrap_or_else(|| panic!("no builtin `{package}`"))
}

/// A load spec granting exactly the world the component declares, checking
/// its recorded sha256, and trusting it like an extension (no effects).
pub fn spec(component: &'static BuiltinComponent) -> ComponentSpec<'static> {
    ComponentSpec {
        label: component.package,
        bytes: component.bytes,
        expected_sha256: Some(component.sha256_hex),
        provider: ToolProvider::Builtin,
        grant: CapabilitySet::for_world(component.world).expect("known world"),
        limits: LimitOverrides::default(),
        trust: Trust::Extension,
    }
}
