//! Skill names and model-supplied paths inside a skill, checked before
//! anything touches the file system.

use crate::error::SkillError;

/// Longest skill name, in bytes (the profile's rule).
pub const MAX_NAME_BYTES: usize = 128;
/// The file a skill is described by, and the default of a read.
pub const SKILL_FILE: &str = "SKILL.md";
/// Deepest file inside a skill, counted in path segments (`SKILL.md` is 1,
/// `examples/dialogue.md` is 2).
pub const MAX_DEPTH: usize = 8;
/// Longest accepted path, in bytes, as the model sent it.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest accepted segment, in bytes (Linux `NAME_MAX`).
pub const MAX_SEGMENT_BYTES: usize = 255;

/// `[a-z0-9_-]{1,128}`: the names a profile may list, and the only names a
/// skill may have.
pub fn is_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Whether a name found on disk is part of a skill: not hidden (`.git`,
/// `.DS_Store` are not), addressable by a path (no `\`, no control
/// character), at most 255 bytes.
pub(crate) fn entry_name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= MAX_SEGMENT_BYTES
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

/// `raw` between backticks, control characters escaped, cut to 120 chars,
/// so the model's own text cannot break a message.
pub(crate) fn quoted(raw: &str) -> String {
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

/// A skill name from the model, checked: `skill.invalid_request` otherwise.
pub(crate) fn check_name(name: &str) -> Result<(), SkillError> {
    if is_skill_name(name) {
        Ok(())
    } else {
        Err(SkillError::invalid(format!(
            "skill name {} is invalid: names are 1 to 128 characters of a-z, 0-9, `_` and `-`.",
            quoted(name)
        )))
    }
}

fn invalid_path(raw: &str, problem: &str) -> SkillError {
    SkillError::invalid(format!(
        "skill path {} is invalid: {problem}. Use a path relative to the skill directory, like `SKILL.md` or `examples/dialogue.md`.",
        quoted(raw)
    ))
}

/// Check and normalize a path inside a skill. Empty means `SKILL.md`.
///
/// Refused (`skill.invalid_request`): over 1024 bytes, control characters
/// (NUL, newline…), whitespace around it, a leading `/` or `\`, any `\`, a
/// drive prefix (`C:`), a `..` segment, a hidden segment (`.git`), a segment
/// over 255 bytes, a trailing `/`, more than 8 segments. `.` and empty
/// segments are dropped: `./examples//a.md` is `examples/a.md`.
pub fn normalize_path(raw: &str) -> Result<String, SkillError> {
    if raw.is_empty() {
        return Ok(SKILL_FILE.to_owned());
    }
    if raw.len() > MAX_PATH_BYTES {
        return Err(invalid_path(
            raw,
            &format!(
                "it is {} bytes long; the limit is {MAX_PATH_BYTES}",
                raw.len()
            ),
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(invalid_path(
            raw,
            "it contains a control character (NUL, newline, tab…)",
        ));
    }
    if raw.trim() != raw {
        return Err(invalid_path(raw, "it starts or ends with whitespace"));
    }
    if raw.starts_with('/') || raw.starts_with('\\') {
        return Err(invalid_path(
            raw,
            "it is absolute; paths are relative to the skill directory",
        ));
    }
    if raw.contains('\\') {
        return Err(invalid_path(raw, "it contains `\\`; separate with `/`"));
    }
    let bytes = raw.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(invalid_path(raw, "it starts with a drive prefix"));
    }
    if raw.ends_with('/') || raw.ends_with("/.") {
        return Err(invalid_path(raw, "it names a directory, not a file"));
    }
    let mut segments = Vec::new();
    for segment in raw.split('/') {
        match segment {
            "" | "." => {}
            ".." => return Err(invalid_path(raw, "it contains `..`")),
            hidden if hidden.starts_with('.') => {
                return Err(invalid_path(
                    raw,
                    "it contains a hidden name (starting with `.`); hidden files are not part of a skill",
                ));
            }
            long if long.len() > MAX_SEGMENT_BYTES => {
                return Err(invalid_path(
                    raw,
                    &format!("a segment is over {MAX_SEGMENT_BYTES} bytes"),
                ));
            }
            segment => segments.push(segment),
        }
    }
    if segments.is_empty() {
        return Err(invalid_path(
            raw,
            "it names the skill directory, not a file",
        ));
    }
    if segments.len() > MAX_DEPTH {
        return Err(invalid_path(
            raw,
            &format!(
                "it is {} levels deep; skills hold files at most {MAX_DEPTH} levels deep",
                segments.len()
            ),
        ));
    }
    Ok(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::codes;

    #[test]
    fn skill_names() {
        for good in ["a", "prose-style", "lore_keeper2", &"x".repeat(128)] {
            assert!(is_skill_name(good), "{good}");
        }
        for bad in [
            "",
            "Prose",
            "prose style",
            "prose.style",
            "../x",
            "é",
            &"x".repeat(129),
        ] {
            assert!(!is_skill_name(bad), "{bad}");
        }
    }

    #[test]
    fn paths_are_normalized() {
        assert_eq!(normalize_path("").unwrap(), "SKILL.md");
        assert_eq!(normalize_path("SKILL.md").unwrap(), "SKILL.md");
        assert_eq!(
            normalize_path("./examples//dialogue.md").unwrap(),
            "examples/dialogue.md"
        );
        assert_eq!(
            normalize_path("a/b/c/d/e/f/g/h.md").unwrap(),
            "a/b/c/d/e/f/g/h.md"
        );
    }

    #[test]
    fn bad_paths_are_invalid_requests() {
        let long = "a".repeat(1025);
        let segment = "a".repeat(256);
        for bad in [
            "/etc/passwd",
            "\\x",
            "a\\b",
            "C:foo",
            "../x",
            "examples/../../x",
            "a\0b",
            "a\nb",
            " SKILL.md",
            "SKILL.md ",
            "examples/",
            "examples/.",
            ".",
            "./",
            ".git/config",
            "examples/.hidden",
            "a/b/c/d/e/f/g/h/i.md",
            long.as_str(),
            segment.as_str(),
        ] {
            let error = normalize_path(bad).expect_err(bad);
            assert_eq!(error.code(), codes::INVALID_REQUEST, "{bad}");
            assert!(error.is_recoverable());
        }
    }

    #[test]
    fn messages_escape_control_characters() {
        let error = normalize_path("a\nb").unwrap_err();
        assert!(error.message().contains("`a\\nb`"), "{}", error.message());
    }
}
