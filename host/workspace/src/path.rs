//! `WorkspacePath`: a model-supplied path, checked and normalized by the
//! shared rules of `toolhost_core::model_path` (the skills use the same).
//! Nothing touches the file system: visibility is [`crate::roots`]'s,
//! symlinks are the `fs` module's.

use std::fmt;

use toolhost_core::model_path::{self, Names, quoted};

use crate::error::{WorkspaceError, codes};

/// Longest accepted path, in bytes, as the model sent it.
pub const MAX_PATH_BYTES: usize = model_path::MAX_PATH_BYTES;
/// Longest accepted segment, in bytes (Linux `NAME_MAX`).
pub const MAX_SEGMENT_BYTES: usize = model_path::MAX_SEGMENT_BYTES;

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

pub(crate) use model_path::segment_ok;

impl WorkspacePath {
    /// Check and normalize a model-supplied path. Every refusal is a
    /// recoverable `workspace.invalid_path` naming the problem.
    ///
    /// - empty: the root for [`PathUse::Directory`], invalid for a file; so
    ///   are `.` and `./`;
    /// - refused: whitespace only or around the path, control characters
    ///   (NUL, newline, DEL…), bidi controls (U+202E…), a leading `/` or
    ///   `\`, any `\`, a drive prefix (`C:`, `c:foo`), a `..` segment, over
    ///   1024 bytes, a segment over 255 bytes, and for a file a path ending
    ///   in `/` or `/.`;
    /// - `.` and empty segments are dropped: `./output//a.md` is
    ///   `output/a.md`; for a directory `output/` is `output`.
    pub fn parse(raw: &str, usage: PathUse) -> Result<Self, WorkspaceError> {
        let names = match usage {
            PathUse::File => Names::File,
            PathUse::Directory => Names::Directory,
        };
        let segments = model_path::segments(raw, names)
            .map_err(|problem| invalid(raw, &problem.describe("the workspace")))?;
        Ok(Self {
            normalized: segments.join("/"),
        })
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
    fn a_bidi_control_is_refused_and_not_echoed() {
        // `notes\u{202e}dm.exe` reads as `notesexe.md` to a person.
        let error = file("output/notes\u{202e}dm.exe").expect_err("bidi");
        assert_eq!(error.code(), codes::INVALID_PATH);
        assert!(error.is_recoverable());
        assert!(error.message().contains("U+202E"), "{}", error.message());
        assert!(error.message().contains("\\u{202e}"), "{}", error.message());
        assert!(!error.message().contains('\u{202e}'));
        assert!(dir("output/\u{2067}x").is_err());
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
