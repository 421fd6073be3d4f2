//! `WorkspacePath`: a model-supplied path, checked and normalized.
//!
//! Stricter than the reference, which converted `\` to `/`: any backslash is
//! refused here, so a path means the same thing on every platform and in
//! every log. Nothing is decoded (`%2e%2e` is a file name, not `..`), and
//! nothing touches the file system: visibility is [`crate::roots`]'s,
//! symlinks are the `fs` module's.

use std::fmt;

use crate::error::{WorkspaceError, codes};

/// Longest accepted path, in bytes, as the model sent it.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest accepted segment, in bytes (Linux `NAME_MAX`).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// What the path is going to name: a file (read, write, patch) or a
/// directory (list, search).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathUse {
    File,
    Directory,
}

/// A relative, `/`-separated path with no `.`, `..` or empty segment. The
/// empty path is the workspace root (directories only).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkspacePath {
    normalized: String,
}

fn invalid(raw: &str, problem: &str) -> WorkspaceError {
    // The model's own text is echoed with escapes, so a NUL or a newline in
    // it cannot break the message.
    WorkspaceError::recoverable(
        codes::INVALID_PATH,
        format!(
            "workspace path {} is invalid: {problem}. Use a relative path under a workspace root, like `output/notes.md`.",
            quoted(raw)
        ),
    )
}

/// `raw` between backticks, control characters escaped and cut to 120 chars.
fn quoted(raw: &str) -> String {
    let mut out = String::from("`");
    for (index, c) in raw.chars().enumerate() {
        if index == 120 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    out
}

/// Whether a single name (from the model or found on disk) is one this
/// workspace can address: not empty, not `.`/`..`, no `/`, no `\`, no
/// control character, at most 255 bytes.
pub(crate) fn segment_ok(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= MAX_SEGMENT_BYTES
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

fn has_drive_prefix(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

impl WorkspacePath {
    /// Check and normalize a model-supplied path. Every refusal is a
    /// recoverable `workspace.invalid_path` naming the problem.
    ///
    /// - empty: the root for [`PathUse::Directory`], invalid for a file; so
    ///   are `.` and `./`;
    /// - refused: whitespace only or around the path, control characters
    ///   (NUL, newline, DEL…), a leading `/` or `\`, any `\`, a drive prefix
    ///   (`C:`, `c:foo`), a `..` segment, over 1024 bytes, a segment over
    ///   255 bytes, and for a file a path ending in `/` or `/.`;
    /// - `.` and empty segments are dropped: `./output//a.md` is
    ///   `output/a.md`; for a directory `output/` is `output`.
    pub fn parse(raw: &str, usage: PathUse) -> Result<Self, WorkspaceError> {
        if raw.len() > MAX_PATH_BYTES {
            return Err(invalid(
                raw,
                &format!(
                    "it is {} bytes long; the limit is {MAX_PATH_BYTES}",
                    raw.len()
                ),
            ));
        }
        if raw.chars().any(char::is_control) {
            return Err(invalid(
                raw,
                "it contains a control character (NUL, newline, tab…)",
            ));
        }
        if !raw.is_empty() && raw.trim().is_empty() {
            return Err(invalid(raw, "it is only whitespace"));
        }
        if raw.trim() != raw {
            return Err(invalid(raw, "it starts or ends with whitespace"));
        }
        if raw.starts_with('/') || raw.starts_with('\\') {
            return Err(invalid(
                raw,
                "it is absolute; paths are relative to the workspace",
            ));
        }
        if raw.contains('\\') {
            return Err(invalid(raw, "it contains `\\`; separate segments with `/`"));
        }
        if has_drive_prefix(raw) {
            return Err(invalid(raw, "it starts with a drive prefix"));
        }
        let raw_segments: Vec<&str> = raw.split('/').collect();
        if let Some(segment) = raw_segments.iter().find(|segment| **segment == "..") {
            return Err(invalid(
                raw,
                &format!("it contains a `{segment}` segment; paths cannot leave their root"),
            ));
        }
        if let Some(segment) = raw_segments.iter().find(|s| s.len() > MAX_SEGMENT_BYTES) {
            return Err(invalid(
                raw,
                &format!(
                    "a segment is {} bytes long; the limit is {MAX_SEGMENT_BYTES}",
                    segment.len()
                ),
            ));
        }
        if usage == PathUse::File
            && !raw.is_empty()
            && matches!(raw_segments.last(), Some(&"" | &"."))
        {
            return Err(invalid(
                raw,
                "a file path cannot end with `/` or `/.`; name the file itself",
            ));
        }
        let segments: Vec<&str> = raw_segments
            .into_iter()
            .filter(|segment| !segment.is_empty() && *segment != ".")
            .collect();
        if segments.is_empty() && usage == PathUse::File {
            return Err(invalid(raw, "it names no file"));
        }
        debug_assert!(segments.iter().all(|segment| segment_ok(segment)));
        let normalized = segments.join("/");
        // Dropping `.` and empty segments can expose what the checks above
        // refuse (`./C:/` is `C:`, `x /` is `x `): a normalized path must
        // pass them itself, or the model could not name it again.
        if normalized.trim() != normalized {
            return Err(invalid(raw, "it starts or ends with whitespace"));
        }
        if has_drive_prefix(&normalized) {
            return Err(invalid(raw, "it starts with a drive prefix"));
        }
        Ok(Self { normalized })
    }

    /// The workspace root (the empty path).
    pub fn root() -> Self {
        Self {
            normalized: String::new(),
        }
    }

    /// `output/a.md`; empty for the root.
    pub fn as_str(&self) -> &str {
        &self.normalized
    }

    pub fn is_root(&self) -> bool {
        self.normalized.is_empty()
    }

    /// The segments, none for the root.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + Clone {
        self.normalized
            .split('/')
            .filter(|segment| !segment.is_empty())
    }

    /// The first segment: the root the path lives under.
    pub fn top(&self) -> Option<&str> {
        self.segments().next()
    }

    /// The last segment.
    pub fn file_name(&self) -> Option<&str> {
        self.segments().next_back()
    }

    /// Everything but the last segment (the root for a one-segment path).
    pub fn parent(&self) -> Option<Self> {
        if self.is_root() {
            return None;
        }
        let parent = match self.normalized.rfind('/') {
            Some(index) => self.normalized[..index].to_owned(),
            None => String::new(),
        };
        Some(Self { normalized: parent })
    }

    /// `self/name`; `name` must pass the segment rules.
    pub(crate) fn join(&self, name: &str) -> Self {
        debug_assert!(segment_ok(name), "{name:?}");
        let normalized = if self.is_root() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.normalized)
        };
        Self { normalized }
    }

    /// Whether `self` is `other` or lies under it (`output_extra` is not under
    /// `output`).
    pub fn starts_with(&self, other: &WorkspacePath) -> bool {
        other.is_root()
            || self.normalized == other.normalized
            || (self.normalized.starts_with(&other.normalized)
                && self.normalized.as_bytes().get(other.normalized.len()) == Some(&b'/'))
    }
}

