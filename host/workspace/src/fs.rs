//! Symlink-proof file access beneath one directory descriptor.
//!
//! Every open goes through `openat2` relative to an *anchor* (the run
//! directory, or a chat's persist directory) with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`: the kernel
//! itself refuses a symlink in any component (file or directory, planted
//! before or swapped in during the call), a `..` that would climb out, and a
//! mount point. Those refusals (`ELOOP`, `EXDEV`) are the System error
//! `workspace.symlink_found`; so are special files (fifo, socket, device).
//! Nothing here ever uses a path string with the host's file-system API.
//!
//! Writes are staged: a temp file (in `<run>/.tmp/`, or beside the target for
//! a chat directory) is created `O_EXCL`, written and fsynced; before it is
//! renamed into the target's parent directory — a descriptor held since it
//! was resolved — the parent path is resolved again and must still be the
//! same directory; then the parent is fsynced. A staged file that is not
//! committed is unlinked when dropped, on every error path.

use std::cell::Cell;
use std::fs::File;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{
    AtFlags, Dir, FileType, Mode, OFlags, RenameFlags, Stat, fstat, fsync, linkat, mkdirat,
    renameat, renameat_with, statat, unlinkat,
};
use rustix::io::Errno;

use toolhost_core::WorkMeter;

use crate::error::{WorkspaceError, codes};
use crate::path::{WorkspacePath, segment_ok};

/// Prefix of every temp file this crate creates. Chat-directory walks skip
/// such names, so a temp file a crash left beside a promoted file is never
/// projected into a run.
pub const TEMP_PREFIX: &str = ".toolhost-tmp-";

pub(crate) use toolhost_core::beneath::open_beneath;
use toolhost_core::beneath::{DIR_FLAGS, NO_OPENAT2, READ_FLAGS, Refusal, special_kind};

/// The error for a refused resolution, or `None` when the path is missing.
pub(crate) fn resolution_error(errno: Errno, display: &str, op: &str) -> Option<WorkspaceError> {
    match Refusal::of(errno) {
        Refusal::Missing | Refusal::NotDirectory => None,
        Refusal::Link => Some(WorkspaceError::symlink_found(
            display,
            "passes through a symbolic link",
        )),
        Refusal::Escape => Some(WorkspaceError::symlink_found(
            display,
            "leaves its directory or crosses a mount point",
        )),
        Refusal::Unsupported => Some(WorkspaceError::io(op, display, NO_OPENAT2)),
        Refusal::Other(other) => Some(WorkspaceError::io(op, display, other)),
    }
}

pub(crate) fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn identity(stat: &Stat) -> (u64, u64) {
    (stat.st_dev as u64, stat.st_ino as u64)
}

#[allow(clippy::useless_conversion)]
pub(crate) fn size(stat: &Stat) -> u64 {
    u64::try_from(stat.st_size).unwrap_or(0)
}

/// The kind of a special (non-regular, non-directory) file, for messages.
fn special(kind: FileType) -> String {
    format!("is {}", special_kind(kind))
}

/// The directory at `segments` beneath `anchor` (the anchor itself for no
/// segment). Missing directories are created when `create`, else reported
/// as `Ok(None)`. A segment that is a regular file is a recoverable
/// `workspace.invalid_path`; a symlink or special file is System.
pub(crate) fn open_dir_path<'a>(
    anchor: BorrowedFd<'_>,
    segments: impl IntoIterator<Item = &'a str>,
    create: bool,
    display: &str,
) -> Result<Option<OwnedFd>, WorkspaceError> {
    let mut current = open_beneath(anchor, ".", DIR_FLAGS, Mode::empty()).map_err(|errno| {
        resolution_error(errno, display, "open")
            .unwrap_or_else(|| WorkspaceError::io("open", display, errno))
    })?;
    let mut walked = String::new();
    for segment in segments {
        if !walked.is_empty() {
            walked.push('/');
        }
        walked.push_str(segment);
        // Someone removing the directory between our mkdir and our open
        // gets a few more tries before it is an error.
        let mut mkdirs = 0;
        current = loop {
            match open_beneath(current.as_fd(), segment, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => break fd,
                Err(Errno::NOENT) if create && mkdirs < 8 => {
                    mkdirs += 1;
                    match mkdirat(current.as_fd(), segment, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(errno) => return Err(WorkspaceError::io("mkdir", &walked, errno)),
                    }
                }
                Err(Errno::NOENT) if create => {
                    return Err(WorkspaceError::io(
                        "create directory",
                        &walked,
                        "it keeps disappearing",
                    ));
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::NOTDIR) => {
                    // Something that is not a directory: say what it is.
                    let stat = statat(current.as_fd(), segment, AtFlags::SYMLINK_NOFOLLOW)
                        .map_err(|errno| WorkspaceError::io("stat", &walked, errno))?;
                    let kind = file_type(&stat);
                    if kind == FileType::RegularFile {
                        if create {
                            return Err(WorkspaceError::recoverable(
                                codes::INVALID_PATH,
                                format!(
                                    "workspace path `{walked}` is a file, so `{display}` cannot be created under it; pick another path."
                                ),
                            ));
                        }
                        return Ok(None);
                    }
                    return Err(WorkspaceError::symlink_found(&walked, &special(kind)));
                }
                Err(errno) => {
                    return Err(resolution_error(errno, &walked, "open")
                        .unwrap_or_else(|| WorkspaceError::io("open", &walked, errno)));
                }
            }
        };
    }
    Ok(Some(current))
}

