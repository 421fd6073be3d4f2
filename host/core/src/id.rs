//! `ToolId`: the stable identity of a tool across sources.
//!
//! A ToolId is `<provider>:<native-name>`, split on the first `:` (a native
//! name may itself contain `:`). Providers are `builtin`, `mcp/<uuid>` (the
//! lowercase hyphenated registration uuid) and `ext/<extension-id>`. The id
//! owns identity only: never the model alias or a display name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// Longest native name accepted from any provider, in bytes.
pub const MAX_NATIVE_NAME_BYTES: usize = 256;
/// Longest extension id, in bytes.
pub const MAX_EXTENSION_ID_BYTES: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("tool id `{0}` has no provider: expected `<provider>:<native-name>`")]
    MissingSeparator(String),
    #[error("tool id `{0}` has an empty provider")]
    EmptyProvider(String),
    #[error("tool id `{0}` has an empty native name")]
    EmptyNativeName(String),
    #[error(
        "unknown tool provider `{0}`: expected `builtin`, `mcp/<registration-uuid>` or `ext/<extension-id>`"
    )]
    UnknownProvider(String),
    #[error("MCP provider `{0}` must carry a lowercase hyphenated registration uuid")]
    InvalidRegistrationId(String),
    #[error(
        "extension id `{0}` is invalid: 1 to 128 of lowercase letters, digits, `.`, `_`, `-`, starting with a letter or digit"
    )]
    InvalidExtensionId(String),
    #[error("native name `{name}` is invalid for provider `{provider}`: {rule}")]
    InvalidNativeName {
        provider: String,
        name: String,
        rule: &'static str,
    },
}

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolProvider {
    /// Shipped with toolhost, run as a sandboxed component.
    Builtin,
    /// A tool of a registered MCP server.
    Mcp(Uuid),
    /// A third-party extension component.
    Extension(String),
}

impl ToolProvider {
    pub fn parse(text: &str) -> Result<Self, IdError> {
        if text == "builtin" {
            return Ok(Self::Builtin);
        }
        if let Some(uuid) = text.strip_prefix("mcp/") {
            return Uuid::parse_str(uuid)
                .ok()
                .filter(|parsed| parsed.hyphenated().to_string() == uuid)
                .map(Self::Mcp)
                .ok_or_else(|| IdError::InvalidRegistrationId(text.to_owned()));
        }
        if let Some(extension) = text.strip_prefix("ext/") {
            return if is_valid_extension_id(extension) {
                Ok(Self::Extension(extension.to_owned()))
            } else {
                Err(IdError::InvalidExtensionId(extension.to_owned()))
            };
        }
        Err(IdError::UnknownProvider(text.to_owned()))
    }

    /// Check a native name against this provider's rules. Builtin and
    /// extension names are ours to define and stay simple; MCP names come
    /// from third-party servers and only need to be printable and bounded.
    pub fn check_native_name(&self, name: &str) -> Result<(), IdError> {
        let rule = if name.is_empty() {
            Some("it must not be empty")
        } else if name.len() > MAX_NATIVE_NAME_BYTES {
            Some("it is longer than 256 bytes")
        } else if name.chars().any(char::is_control) {
            Some("it contains a control character")
        } else {
            match self {
                Self::Mcp(_) => None,
                Self::Builtin | Self::Extension(_) => {
                    let simple = name.starts_with(|c: char| c.is_ascii_lowercase())
                        && name.chars().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c)
                        });
                    (!simple).then_some(
                        "use lowercase ASCII letters, digits, `.`, `_` and `-`, starting with a letter",
                    )
                }
            }
        };
        match rule {
            None => Ok(()),
            Some(rule) => Err(IdError::InvalidNativeName {
                provider: self.to_string(),
                name: name.to_owned(),
                rule,
            }),
        }
    }
}

impl fmt::Display for ToolProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Builtin => f.write_str("builtin"),
            Self::Mcp(uuid) => write!(f, "mcp/{}", uuid.hyphenated()),
            Self::Extension(id) => write!(f, "ext/{id}"),
        }
    }
}

fn is_valid_extension_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_EXTENSION_ID_BYTES
        && id.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

/// `<provider>:<native-name>`, validated on construction and on deserialize.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId {
    /// The canonical text; ordering and equality follow it (the other
    /// fields are derived from it).
    text: String,
    /// Byte offset of the separating `:`.
    split: usize,
    provider: ToolProvider,
}

