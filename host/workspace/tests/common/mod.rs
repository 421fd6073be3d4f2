//! A run directory as the runtime lays it out, with hidden files and a
//! sentinel outside it, and a way to prove none of them changed.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use toolhost_workspace::{Workspace, WorkspaceLimits, WorkspaceRoots, WorkspaceSession};

pub struct Fixture {
    pub temp: tempfile::TempDir,
    /// `<temp>/run`
    pub run: PathBuf,
    /// `<temp>/outside`, holding `sentinel.txt` and `dir/inner.txt`.
    pub outside: PathBuf,
    pub workspace: Arc<Workspace>,
}

/// The run's workspace roots, as a listing of the run directory orders
/// them (its top level comes first, by name).
pub const ROOTS: [&str; 6] = [
    "output",
    "persist",
    "plan",
    "scratch",
    "summaries",
    "tool-results",
];

/// What a listing of the whole run directory shows: [`ROOTS`], then
/// `files` (deeper entries, in the listing's order).
pub fn roots_then<'a>(files: &[&'a str]) -> Vec<&'a str> {
    ROOTS.iter().copied().chain(files.iter().copied()).collect()
}

/// The paths of `listing`'s entries, in its order.
pub fn listed_paths(listing: &toolhost_workspace::Listing) -> Vec<&str> {
    listing
        .entries
        .iter()
        .map(|entry| entry.path.as_str())
        .collect()
}

pub const HIDDEN_FILES: [(&str, &str); 8] = [
    ("run.json", "{\"manifestVersion\":1}\n"),
    ("events.jsonl", "{\"seq\":1}\n"),
    ("input/resolved_profile.json", "{\"id\":\"p\"}\n"),
    ("tool-args/call_1.json", "{\"callId\":\"call_1\"}\n"),
    ("model-responses/r1.json", "{}\n"),
    ("agent-results/a1.json", "{}\n"),
    ("output_extra/secret.md", "not a root\n"),
    ("notes.txt", "unknown top-level entry\n"),
];

impl Fixture {
    pub fn new() -> Self {
        Self::with_limits(WorkspaceLimits::default())
    }

    pub fn with_limits(limits: WorkspaceLimits) -> Self {
        let temp = tempfile::tempdir().expect("tempdir");
        let run = temp.path().join("run");
        let outside = temp.path().join("outside");
        for dir in ROOTS.into_iter().chain([".tmp"]) {
            fs::create_dir_all(run.join(dir)).expect("root");
        }
        for (path, content) in HIDDEN_FILES {
            let path = run.join(path);
            fs::create_dir_all(path.parent().expect("parent")).expect("dir");
            fs::write(path, content).expect("hidden file");
        }
        fs::write(run.join("tool-results/call_1.json"), "{\"result\":1}\n").expect("result");
        fs::create_dir_all(outside.join("dir")).expect("outside");
        fs::write(outside.join("sentinel.txt"), "sentinel\n").expect("sentinel");
        fs::write(outside.join("dir/inner.txt"), "inner\n").expect("inner");
        // Names a `..` escape from the run directory would reach.
        fs::write(temp.path().join("run.json"), "parent run.json\n").expect("parent");
        let workspace =
            Arc::new(Workspace::open(&run, WorkspaceRoots::default_run(), limits).expect("open"));
        Self {
            temp,
            run,
            outside,
            workspace,
        }
    }

    pub fn session(&self) -> WorkspaceSession {
        WorkspaceSession::new(Arc::clone(&self.workspace))
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.run.join(relative)
    }

    pub fn write(&self, relative: &str, content: &str) {
        let path = self.path(relative);
        fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        fs::write(path, content).expect("write");
    }

    pub fn read(&self, relative: &str) -> String {
        fs::read_to_string(self.path(relative)).expect("read")
    }

    /// Every file and directory under the temp dir (the run and outside
    /// it), files with their bytes and mtime. Symlinks are recorded with
    /// their target, never followed.
    pub fn snapshot(&self) -> Tree {
        snapshot(self.temp.path())
    }

    /// Files left in `.tmp/`.
    pub fn temp_files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path(".tmp"))
            .expect(".tmp")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(Vec<u8>, SystemTime),
    Dir,
    Link(PathBuf),
}

pub type Tree = BTreeMap<PathBuf, Node>;

pub fn snapshot(root: &Path) -> Tree {
    let mut tree = Tree::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("meta");
            let node = if meta.file_type().is_symlink() {
                Node::Link(fs::read_link(&path).expect("link"))
            } else if meta.is_dir() {
                stack.push(path.clone());
                Node::Dir
            } else {
                Node::File(
                    fs::read(&path).expect("file"),
                    meta.modified().expect("mtime"),
                )
            };
            tree.insert(path.strip_prefix(root).expect("prefix").to_owned(), node);
        }
    }
    tree
}
