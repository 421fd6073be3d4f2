//! The builtin tool components, embedded in the binary.
//!
//! `build.rs` compiles each builtin crate of `guest-tools/` (one with a
//! `tool.json`) into a
//! component and records its sha256; the sandbox verifies that digest again
//! when it loads the bytes, so a damaged binary cannot load a changed tool.

/// One embedded component.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinComponent {
    /// The guest crate it was built from.
    pub package: &'static str,
    /// The capability world it was built for (`wit/host/worlds.wit`); the host
    /// grants exactly that world and refuses the component if it imports more.
    pub world: &'static str,
    /// sha256 of `bytes`, computed when the component was built.
    pub sha256_hex: &'static str,
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/builtins.rs"));

/// Every builtin component, in a fixed order.
pub fn components() -> &'static [BuiltinComponent] {
    COMPONENTS
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_is_a_component_with_a_world() {
        assert!(!super::components().is_empty());
        for component in super::components() {
            // The component-model layer of the binary format, not a core module.
            assert_eq!(
                &component.bytes[..8],
                b"\0asm\x0d\x00\x01\x00",
                "{}",
                component.package
            );
            assert!(!component.world.is_empty());
            assert_eq!(component.sha256_hex.len(), 64);
        }
    }
}
