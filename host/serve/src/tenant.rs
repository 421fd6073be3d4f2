//! Each tenant's own directories under the server's data directory:
//!
//! ```text
//! <data-dir>/tenants/<tenant>/
//!   runs/<run-id>/       its runs (the run directories of docs/runs.md)
//!   summaries/<id>.json  how each run served here ended (`LoopSummary`)
//!   chats/<name>.jsonl   the SillyTavern chats its runs write into
//!   profiles/<name>.json the profiles (and agents) its runs may name
//!   skills/<name>/       installed-skills directories
//!   persist/<chat>/      each chat's persistent files (`chats/<chat>.jsonl`'s),
//!                        projected into its runs' `persist/`, promoted back
//!                        by the runs that finish
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

    /// Where each chat's persist directory is: `persist/<chat>/`, made on
    /// demand by [`TenantDirs::chat_persist`].
    pub fn persist(&self) -> PathBuf {
        self.root.join("persist")
    }

    /// `persist/<name>/` for the chat file `chats/<name>.jsonl` (`None` for
    /// any other path): the path a run of that chat records, absolute as
    /// its chat's is, never resolved.
    pub fn chat_persist_path(&self, chat: &Path) -> Option<PathBuf> {
        let name = chat.file_name()?.to_str()?.strip_suffix(CHAT_SUFFIX)?;
        // Made absolute, never resolved: `chats/../..` is not `chats`.
        let parent = std::path::absolute(chat.parent()?).ok()?;
        if !is_plain_name(name) || parent != std::path::absolute(self.chats()).ok()? {
            return None;
        }
        std::path::absolute(self.persist().join(name)).ok()
    }

    /// The persist directory of the chat file `chats/<name>.jsonl`, made if
    /// missing: what a served run projects into its `persist/` and, when it
    /// finishes, promotes back to (docs/serve.md). The runtime opens this
    /// path as given, following links, so it is made a real directory here
    /// first: `persist/` or `persist/<name>` that is a symbolic link —
    /// which could lead out of the tenant, into another's — is refused
    /// (`403 workspace.symlink_found`), never followed or replaced. The
    /// files inside are walked beneath it by the runtime, which refuses
    /// links there itself.
    pub fn chat_persist(&self, chat: &Path) -> Result<PathBuf, ApiError> {
        let dir = self.chat_persist_path(chat).ok_or_else(|| {
            ApiError::internal(
                "finding the chat's persist directory",
                format!("{} is not a chat of the tenant", chat.display()),
            )
        })?;
        let parent = dir.parent().unwrap_or(&dir).to_owned();
        for level in [parent.as_path(), dir.as_path()] {
            real_directory(level)?;
        }
        Ok(dir)
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

/// The suffix of a chat file, which its persist directory's name drops.
const CHAT_SUFFIX: &str = ".jsonl";

/// Make `dir` (its parent must exist), or find it made: a directory, not a
/// link to one. `create_dir` never follows a link at its last component (a
/// dangling one is "already exists"), and what is there is looked at
/// without following it.
fn real_directory(dir: &Path) -> Result<(), ApiError> {
    let what = "making the chat's persist directory";
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(ApiError::internal(what, error)),
    }
    let meta = dir
        .symlink_metadata()
        .map_err(|error| ApiError::internal(what, error))?;
    if meta.file_type().is_symlink() {
        return Err(ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            "workspace.symlink_found",
            format!(
                "the chat's persist directory `{}` is a symbolic link; it is never followed",
                dir.file_name()
                    .map(|name| name.to_string_lossy())
                    .unwrap_or_default()
            ),
        ));
    }
    if !meta.is_dir() {
        return Err(ApiError::internal(
            what,
            format!("{} is not a directory", dir.display()),
        ));
    }
    Ok(())
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

    #[test]
    fn a_chats_persist_directory_is_its_own_and_made_on_demand() {
        let data = tempfile::tempdir().expect("temp dir");
        let dirs = TenantDirs::new(data.path(), "acme");
        dirs.ensure().expect("dirs");
        let chat = dirs.chats().join("c1.jsonl");
        let made = dirs.chat_persist(&chat).expect("made");
        assert_eq!(made, dirs.persist().join("c1"));
        assert!(made.symlink_metadata().is_ok_and(|meta| meta.is_dir()));
        // Again: found, not made twice.
        assert_eq!(dirs.chat_persist(&chat).expect("found"), made);
        // Only a chat file of this tenant has one.
        let bob = TenantDirs::new(data.path(), "bob");
        for other in [
            bob.chats().join("c1.jsonl"),
            dirs.chats().join("../../bob/chats/c1.jsonl"),
            dirs.chats().join("c1.txt"),
            dirs.chats().join(".jsonl"),
            dirs.root().join("c1.jsonl"),
        ] {
            assert_eq!(dirs.chat_persist_path(&other), None, "{}", other.display());
        }
    }

    #[test]
    fn a_link_in_place_of_a_persist_directory_is_refused_not_followed() {
        let data = tempfile::tempdir().expect("temp dir");
        let (acme, bob) = (
            TenantDirs::new(data.path(), "acme"),
            TenantDirs::new(data.path(), "bob"),
        );
        for dirs in [&acme, &bob] {
            dirs.ensure().expect("dirs");
        }
        let bobs = bob
            .chat_persist(&bob.chats().join("c1.jsonl"))
            .expect("bob's");
        // The chat's own directory a link to bob's.
        std::fs::create_dir(acme.persist()).expect("persist");
        std::os::unix::fs::symlink(&bobs, acme.persist().join("c1")).expect("link");
        let refused = acme
            .chat_persist(&acme.chats().join("c1.jsonl"))
            .expect_err("a link");
        assert_eq!(
            (refused.status, refused.code.as_str()),
            (403, "workspace.symlink_found")
        );
        // `persist/` itself a link to bob's: nothing is made through it.
        std::fs::remove_file(acme.persist().join("c1")).expect("unlink");
        std::fs::remove_dir(acme.persist()).expect("rmdir");
        std::os::unix::fs::symlink(bob.persist(), acme.persist()).expect("link");
        let refused = acme
            .chat_persist(&acme.chats().join("c2.jsonl"))
            .expect_err("a link");
        assert_eq!(refused.code, "workspace.symlink_found");
        assert!(!bob.persist().join("c2").exists(), "made through the link");
    }
}