/// What `open_node` found.
pub(crate) enum Node {
    File { fd: OwnedFd, bytes: u64 },
    Directory(OwnedFd),
}

/// Open `path` beneath `anchor` without following anything; `Ok(None)` when
/// it (or a parent) does not exist. Special files are System errors.
pub(crate) fn open_node(
    anchor: BorrowedFd<'_>,
    path: &str,
    display: &str,
) -> Result<Option<Node>, WorkspaceError> {
    let fd = match open_beneath(anchor, path, READ_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(errno) => {
            return match resolution_error(errno, display, "open") {
                None => Ok(None),
                Some(error) => Err(error),
            };
        }
    };
    let stat = fstat(&fd).map_err(|errno| WorkspaceError::io("stat", display, errno))?;
    match file_type(&stat) {
        FileType::RegularFile => Ok(Some(Node::File {
            bytes: size(&stat),
            fd,
        })),
        FileType::Directory => Ok(Some(Node::Directory(fd))),
        other => Err(WorkspaceError::symlink_found(display, &special(other))),
    }
}

/// The bytes of the regular file at `path`, `Ok(None)` when missing. A
/// directory is `workspace.path_is_directory`; over `max_bytes` is
/// `workspace.file_too_large` (checked on the size and again while reading,
/// so a file growing meanwhile cannot get past it).
pub(crate) fn read_file(
    anchor: BorrowedFd<'_>,
    path: &str,
    display: &str,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, WorkspaceError> {
    let (fd, bytes) = match open_node(anchor, path, display)? {
        None => return Ok(None),
        Some(Node::Directory(_)) => return Err(WorkspaceError::path_is_directory(display)),
        Some(Node::File { fd, bytes }) => (fd, bytes),
    };
    if bytes > max_bytes {
        return Err(WorkspaceError::file_too_large(display, max_bytes, "is"));
    }
    let mut content = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
    File::from(fd)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(|error| WorkspaceError::io("read", display, error))?;
    if content.len() as u64 > max_bytes {
        return Err(WorkspaceError::file_too_large(display, max_bytes, "is"));
    }
    Ok(Some(content))
}

/// Where a staged file's temp file lives.
pub(crate) enum TempSite<'a> {
    /// In this directory (beneath the same anchor): the run's `.tmp`.
    Dir(&'a [&'a str]),
    /// Beside the target, in its parent directory.
    Beside,
}

/// How a staged file takes its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Atomically replace whatever file is there (or create it).
    Replace,
    /// Only if nothing is there (`RENAME_NOREPLACE`).
    CreateOnly,
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placed {
    Done,
    /// `CreateOnly` found a regular file in the way; nothing was changed.
    Exists,
}

#[cfg(test)]
thread_local! {
    /// Runs at the start of every commit made on this thread: lets a test
    /// swap a directory for a symlink between the check and the use.
    pub(crate) static BEFORE_COMMIT: std::cell::RefCell<Option<Box<dyn FnMut()>>> =
        std::cell::RefCell::new(None);
}

fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos())
        .unwrap_or(0);
    format!("{TEMP_PREFIX}{}-{count}-{nanos:08x}", process::id())
}

/// A written, fsynced temp file waiting to be renamed into place. Dropping
/// it uncommitted unlinks the temp file.
pub(crate) struct Staged {
    /// `None`: the temp file is in `parent`.
    temp_dir: Option<OwnedFd>,
    temp_name: String,
    parent: OwnedFd,
    parent_segments: Vec<String>,
    name: String,
    display: String,
    live: bool,
}

