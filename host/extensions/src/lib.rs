//! Extension tools as data: the manifest an author ships with a component
//! ([`Manifest`]), and the installed extensions of a directory with the
//! grants a user gave them ([`ExtensionRegistry`]).
//!
//! Loading, checking imports and compiling are the runtime's job (it owns
//! the sandbox); this crate decides what is installed and what is allowed,
//! and stays free of wasmtime.

mod error;
pub mod manifest;
pub mod registry;
pub mod secrets;

pub use error::ExtensionError;
pub use manifest::{
    BuildLanguage, BuildRecipe, CheckedManifest, MANIFEST_FILE, MAX_COMPONENT_BYTES, Manifest,
    RequestedLimits, WitTarget, manifest_path, read_bounded,
};
pub use registry::{ExtensionRegistry, Grant, GrantRequest, InstalledExtension, sha256_hex};
pub use secrets::{SecretBinding, SecretError, SecretRequest, SecretStore, SecretValue};

#[cfg(test)]
mod tests;
