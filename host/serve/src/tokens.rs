//! The tokens file: which bearer token belongs to which tenant.
//!
//! ```json
//! {"schemaVersion": 1, "kind": "toolhost.tokens",
//!  "tokens": [{"tenant": "acme", "sha256": "<64 hex digits: sha256 of the token>",
//!              "caps": {"maxRounds": 40}}]}
//! ```
//!
//! `caps` (optional) bounds what the tenant's runs may ask for
//! ([`TenantCaps`]); a tenant with several tokens may give them on any of
//! its entries, but never two different ones.
//!
//! Only hashes are stored, so the file never holds a usable token; it is
//! refused unless only its owner may read it (mode 0600 or stricter), like
//! an SSH key. A presented token is hashed and compared with every entry in
//! constant time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::caps::TenantCaps;

const TOKENS_KIND: &str = "toolhost.tokens";
/// Largest tokens file read.
const MAX_TOKENS_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    #[error("serve.tokens_invalid: {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error(
        "serve.tokens_exposed: {} has mode {mode:o}: a tokens file must be readable by its owner only (chmod 600)",
        path.display()
    )]
    Exposed { path: PathBuf, mode: u32 },
    #[error("serve.tokens_io: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The tenant a request acts for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tenant(pub String);

#[derive(Debug, Clone)]
pub struct Tokens {
    path: PathBuf,
    entries: Vec<([u8; 32], Tenant)>,
    /// The operator's caps, by tenant (only those given some).
    caps: BTreeMap<String, TenantCaps>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TokensFile {
    schema_version: u32,
    kind: String,
    tokens: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    tenant: String,
    sha256: String,
    #[serde(default)]
    caps: Option<TenantCaps>,
}

impl Tokens {
    pub fn load(path: &Path) -> Result<Self, TokensError> {
        let io = |source| TokensError::Io {
            path: path.to_owned(),
            source,
        };
        let invalid = |message: String| TokensError::Invalid {
            path: path.to_owned(),
            message,
        };
        let metadata = std::fs::metadata(path).map_err(io)?;
        let mode = rustix::fs::stat(path)
            .map_err(|error| io(error.into()))?
            .st_mode;
        if mode & 0o077 != 0 {
            return Err(TokensError::Exposed {
                path: path.to_owned(),
                mode: mode & 0o777,
            });
        }
        if !metadata.is_file() || metadata.len() > MAX_TOKENS_BYTES {
            return Err(invalid(format!(
                "must be a regular file of at most {MAX_TOKENS_BYTES} bytes"
            )));
        }
        let text = std::fs::read(path).map_err(io)?;
        let file: TokensFile =
            serde_json::from_slice(&text).map_err(|error| invalid(error.to_string()))?;
        if file.schema_version != 1 || file.kind != TOKENS_KIND {
            return Err(invalid(format!(
                "expected schemaVersion 1 and kind {TOKENS_KIND}"
            )));
        }
        let mut entries = Vec::with_capacity(file.tokens.len());
        let mut caps = BTreeMap::new();
        for entry in file.tokens {
            if !toolhost_core::profile::is_tenant_name(&entry.tenant) {
                return Err(invalid(format!(
                    "tenant `{}` must be 1 to 64 of a-z, 0-9, `-`, `_`",
                    entry.tenant.chars().take(64).collect::<String>()
                )));
            }
            let mut digest = [0u8; 32];
            hex::decode_to_slice(&entry.sha256, &mut digest).map_err(|_| {
                invalid(format!(
                    "the sha256 of tenant `{}` must be 64 hex digits",
                    entry.tenant
                ))
            })?;
            if let Some(given) = entry.caps.filter(|given| !given.is_empty()) {
                let earlier = caps.insert(entry.tenant.clone(), given);
                if earlier.is_some_and(|earlier| earlier != given) {
                    return Err(invalid(format!(
                        "tenant `{}` is given two different caps: give them once",
                        entry.tenant
                    )));
                }
            }
            entries.push((digest, Tenant(entry.tenant)));
        }
        Ok(Self {
            path: path.to_owned(),
            entries,
            caps,
        })
    }

    /// The file these tokens were read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many tokens the file holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The operator's caps on `tenant` (none: only the host's).
    pub fn caps_of(&self, tenant: &str) -> TenantCaps {
        self.caps.get(tenant).copied().unwrap_or_default()
    }

    /// The tenant `token` belongs to. Every entry is compared, matched or
    /// not, so the time taken says nothing about which one matched.
    pub fn tenant_of(&self, token: &str) -> Option<Tenant> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for (digest, tenant) in &self.entries {
            if bool::from(digest.ct_eq(&presented)) && found.is_none() {
                found = Some(tenant.clone());
            }
        }
        found
    }
}

/// The hex sha256 a tokens file records for `token`.
pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("tokens.json");
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn tokens_are_hashes_and_the_file_is_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = format!(
            r#"{{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{{"tenant":"acme","sha256":"{}"}},{{"tenant":"globex","sha256":"{}"}}]}}"#,
            token_digest("acme-secret"),
            token_digest("globex-secret")
        );
        let tokens = Tokens::load(&write(dir.path(), &text, 0o600)).expect("loads");
        assert_eq!(tokens.tenant_of("acme-secret"), Some(Tenant("acme".into())));
        assert_eq!(
            tokens.tenant_of("globex-secret"),
            Some(Tenant("globex".into()))
        );
        assert_eq!(tokens.tenant_of("acme-secret "), None);
        assert_eq!(tokens.tenant_of(""), None);
        assert!(tokens.caps_of("acme").is_empty());

        // Caps on one of a tenant's entries are that tenant's.
        let capped = format!(
            r#"{{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{{"tenant":"acme","sha256":"{}","caps":{{"maxRounds":12,"fuel":5000}}}},{{"tenant":"acme","sha256":"{}"}}]}}"#,
            token_digest("acme-secret"),
            token_digest("acme-second")
        );
        let tokens = Tokens::load(&write(dir.path(), &capped, 0o600)).expect("loads");
        let caps = tokens.caps_of("acme");
        assert_eq!((caps.max_rounds, caps.fuel), (Some(12), Some(5000)));
        assert!(tokens.caps_of("globex").is_empty());

        let exposed =
            Tokens::load(&write(dir.path(), &text, 0o644)).expect_err("readable by others");
        assert!(
            matches!(exposed, TokensError::Exposed { mode: 0o644, .. }),
            "{exposed}"
        );
        for bad in [
            r#"{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{"tenant":"Acme","sha256":"00"}]}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{"tenant":"acme","sha256":"zz"}]}"#,
            r#"{"schemaVersion":2,"kind":"toolhost.tokens","tokens":[]}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[],"extra":1}"#,
            // A cap it does not know, and two caps for one tenant.
            r#"{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{"tenant":"acme","sha256":"0000000000000000000000000000000000000000000000000000000000000000","caps":{"maxTurns":3}}]}"#,
            r#"{"schemaVersion":1,"kind":"toolhost.tokens","tokens":[{"tenant":"acme","sha256":"0000000000000000000000000000000000000000000000000000000000000000","caps":{"maxRounds":3}},{"tenant":"acme","sha256":"1111111111111111111111111111111111111111111111111111111111111111","caps":{"maxRounds":4}}]}"#,
        ] {
            let error = Tokens::load(&write(dir.path(), bad, 0o600)).expect_err(bad);
            assert!(
                matches!(error, TokensError::Invalid { .. }),
                "{bad}: {error}"
            );
        }
    }
}
