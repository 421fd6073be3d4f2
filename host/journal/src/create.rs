//! Create-only files without a temp name: on Linux an unnamed file is made
//! in the target's own directory (`O_TMPFILE`), written, and only then given
//! its name with `linkat`, which fails with `EEXIST` rather than replace
//! anything. A reader never sees a partial file, an existing file is never
//! touched, a crash leaves nothing behind to clean up (an unnamed file dies
//! with its descriptor), and one directory entry is made instead of a temp
//! entry plus a rename. A caller writing many files into one directory
//! holds it open and names files relative to it ([`create_linked_in`]),
//! and may make the unnamed file ahead of time ([`open_unnamed`]).

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
pub(crate) fn create_linked(
    path: &Path,
    bytes: &[u8],
    before_link: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<Linked> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let dir = crate::fsync::parent_dir(path);
        create_linked_at(rustix::fs::CWD, dir, path, bytes, before_link, None)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        let _ = (path, bytes, before_link);
        Ok(Linked::Unsupported)
    }
}

/// [`create_linked`] for a file named `name` in a directory the caller holds
/// open: no path is walked again, which is most of the cost of a small file
/// on a busy run. `made` is an unnamed file [`open_unnamed`] made ahead in
/// that directory (never written); without one the file is made now.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn create_linked_in(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &str,
    bytes: &[u8],
    before_link: impl FnOnce(&File) -> io::Result<()>,
    made: Option<std::os::fd::OwnedFd>,
) -> io::Result<Linked> {
    create_linked_at(
        dir,
        Path::new("."),
        Path::new(name),
        bytes,
        before_link,
        made,
    )
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn create_linked_in(
    _dir: std::os::fd::BorrowedFd<'_>,
    _name: &str,
    _bytes: &[u8],
    _before_link: impl FnOnce(&File) -> io::Result<()>,
    _made: Option<std::os::fd::OwnedFd>,
) -> io::Result<Linked> {
    Ok(Linked::Unsupported)
}

/// An unnamed file in the held directory `dir`, made ahead of the call that
/// will write and link it; `None` where the file system has no `O_TMPFILE`
/// or refuses (that call then takes its usual path).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn open_unnamed(dir: &std::os::fd::OwnedFd) -> Option<std::os::fd::OwnedFd> {
    if !links_may_work() {
        return None;
    }
    rustix::fs::openat(dir, ".", UNNAMED_FLAGS, UNNAMED_MODE).ok()
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(crate) fn open_unnamed(_dir: &std::os::fd::OwnedFd) -> Option<std::os::fd::OwnedFd> {
    None
}

#[cfg(any(target_os = "linux", target_os = "android"))]
const UNNAMED_FLAGS: rustix::fs::OFlags = rustix::fs::OFlags::TMPFILE
    .union(rustix::fs::OFlags::WRONLY)
    .union(rustix::fs::OFlags::CLOEXEC);
/// Audit files hold tool arguments and results: the owner's only.
#[cfg(any(target_os = "linux", target_os = "android"))]
const UNNAMED_MODE: rustix::fs::Mode = rustix::fs::Mode::from_raw_mode(0o600);

/// The unnamed file is made in `unnamed_in` and linked as `name`, both
/// looked up from `dir` (a held directory, or the working directory with
/// absolute paths).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn create_linked_at(
    dir: std::os::fd::BorrowedFd<'_>,
    unnamed_in: &Path,
    name: &Path,
    bytes: &[u8],
    before_link: impl FnOnce(&File) -> io::Result<()>,
    made: Option<std::os::fd::OwnedFd>,
) -> io::Result<Linked> {
    use std::io::Write as _;

    use rustix::fs::openat;
    use rustix::io::Errno;

    if !links_may_work() {
        return Ok(Linked::Unsupported);
    }
    let unnamed = match made {
        Some(fd) => fd,
        None => match openat(dir, unnamed_in, UNNAMED_FLAGS, UNNAMED_MODE) {
            Ok(fd) => fd,
            // No O_TMPFILE here: an old kernel, or a file system without it.
            Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOSYS) => {
                return Ok(Linked::Unsupported);
            }
            Err(errno) => return Err(errno.into()),
        },
    };
    let mut file = File::from(unnamed);
    file.write_all(bytes)?;
    before_link(&file)?;
    link_unnamed(&file, dir, name)
}

