//! Every sync system call a run makes (`fsync`, `fdatasync`, `syncfs`) goes
//! through one [`SyncCounter`], so the durability policy is testable: a test
//! reads how many a tool call cost instead of trusting a comment.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts the sync system calls made for one run: its journal, its audit
/// files and their directories. Clones share the count.
#[derive(Debug, Clone, Default)]
pub struct SyncCounter(Arc<AtomicU64>);

impl SyncCounter {
    /// How many sync system calls have been made so far.
    pub fn calls(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// `fsync`: the file's data and metadata.
    pub(crate) fn file(&self, file: &File) -> io::Result<()> {
        self.count();
        file.sync_all()
    }

    /// `fdatasync`: the file's data (and the size that reaches it).
    pub(crate) fn data(&self, file: &File) -> io::Result<()> {
        self.count();
        file.sync_data()
    }

    /// Make a directory's entries (a created, linked or truncated file)
    /// durable. A file's own fsync does not cover the name that points at it.
    pub(crate) fn dir(&self, dir: &Path) -> io::Result<()> {
        let opened = File::open(dir)?;
        self.file(&opened)
    }

    /// Flush the whole file system holding `dir` in one call (`syncfs`):
    /// every file and directory entry written before it, whoever wrote it.
    /// Where there is no `syncfs`, [`Unsupported`](io::ErrorKind::Unsupported)
    /// and the caller syncs file by file.
    pub(crate) fn filesystem(&self, dir: &Path) -> io::Result<()> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let opened = File::open(dir)?;
            self.count();
            rustix::fs::syncfs(&opened).map_err(io::Error::from)
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let _ = dir;
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
    }
}

/// Whether a sync of what is written at `path` can wait on a device:
/// `false` on a memory file system (tmpfs, ramfs), whose syncs return at
/// once; `true` on every other, and when the file system cannot be told.
/// Lets a caller keep a sync inline where handing it off would cost more
/// than the sync.
pub fn sync_may_wait(path: &Path) -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        const TMPFS_MAGIC: u64 = 0x0102_1994;
        const RAMFS_MAGIC: u64 = 0x8584_58f6;
        match rustix::fs::statfs(path) {
            #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs by target
            Ok(stat) => !matches!(stat.f_type as u64, TMPFS_MAGIC | RAMFS_MAGIC),
            Err(_) => true,
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = path;
        true
    }
}

/// The directory holding `path`, `.` for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_memory_file_system_never_waits_and_an_unknown_path_may() {
        // /dev/shm when the last mount there is a tmpfs (a sandbox may
        // bind-mount something else over it).
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let shm = mounts.lines().rev().find_map(|line| {
            let mut fields = line.split(' ');
            (fields.nth(1)? == "/dev/shm").then(|| fields.next() == Some("tmpfs"))
        });
        if shm == Some(true) {
            assert!(!sync_may_wait(Path::new("/dev/shm")));
        }
        assert!(sync_may_wait(Path::new("/no/such/place")));
        // /proc is not a memory file system of this kind: its answer is "may".
        assert!(sync_may_wait(Path::new("/proc")));
    }
}
