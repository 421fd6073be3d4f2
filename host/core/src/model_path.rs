//! One validator for the relative paths a model names: workspace and
//! `persist/` paths (`toolhost_workspace::WorkspacePath`) and paths inside a
//! skill (`toolhost_skills::normalize_path`). Each adds its own rules (a
//! skill refuses hidden names and deep paths) and its own error; the shared
//! rules and their order live here.
//!
//! Stricter than the reference, which converted `\` to `/`: any backslash is
//! refused, so a path means the same thing on every platform and in every
//! log. Nothing is decoded (`%2e%2e` is a file name, not `..`), and nothing
//! touches the file system.

/// Longest accepted path, in bytes, as the model sent it.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest accepted segment, in bytes (Linux `NAME_MAX`).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Why a path is refused; [`describe`](Self::describe) words it for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    /// Longer than [`MAX_PATH_BYTES`] (its length).
    TooLong(usize),
    ControlCharacter,
    /// A bidi control (its character): it makes a path read as another
    /// (`report\u{202e}dm.exe` shows as `reportexe.md`).
    BidiControl(char),
    OnlyWhitespace,
    SurroundingWhitespace,
    Absolute,
    Backslash,
    DrivePrefix,
    ParentSegment,
    /// A segment longer than [`MAX_SEGMENT_BYTES`] (its length).
    SegmentTooLong(usize),
    /// A file path ending in `/` or `/.`.
    EndsLikeADirectory,
    /// A file path with no segment left (`.`, `./`).
    NamesNothing,
}

impl PathProblem {
    /// The problem in words, paths being relative to `base` ("the
    /// workspace", "the skill directory").
    pub fn describe(&self, base: &str) -> String {
        match self {
            Self::TooLong(bytes) => {
                format!("it is {bytes} bytes long; the limit is {MAX_PATH_BYTES}")
            }
            Self::ControlCharacter => {
                "it contains a control character (NUL, newline, tab…)".to_owned()
            }
            Self::BidiControl(c) => format!(
                "it contains the bidi control U+{:04X}, which shows text in another order than it has",
                u32::from(*c)
            ),
            Self::OnlyWhitespace => "it is only whitespace".to_owned(),
            Self::SurroundingWhitespace => "it starts or ends with whitespace".to_owned(),
            Self::Absolute => format!("it is absolute; paths are relative to {base}"),
            Self::Backslash => "it contains `\\`; separate segments with `/`".to_owned(),
            Self::DrivePrefix => "it starts with a drive prefix".to_owned(),
            Self::ParentSegment => {
                "it contains a `..` segment; paths cannot leave their root".to_owned()
            }
            Self::SegmentTooLong(bytes) => {
                format!("a segment is {bytes} bytes long; the limit is {MAX_SEGMENT_BYTES}")
            }
            Self::EndsLikeADirectory => {
                "a file path cannot end with `/` or `/.`; name the file itself".to_owned()
            }
            Self::NamesNothing => "it names no file".to_owned(),
        }
    }
}

/// What the path is going to name: a file, or a directory (where the empty
/// path, `.` and a trailing `/` are fine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    File,
    Directory,
}

/// The segments of `raw` once checked, `.` and empty segments dropped
/// (`./output//a.md` is `output`, `a.md`). Refused: over 1024 bytes,
/// control characters, bidi controls, whitespace only or around it, a leading `/` or `\`,
/// any `\`, a drive prefix (`C:`, `c:foo`), a `..` segment, a segment over
/// 255 bytes, and for a file an ending in `/` or `/.` or no segment at all.
/// What dropping segments exposes is checked again (`./C:/x` is refused).
pub fn segments(raw: &str, names: Names) -> Result<Vec<&str>, PathProblem> {
    if raw.len() > MAX_PATH_BYTES {
        return Err(PathProblem::TooLong(raw.len()));
    }
    if raw.chars().any(char::is_control) {
        return Err(PathProblem::ControlCharacter);
    }
    if let Some(c) = raw.chars().find(|c| is_bidi_control(*c)) {
        return Err(PathProblem::BidiControl(c));
    }
    if !raw.is_empty() && raw.trim().is_empty() {
        return Err(PathProblem::OnlyWhitespace);
    }
    if raw.trim() != raw {
        return Err(PathProblem::SurroundingWhitespace);
    }
    if raw.starts_with('/') || raw.starts_with('\\') {
        return Err(PathProblem::Absolute);
    }
    if raw.contains('\\') {
        return Err(PathProblem::Backslash);
    }
    if has_drive_prefix(raw) {
        return Err(PathProblem::DrivePrefix);
    }
    let raw_segments: Vec<&str> = raw.split('/').collect();
    if raw_segments.contains(&"..") {
        return Err(PathProblem::ParentSegment);
    }
    if let Some(segment) = raw_segments.iter().find(|s| s.len() > MAX_SEGMENT_BYTES) {
        return Err(PathProblem::SegmentTooLong(segment.len()));
    }
    if names == Names::File && !raw.is_empty() && matches!(raw_segments.last(), Some(&"" | &".")) {
        return Err(PathProblem::EndsLikeADirectory);
    }
    let segments: Vec<&str> = raw_segments
        .into_iter()
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect();
    if segments.is_empty() && names == Names::File {
        return Err(PathProblem::NamesNothing);
    }
    // Dropping `.` and empty segments can expose what the checks above
    // refuse (`./C:/` is `C:`, `x /` is `x `): a normalized path must pass
    // them itself, or the model could not name it again.
    if let (Some(first), Some(last)) = (segments.first(), segments.last()) {
        if first.trim_start() != *first || last.trim_end() != *last {
            return Err(PathProblem::SurroundingWhitespace);
        }
        if has_drive_prefix(first) {
            return Err(PathProblem::DrivePrefix);
        }
    }
    Ok(segments)
}

