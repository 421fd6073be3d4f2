//! Each tenant's own directories under the server's data directory:
//!
//! ```text
//! <data-dir>/tenants/<tenant>/
//!   runs/<run-id>/       its runs (the run directories of docs/runs.md)
//!   summaries/<id>.json  how each run served here ended (`LoopSummary`)
//!   chats/<name>.jsonl   the SillyTavern chats its runs write into
//!   profiles/<name>.json the profiles (and agents) its runs may name
//!   skills/<name>/       installed-skills directories
//!   tmp/                 inline world info, while a run is created
//!   policy.json          its tool policy, as a user's (docs/policy.md; optional)
//! ```
//!
//! A request names files in these directories by a plain name, never a
//! path; a name that could leave the directory is refused, and a tenant
//! never reaches another's directory (the tenant name is checked when the
//! tokens file is read).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use toolhost_core::policy::{Policies, ToolPolicy};
use toolhost_runtime::ToolHost;

use crate::error::ApiError;

/// `[A-Za-z0-9._-]{1,64}`, not starting with `.`: a file name in one
/// directory that cannot name a parent, a hidden file or a path.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// One tenant's directories.
#[derive(Debug, Clone)]
pub struct TenantDirs {
    root: PathBuf,
    /// Where its `runs/` and `summaries/` are: `root`, or on a cluster node
    /// the node's own directory (a cache of the cluster's runs).
    runs_root: PathBuf,
}

impl TenantDirs {
    pub fn new(data_dir: &Path, tenant: &str) -> Self {
        let root = data_dir.join("tenants").join(tenant);
        Self {
            runs_root: root.clone(),
            root,
        }
    }

    /// A tenant's directories on a cluster node: its chats, profiles and
    /// skills in the shared data directory, its runs in the node's own.
    pub fn on_node(data_dir: &Path, node_dir: &Path, tenant: &str) -> Self {
        Self {
            root: data_dir.join("tenants").join(tenant),
            runs_root: node_dir.join("tenants").join(tenant),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn runs(&self) -> PathBuf {
        self.runs_root.join("runs")
    }

    pub fn summaries(&self) -> PathBuf {
        self.runs_root.join("summaries")
    }

    pub fn chats(&self) -> PathBuf {
        self.root.join("chats")
    }

    pub fn profiles(&self) -> PathBuf {
        self.root.join("profiles")
    }

    pub fn skills(&self) -> PathBuf {
        self.root.join("skills")
    }

    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// The tenant's own tool policy, in place of a user's (docs/policy.md).
    pub fn policy(&self) -> PathBuf {
        self.root.join("policy.json")
    }

    /// The policies this tenant's snapshots are compiled under: its own
    /// `policy.json` as the user's policy (none when it has none), and the
    /// server's platform policy; with a digest of both, so what was built
    /// for other policies is not reused. A policy file that does not read
    /// refuses the request: it is never taken as "no policy".
    pub fn policies(&self, host: &ToolHost) -> Result<(Arc<Policies>, String), ApiError> {
        let path = self.policy();
        let mut digest = Sha256::new();
        let user = match crate::runs::read_bounded(&path, MAX_POLICY_BYTES) {
            Ok(bytes) => {
                digest.update(&bytes);
                let text = String::from_utf8_lossy(&bytes);
                let policy = ToolPolicy::from_json(&text, "the tenant's policy.json")
                    .map_err(|error| ApiError::internal("reading the tenant's policy", error))?;
                Some(policy)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(ApiError::internal("reading the tenant's policy", error)),
        };
        let platform = host.policies().platform.clone();
        digest.update(format!("{platform:?}").as_bytes());
        let policies = Policies { user, platform };
        Ok((Arc::new(policies), hex::encode(digest.finalize())))
    }

    /// `dir/<name><suffix>`, when `name` is plain.
    pub fn named(dir: PathBuf, name: &str, suffix: &str) -> Option<PathBuf> {
        let file = if name.ends_with(suffix) {
            name.to_owned()
        } else {
            format!("{name}{suffix}")
        };
        is_plain_name(&file).then(|| dir.join(file))
    }

    /// Create the directories a run needs (idempotent).
    pub fn ensure(&self) -> std::io::Result<()> {
        for dir in [
            self.runs(),
            self.summaries(),
            self.chats(),
            self.profiles(),
            self.tmp(),
        ] {
            std::fs::create_dir_all(dir)?;
        }
        Ok(())
    }
}

/// Largest tenant policy file read.
const MAX_POLICY_BYTES: u64 = 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_name_a_file() {
        for good in ["chat", "chat.jsonl", "a-b_c.1"] {
            assert!(is_plain_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "a\\b",
            "a b",
            &"x".repeat(65),
        ] {
            assert!(!is_plain_name(bad), "{bad}");
        }
        let dirs = TenantDirs::new(Path::new("/d"), "acme");
        assert_eq!(
            TenantDirs::named(dirs.chats(), "c1", ".jsonl"),
            Some(PathBuf::from("/d/tenants/acme/chats/c1.jsonl"))
        );
        assert_eq!(TenantDirs::named(dirs.chats(), "../c1", ".jsonl"), None);
    }
}
