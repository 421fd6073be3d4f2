//! An in-memory [`Workspace`](crate::workspace::Workspace) for native unit
//! tests of tools (feature `testing`). It keeps files and records what tools
//! reported as read; it does not enforce the host's compare-and-swap rules,
//! which the host's own tests and the end-to-end tests cover.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::ToolError;
use crate::workspace::{
    Entry, EntryKind, Listing, Patched, Root, TextFile, Workspace, WorkspaceWriter, WriteMode,
    Written,
};

#[derive(Debug, Default)]
pub struct MemoryWorkspace {
    /// path → bytes (not necessarily UTF-8).
    pub files: RefCell<BTreeMap<String, Vec<u8>>>,
    /// Every `record_read` call: (path, sha256, seen).
    pub reads: RefCell<Vec<(String, String, Option<String>)>>,
}

impl MemoryWorkspace {
    pub fn with(files: &[(&str, &str)]) -> Self {
        let workspace = Self::default();
        for (path, text) in files {
            workspace
                .files
                .borrow_mut()
                .insert((*path).to_owned(), text.as_bytes().to_vec());
        }
        workspace
    }

    pub fn text(&self, path: &str) -> Option<String> {
        self.files
            .borrow()
            .get(path)
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Not a real digest: tests only compare it for equality.
pub fn fake_sha(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn not_found(path: &str) -> ToolError {
    ToolError::new(
        "workspace.file_not_found",
        format!("workspace file `{path}` does not exist"),
    )
}

impl Workspace for MemoryWorkspace {
    fn roots(&self) -> Vec<Root> {
        ["output", "scratch", "plan", "summaries", "persist"]
            .into_iter()
            .map(|path| Root {
                path: path.to_owned(),
                writable: true,
            })
            .collect()
    }

    fn list(&self, path: &str, _depth: u32, limit: u32) -> Result<Listing, ToolError> {
        let prefix = path.trim_end_matches('/');
        let mut entries: Vec<Entry> = self
            .files
            .borrow()
            .iter()
            .filter(|(file, _)| prefix.is_empty() || file.starts_with(&format!("{prefix}/")))
            .map(|(file, bytes)| Entry {
                path: file.clone(),
                kind: EntryKind::File,
                bytes: bytes.len() as u64,
            })
            .collect();
        let truncated = entries.len() > limit as usize;
        entries.truncate(limit as usize);
        Ok(Listing { entries, truncated })
    }

    fn walk_files(&self, path: &str, depth: u32, max_files: u32) -> Result<Listing, ToolError> {
        self.list(path, depth, max_files)
    }

    fn read_text(&self, path: &str) -> Result<TextFile, ToolError> {
        let files = self.files.borrow();
        let bytes = files.get(path).ok_or_else(|| not_found(path))?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            ToolError::new(
                "workspace.file_not_text",
                format!("workspace file `{path}` is not UTF-8 text"),
            )
        })?;
        Ok(TextFile {
            path: path.to_owned(),
            text,
            sha256: fake_sha(bytes),
        })
    }

    fn record_read(&self, path: &str, sha256: &str, seen: Option<&str>) -> Result<(), ToolError> {
        self.reads
            .borrow_mut()
            .push((path.to_owned(), sha256.to_owned(), seen.map(str::to_owned)));
        Ok(())
    }
}

impl WorkspaceWriter for MemoryWorkspace {
    fn write(&self, path: &str, content: &str, mode: WriteMode) -> Result<Written, ToolError> {
        let mut files = self.files.borrow_mut();
        let created = !files.contains_key(path);
        let file = files.entry(path.to_owned()).or_default();
        match mode {
            WriteMode::Replace => *file = content.as_bytes().to_vec(),
            WriteMode::Append => file.extend_from_slice(content.as_bytes()),
        }
        let metrics = toolhost_text::metrics(content);
        Ok(Written {
            path: path.to_owned(),
            mode,
            sha256: fake_sha(file),
            chars: metrics.chars,
            words: metrics.words,
            created,
        })
    }

    fn patch(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Patched, ToolError> {
        let mut files = self.files.borrow_mut();
        let bytes = files.get_mut(path).ok_or_else(|| not_found(path))?;
        let text = String::from_utf8_lossy(bytes).into_owned();
        let count = text.matches(old).count();
        if count == 0 {
            return Err(ToolError::new(
                "workspace.patch_old_string_not_found",
                "old_string was not found",
            ));
        }
        let patched = if replace_all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        let old_sha256 = fake_sha(bytes);
        *bytes = patched.as_bytes().to_vec();
        let metrics = toolhost_text::metrics(&patched);
        Ok(Patched {
            path: path.to_owned(),
            replacements: if replace_all { count as u32 } else { 1 },
            old_sha256,
            sha256: fake_sha(bytes),
            chars: metrics.chars,
            words: metrics.words,
        })
    }
}