/// Whether a single name (from the model or found on disk) can be one
/// segment of a path: not empty, not `.`/`..`, no `/`, no `\`, no control
/// or bidi character, at most 255 bytes. (A name on disk the model could
/// not name back is left out of listings.)
pub fn segment_ok(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= MAX_SEGMENT_BYTES
        && !name.contains(['/', '\\'])
        && !name.chars().any(|c| c.is_control() || is_bidi_control(c))
}

fn has_drive_prefix(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':'
}

/// The characters that reorder text as it is shown: the Arabic letter
/// mark, the LRM/RLM marks, the embeddings and overrides, and the isolates.
/// Refused in a path, escaped wherever a run's text reaches a person.
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
    )
}

/// `raw` between backticks, control and bidi characters escaped and cut to
/// 120 characters, so the model's own text cannot break a message or
/// reorder it.
pub fn quoted(raw: &str) -> String {
    format!("`{}`", escaped(raw, 120))
}

/// `raw` with control and bidi characters escaped, cut to `max_chars`
/// (then `…`): someone else's text shown in one line of ours.
pub fn escaped(raw: &str, max_chars: usize) -> String {
    let mut out = String::new();
    for (index, c) in raw.chars().enumerate() {
        if index == max_chars {
            out.push('…');
            break;
        }
        if c.is_control() || is_bidi_control(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_rules_in_their_order() {
        let file = |raw| segments(raw, Names::File);
        assert_eq!(file("./output//a.md").unwrap(), ["output", "a.md"]);
        assert_eq!(segments("", Names::Directory).unwrap(), Vec::<&str>::new());
        assert_eq!(segments("output/", Names::Directory).unwrap(), ["output"]);
        let refused = [
            ("", PathProblem::NamesNothing),
            ("./", PathProblem::EndsLikeADirectory),
            ("   ", PathProblem::OnlyWhitespace),
            (" a", PathProblem::SurroundingWhitespace),
            ("/etc/passwd", PathProblem::Absolute),
            ("a\\b", PathProblem::Backslash),
            ("C:/x", PathProblem::DrivePrefix),
            ("./C:/x", PathProblem::DrivePrefix),
            ("./ x", PathProblem::SurroundingWhitespace),
            ("a/../b", PathProblem::ParentSegment),
            ("a\0b", PathProblem::ControlCharacter),
        ];
        for (raw, problem) in refused {
            assert_eq!(file(raw), Err(problem), "{raw:?}");
        }
        let (long, segment) = ("a".repeat(1025), "a".repeat(256));
        assert_eq!(file(&long), Err(PathProblem::TooLong(1025)));
        assert_eq!(file(&segment), Err(PathProblem::SegmentTooLong(256)));
        assert_eq!(quoted("a\nb"), "`a\\nb`");
        assert!(
            PathProblem::Absolute
                .describe("the workspace")
                .ends_with("the workspace")
        );
    }

    #[test]
    fn bidi_controls_are_refused_by_name() {
        // `report\u{202e}dm.exe` shows as `reportexe.md`: a person reading
        // the path would approve or audit a file that is not the one named.
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{061c}',
        ] {
            let raw = format!("output/report{c}dm.exe");
            assert_eq!(
                segments(&raw, Names::File),
                Err(PathProblem::BidiControl(c)),
                "{raw:?}"
            );
            assert!(!segment_ok(&format!("report{c}dm.exe")), "{raw:?}");
            assert!(!quoted(&raw).contains(c), "{raw:?}");
        }
        let described = PathProblem::BidiControl('\u{202e}').describe("the workspace");
        assert!(described.contains("U+202E"), "{described}");
        // Right-to-left text itself is a name like any other.
        assert!(segments("output/ملاحظات.md", Names::File).is_ok());
    }
}