/// Whether `linkat(AT_EMPTY_PATH)` works for this process: since Linux 6.10
/// for a file the caller opened itself, before that only with
/// CAP_DAC_READ_SEARCH. Learned at the first link.
#[cfg(any(target_os = "linux", target_os = "android"))]
static EMPTY_PATH_LINKS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(UNKNOWN);
#[cfg(any(target_os = "linux", target_os = "android"))]
const UNKNOWN: u8 = 0;
#[cfg(any(target_os = "linux", target_os = "android"))]
const WORKS: u8 = 1;
#[cfg(any(target_os = "linux", target_os = "android"))]
const REFUSED: u8 = 2;
/// Neither way links: no `AT_EMPTY_PATH` for this process and no `/proc`.
/// Every file then takes the portable path, without making an unnamed one
/// first.
#[cfg(any(target_os = "linux", target_os = "android"))]
const NEITHER: u8 = 3;

/// Whether an unnamed file can be given a name here (not known to fail).
#[cfg(any(target_os = "linux", target_os = "android"))]
fn links_may_work() -> bool {
    EMPTY_PATH_LINKS.load(std::sync::atomic::Ordering::Relaxed) != NEITHER
}

/// Give the unnamed `file` its name: by descriptor where the kernel allows
/// it, else through the file's `/proc/self/fd` entry.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn link_unnamed(file: &File, dir: std::os::fd::BorrowedFd<'_>, name: &Path) -> io::Result<Linked> {
    use std::os::fd::AsRawFd as _;
    use std::sync::atomic::Ordering;

    use rustix::fs::{AtFlags, CWD, linkat};
    use rustix::io::Errno;

    let known = EMPTY_PATH_LINKS.load(Ordering::Relaxed);
    if known != REFUSED {
        match linkat(file, "", dir, name, AtFlags::EMPTY_PATH) {
            Ok(()) => {
                EMPTY_PATH_LINKS.store(WORKS, Ordering::Relaxed);
                return Ok(Linked::Created);
            }
            // Refused for lack of the capability: try /proc below, and
            // remember which way works (or that neither does).
            Err(Errno::NOENT | Errno::PERM) if known == UNKNOWN => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    let by_descriptor = format!("/proc/self/fd/{}", file.as_raw_fd());
    match linkat(CWD, &by_descriptor, dir, name, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => {
            EMPTY_PATH_LINKS.store(REFUSED, Ordering::Relaxed);
            Ok(Linked::Created)
        }
        // No /proc in this sandbox: the unnamed file goes with `file`.
        Err(Errno::NOENT) if !Path::new("/proc/self/fd").is_dir() => {
            if known == UNKNOWN {
                EMPTY_PATH_LINKS.store(NEITHER, Ordering::Relaxed);
            }
            Ok(Linked::Unsupported)
        }
        Err(errno) => Err(errno.into()),
    }
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
    fn creates_in_a_held_directory_and_never_replaces_there() {
        let dir = tempfile::tempdir().expect("tempdir");
        let held = std::fs::File::open(dir.path()).expect("open dir");
        let created = create_linked_in(
            std::os::fd::AsFd::as_fd(&held),
            "b.json",
            b"one",
            |_| Ok(()),
            None,
        )
        .expect("create");
        if created == Linked::Unsupported {
            assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
            return;
        }
        assert_eq!(
            std::fs::read(dir.path().join("b.json")).expect("read"),
            b"one"
        );
        let again = create_linked_in(
            std::os::fd::AsFd::as_fd(&held),
            "b.json",
            b"two",
            |_| Ok(()),
            None,
        )
        .expect_err("exists");
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read(dir.path().join("b.json")).expect("read"),
            b"one"
        );
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
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