impl Staged {
    /// Write `bytes` to a temp file for `segments` (the target, beneath
    /// `anchor`), creating the target's missing parent directories.
    pub(crate) fn new(
        anchor: BorrowedFd<'_>,
        segments: &[&str],
        bytes: &[u8],
        temp: TempSite<'_>,
        display: &str,
    ) -> Result<Self, WorkspaceError> {
        let Some((name, parent_segments)) = segments.split_last() else {
            return Err(WorkspaceError::io("write", display, "no file name"));
        };
        let parent = open_dir_path(anchor, parent_segments.iter().copied(), true, display)?
            .ok_or_else(|| WorkspaceError::io("open", display, "parent vanished"))?;
        let temp_dir = match temp {
            TempSite::Dir(dir) => Some(
                open_dir_path(anchor, dir.iter().copied(), true, &dir.join("/"))?
                    .ok_or_else(|| WorkspaceError::io("open", display, "temp dir vanished"))?,
            ),
            TempSite::Beside => None,
        };
        let temp_parent = temp_dir.as_ref().unwrap_or(&parent).as_fd();
        let mut attempts = 0;
        let (fd, temp_name) = loop {
            let candidate = temp_name();
            match open_beneath(
                temp_parent,
                &candidate,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            ) {
                Ok(fd) => break (fd, candidate),
                Err(Errno::EXIST) if attempts < 16 => attempts += 1,
                Err(errno) => {
                    return Err(resolution_error(errno, display, "create temp file for")
                        .unwrap_or_else(|| {
                            WorkspaceError::io("create temp file for", display, errno)
                        }));
                }
            }
        };
        let staged = Self {
            temp_dir,
            temp_name,
            parent,
            parent_segments: parent_segments.iter().map(|s| (*s).to_owned()).collect(),
            name: (*name).to_owned(),
            display: display.to_owned(),
            live: true,
        };
        let mut file = File::from(fd);
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|error| WorkspaceError::io("write temp file for", display, error))?;
        Ok(staged)
    }

    fn temp_parent(&self) -> BorrowedFd<'_> {
        self.temp_dir.as_ref().unwrap_or(&self.parent).as_fd()
    }

    /// Move the temp file into place. The parent directory is resolved
    /// again first and must still be the directory the temp file was staged
    /// for (a directory swapped for a symlink, or moved, is System
    /// `workspace.symlink_found` and nothing is placed).
    pub(crate) fn commit(
        mut self,
        anchor: BorrowedFd<'_>,
        placement: Placement,
    ) -> Result<Placed, WorkspaceError> {
        #[cfg(test)]
        BEFORE_COMMIT.with(|hook| {
            if let Some(hook) = hook.borrow_mut().as_mut() {
                hook();
            }
        });
        self.verify_parent(anchor)?;
        let display = self.display.clone();
        let placed = match placement {
            Placement::Replace => {
                match renameat(
                    self.temp_parent(),
                    &self.temp_name,
                    &self.parent,
                    &self.name,
                ) {
                    Ok(()) => Placed::Done,
                    Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
                        return Err(WorkspaceError::path_is_directory(&display));
                    }
                    Err(Errno::NOENT) => return Err(parent_replaced(&display)),
                    Err(errno) => return Err(WorkspaceError::io("rename into", &display, errno)),
                }
            }
            Placement::CreateOnly => match renameat_with(
                self.temp_parent(),
                &self.temp_name,
                &self.parent,
                &self.name,
                RenameFlags::NOREPLACE,
            ) {
                Ok(()) => Placed::Done,
                Err(Errno::EXIST) => self.in_the_way()?,
                // A file system without RENAME_NOREPLACE: link, then unlink.
                Err(Errno::INVAL | Errno::NOSYS) => match linkat(
                    self.temp_parent(),
                    &self.temp_name,
                    &self.parent,
                    &self.name,
                    AtFlags::empty(),
                ) {
                    Ok(()) => {
                        self.remove_temp();
                        Placed::Done
                    }
                    Err(Errno::EXIST) => self.in_the_way()?,
                    Err(Errno::NOENT) => return Err(parent_replaced(&display)),
                    Err(errno) => return Err(WorkspaceError::io("link into", &display, errno)),
                },
                Err(Errno::NOENT) => return Err(parent_replaced(&display)),
                Err(errno) => return Err(WorkspaceError::io("rename into", &display, errno)),
            },
        };
        if placed == Placed::Done {
            // The temp name is gone (renamed or unlinked): nothing to clean.
            self.live = false;
            fsync(&self.parent).map_err(|errno| WorkspaceError::io("sync", &display, errno))?;
        }
        Ok(placed)
    }

    /// `CreateOnly` met an entry: a file is a conflict, anything else says
    /// what it is.
    fn in_the_way(&self) -> Result<Placed, WorkspaceError> {
        let stat = statat(&self.parent, &self.name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|errno| WorkspaceError::io("stat", &self.display, errno))?;
        match file_type(&stat) {
            FileType::RegularFile => Ok(Placed::Exists),
            FileType::Directory => Err(WorkspaceError::path_is_directory(&self.display)),
            other => Err(WorkspaceError::symlink_found(
                &self.display,
                &special(other),
            )),
        }
    }

    fn verify_parent(&self, anchor: BorrowedFd<'_>) -> Result<(), WorkspaceError> {
        let held = fstat(&self.parent)
            .map_err(|errno| WorkspaceError::io("stat", &self.display, errno))?;
        let again = open_dir_path(
            anchor,
            self.parent_segments.iter().map(String::as_str),
            false,
            &self.display,
        )?;
        let same = match again {
            Some(fd) => {
                let now =
                    fstat(&fd).map_err(|errno| WorkspaceError::io("stat", &self.display, errno))?;
                identity(&now) == identity(&held)
            }
            None => false,
        };
        if same {
            Ok(())
        } else {
            Err(parent_replaced(&self.display))
        }
    }

    fn remove_temp(&mut self) {
        if self.live {
            self.live = false;
            if let Err(errno) = unlinkat(self.temp_parent(), &self.temp_name, AtFlags::empty()) {
                tracing::warn!(temp = %self.temp_name, %errno, "could not remove a temp file");
            }
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.remove_temp();
    }
}

