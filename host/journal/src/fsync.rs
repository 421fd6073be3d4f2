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

/// The directory holding `path`, `.` for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
