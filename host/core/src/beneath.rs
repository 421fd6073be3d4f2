//! Opening beneath a directory, never through a link: the one `openat2`
//! helper of the crates that read or write under a directory a model or a
//! file names (the workspace and the chat's persist directory, the skills,
//! the run's world-info snapshot).
//!
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
//! RESOLVE_NO_XDEV`: the kernel refuses, atomically with the open, any path
//! that leaves the directory, passes through a symbolic link (even one
//! planted a moment ago) or crosses a mount. Each crate turns a refusal
//! ([`Refusal`]) into its own error.

use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, openat2};
use rustix::io::Errno;

/// How every open beneath resolves.
pub const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::NO_XDEV);

/// A directory, to list or to open beneath.
pub const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

/// A file to read. `O_NONBLOCK`: opening a planted fifo must not hang;
/// `O_NOCTTY`: a planted tty must not become ours. Both are refused right
/// after `fstat` by the caller.
pub const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::CLOEXEC)
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY);

/// What a refusal says when the kernel has no `openat2`.
pub const NO_OPENAT2: &str = "openat2 is not available (Linux 5.6 or later is required)";

/// `openat2` beneath `dir`, retrying the transient `EAGAIN`/`EINTR` (at
/// most 16 times).
pub fn open_beneath(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, Errno> {
    let mut attempts = 0;
    loop {
        match openat2(dir, path, flags, mode, RESOLVE) {
            Err(Errno::AGAIN | Errno::INTR) if attempts < 16 => attempts += 1,
            other => return other,
        }
    }
}

/// Why an open beneath failed, in the terms every caller distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It, or a parent, does not exist.
    Missing,
    /// A parent is a file, or a directory was asked for and this is not one.
    NotDirectory,
    /// A symbolic link on the way (`ELOOP`).
    Link,
    /// It leaves the directory or crosses a mount (`EXDEV`).
    Escape,
    /// The kernel has no `openat2` ([`NO_OPENAT2`]).
    Unsupported,
    /// Anything else the host could not do.
    Other(Errno),
}

impl Refusal {
    pub fn of(errno: Errno) -> Self {
        match errno {
            Errno::NOENT => Self::Missing,
            Errno::NOTDIR => Self::NotDirectory,
            Errno::LOOP => Self::Link,
            Errno::XDEV => Self::Escape,
            Errno::NOSYS => Self::Unsupported,
            other => Self::Other(other),
        }
    }
}

/// What a non-regular, non-directory file is, for messages.
pub fn special_kind(kind: FileType) -> &'static str {
    match kind {
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a fifo",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        _ => "a special file",
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn links_escapes_and_missing_paths_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("inside")).unwrap();
        std::fs::write(dir.path().join("inside/file"), "x").unwrap();
        std::os::unix::fs::symlink("inside", dir.path().join("link")).unwrap();
        let root = rustix::fs::open(dir.path(), DIR_FLAGS, Mode::empty()).unwrap();
        let open = |path: &str| open_beneath(root.as_fd(), path, READ_FLAGS, Mode::empty());
        assert!(open("inside/file").is_ok());
        let refusal = |path: &str| Refusal::of(open(path).unwrap_err());
        assert_eq!(refusal("link/file"), Refusal::Link);
        assert_eq!(refusal("../x"), Refusal::Escape);
        assert_eq!(refusal("/etc/passwd"), Refusal::Escape);
        assert_eq!(refusal("inside/nope"), Refusal::Missing);
        assert_eq!(refusal("inside/file/x"), Refusal::NotDirectory);
        assert_eq!(special_kind(FileType::Fifo), "a fifo");
    }
}
