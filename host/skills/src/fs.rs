//! Symlink-proof access beneath a skill directory.
//!
//! Every open below a scope's skills directory goes through `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
//! RESOLVE_NO_XDEV`: the kernel refuses a symbolic link in any component —
//! there at load or planted afterwards — a `..` that would climb out, and a
//! mount point. Walks look at every entry with `statat(AT_SYMLINK_NOFOLLOW)`
//! and never descend into anything but a real directory. Special files
//! (fifo, socket, device) are refused like links; files are opened
//! `O_NONBLOCK` so a planted fifo cannot hang a read.

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, fstat, open, statat};
use rustix::io::Errno;

use crate::path::entry_name_ok;

use toolhost_core::beneath::{
    DIR_FLAGS, NO_OPENAT2, READ_FLAGS, Refusal, open_beneath, special_kind,
};

/// Why something beneath a skill directory could not be used.
#[derive(Debug)]
pub(crate) enum FsProblem {
    /// It (or a parent) does not exist.
    Missing,
    /// A symbolic link, a `..` escape or a mount crossing.
    Link,
    /// A fifo, socket or device: the words say which.
    Special(&'static str),
    /// A directory where a file was expected.
    Directory,
    /// A file where a directory was expected.
    NotDirectory,
    /// Bigger than the limit (the size found).
    TooLarge(u64),
    /// More than the limit of files.
    TooManyFiles,
    /// A file deeper than the limit (its path).
    TooDeep(String),
    /// A link or special file found by a walk (its path, and what it is).
    FoundLink(String, &'static str),
    /// The kernel has no `openat2`.
    Unsupported(String),
    /// The host could not do it.
    Io(&'static str, String),
}

impl FsProblem {
    fn io(op: &'static str, error: impl std::fmt::Display) -> Self {
        Self::Io(op, error.to_string())
    }

    fn from_open(errno: Errno) -> Self {
        match Refusal::of(errno) {
            Refusal::Missing => Self::Missing,
            // A component that is a file (`SKILL.md/x`) or a path that must
            // be a directory and is not.
            Refusal::NotDirectory => Self::NotDirectory,
            Refusal::Link | Refusal::Escape => Self::Link,
            Refusal::Unsupported => Self::Unsupported(NO_OPENAT2.to_owned()),
            Refusal::Other(other) => Self::io("open", other),
        }
    }
}

/// A scope's skills directory, configured by the host: its own path may go
/// through links (it is the host's choice), nothing below it may.
/// `Ok(None)` when it does not exist.
pub(crate) fn open_root(path: &Path) -> Result<Option<OwnedFd>, FsProblem> {
    match open(path, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::NOENT) => Ok(None),
        Err(Errno::NOTDIR) => Err(FsProblem::NotDirectory),
        Err(errno) => Err(FsProblem::io("open", errno)),
    }
}

/// The directory `path` beneath `root` (one or more segments), never
/// through a link.
pub(crate) fn open_dir(root: BorrowedFd<'_>, path: &str) -> Result<OwnedFd, FsProblem> {
    let fd = open_beneath(root, path, DIR_FLAGS, Mode::empty()).map_err(FsProblem::from_open)?;
    Ok(fd)
}

/// The bytes of the regular file `path` beneath `dir`, at most `max_bytes`
/// (checked on the size and again while reading, so a growing file cannot
/// get past it).
pub(crate) fn read_file(
    dir: BorrowedFd<'_>,
    path: &str,
    max_bytes: u64,
) -> Result<Vec<u8>, FsProblem> {
    let fd = open_beneath(dir, path, READ_FLAGS, Mode::empty()).map_err(FsProblem::from_open)?;
    let stat = fstat(&fd).map_err(|errno| FsProblem::io("stat", errno))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(FsProblem::Directory),
        other => return Err(FsProblem::Special(special_kind(other))),
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max_bytes {
        return Err(FsProblem::TooLarge(size));
    }
    let mut content = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    File::from(fd)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(|error| FsProblem::io("read", error))?;
    if content.len() as u64 > max_bytes {
        return Err(FsProblem::TooLarge(content.len() as u64));
    }
    Ok(content)
}

/// One file found by [`walk`]: its `/`-separated path and size.
pub(crate) type Found = (String, u64);

/// Every regular file under `dir`, at most `max_depth` segments deep and
/// `max_files` files, in no particular order. Hidden names and names a path
/// cannot address are not part of a skill and are skipped (never entered).
/// A link or special file anywhere is an error, and so is a file deeper
/// than the limit or one file too many.
pub(crate) fn walk(
    dir: OwnedFd,
    max_depth: usize,
    max_files: usize,
) -> Result<Vec<Found>, FsProblem> {
    let mut found = Vec::new();
    walk_dir(dir, "", 1, max_depth, max_files, &mut found)?;
    Ok(found)
}

fn walk_dir(
    dir: OwnedFd,
    prefix: &str,
    depth: usize,
    max_depth: usize,
    max_files: usize,
    found: &mut Vec<Found>,
) -> Result<(), FsProblem> {
    let mut reader = Dir::new(dir).map_err(|errno| FsProblem::io("list", errno))?;
    let mut names = Vec::new();
    for entry in reader.by_ref() {
        let entry = entry.map_err(|errno| FsProblem::io("list", errno))?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        // Names are sorted in memory: a directory with more entries than a
        // skill may hold files is refused before it is read whole.
        if names.len() >= max_files {
            return Err(FsProblem::TooManyFiles);
        }
        match std::str::from_utf8(raw) {
            Ok(name) if entry_name_ok(name) => names.push(name.to_owned()),
            _ => tracing::debug!(
                dir = prefix,
                name = %String::from_utf8_lossy(raw),
                "skipping a hidden or unaddressable name in a skill"
            ),
        }
    }
    names.sort();
    let fd = reader.fd().map_err(|errno| FsProblem::io("list", errno))?;
    for name in names {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let stat = match statat(fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Removed while we were listing.
            Err(Errno::NOENT) => continue,
            Err(errno) => return Err(FsProblem::io("stat", errno)),
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        if depth > max_depth && matches!(kind, FileType::RegularFile | FileType::Directory) {
            return Err(FsProblem::TooDeep(path));
        }
        match kind {
            FileType::RegularFile => {
                if found.len() == max_files {
                    return Err(FsProblem::TooManyFiles);
                }
                found.push((path, u64::try_from(stat.st_size).unwrap_or(0)));
            }
            FileType::Directory => {
                let child = match open_beneath(fd, name.as_str(), DIR_FLAGS, Mode::empty()) {
                    Ok(child) => child,
                    Err(Errno::NOENT) => continue,
                    Err(Errno::LOOP | Errno::XDEV) => {
                        return Err(FsProblem::FoundLink(path, "a symbolic link or mount point"));
                    }
                    Err(errno) => return Err(FsProblem::from_open(errno)),
                };
                walk_dir(child, &path, depth + 1, max_depth, max_files, found)?;
            }
            other => return Err(FsProblem::FoundLink(path, special_kind(other))),
        }
    }
    Ok(())
}

/// What `name` beneath `dir` is, without following it: `None` when missing.
pub(crate) fn kind_of(dir: impl AsFd, name: &str) -> Result<Option<FileType>, FsProblem> {
    match statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(FileType::from_raw_mode(stat.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(FsProblem::io("stat", errno)),
    }
}

/// An entry of a scope's skills directory.
pub(crate) struct RootEntry {
    /// Lossy when the name is not UTF-8.
    pub name: String,
    pub utf8: bool,
    /// `None`: gone meanwhile, or not UTF-8 (never looked at).
    pub kind: Option<FileType>,
}

/// The entries of a scope's skills directory, by name.
pub(crate) fn list_root(root: BorrowedFd<'_>) -> Result<Vec<RootEntry>, FsProblem> {
    let dup = open_beneath(root, ".", DIR_FLAGS, Mode::empty()).map_err(FsProblem::from_open)?;
    let mut reader = Dir::new(dup).map_err(|errno| FsProblem::io("list", errno))?;
    let mut names = Vec::new();
    for entry in reader.by_ref() {
        let entry = entry.map_err(|errno| FsProblem::io("list", errno))?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        match std::str::from_utf8(raw) {
            Ok(name) => names.push((name.to_owned(), true)),
            Err(_) => names.push((String::from_utf8_lossy(raw).into_owned(), false)),
        }
    }
    names.sort();
    let mut out = Vec::with_capacity(names.len());
    for (name, utf8) in names {
        let kind = if utf8 { kind_of(root, &name)? } else { None };
        out.push(RootEntry { name, utf8, kind });
    }
    Ok(out)
}