/// The directory a staged file was made for is no longer at its path
/// (replaced by a symlink, moved, removed): someone is tampering with the
/// workspace while we write, which is treated like a symlink found.
fn parent_replaced(display: &str) -> WorkspaceError {
    WorkspaceError::symlink_found(
        display,
        "had its parent directory replaced, moved or removed while it was being written",
    )
}

/// Stage and commit in one step.
pub(crate) fn write_file(
    anchor: BorrowedFd<'_>,
    segments: &[&str],
    bytes: &[u8],
    temp: TempSite<'_>,
    placement: Placement,
    display: &str,
) -> Result<Placed, WorkspaceError> {
    Staged::new(anchor, segments, bytes, temp, display)?.commit(anchor, placement)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WalkKind {
    File,
    Directory,
}

/// Most names read by a walk that has no tighter bound of its own (the
/// persist projection).
pub(crate) const MAX_DIRECTORY_NAMES: usize = 100_000;

/// Work units charged per directory entry: reading and `stat`ing one costs
/// about what scanning a few hundred bytes does, so the meter looks at the
/// clock every few thousand entries (milliseconds), not every 64 Ki.
const ENTRY_UNITS: u64 = 16;

/// What bounds one walk: the call's meter ([`ENTRY_UNITS`] per directory
/// entry read) and the names it may still read.
#[derive(Clone, Copy)]
pub(crate) struct WalkBounds<'a> {
    pub meter: &'a WorkMeter,
    /// Names the whole walk may still read, shared by every directory it
    /// enters (each keeps its sorted names while its children are walked):
    /// once none are left, the walk ends cut short
    /// ([`ControlFlow::Break`]). Every entry counts, skipped ones too.
    pub names_left: &'a Cell<usize>,
}

impl<'a> WalkBounds<'a> {
    pub(crate) fn new(meter: &'a WorkMeter, names_left: &'a Cell<usize>) -> Self {
        Self { meter, names_left }
    }
}

