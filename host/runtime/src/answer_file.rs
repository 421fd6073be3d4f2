//! Answers written into a run's directory from outside while the run waits
//! for them — a person's approval of a call (`approvals/`), a chat app's
//! answer to a commit it was asked to make (`host-commits/`). Each is one
//! small file per question, named by the question's audit stem: written
//! create-only (a question is answered once), beneath the run directory,
//! never through a symbolic link, and whole (under a temporary name first,
//! then given its own without replacing one already there); read bounded,
//! and only when it is a regular file.

use std::io::Read as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use serde::de::DeserializeOwned;
use toolhost_journal::audit_stem;

/// Why an answer file was not written or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AnswerFileError {
    /// The question has an answer already.
    #[error("answered already")]
    Exists,
    /// Not a regular file, or over its size.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The run directory itself, never through a link.
fn open_root(run_root: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    Ok(rustix::fs::open(run_root, flags, Mode::empty())?)
}

/// `<dir>/<stem of key>.json`.
fn relative(dir: &str, key: &str) -> String {
    format!("{dir}/{}.json", audit_stem(key))
}

/// Write `bytes` as the answer to `key` in the run's `dir`, once.
pub(crate) fn write_once(
    run_root: &Path,
    dir: &str,
    key: &str,
    bytes: &[u8],
) -> Result<(), AnswerFileError> {
    let root = open_root(run_root)?;
    match rustix::fs::mkdirat(root.as_fd(), dir, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(errno) => return Err(std::io::Error::from(errno).into()),
    }
    let dir = toolhost_core::beneath::open_beneath(
        root.as_fd(),
        dir,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let stem = audit_stem(key);
    let name = format!("{stem}.json");
    let temp = format!(".{stem}.{}.tmp", uuid::Uuid::new_v4().simple());
    let flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let fd = rustix::fs::openat(dir.as_fd(), &temp, flags, Mode::from_raw_mode(0o600))
        .map_err(std::io::Error::from)?;
    let written = std::io::Write::write_all(&mut std::fs::File::from(fd), bytes);
    let placed = written.map_err(AnswerFileError::Io).and_then(|()| {
        let renamed = rustix::fs::renameat_with(
            dir.as_fd(),
            &temp,
            dir.as_fd(),
            &name,
            RenameFlags::NOREPLACE,
        );
        let result = match renamed {
            // No RENAME_NOREPLACE on this file system: a hard link never
            // replaces either.
            Err(Errno::INVAL | Errno::NOSYS) => {
                rustix::fs::linkat(dir.as_fd(), &temp, dir.as_fd(), &name, AtFlags::empty())
            }
            other => other,
        };
        result.map_err(|errno| match errno {
            Errno::EXIST => AnswerFileError::Exists,
            other => AnswerFileError::Io(other.into()),
        })
    });
    // Gone after a rename; left after a link or a failure.
    let _ = rustix::fs::unlinkat(dir.as_fd(), &temp, AtFlags::empty());
    placed
}

/// The answer to `key` in the run's `dir`, if one was written: at most
/// `max` bytes.
fn read_once(
    run_root: &Path,
    dir: &str,
    key: &str,
    max: u64,
) -> Result<Option<Vec<u8>>, AnswerFileError> {
    let root = open_root(run_root)?;
    let fd = match toolhost_core::beneath::open_beneath(
        root.as_fd(),
        &relative(dir, key),
        toolhost_core::beneath::READ_FLAGS,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(errno) => return Err(AnswerFileError::Io(errno.into())),
    };
    // Opened without blocking: only a regular file is read.
    let kind = rustix::fs::FileType::from_raw_mode(
        rustix::fs::fstat(&fd)
            .map_err(std::io::Error::from)?
            .st_mode,
    );
    if kind != rustix::fs::FileType::RegularFile {
        return Err(AnswerFileError::Invalid(format!(
            "the answer to `{key}` is not a regular file"
        )));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(AnswerFileError::Invalid(format!(
            "the answer to `{key}` is over {max} bytes"
        )));
    }
    Ok(Some(bytes))
}

/// An answer's identity: the form it is in, and the question it answers.
pub(crate) trait Answer: DeserializeOwned {
    /// Its `kind` (`toolhost.approvalDecision`, …); its schema is 1.
    const KIND: &'static str;
    fn kind(&self) -> &str;
    fn schema_version(&self) -> u32;
    /// The call or commit it answers.
    fn key(&self) -> &str;
}

/// The answer to `key` in the run's `dir`, if one was written: at most
/// `max` bytes of JSON, of `T`'s kind and schema, answering `key` (a file
/// put under another question's name is refused).
pub(crate) fn read_answer<T: Answer>(
    run_root: &Path,
    dir: &str,
    key: &str,
    max: u64,
) -> Result<Option<T>, AnswerFileError> {
    let Some(bytes) = read_once(run_root, dir, key, max)? else {
        return Ok(None);
    };
    let file: T = serde_json::from_slice(&bytes)
        .map_err(|error| AnswerFileError::Invalid(error.to_string()))?;
    if file.kind() != T::KIND || file.schema_version() != 1 || file.key() != key {
        return Err(AnswerFileError::Invalid(format!(
            "not a {} answering `{key}`",
            T::KIND
        )));
    }
    Ok(Some(file))
}
