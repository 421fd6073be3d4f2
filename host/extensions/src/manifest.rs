//! `toolhost-extension.toml`: what an extension author declares about a
//! component. Every field is checked when the manifest is read; nothing in it
//! is trusted later without being compared to the component itself.
//!
//! ```toml
//! id = "acme-wordcount"
//! version = "0.1.0"
//! description = "Count the words of a text."
//! author = "Acme Tools <tools@acme.example>"
//! component = "target/wasm32-wasip2/release/acme_wordcount.wasm"
//! sha256 = "9f2c…"                      # of the component file
//! tools = ["text.word_count"]
//! capabilities = ["log"]               # add "outbound-http" to reach:
//! # allowed-hosts = ["https://api.weather.example", "*.example.org"]
//!
//! [wit]
//! tool = "0.1.0"                         # toolhost:tool it exports
//! host = "0.1.3"                         # toolhost:host it imports
//!
//! [limits]                               # asked for; capped by host policy
//! fuel = 2_000_000_000
//! deadline-ms = 2_000
//! memory-bytes = 33_554_432
//! instances = 40                         # core instances per call
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolhost_core::allowed_hosts::{AllowedHosts, HostPattern, MAX_ALLOWED_HOSTS};
use toolhost_core::capability::{HostVersion, TOOL_VERSION};
use toolhost_core::limits::LimitOverrides;
use toolhost_core::{Capability, CapabilitySet, ToolProvider};

use crate::error::ExtensionError;
use crate::secrets::{
    MAX_SECRETS, SecretRequest, check_format, check_header, check_secret_host, is_secret_name,
};

/// The manifest's file name inside an extension directory.
pub const MANIFEST_FILE: &str = "toolhost-extension.toml";

/// Largest manifest read, in bytes.
const MAX_MANIFEST_BYTES: u64 = 64 * 1024;
/// Longest description or author, in characters.
const MAX_TEXT_CHARS: usize = 1_000;

/// A manifest as written by its author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Manifest {
    /// `[a-z0-9][a-z0-9._-]{0,127}`; the tools' ids are `ext/<id>:<tool>`.
    pub id: String,
    /// The extension's own version (`MAJOR.MINOR.PATCH`).
    pub version: String,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// The component file, relative to the manifest.
    pub component: PathBuf,
    /// Lowercase hex sha256 of the component file.
    pub sha256: String,
    /// Native names of the tools the component provides (one component is
    /// one tool, so exactly one for now).
    pub tools: Vec<String>,
    /// Host capabilities the component asks for, by name: any of
    /// `toolhost_core::Capability::ALL` but those refused to extensions.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Where `outbound-http` would send requests (`[scheme://]host[:port]`,
    /// `*.suffix` for subdomains); a user grants a subset. Required with
    /// `outbound-http`, refused without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<HostPattern>,
    /// Secrets its requests need, by the key the extension names each by:
    /// the host and header each goes to. Only with `outbound-http`; a user
    /// binds each key to a stored secret with `ext grant --secret`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, SecretRequest>,
    pub wit: WitTarget,
    #[serde(default)]
    pub limits: RequestedLimits,
    /// How `toolhost ext install DIR` builds the component of a
    /// development extension before sealing it; absent, the sealed
    /// component is installed as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildRecipe>,
}

/// How a development extension's component is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BuildRecipe {
    pub language: BuildLanguage,
    /// Python: the WIT world in `wit/` to build against (componentize-py's
    /// `-w`) [default: `extension`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world: Option<String>,
    /// Python: the module holding the tool [default: `app`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

/// The languages `ext install` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BuildLanguage {
    /// `cargo build --release --target wasm32-wasip2`.
    Rust,
    /// componentize-py, against the extension's `wit/`.
    Python,
    /// `npm run build` (componentize with jco), after `npm ci`/`npm install`.
    Js,
    /// As `js`; the package's build script compiles TypeScript.
    Ts,
}

/// The WIT versions a component was built against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct WitTarget {
    /// `toolhost:tool` version it exports.
    pub tool: String,
    /// `toolhost:host` version it imports.
    pub host: String,
}

/// Limits an extension asks for; the host policy caps each one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RequestedLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Core instances of one call (a component built from an interpreter,
    /// such as componentize-py's, needs more than the default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
}

