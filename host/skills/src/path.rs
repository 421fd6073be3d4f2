//! Skill names and model-supplied paths inside a skill, checked before
//! anything touches the file system.

use toolhost_core::model_path::{self, Names};

use crate::error::SkillError;

/// Longest skill name, in bytes (the profile's rule).
pub const MAX_NAME_BYTES: usize = 128;
/// The file a skill is described by, and the default of a read.
pub const SKILL_FILE: &str = "SKILL.md";
/// Deepest file inside a skill, counted in path segments (`SKILL.md` is 1,
/// `examples/dialogue.md` is 2).
pub const MAX_DEPTH: usize = 8;
/// Longest accepted path, in bytes, as the model sent it.
pub const MAX_PATH_BYTES: usize = model_path::MAX_PATH_BYTES;
/// Longest accepted segment, in bytes (Linux `NAME_MAX`).
pub const MAX_SEGMENT_BYTES: usize = model_path::MAX_SEGMENT_BYTES;

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
    model_path::segment_ok(name) && !name.starts_with('.')
}

pub(crate) use model_path::quoted;

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
/// Refused (`skill.invalid_request`): what `toolhost_core::model_path`
/// refuses of a file path (over 1024 bytes, control characters, whitespace
/// around it, absolute, any `\`, a drive prefix, a `..` segment, a segment
/// over 255 bytes, a trailing `/` or `/.`), and here a hidden segment
/// (`.git`) or more than 8 segments. `.` and empty segments are dropped:
/// `./examples//a.md` is `examples/a.md`.
pub fn normalize_path(raw: &str) -> Result<String, SkillError> {
    if raw.is_empty() {
        return Ok(SKILL_FILE.to_owned());
    }
    let segments = model_path::segments(raw, Names::File)
        .map_err(|problem| invalid_path(raw, &problem.describe("the skill directory")))?;
    if segments.iter().any(|segment| segment.starts_with('.')) {
        return Err(invalid_path(
            raw,
            "it contains a hidden name (starting with `.`); hidden files are not part of a skill",
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
            // What normalizing exposes (the shared rules check it again).
            "./C:/x",
            "./ x.md",
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
