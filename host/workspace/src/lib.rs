//! The host side of the `workspace-read` / `workspace-write` capabilities:
//! what a sandboxed tool may read and write in its run directory, and how.
//! Linux only (`openat2`), no wasmtime.
//!
//! - [`path`]: [`WorkspacePath`], a model-supplied path checked and
//!   normalized (`workspace.invalid_path`).
//! - [`roots`]: [`WorkspaceRoots`], the visible and writable roots from the
//!   manifest; everything else in the run directory is hidden.
//! - `fs`: symlink-proof access beneath one directory descriptor and atomic
//!   writes (temp file in `.tmp/`, fsync, rename).
//! - [`workspace`]: [`Workspace`], one per run: list, walk, read, and the
//!   per-path write locks.
//! - [`session`]: [`WorkspaceSession`], one per invocation: read-states and
//!   the compare-and-swap rules of write and patch.
//! - `replace`: finding and replacing a patch's `old_string` with linear
//!   work and no allocation over the file cap.
//! - [`persist`]: projecting the chat's persistent directory into the run
//!   and promoting it back.
//! - [`error`]: [`WorkspaceError`], recoverable (the model reads it) or
//!   System (the run fails).

#[cfg(not(target_os = "linux"))]
compile_error!("toolhost-workspace relies on Linux openat2/renameat2");

pub mod error;
mod fs;
pub mod path;
pub mod persist;
mod replace;
pub mod roots;
pub mod session;
pub mod workspace;

pub use error::{WorkspaceError, codes};
pub use fs::TEMP_PREFIX;
pub use path::{PathUse, WorkspacePath};
pub use persist::{
    ChangeKind, ChangeSet, PERSIST_ROOT, PERSIST_SNAPSHOT_FILE, PersistBase, PersistChange,
    project, project_again, promote,
};
pub use roots::{Root, WorkspaceRoots};
pub use session::{
    IntentSink, Patched, ReadState, WorkspaceSession, WriteIntent, WriteMode, Written,
};
pub use workspace::{
    DEFAULT_WALK_DEPTH, DEFAULT_WALK_FILES, Entry, EntryKind, GuardedWrite, Listing,
    MAX_LIST_DEPTH, TextFile, Workspace, WorkspaceLimits, WriteGuard,
};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_types_are_send_and_sync() {
        assert_send_sync::<crate::Workspace>();
        assert_send_sync::<crate::WorkspaceSession>();
    }
}
