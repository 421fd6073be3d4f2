//! Create-only files without a temp name: on Linux an unnamed file is made
//! in the target's own directory (`O_TMPFILE`), written, and only then given
//! its name with `linkat`, which fails with `EEXIST` rather than replace
//! anything. A reader never sees a partial file, an existing file is never
//! touched, a crash leaves nothing behind to clean up (an unnamed file dies
//! with its descriptor), and one directory entry is made instead of a temp
//! entry plus a rename.

use std::fs::File;
use std::io;
use std::path::Path;

/// What [`create_linked`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Linked {
    /// The file exists now, with exactly the bytes given.
    Created,
    /// The kernel, the file system or a missing `/proc` does not allow it;
    /// nothing was created. The caller takes the portable path.
    Unsupported,
}

/// Create `path` (whose directory exists) holding `bytes`, never replacing
/// a file already there (`AlreadyExists`). `before_link` runs on the written
/// file before it gets its name (an fsync, when asked). Mode 0600: audit
/// files hold tool arguments and results.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn create_linked(
    path: &Path,
    bytes: &[u8],
    before_link: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<Linked> {
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;

    use rustix::fs::{AtFlags, CWD, Mode, OFlags, linkat, open};
    use rustix::io::Errno;

    let dir = crate::fsync::parent_dir(path);
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    let unnamed = match open(dir, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fd,
        // No O_TMPFILE here: an old kernel, or a file system without it.
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => {
            return Ok(Linked::Unsupported);
        }
        Err(errno) => return Err(errno.into()),
    };
    let mut file = File::from(unnamed);
    file.write_all(bytes)?;
    before_link(&file)?;
    // Linking an unnamed file by descriptor goes through its /proc entry
    // (`AT_EMPTY_PATH` would need CAP_DAC_READ_SEARCH).
    let by_descriptor = format!("/proc/self/fd/{}", file.as_raw_fd());
    match linkat(CWD, &by_descriptor, CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => Ok(Linked::Created),
        // No /proc in this sandbox: the unnamed file goes with `file`.
        Err(Errno::NOENT) if !Path::new("/proc/self/fd").is_dir() => Ok(Linked::Unsupported),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn create_linked(
    _path: &Path,
    _bytes: &[u8],
    _before_link: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<Linked> {
    Ok(Linked::Unsupported)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn creates_the_file_whole_and_never_replaces_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.json");
        let mut synced = false;
        let linked = create_linked(&path, b"first", |_| {
            synced = true;
            Ok(())
        })
        .expect("create");
        if linked == Linked::Unsupported {
            // Not on this file system: nothing may have been created.
            assert!(!path.exists());
            return;
        }
        assert!(synced, "before_link ran");
        assert_eq!(std::fs::read(&path).expect("read"), b"first");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = create_linked(&path, b"second", |_| Ok(())).expect_err("exists");
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read(&path).expect("read"),
            b"first",
            "left as it was"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("list").count(),
            1,
            "no temp name left anywhere"
        );
    }

    #[test]
    fn a_failing_before_link_creates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.json");
        let failed = create_linked(&path, b"x", |_| Err(io::Error::other("disk on fire")));
        if let Ok(Linked::Unsupported) = failed {
            return;
        }
        assert!(failed.is_err());
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }
}