impl RequestedLimits {
    pub fn overrides(&self) -> LimitOverrides {
        LimitOverrides {
            fuel: self.fuel.map(Some),
            deadline: self.deadline_ms.map(Duration::from_millis),
            memory_bytes: self.memory_bytes,
            instances: self.instances,
            ..LimitOverrides::default()
        }
    }
}

/// A manifest that passed every check, with what the checks derived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedManifest {
    pub manifest: Manifest,
    /// The directory the manifest was read from (the component path is
    /// relative to it).
    pub dir: PathBuf,
    pub provider: ToolProvider,
    pub requested: CapabilitySet,
    /// The hosts `outbound-http` asks for (empty without it).
    pub requested_hosts: AllowedHosts,
    pub host_version: HostVersion,
}

/// Largest component accepted, in bytes (an interpreter-based component,
/// CPython inside, is about 20 MB).
pub const MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

impl CheckedManifest {
    /// The component file this manifest names.
    pub fn component_path(&self) -> PathBuf {
        self.dir.join(&self.manifest.component)
    }

    /// The component's bytes: a regular file that resolves (symbolic links
    /// followed) inside the manifest's directory, at most
    /// [`MAX_COMPONENT_BYTES`].
    pub fn read_component(&self) -> Result<Vec<u8>, ExtensionError> {
        let path = self.component_path();
        let io = |source| ExtensionError::Io {
            path: path.clone(),
            source,
        };
        let resolved = path.canonicalize().map_err(io)?;
        let dir = self.dir.canonicalize().map_err(io)?;
        if !resolved.starts_with(&dir) {
            return Err(ExtensionError::ComponentOutside {
                path,
                message: format!(
                    "resolves to {}, outside {}",
                    resolved.display(),
                    dir.display()
                ),
            });
        }
        read_bounded(&resolved, MAX_COMPONENT_BYTES)?.ok_or(ExtensionError::ComponentTooLarge {
            path,
            max: MAX_COMPONENT_BYTES,
        })
    }
}

/// A regular file's bytes, `None` when it holds more than `max`; a fifo,
/// device or directory is refused before any read
/// ([`toolhost_core::file::read_regular`]).
pub fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>, ExtensionError> {
    use toolhost_core::file::{FileError, read_regular};
    read_regular(path, max).map_err(|error| match error {
        FileError::Io(source) => ExtensionError::Io {
            path: path.to_owned(),
            source,
        },
        FileError::NotAFile(kind) => ExtensionError::NotAFile {
            path: path.to_owned(),
            kind,
        },
    })
}

/// The manifest file `path` names: the file itself, or the
/// `toolhost-extension.toml` inside the directory it is.
pub fn manifest_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(MANIFEST_FILE)
    } else {
        path.to_owned()
    }
}

impl Manifest {
    /// Read and check a manifest file, or `toolhost-extension.toml` inside a
    /// directory.
    pub fn load(path: &Path) -> Result<CheckedManifest, ExtensionError> {
        let path = manifest_path(path);
        let invalid = |message: String| ExtensionError::ManifestInvalid {
            path: path.clone(),
            message,
        };
        let bytes = read_bounded(&path, MAX_MANIFEST_BYTES)?.ok_or_else(|| {
            invalid(format!(
                "it is longer than the {MAX_MANIFEST_BYTES} bytes a manifest may have"
            ))
        })?;
        let text = String::from_utf8(bytes).map_err(|_| invalid("it is not UTF-8".into()))?;
        let manifest: Manifest =
            toml::from_str(&text).map_err(|error| invalid(error.to_string()))?;
        let dir = path
            .parent()
            .map(Path::to_owned)
            .unwrap_or_else(|| PathBuf::from("."));
        manifest.check(dir).map_err(|error| match error {
            ExtensionError::ManifestInvalid { message, .. } => invalid(message),
            other => other,
        })
    }

