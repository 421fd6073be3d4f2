//! Where a bench's "disk" rows write: a fresh directory in a part of the
//! file system that earlier deletions have not slowed down, and what one
//! file creation costs there before the bench starts.
//!
//! Why: on an ext4 without a journal (this VM's root file system) the
//! kernel will not reuse an inode freed in the last 60 s — 360 s while
//! its inode-table block is still dirty (`recently_deleted` in
//! `fs/ext4/ialloc.c`) — and every new inode's search starts at the first
//! inode of its block group, looking each freed one up in the buffer
//! cache. After the test suite or an earlier bench has deleted thousands
//! of files beside the build, creating one file there took 0.6–0.9 ms
//! instead of 16 µs, for minutes (measured 2026-12-05): the disk rows
//! measured that, not the programs. A directory whose parent carries
//! `FS_TOPDIR_FL` is placed like a top-level one (ext4's Orlov allocator:
//! in an emptier group), away from those deletions. The deletions the
//! measured programs make themselves (a chat replaced at each commit) still
//! count, as they would for a user.
//!
//! The directory is kept, not deleted when the bench ends: deleting tens
//! of thousands of files would slow the next bench's creations down the
//! same way, and ext4's Orlov allocator is apt to place the next fresh
//! directory in that same emptiest group. `make bench` removes
//! `target/tmp/bench-disk` once every bench has run; a bench run alone
//! leaves its directory there.
//!
//! Included with `#[path]` by the benches that have a disk row.

use std::path::{Path, PathBuf};
use std::time::Instant;

/// A fresh directory for one disk row, kept when the bench ends.
pub struct DiskPlace {
    pub dir: PathBuf,
    /// Median time of one empty file's creation in `dir`, in µs.
    pub create_us: f64,
    /// Whether the file system took the top-level placement hint (which
    /// says where ext4 looked, not that the place is free of deletions:
    /// the probe says that).
    pub spread: bool,
}

impl DiskPlace {
    /// One line for the bench's output, under its table.
    pub fn describe(&self, label: &str) -> String {
        let placement = if self.spread {
            "placed with ext4's top-level hint"
        } else {
            "the file system took no placement hint"
        };
        format!(
            "{label}: {} ({placement}); one file creation there took {:.0} µs before the bench.",
            self.dir.display(),
            self.create_us
        )
    }
}

/// Where the disk rows' directories go: `$BENCH_DISK_DIR` when set (to
/// measure another file system, e.g. `/dev/shm/bench`), else
/// `bench-disk` under `target_tmp` (the target directory's `tmp`).
pub fn base(target_tmp: &Path) -> PathBuf {
    std::env::var_os("BENCH_DISK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_tmp.join("bench-disk"))
}

/// A fresh directory under `base` (created if missing), with the probe.
pub fn fresh_disk_dir(base: &Path) -> DiskPlace {
    std::fs::create_dir_all(base).expect("bench disk directory");
    let spread = place_like_top_level(base).is_ok();
    let dir = tempfile::tempdir_in(base).expect("bench tempdir").keep();
    let probe = dir.join("create-probe");
    std::fs::create_dir(&probe).expect("probe directory");
    // The probe's files stay: deleting them here would slow the bench's
    // own creations down, as above.
    let mut times: Vec<f64> = (0..200)
        .map(|index| {
            let started = Instant::now();
            std::fs::File::create_new(probe.join(format!("file-{index:03}"))).expect("probe file");
            started.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    times.sort_by(f64::total_cmp);
    DiskPlace {
        dir,
        create_us: times[times.len() / 2],
        spread,
    }
}

/// Set `FS_TOPDIR_FL` on `parent`: ext4 then places each new directory in
/// it as it places those at the file system's root. Elsewhere an error.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn place_like_top_level(parent: &Path) -> std::io::Result<()> {
    let parent = std::fs::File::open(parent)?;
    let flags = rustix::fs::ioctl_getflags(&parent)?;
    rustix::fs::ioctl_setflags(&parent, flags | rustix::fs::IFlags::TOPDIR)?;
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn place_like_top_level(_parent: &Path) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}