impl fmt::Display for WorkspacePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.normalized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(raw: &str) -> Result<String, WorkspaceError> {
        WorkspacePath::parse(raw, PathUse::File).map(|path| path.as_str().to_owned())
    }

    fn dir(raw: &str) -> Result<String, WorkspaceError> {
        WorkspacePath::parse(raw, PathUse::Directory).map(|path| path.as_str().to_owned())
    }

    #[test]
    fn normalizes_dots_and_empty_segments() {
        assert_eq!(file("./output//a.md").unwrap(), "output/a.md");
        assert_eq!(file("output/./a.md").unwrap(), "output/a.md");
        assert_eq!(file("output/a.md").unwrap(), "output/a.md");
        assert_eq!(file("output/...").unwrap(), "output/...");
        assert_eq!(file("output/.hidden").unwrap(), "output/.hidden");
        assert_eq!(
            file("output/日本語 ノート.md").unwrap(),
            "output/日本語 ノート.md"
        );
        assert_eq!(dir("output/").unwrap(), "output");
        assert_eq!(dir("output//sub/./").unwrap(), "output/sub");
        for root in ["", ".", "./", ".//./"] {
            assert_eq!(dir(root).unwrap(), "", "{root:?}");
            assert!(
                WorkspacePath::parse(root, PathUse::Directory)
                    .unwrap()
                    .is_root()
            );
        }
    }

    #[test]
    fn refusals_name_the_problem() {
        let cases: [(&str, &str); 16] = [
            ("", "names no file"),
            (".", "end with"),
            ("./", "end with"),
            ("output/", "end with"),
            ("output/a/.", "end with"),
            ("   ", "only whitespace"),
            (" output/a.md", "whitespace"),
            ("/etc/passwd", "absolute"),
            ("\\x", "absolute"),
            ("output\\a.md", "`\\`"),
            ("C:/x", "drive"),
            ("output/../run.json", "`..`"),
            ("output/a\0b", "control"),
            ("output/a\nb", "control"),
            // Found by the generated-path property: what normalizing exposes.
            ("./C:/x", "drive"),
            ("./ x.md", "whitespace"),
        ];
        for (raw, needle) in cases {
            let error = file(raw).expect_err(raw);
            assert_eq!(error.code(), codes::INVALID_PATH, "{raw:?}");
            assert!(error.is_recoverable());
            assert!(
                error.message().contains(needle),
                "{raw:?}: {}",
                error.message()
            );
            assert!(!error.message().contains('\0') && !error.message().contains('\n'));
        }
        assert!(dir("..").is_err());
        assert!(dir("output/..").is_err());
        assert!(dir("c:foo").is_err());
        assert!(dir("  ").is_err());
    }

    #[test]
    fn length_limits() {
        let long_segment = "a".repeat(256);
        assert!(file(&format!("output/{long_segment}")).is_err());
        assert!(file(&format!("output/{}", "a".repeat(255))).is_ok());
        let deep = format!("output/{}", "abcdefg/".repeat(127)) + "x";
        assert!(deep.len() <= MAX_PATH_BYTES);
        assert!(file(&deep).is_ok());
        let too_deep = format!("output/{}", "abcdefg/".repeat(128)) + "x";
        assert!(too_deep.len() > MAX_PATH_BYTES);
        assert!(file(&too_deep).unwrap_err().message().contains("1024"));
    }

    #[test]
    fn starts_with_respects_segment_boundaries() {
        let parse = |raw| WorkspacePath::parse(raw, PathUse::Directory).unwrap();
        assert!(parse("output/a").starts_with(&parse("output")));
        assert!(parse("output").starts_with(&parse("output")));
        assert!(!parse("output_extra/a").starts_with(&parse("output")));
        assert!(!parse("outputs").starts_with(&parse("output")));
        assert!(parse("anything").starts_with(&WorkspacePath::root()));
        assert_eq!(parse("output/a/b").parent().unwrap(), parse("output/a"));
        assert_eq!(parse("output").parent().unwrap(), WorkspacePath::root());
        assert_eq!(parse("output/a/b").file_name(), Some("b"));
        assert_eq!(parse("output/a/b").top(), Some("output"));
    }
}