    /// Check every field; `dir` is where the component path starts.
    pub fn check(self, dir: PathBuf) -> Result<CheckedManifest, ExtensionError> {
        let invalid = |message: String| ExtensionError::ManifestInvalid {
            path: dir.join(MANIFEST_FILE),
            message,
        };
        let provider = ToolProvider::parse(&format!("ext/{}", self.id))
            .map_err(|error| invalid(format!("`id`: {error}")))?;
        if !is_version(&self.version) {
            return Err(invalid(format!(
                "`version` `{}` must be MAJOR.MINOR.PATCH",
                self.version
            )));
        }
        for (field, text) in [
            ("description", Some(self.description.as_str())),
            ("author", self.author.as_deref()),
        ] {
            if let Some(text) = text
                && text.chars().count() > MAX_TEXT_CHARS
            {
                return Err(invalid(format!(
                    "`{field}` is longer than {MAX_TEXT_CHARS} characters"
                )));
            }
        }
        if self.description.trim().is_empty() {
            return Err(invalid("`description` must not be empty".into()));
        }
        if self.component.is_absolute()
            || self
                .component
                .components()
                .any(|part| matches!(part, std::path::Component::ParentDir))
        {
            return Err(invalid(format!(
                "`component` `{}` must be a path inside the extension's directory",
                self.component.display()
            )));
        }
        if self.sha256.len() != 64
            || !self
                .sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(invalid(
                "`sha256` must be 64 lowercase hex digits (run `toolhost ext seal` after building)"
                    .into(),
            ));
        }
        match self.tools.as_slice() {
            [tool] => provider
                .check_native_name(tool)
                .map_err(|error| invalid(format!("`tools`: {error}")))?,
            _ => {
                return Err(invalid(format!(
                    "`tools` must name exactly the one tool the component provides, not {}",
                    self.tools.len()
                )));
            }
        }
        let mut requested = Vec::new();
        for name in &self.capabilities {
            let capability = Capability::parse(name).ok_or_else(|| {
                invalid(format!(
                    "`capabilities`: unknown capability `{name}` (known: {})",
                    Capability::ALL
                        .iter()
                        .map(|c| c.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
            if let Some(reason) = capability.refused_to_extensions() {
                return Err(ExtensionError::CapabilityRefused {
                    capability: name.clone(),
                    reason,
                });
            }
            requested.push(capability);
        }
        let host_version = check_wit(&self.wit)?;
        let requested = CapabilitySet::new(requested);
        if let Some((too_new, since)) = requested.iter().find_map(|c| {
            c.since()
                .filter(|since| *since > host_version)
                .map(|since| (c, since))
        }) {
            return Err(invalid(format!(
                "`capabilities`: `{too_new}` arrived in toolhost:host@{since}, after the targeted {host_version}"
            )));
        }
        let requested_hosts = AllowedHosts::new(self.allowed_hosts.iter().cloned());
        match (
            requested.contains(Capability::OutboundHttp),
            requested_hosts.is_empty(),
        ) {
            (true, true) => {
                return Err(invalid(
                    "`capabilities` asks for outbound-http: list where in `allowed-hosts`".into(),
                ));
            }
            (false, false) => {
                return Err(invalid(
                    "`allowed-hosts` is only for outbound-http, which `capabilities` does not ask for"
                        .into(),
                ));
            }
            _ => {}
        }
        if requested_hosts.patterns().len() > MAX_ALLOWED_HOSTS {
            return Err(invalid(format!(
                "`allowed-hosts` lists more than {MAX_ALLOWED_HOSTS} patterns"
            )));
        }
        let limits = &self.limits;
        for (name, value) in [
            ("fuel", limits.fuel),
            ("deadline-ms", limits.deadline_ms),
            ("memory-bytes", limits.memory_bytes),
            ("instances", limits.instances.map(u64::from)),
        ] {
            if value == Some(0) {
                return Err(invalid(format!(
                    "`limits.{name}` must be greater than zero"
                )));
            }
        }
        check_secrets(&self.secrets, &requested, &requested_hosts).map_err(invalid)?;
        Ok(CheckedManifest {
            manifest: self,
            dir,
            provider,
            requested,
            requested_hosts,
            host_version,
        })
    }
}

/// Each secret asked for goes with `outbound-http`, to a host it asks to
/// reach, in a header a secret may go into.
fn check_secrets(
    secrets: &BTreeMap<String, SecretRequest>,
    requested: &CapabilitySet,
    hosts: &AllowedHosts,
) -> Result<(), String> {
    if secrets.is_empty() {
        return Ok(());
    }
    if !requested.contains(Capability::OutboundHttp) {
        return Err("`secrets` go into HTTP requests: ask for outbound-http too".into());
    }
    if secrets.len() > MAX_SECRETS {
        return Err(format!("`secrets` asks for more than {MAX_SECRETS}"));
    }
    for (key, secret) in secrets {
        let field = |message: String| format!("`secrets.{key}`: {message}");
        if !is_secret_name(key) {
            return Err(format!(
                "`secrets`: key `{}` must be 1 to 64 of A-Z, a-z, 0-9, `_`, `-`, `.`",
                key.chars().take(64).collect::<String>()
            ));
        }
        if secret.description.trim().is_empty()
            || secret.description.chars().count() > MAX_TEXT_CHARS
        {
            return Err(field(format!(
                "`description` must be 1 to {MAX_TEXT_CHARS} characters"
            )));
        }
        if !hosts
            .patterns()
            .iter()
            .any(|pattern| pattern.covers(&secret.host))
        {
            return Err(field(format!(
                "host `{}` is not among `allowed-hosts`",
                secret.host
            )));
        }
        check_header(&secret.header).map_err(field)?;
        check_format(&secret.format).map_err(field)?;
        check_secret_host(&secret.host).map_err(field)?;
    }
    Ok(())
}

/// The targeted WIT versions must be ones this host publishes: a different
/// major (for 0.x: a different minor) is refused as incompatible, a newer
/// patch as too new for this host.
fn check_wit(wit: &WitTarget) -> Result<HostVersion, ExtensionError> {
    let supported = || {
        format!(
            "toolhost:tool@{TOOL_VERSION} and toolhost:host@{}..={}",
            HostVersion::ALL[0],
            HostVersion::ALL[HostVersion::ALL.len() - 1]
        )
    };
    let unsupported = |package: &str, version: &str, why: &str| ExtensionError::WitUnsupported {
        target: format!("{package}@{version}"),
        reason: format!("{why}; this toolhost supports {}", supported()),
    };
    if wit.tool != TOOL_VERSION {
        let why = if same_series(&wit.tool, TOOL_VERSION) {
            "a newer toolhost:tool than this host knows"
        } else {
            "an incompatible (major) version"
        };
        return Err(unsupported("toolhost:tool", &wit.tool, why));
    }
    HostVersion::parse(&wit.host).ok_or_else(|| {
        let newest = HostVersion::ALL[HostVersion::ALL.len() - 1].as_str();
        let why = if same_series(&wit.host, newest) {
            "a newer toolhost:host than this host knows: upgrade toolhost"
        } else {
            "an incompatible (major) version"
        };
        unsupported("toolhost:host", &wit.host, why)
    })
}

/// Semver-compatible series: same major, and for 0.x the same minor.
fn same_series(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Option<(u64, u64)> {
        let mut it = v.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    };
    match (parts(a), parts(b)) {
        (Some((0, minor_a)), Some((0, minor_b))) => minor_a == minor_b,
        (Some((major_a, _)), Some((major_b, _))) => major_a == major_b,
        _ => false,
    }
}

fn is_version(text: &str) -> bool {
    let parts: Vec<&str> = text.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|part| {
            !part.is_empty()
                && part.len() <= 9
                && part.bytes().all(|b| b.is_ascii_digit())
                && (part.len() == 1 || !part.starts_with('0'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
id = "acme-wordcount"
version = "0.1.0"
description = "Count the words of a text."
author = "Acme"
component = "wordcount.wasm"
sha256 = "9f2c000000000000000000000000000000000000000000000000000000000000"
tools = ["text.word_count"]
capabilities = ["log"]

[wit]
tool = "0.1.0"
host = "0.1.3"

[limits]
fuel = 2_000_000_000
deadline-ms = 2_000
"#;

    fn check(text: &str) -> Result<CheckedManifest, ExtensionError> {
        let manifest: Manifest =
            toml::from_str(text).map_err(|error| ExtensionError::ManifestInvalid {
                path: PathBuf::from("m.toml"),
                message: error.to_string(),
            })?;
        manifest.check(PathBuf::from("/ext"))
    }

    fn with(line: &str, replacement: &str) -> String {
        assert!(GOOD.contains(line), "{line}");
        GOOD.replacen(line, replacement, 1)
    }

    #[test]
    fn a_good_manifest_is_checked_and_derived() {
        let checked = check(GOOD).expect("valid");
        assert_eq!(checked.provider.to_string(), "ext/acme-wordcount");
        assert_eq!(checked.requested, CapabilitySet::new([Capability::Log]));
        assert_eq!(checked.host_version, HostVersion::V0_1_3);
        assert_eq!(
            checked.component_path(),
            PathBuf::from("/ext/wordcount.wasm")
        );
        let overrides = checked.manifest.limits.overrides();
        assert_eq!(overrides.fuel, Some(Some(2_000_000_000)));
        assert_eq!(overrides.deadline, Some(Duration::from_secs(2)));
        assert_eq!(overrides.memory_bytes, None);
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (with("acme-wordcount", "Acme Wordcount"), "`id`"),
            (with("\"0.1.0\"\ndesc", "\"1.0\"\ndesc"), "`version`"),
            (with("wordcount.wasm", "../elsewhere.wasm"), "`component`"),
            (with("wordcount.wasm", "/abs.wasm"), "`component`"),
            (with("9f2c0000", "9F2C0000"), "`sha256`"),
            (with("[\"text.word_count\"]", "[]"), "`tools`"),
            (
                with("[\"text.word_count\"]", "[\"a.b\", \"c.d\"]"),
                "`tools`",
            ),
            (with("[\"text.word_count\"]", "[\"Text Count\"]"), "`tools`"),
            (
                with("[\"log\"]", "[\"network\"]"),
                "unknown capability `network`",
            ),
            (with("fuel = 2_000_000_000", "fuel = 0"), "`limits.fuel`"),
            (
                with("deadline-ms = 2_000", "deadline-ms = 0"),
                "`limits.deadline-ms`",
            ),
            (
                with("author = \"Acme\"", "owner = \"Acme\""),
                "unknown field `owner`",
            ),
            (
                with("[\"log\"]", "[\"agent-read\"]").replace("0.1.3", "0.1.0"),
                "arrived in toolhost:host@0.1.3",
            ),
        ];
        for (text, expected) in cases {
            let error = check(&text).expect_err(expected);
            assert_eq!(error.code(), "ext.manifest_invalid", "{expected}: {error}");
            assert!(error.to_string().contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn workspace_write_is_never_requested_read_capabilities_are() {
        let error = check(&with("[\"log\"]", "[\"log\", \"workspace-write\"]"))
            .expect_err("workspace-write");
        assert_eq!(error.code(), "ext.capability_refused", "{error}");
        assert!(error.to_string().contains("workspace-write"));
        let readers = with(
            "[\"log\"]",
            "[\"log\", \"random\", \"workspace-read\", \"chat-read\", \"worldinfo-read\", \"skill-read\", \"agent-read\"]",
        );
        assert_eq!(
            check(&readers).expect("read-only").requested.iter().count(),
            7
        );
    }

    #[test]
    fn wit_versions_old_minors_load_other_majors_do_not() {
        let old = check(&with("host = \"0.1.3\"", "host = \"0.1.0\"")).expect("0.1.0 still loads");
        assert_eq!(old.host_version, HostVersion::V0_1_0);
        for (line, replacement, expected) in [
            (
                "host = \"0.1.3\"",
                "host = \"1.0.0\"",
                "incompatible (major)",
            ),
            (
                "host = \"0.1.3\"",
                "host = \"0.2.0\"",
                "incompatible (major)",
            ),
            ("host = \"0.1.3\"", "host = \"0.1.9\"", "upgrade toolhost"),
            (
                "tool = \"0.1.0\"",
                "tool = \"2.0.0\"",
                "incompatible (major)",
            ),
        ] {
            let error = check(&with(line, replacement)).expect_err(replacement);
            assert_eq!(error.code(), "ext.wit_unsupported", "{error}");
            let text = error.to_string();
            assert!(text.contains(expected), "{text}");
            assert!(
                text.contains("supports toolhost:tool@0.1.0 and toolhost:host@0.1.0..=0.1.4"),
                "{text}"
            );
        }
    }
}
