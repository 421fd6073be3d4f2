//! fsync helpers shared by the journal and the run directory.

use std::fs::File;
use std::io;
use std::path::Path;

/// Make a directory's entries (a created, linked or truncated file) durable.
/// A file's own fsync does not cover the name that points at it.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The directory holding `path`, `.` for a bare file name.
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