impl ToolId {
    pub fn new(provider: &ToolProvider, native_name: &str) -> Result<Self, IdError> {
        provider.check_native_name(native_name)?;
        let prefix = provider.to_string();
        Ok(Self {
            split: prefix.len(),
            text: format!("{prefix}:{native_name}"),
            provider: provider.clone(),
        })
    }

    pub fn builtin(native_name: &str) -> Result<Self, IdError> {
        Self::new(&ToolProvider::Builtin, native_name)
    }

    pub fn parse(text: &str) -> Result<Self, IdError> {
        let Some(split) = text.find(':') else {
            return Err(IdError::MissingSeparator(text.to_owned()));
        };
        let (provider, native_name) = (&text[..split], &text[split + 1..]);
        if provider.is_empty() {
            return Err(IdError::EmptyProvider(text.to_owned()));
        }
        if native_name.is_empty() {
            return Err(IdError::EmptyNativeName(text.to_owned()));
        }
        Self::new(&ToolProvider::parse(provider)?, native_name)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn provider(&self) -> &ToolProvider {
        &self.provider
    }

    pub fn provider_str(&self) -> &str {
        &self.text[..self.split]
    }

    pub fn native_name(&self) -> &str {
        &self.text[self.split + 1..]
    }

    pub fn is_builtin(&self) -> bool {
        self.provider == ToolProvider::Builtin
    }
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ToolId({})", self.text)
    }
}

impl FromStr for ToolId {
    type Err = IdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl Serialize for ToolId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for ToolId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b";

    #[test]
    fn parses_each_provider() {
        let id = ToolId::parse("builtin:workspace.read_file").expect("builtin");
        assert_eq!(id.provider(), &ToolProvider::Builtin);
        assert_eq!(id.native_name(), "workspace.read_file");

        let mcp = ToolId::parse(&format!("mcp/{UUID}:search:exact")).expect("mcp");
        assert_eq!(
            mcp.native_name(),
            "search:exact",
            "split on the first colon"
        );
        assert!(matches!(mcp.provider(), ToolProvider::Mcp(_)));

        let ext = ToolId::parse("ext/acme-weather:forecast").expect("ext");
        assert_eq!(
            ext.provider(),
            &ToolProvider::Extension("acme-weather".into())
        );
    }

    #[test]
    fn rejects_what_the_reference_rejects() {
        assert!(matches!(
            ToolId::parse(""),
            Err(IdError::MissingSeparator(_))
        ));
        assert!(matches!(
            ToolId::parse("builtin"),
            Err(IdError::MissingSeparator(_))
        ));
        assert!(matches!(
            ToolId::parse(":tool"),
            Err(IdError::EmptyProvider(_))
        ));
        assert!(matches!(
            ToolId::parse("builtin:"),
            Err(IdError::EmptyNativeName(_))
        ));
    }

    #[test]
    fn rejects_unknown_and_malformed_providers() {
        assert!(matches!(
            ToolId::parse("shell:run"),
            Err(IdError::UnknownProvider(_))
        ));
        let upper = UUID.to_uppercase();
        assert!(matches!(
            ToolId::parse(&format!("mcp/{upper}:x")),
            Err(IdError::InvalidRegistrationId(_))
        ));
        let simple = UUID.replace('-', "");
        assert!(matches!(
            ToolId::parse(&format!("mcp/{simple}:x")),
            Err(IdError::InvalidRegistrationId(_))
        ));
        for bad in ["ext/:x", "ext/Acme:x", "ext/-a:x", "ext/a b:x"] {
            assert!(
                matches!(ToolId::parse(bad), Err(IdError::InvalidExtensionId(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn builtin_names_are_simple_but_mcp_names_are_free() {
        for bad in ["Dice.roll", "dice roll", "1dice", "dice/roll", "dice\u{7}"] {
            assert!(ToolId::builtin(bad).is_err(), "{bad}");
        }
        assert!(ToolId::parse(&format!("mcp/{UUID}:Get Weather (v2)")).is_ok());
        assert!(ToolId::parse(&format!("mcp/{UUID}:bad\nname")).is_err());
        let long = "a".repeat(257);
        assert!(ToolId::parse(&format!("mcp/{UUID}:{long}")).is_err());
    }

    #[test]
    fn serde_round_trip_revalidates() {
        let id = ToolId::builtin("dice.roll").expect("valid");
        let json = serde_json::to_string(&id).expect("serialize");
        assert_eq!(json, "\"builtin:dice.roll\"");
        assert_eq!(
            serde_json::from_str::<ToolId>(&json).expect("round trip"),
            id
        );
        assert!(serde_json::from_str::<ToolId>("\"builtin:\"").is_err());
    }
}