/// Visit what lies under the directory `dir` (whose path is `base`), depth
/// first, names in byte order, `depth` levels deep (1: its children only).
/// A symlink or special file anywhere is System `workspace.symlink_found`.
/// Names this workspace cannot address (not UTF-8, control characters, `\`)
/// and, when `skip_temp`, this crate's temp files are skipped (one warning
/// per directory, with the count).
pub(crate) fn walk(
    dir: OwnedFd,
    base: &WorkspacePath,
    depth: usize,
    skip_temp: bool,
    bounds: WalkBounds<'_>,
    visit: &mut dyn FnMut(&WorkspacePath, WalkKind, u64) -> ControlFlow<()>,
) -> Result<ControlFlow<()>, WorkspaceError> {
    if depth == 0 {
        return Ok(ControlFlow::Continue(()));
    }
    let shown = base.as_str();
    let mut reader = Dir::new(dir).map_err(|errno| WorkspaceError::io("list", shown, errno))?;
    let mut names = Vec::new();
    let mut cut_short = false;
    let mut skipped = 0_usize;
    for entry in reader.by_ref() {
        bounds.meter.charge(ENTRY_UNITS)?;
        let entry = entry.map_err(|errno| WorkspaceError::io("list", shown, errno))?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        let Some(left) = bounds.names_left.get().checked_sub(1) else {
            tracing::warn!(
                dir = shown,
                "more entries than one listing reads; listing cut short"
            );
            cut_short = true;
            break;
        };
        bounds.names_left.set(left);
        match std::str::from_utf8(raw) {
            Ok(name) if segment_ok(name) && !(skip_temp && name.starts_with(TEMP_PREFIX)) => {
                names.push(name.to_owned());
            }
            _ => skipped += 1,
        }
    }
    if skipped > 0 {
        tracing::warn!(
            dir = shown,
            skipped,
            "skipping directory entries the workspace cannot address"
        );
    }
    names.sort();
    let fd = reader
        .fd()
        .map_err(|errno| WorkspaceError::io("list", shown, errno))?;
    for name in names {
        let path = base.join(&name);
        let stat = match statat(fd, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Removed while we were listing.
            Err(Errno::NOENT) => continue,
            Err(errno) => return Err(WorkspaceError::io("stat", path.as_str(), errno)),
        };
        match file_type(&stat) {
            FileType::RegularFile => {
                if visit(&path, WalkKind::File, size(&stat)).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
            }
            FileType::Directory => {
                if visit(&path, WalkKind::Directory, 0).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
                if depth > 1 {
                    let child = match open_beneath(fd, name.as_str(), DIR_FLAGS, Mode::empty()) {
                        Ok(child) => child,
                        Err(Errno::NOENT) => continue,
                        Err(errno) => {
                            return Err(resolution_error(errno, path.as_str(), "open")
                                .unwrap_or_else(|| {
                                    WorkspaceError::io("open", path.as_str(), errno)
                                }));
                        }
                    };
                    if walk(child, &path, depth - 1, skip_temp, bounds, visit)?.is_break() {
                        return Ok(ControlFlow::Break(()));
                    }
                }
            }
            other => {
                return Err(WorkspaceError::symlink_found(
                    path.as_str(),
                    &special(other),
                ));
            }
        }
    }
    Ok(if cut_short {
        ControlFlow::Break(())
    } else {
        ControlFlow::Continue(())
    })
}

/// Remove the temp files ([`TEMP_PREFIX`]) a crash left in the directory
/// at `segments` beneath `anchor` (absent: nothing to do). Only for a
/// directory the caller holds exclusively: nobody else may be staging in
/// it. Reads at most 100,000 names.
pub(crate) fn remove_stale_temps(
    anchor: BorrowedFd<'_>,
    segments: &[&str],
    display: &str,
) -> Result<usize, WorkspaceError> {
    let Some(dir) = open_dir_path(anchor, segments.iter().copied(), false, display)? else {
        return Ok(0);
    };
    let mut reader =
        Dir::read_from(&dir).map_err(|errno| WorkspaceError::io("list", display, errno))?;
    let mut stale = Vec::new();
    for entry in reader.by_ref().take(100_000) {
        let entry = entry.map_err(|errno| WorkspaceError::io("list", display, errno))?;
        let name = entry.file_name().to_bytes();
        if name.starts_with(TEMP_PREFIX.as_bytes()) && entry.file_type() == FileType::RegularFile {
            stale.push(entry.file_name().to_owned());
        }
    }
    for name in &stale {
        match unlinkat(&dir, name.as_c_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(errno) => return Err(WorkspaceError::io("remove", display, errno)),
        }
    }
    Ok(stale.len())
}

/// Remove the regular file at `path` beneath `anchor` (absent: nothing to
/// do); never through a symlink.
pub(crate) fn remove_file(
    anchor: BorrowedFd<'_>,
    path: &WorkspacePath,
) -> Result<(), WorkspaceError> {
    let shown = path.as_str();
    let segments: Vec<&str> = path.segments().collect();
    let Some((name, parents)) = segments.split_last() else {
        return Ok(());
    };
    let Some(dir) = open_dir_path(anchor, parents.iter().copied(), false, shown)? else {
        return Ok(());
    };
    match unlinkat(&dir, *name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(errno) => Err(WorkspaceError::io("remove", shown, errno)),
    }
}
