//! [`read_regular`]: reading a file a user named (a manifest, a component,
//! a CA file) without letting the path hang or flood the host.

use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A fifo, socket, device or directory: refused before any read.
    #[error("it is {0}, not a regular file")]
    NotAFile(&'static str),
}

/// A regular file's bytes, `None` when it holds more than `max` (read with
/// a bound: a growing file cannot make it read forever). The file is opened
/// with `O_NONBLOCK` and its type checked before any read: opening a fifo
/// for reading would otherwise wait for a writer forever, and reading a
/// device need never end.
pub fn read_regular(path: &Path, max: u64) -> Result<Option<Vec<u8>>, FileError> {
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(FileError::NotAFile(describe(kind)));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

fn describe(kind: std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a fifo"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_file_up_to_its_bound_and_refuses_a_fifo_at_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, b"12345").expect("write");
        assert_eq!(
            read_regular(&path, 5).expect("read"),
            Some(b"12345".to_vec())
        );
        assert_eq!(read_regular(&path, 4).expect("read"), None);
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        assert!(matches!(
            read_regular(&fifo, 10),
            Err(FileError::NotAFile("a fifo"))
        ));
        assert!(matches!(
            read_regular(dir.path(), 10),
            Err(FileError::NotAFile("a directory") | FileError::Io(_))
        ));
    }
}
