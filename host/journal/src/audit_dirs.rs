//! The directories of a run that audit files go into. Once made, a directory
//! is known to exist (a failing `mkdir` costs as much as a write), and the
//! ones written to most recently — `tool-args/`, `tool-results/`,
//! `model-responses/…` in a busy run — are held open, so each new file is
//! created relative to its directory instead of walking the run's whole path
//! again.
//!
//! A held directory can also hold one unnamed file made ahead of time
//! ([`AuditDirs::make_unnamed_ahead`]): a host with idle time between calls
//! (`mcp serve` after writing an answer) makes the inodes of the next call's
//! files then, so the call itself only writes and links them. An unnamed
//! file never linked vanishes with its descriptor (and, after a crash, with
//! the process), so making one ahead leaves no trace and changes no promise.

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;

/// Directories held open per run, the least recently written closed first:
/// bounds a run's descriptors (one invocation directory per child agent
/// would otherwise each keep one).
const HELD_AT_MOST: usize = 6;

#[derive(Debug, Default)]
pub(crate) struct AuditDirs {
    /// Run-relative directories known to exist.
    known: HashSet<String>,
    /// Held directories, by run-relative name.
    held: HashMap<String, Held>,
    uses: u64,
}

#[derive(Debug)]
struct Held {
    dir: Arc<OwnedFd>,
    /// When it was last asked for.
    used: u64,
    /// An unnamed file made ahead in it, not yet written.
    unnamed: Option<OwnedFd>,
    /// Files created in it while held.
    created: u64,
    /// A file was created in it since files were last made ahead.
    created_since: bool,
}

impl AuditDirs {
    pub(crate) fn is_known(&self, relative_dir: &str) -> bool {
        self.known.contains(relative_dir)
    }

    pub(crate) fn mark_known(&mut self, relative_dir: &str) {
        self.known.insert(relative_dir.to_owned());
    }

    /// The open directory `relative_dir` (known to exist) of the run at
    /// `root`, opened now if it is not held (closing the least recently
    /// used one when full); `None` when it cannot be opened — the caller
    /// then writes by path, as before.
    pub(crate) fn held(&mut self, root: &Path, relative_dir: &str) -> Option<Arc<OwnedFd>> {
        self.uses += 1;
        if let Some(held) = self.held.get_mut(relative_dir) {
            held.used = self.uses;
            return Some(Arc::clone(&held.dir));
        }
        let dir = Arc::new(open_dir(&root.join(relative_dir)).ok()?);
        if self.held.len() >= HELD_AT_MOST
            && let Some(oldest) = self
                .held
                .iter()
                .min_by_key(|(_, held)| held.used)
                .map(|(name, _)| name.clone())
        {
            self.held.remove(&oldest);
        }
        let held = Held {
            dir: Arc::clone(&dir),
            used: self.uses,
            unnamed: None,
            created: 0,
            created_since: false,
        };
        self.held.insert(relative_dir.to_owned(), held);
        Some(dir)
    }

    /// A file is about to be created in the held `relative_dir`: the
    /// unnamed file made ahead there, if any, to write and link.
    pub(crate) fn take_unnamed(&mut self, relative_dir: &str) -> Option<OwnedFd> {
        let held = self.held.get_mut(relative_dir)?;
        held.created += 1;
        held.created_since = true;
        held.unnamed.take()
    }

    /// Make one unnamed file ahead in each held directory that files keep
    /// going into — two so far, one since the last time — where none
    /// waits; returns how many were made. A directory written once (an
    /// invocation's snapshot) gets none. A directory that refuses one is
    /// left to the usual path.
    pub(crate) fn make_unnamed_ahead(&mut self) -> usize {
        let mut made = 0;
        for held in self.held.values_mut() {
            let recent = std::mem::take(&mut held.created_since);
            if !recent || held.created < 2 || held.unnamed.is_some() {
                continue;
            }
            if let Some(file) = crate::create::open_unnamed(&held.dir) {
                held.unnamed = Some(file);
                made += 1;
            }
        }
        made
    }
}

#[cfg(test)]
impl AuditDirs {
    /// The inode of the unnamed file waiting in `relative_dir`.
    pub(crate) fn unnamed_inode(&self, relative_dir: &str) -> Option<u64> {
        let file = self.held.get(relative_dir)?.unnamed.as_ref()?;
        Some(rustix::fs::fstat(file).ok()?.st_ino)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags, open};
    // A path descriptor: enough to create and link files beneath it.
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok(open(path, flags, Mode::empty())?)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(std::fs::File::open(path)?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_most_recently_used_directories_and_no_more() {
        let root = tempfile::tempdir().expect("tempdir");
        let mut dirs = AuditDirs::default();
        let names: Vec<String> = (0..HELD_AT_MOST + 2)
            .map(|index| format!("d{index}"))
            .collect();
        for name in &names {
            std::fs::create_dir(root.path().join(name)).expect("mkdir");
            dirs.mark_known(name);
        }
        let first = dirs.held(root.path(), "d0").expect("held");
        for name in &names[1..] {
            // d0 stays the most recently used: it is never the one closed.
            assert!(dirs.held(root.path(), name).is_some(), "{name}");
            let again = dirs.held(root.path(), "d0").expect("held");
            assert!(Arc::ptr_eq(&again, &first), "d0 opened once");
            assert!(dirs.held.len() <= HELD_AT_MOST);
        }
        assert_eq!(dirs.held.len(), HELD_AT_MOST);
        assert!(
            !dirs.held.contains_key("d1"),
            "the least recently used went first"
        );
        assert!(
            dirs.is_known("d1"),
            "closing a directory does not forget it exists"
        );
        assert!(dirs.held(root.path(), "missing").is_none());
        assert_eq!(
            dirs.held.len(),
            HELD_AT_MOST,
            "a failed open closes nothing"
        );
    }
}
