//! stdin and stdout for `toolhost mcp serve`, read and written on the
//! runtime's own thread.
//!
//! `tokio::io::stdin()`/`stdout()` hand every read and write to a blocking
//! thread and back (two thread wake-ups per message, each a futex pair);
//! on this project's 2-core machines that hand-off cost more than the
//! sandboxed call. An MCP client almost always talks over pipes, and a
//! pipe can be polled: each end is opened again through `/proc/self/fd`,
//! which makes a new open file description, so switching it to
//! non-blocking mode does not change the one the parent process shares.
//! Anything else (a terminal, a file, a socket, no `/proc`) falls back to
//! tokio's blocking-thread stdio.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

/// How the transport reaches the client (said on stderr at start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdioKind {
    /// Non-blocking pipes polled by the runtime.
    Pipes,
    /// tokio's stdio, through a blocking thread.
    Blocking,
}

pub type Reader = Pin<Box<dyn AsyncRead + Send + Sync>>;
pub type Writer = Pin<Box<dyn AsyncWrite + Send + Sync>>;

/// stdin and stdout as the MCP transport.
pub fn transport() -> (Reader, Writer, StdioKind) {
    match pipes() {
        Some((reader, writer)) => (Box::pin(reader), Box::pin(writer), StdioKind::Pipes),
        None => (
            Box::pin(tokio::io::stdin()),
            Box::pin(tokio::io::stdout()),
            StdioKind::Blocking,
        ),
    }
}

fn pipes() -> Option<(pipe::Receiver, pipe::Sender)> {
    let stdin = reopen(0, OpenOptions::new().read(true))?;
    let stdout = reopen(1, OpenOptions::new().write(true))?;
    let receiver = pipe::Receiver::from_file(stdin).ok()?;
    let sender = pipe::Sender::from_file(stdout).ok()?;
    Some((receiver, sender))
}

/// `fd` opened again as a new open file description, if it is a pipe.
fn reopen(fd: i32, options: &mut OpenOptions) -> Option<File> {
    let path = format!("/proc/self/fd/{fd}");
    let is_pipe = std::fs::metadata(&path)
        .map(|metadata| metadata.file_type().is_fifo())
        .unwrap_or(false);
    if !is_pipe {
        return None;
    }
    options
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&path)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_or_a_file_is_not_taken_for_a_pipe() {
        // Under `cargo test` stdin is /dev/null or a terminal, never a pipe
        // we could own; the fallback must answer without touching it.
        let file = tempfile::tempfile().expect("tempfile");
        use std::os::fd::AsRawFd as _;
        assert!(reopen(file.as_raw_fd(), OpenOptions::new().read(true)).is_none());
    }
}
