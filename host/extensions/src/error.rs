//! [`ExtensionError`]: what can go wrong with manifests, the registry and grants.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    #[error("ext.manifest_invalid: {}: {message}", path.display())]
    ManifestInvalid { path: PathBuf, message: String },
    #[error("ext.capability_refused: an extension cannot be given `{capability}`: {reason}")]
    CapabilityRefused {
        capability: String,
        reason: &'static str,
    },
    #[error("ext.wit_unsupported: built against {target}, {reason}")]
    WitUnsupported { target: String, reason: String },
    #[error(
        "ext.sha256_mismatch: the component of `{id}` has sha256 {actual}, but its manifest says {expected}: refusing to install it"
    )]
    Sha256Mismatch {
        id: String,
        expected: String,
        actual: String,
    },
    #[error(
        "ext.sha256_mismatch: the stored component of `{id}` has sha256 {actual}, not the {expected} it was installed with: it changed on disk; reinstall it"
    )]
    StoredComponentChanged {
        id: String,
        expected: String,
        actual: String,
    },
    #[error("ext.component_too_large: {} is more than the {max} bytes accepted", path.display())]
    ComponentTooLarge { path: PathBuf, max: u64 },
    /// The manifest's component is not a regular file inside its directory.
    #[error("ext.manifest_invalid: `component` {}: {message}", path.display())]
    ComponentOutside { path: PathBuf, message: String },
    /// A manifest or component path that is not a regular file (a fifo, a
    /// device, a directory): refused before anything is read from it.
    #[error("ext.manifest_invalid: {} is {kind}, not a regular file", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("ext.registry_invalid: {}: {message}", path.display())]
    RegistryInvalid { path: PathBuf, message: String },
    #[error("ext.not_installed: no extension `{0}` is installed")]
    NotInstalled(String),
    #[error(
        "ext.already_installed: `{id}` {version} is installed; remove it first or install with --upgrade"
    )]
    AlreadyInstalled { id: String, version: String },
    #[error("ext.grant_invalid: `{id}`: {message}")]
    GrantInvalid { id: String, message: String },
    #[error("ext.io_error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ExtensionError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::ManifestInvalid { .. } => "ext.manifest_invalid",
            Self::CapabilityRefused { .. } => "ext.capability_refused",
            Self::WitUnsupported { .. } => "ext.wit_unsupported",
            Self::Sha256Mismatch { .. } | Self::StoredComponentChanged { .. } => {
                "ext.sha256_mismatch"
            }
            Self::ComponentTooLarge { .. } => "ext.component_too_large",
            Self::ComponentOutside { .. } | Self::NotAFile { .. } => "ext.manifest_invalid",
            Self::RegistryInvalid { .. } => "ext.registry_invalid",
            Self::NotInstalled(_) => "ext.not_installed",
            Self::AlreadyInstalled { .. } => "ext.already_installed",
            Self::GrantInvalid { .. } => "ext.grant_invalid",
            Self::Io { .. } => "ext.io_error",
        }
    }
}

impl From<toolhost_core::document::DocumentError> for ExtensionError {
    fn from(error: toolhost_core::document::DocumentError) -> Self {
        use toolhost_core::document::DocumentError;
        match error {
            DocumentError::Io { path, source } => Self::Io { path, source },
            DocumentError::Invalid { path, message } => Self::RegistryInvalid { path, message },
        }
    }
}
