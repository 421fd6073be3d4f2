//! `toolhost serve` picks up catalog changes while it runs: `mcp add`,
//! `mcp refresh`, `ext grant` and the like change files under the MCP and
//! extension directories; every [`POLL`] the server looks at their names,
//! sizes and modification times, and when they changed it loads the tools
//! again and gives them to new runs (`ServeState::replace_host`). Running
//! runs keep the tools they started with, and their snapshots.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use toolhost_serve::ServeState;

/// How often the directories are looked at.
pub const POLL: Duration = Duration::from_secs(2);
/// Most entries looked at per directory (a registry holds a few).
const MAX_ENTRIES: usize = 10_000;
/// How deep under each directory.
const MAX_DEPTH: usize = 4;

/// Where the catalog's sources are.
#[derive(Debug, Clone)]
pub struct Sources {
    pub cache_dir: Option<PathBuf>,
    pub mcp_dir: Option<PathBuf>,
    pub ext_dir: Option<PathBuf>,
    /// The user's and the platform's policy files.
    pub policy: crate::load::PolicyFiles,
}

impl Sources {
    /// A digest of what the directories hold now (names, sizes, times).
    pub fn fingerprint(&self) -> String {
        let mut hasher = Sha256::new();
        for dir in [&self.mcp_dir, &self.ext_dir].into_iter().flatten() {
            let mut entries = Vec::new();
            walk(dir, dir, 0, &mut entries);
            entries.sort();
            for entry in entries {
                hasher.update(entry.as_bytes());
                hasher.update(b"\n");
            }
            hasher.update(b"\0");
        }
        // A policy file edited, created or removed reloads the tools too.
        for file in self.policy.paths() {
            hasher.update(describe(file).as_bytes());
            hasher.update(b"\0");
        }
        hex::encode(hasher.finalize())
    }

    /// Load the tools again.
    pub async fn load(&self) -> anyhow::Result<toolhost_runtime::ToolHost> {
        crate::load::host(
            self.cache_dir.clone(),
            self.mcp_dir.clone(),
            self.ext_dir.clone(),
            &self.policy,
        )
        .await
    }
}

/// A file's size and modification time, or that it is absent.
fn describe(file: &Path) -> String {
    match std::fs::metadata(file) {
        Ok(meta) => {
            let modified = meta
                .modified()
                .ok()
                .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |since| since.as_nanos());
            format!("{}\t{}\t{modified}", file.display(), meta.len())
        }
        Err(_) => format!("{}\tabsent", file.display()),
    }
}

fn walk(root: &Path, dir: &Path, depth: usize, entries: &mut Vec<String>) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in listing.flatten() {
        if entries.len() >= MAX_ENTRIES {
            return;
        }
        let path = entry.path();
        // Not followed: a link is described by itself.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let modified = meta
            .modified()
            .ok()
            .and_then(|time| time.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_nanos());
        let relative = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        entries.push(format!("{relative}\t{}\t{modified}", meta.len()));
        if meta.is_dir() && depth + 1 < MAX_DEPTH {
            walk(root, &path, depth + 1, entries);
        }
    }
}

/// Reload the tools whenever the sources change from `loaded` (their
/// fingerprint when the server's tools were loaded), for as long as the
/// server runs.
pub async fn watch(state: Arc<ServeState>, sources: Sources, loaded: String) {
    let fingerprint = |sources: &Sources| {
        let sources = sources.clone();
        async move {
            tokio::task::spawn_blocking(move || sources.fingerprint())
                .await
                .unwrap_or_default()
        }
    };
    let mut seen = loaded;
    loop {
        tokio::time::sleep(POLL).await;
        let now = fingerprint(&sources).await;
        if now == seen {
            continue;
        }
        seen = now;
        reload(&state, &sources).await;
    }
}

/// Load the tools and hand them to new runs; on failure keep the old ones.
pub async fn reload(state: &ServeState, sources: &Sources) {
    match sources.load().await {
        Ok(host) => {
            let count = host.catalog().iter().count();
            let host = Arc::new(host);
            state.warm(&host);
            state.replace_host(host);
            eprintln!("toolhost serve: tools loaded again: {count} in the catalog for new runs");
        }
        Err(error) => eprintln!("toolhost serve: the tools stay as they were: {error:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_changes_with_a_registry_file_and_only_then() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mcp = dir.path().join("mcp");
        std::fs::create_dir_all(mcp.join("cache")).expect("dirs");
        std::fs::write(mcp.join("registry.json"), "{}").expect("write");
        let sources = Sources {
            cache_dir: None,
            mcp_dir: Some(mcp.clone()),
            ext_dir: Some(dir.path().join("no-extensions")),
            policy: crate::load::PolicyFiles {
                user: Some((dir.path().join("policy.json"), false)),
                platform: None,
            },
        };
        let before = sources.fingerprint();
        assert_eq!(sources.fingerprint(), before);
        std::fs::write(mcp.join("cache/server.json"), "[]").expect("write");
        let after = sources.fingerprint();
        assert_ne!(after, before);
        std::fs::write(mcp.join("registry.json"), "{\"changed\":1}").expect("write");
        let changed = sources.fingerprint();
        assert_ne!(changed, after);
        // The user's policy appearing reloads the tools too.
        std::fs::write(dir.path().join("policy.json"), "{}").expect("write");
        assert_ne!(sources.fingerprint(), changed);
    }
}
