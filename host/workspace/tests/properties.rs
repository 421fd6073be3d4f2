//! Generated model paths: whatever the model sends, parsing never panics,
//! refuses with the recoverable `workspace.invalid_path`, or yields a
//! normalized path that is relative, has no `.`/`..`/empty segment or
//! control character, and parses back to itself. `make fuzz` runs more
//! cases (`PROPTEST_CASES`).

use proptest::prelude::*;
use toolhost_workspace::{PathUse, WorkspacePath, codes};

/// Path-like text: segments from a set rich in the characters that matter
/// (`.`, `/`, `\`, `:`, controls, spaces, non-ASCII), joined by separators.
fn model_path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just(String::new()),
        Just("output".to_owned()),
        Just("C:".to_owned()),
        "[a-z.]{1,6}",
        "\\PC{0,8}",
        any::<String>().prop_map(|s| s.chars().take(12).collect()),
    ];
    let separator = prop_oneof![Just("/"), Just("//"), Just("\\"), Just("/./")];
    (
        prop::collection::vec((segment, separator), 0..8),
        prop::option::of(prop_oneof![Just("/"), Just(" "), Just("\0")]),
    )
        .prop_map(|(parts, lead)| {
            let mut text = lead.unwrap_or_default().to_owned();
            for (segment, separator) in parts {
                text.push_str(&segment);
                text.push_str(separator);
            }
            text
        })
}

fn check(raw: &str, usage: PathUse) -> Result<(), TestCaseError> {
    match WorkspacePath::parse(raw, usage) {
        Err(error) => {
            prop_assert!(error.is_recoverable(), "{error}");
            prop_assert_eq!(error.code(), codes::INVALID_PATH);
            prop_assert!(!error.message().contains('\n') && !error.message().contains('\0'));
        }
        Ok(path) => {
            let text = path.as_str();
            prop_assert!(!text.starts_with('/') && !text.ends_with('/'), "{text:?}");
            prop_assert!(
                !text.contains('\\') && !text.chars().any(char::is_control),
                "{text:?}"
            );
            for segment in text.split('/').filter(|_| !text.is_empty()) {
                prop_assert!(
                    !segment.is_empty() && segment != "." && segment != "..",
                    "{text:?}"
                );
                prop_assert!(segment.len() <= 255, "{text:?}");
            }
            let again = WorkspacePath::parse(text, usage).expect("a normalized path parses");
            prop_assert_eq!(again.as_str(), text);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn model_paths_normalize_or_are_refused(raw in model_path()) {
        check(&raw, PathUse::File)?;
        check(&raw, PathUse::Directory)?;
    }

    #[test]
    fn arbitrary_text_never_panics(raw in any::<String>()) {
        check(&raw, PathUse::File)?;
        check(&raw, PathUse::Directory)?;
    }
}
