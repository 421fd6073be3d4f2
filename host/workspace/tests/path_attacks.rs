//! Hostile model paths: each is refused with its expected code by every
//! operation, and nothing anywhere under the temp dir (the run's hidden
//! files, the roots, the sentinel outside the run) changes.

mod common;

use common::{Fixture, listed_paths, roots_then};
use toolhost_workspace::{WorkspaceError, WriteMode, codes};

const INVALID: &str = codes::INVALID_PATH;
const NOT_VISIBLE: &str = codes::PATH_NOT_VISIBLE;
const NOT_WRITABLE: &str = codes::PATH_NOT_WRITABLE;
const NOT_FOUND: &str = codes::FILE_NOT_FOUND;
const DIR_NOT_FOUND: &str = codes::PATH_NOT_FOUND;
const IS_DIRECTORY: &str = codes::PATH_IS_DIRECTORY;

/// A hostile path and what each operation must answer: `read` (read_text,
/// record_read), `write` (replace, append, patch: always refused), `list`
/// (list, walk_files) where `None` means the path is a legitimate directory
/// path (`output/`, `.`) and is not part of the attack on listing.
struct Attack {
    path: String,
    read: &'static str,
    write: &'static str,
    list: Option<&'static str>,
}

fn attack(
    path: impl Into<String>,
    read: &'static str,
    write: &'static str,
    list: Option<&'static str>,
) -> Attack {
    Attack {
        path: path.into(),
        read,
        write,
        list,
    }
}

fn corpus() -> Vec<Attack> {
    vec![
        // Absolute paths.
        attack("/etc/passwd", INVALID, INVALID, Some(INVALID)),
        attack("/", INVALID, INVALID, Some(INVALID)),
        attack("//etc/passwd", INVALID, INVALID, Some(INVALID)),
        attack("/run.json", INVALID, INVALID, Some(INVALID)),
        attack("\\etc\\passwd", INVALID, INVALID, Some(INVALID)),
        attack("\\\\server\\share\\x", INVALID, INVALID, Some(INVALID)),
        // `..` in every position.
        attack("..", INVALID, INVALID, Some(INVALID)),
        attack("../", INVALID, INVALID, Some(INVALID)),
        attack("../run.json", INVALID, INVALID, Some(INVALID)),
        attack("../outside/sentinel.txt", INVALID, INVALID, Some(INVALID)),
        attack("./../run.json", INVALID, INVALID, Some(INVALID)),
        attack("output/..", INVALID, INVALID, Some(INVALID)),
        attack("output/../run.json", INVALID, INVALID, Some(INVALID)),
        attack(
            "output/../../outside/sentinel.txt",
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        attack(
            "output/sub/../../events.jsonl",
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        attack(
            "output/./../input/resolved_profile.json",
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        attack(
            "output/a/b/c/../../../../run.json",
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        attack(
            "tool-results/../tool-args/call_1.json",
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        // Backslashes and drive prefixes.
        attack("..\\run.json", INVALID, INVALID, Some(INVALID)),
        attack("output\\..\\..\\run.json", INVALID, INVALID, Some(INVALID)),
        attack("output/..\\..\\run.json", INVALID, INVALID, Some(INVALID)),
        attack("output\\a.md", INVALID, INVALID, Some(INVALID)),
        attack("C:\\Windows\\system.ini", INVALID, INVALID, Some(INVALID)),
        attack("C:/x", INVALID, INVALID, Some(INVALID)),
        attack("c:foo", INVALID, INVALID, Some(INVALID)),
        attack("z:", INVALID, INVALID, Some(INVALID)),
        // Control characters.
        attack("output/a\0.md", INVALID, INVALID, Some(INVALID)),
        attack("output/a.md\0", INVALID, INVALID, Some(INVALID)),
        attack("\0", INVALID, INVALID, Some(INVALID)),
        attack("output/a\n.md", INVALID, INVALID, Some(INVALID)),
        attack("output/\r", INVALID, INVALID, Some(INVALID)),
        attack("output\t/a.md", INVALID, INVALID, Some(INVALID)),
        attack("output/a\u{7f}", INVALID, INVALID, Some(INVALID)),
        attack("output/a\u{85}b", INVALID, INVALID, Some(INVALID)),
        attack("output/\u{1b}[2Jx", INVALID, INVALID, Some(INVALID)),
        // Whitespace, empty, dots, trailing slashes.
        attack("", INVALID, INVALID, None),
        attack("   ", INVALID, INVALID, Some(INVALID)),
        attack(" output/a.md", INVALID, INVALID, Some(INVALID)),
        attack("output/a.md ", INVALID, INVALID, Some(INVALID)),
        attack(".", INVALID, INVALID, None),
        attack("./", INVALID, INVALID, None),
        attack("./.", INVALID, INVALID, None),
        attack("output/", INVALID, INVALID, None),
        attack("output/a.md/", INVALID, INVALID, Some(DIR_NOT_FOUND)),
        attack("output/a.md/.", INVALID, INVALID, Some(DIR_NOT_FOUND)),
        // Lengths.
        attack("x".repeat(1025), INVALID, INVALID, Some(INVALID)),
        attack(
            format!("output/{}", "a".repeat(256)),
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        attack(
            format!("output/{}x.md", "a/".repeat(600)),
            INVALID,
            INVALID,
            Some(INVALID),
        ),
        // Hidden entries of the run directory.
        attack("run.json", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("events.jsonl", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("input", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(
            "input/resolved_profile.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack(
            "tool-args/call_1.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack("tool-args", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(
            "model-responses/r1.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack(
            "agent-results/a1.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack(".tmp/x", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(".tmp", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(
            "output_extra/secret.md",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack("outputs/x.md", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("OUTPUT/a.md", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("notes.txt", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("./run.json", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(
            ".//events.jsonl",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        // Encoded-looking and look-alike dots are names, never `..`.
        attack(
            "%2e%2e/run.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack(
            "%2e%2e%2frun.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack("..%2frun.json", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("．．/run.json", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(
            "\u{2025}/run.json",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack("...", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        // A bidi control is refused by name (it shows the path in another
        // order than it has), wherever it stands.
        attack("output\u{202e}/x.md", INVALID, INVALID, Some(INVALID)),
        attack("~/.ssh/id_rsa", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack("$HOME/x", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        attack(
            "file:///etc/passwd",
            NOT_VISIBLE,
            NOT_VISIBLE,
            Some(NOT_VISIBLE),
        ),
        attack("file:run.json", NOT_VISIBLE, NOT_VISIBLE, Some(NOT_VISIBLE)),
        // Visible but not writable.
        attack(
            "tool-results/new.md",
            NOT_FOUND,
            NOT_WRITABLE,
            Some(DIR_NOT_FOUND),
        ),
        attack(
            "tool-results/x/y.md",
            NOT_FOUND,
            NOT_WRITABLE,
            Some(DIR_NOT_FOUND),
        ),
        attack("output", IS_DIRECTORY, NOT_WRITABLE, None),
        attack("persist", IS_DIRECTORY, NOT_WRITABLE, None),
    ]
}

fn expect_code(result: Result<impl std::fmt::Debug, WorkspaceError>, code: &str, what: &str) {
    match result {
        Ok(value) => panic!("{what}: expected {code}, got Ok({value:?})"),
        Err(error) => {
            assert_eq!(error.code(), code, "{what}: {error}");
            assert!(error.is_recoverable(), "{what}: {error}");
            assert!(!error.message().is_empty());
        }
    }
}

#[test]
fn every_hostile_path_is_refused_and_nothing_changes() {
    let fixture = Fixture::new();
    let corpus = corpus();
    assert!(corpus.len() >= 40, "corpus has {} paths", corpus.len());
    let before = fixture.snapshot();
    let session = fixture.session();
    for attack in &corpus {
        let path = attack.path.as_str();
        let what = |op: &str| format!("{op} {path:?}");
        expect_code(
            fixture.workspace.read_text(path),
            attack.read,
            &what("read"),
        );
        expect_code(
            session.record_read(path, &"0".repeat(64), None),
            attack.read,
            &what("record_read"),
        );
        expect_code(
            session.write(path, "pwned", WriteMode::Replace),
            attack.write,
            &what("replace"),
        );
        expect_code(
            session.write(path, "pwned", WriteMode::Append),
            attack.write,
            &what("append"),
        );
        expect_code(
            session.patch(path, "a", "pwned", false),
            attack.write,
            &what("patch"),
        );
        expect_code(
            fixture
                .workspace
                .write_text(path, "pwned", toolhost_workspace::WriteGuard::Unchecked),
            attack.write,
            &what("write_text"),
        );
        if let Some(list) = attack.list {
            expect_code(fixture.workspace.list(path, 4, 200), list, &what("list"));
            expect_code(
                fixture.workspace.walk_files(path, 8, 5000),
                list,
                &what("walk_files"),
            );
        }
        assert!(
            session.read_state(path).is_none(),
            "{path:?} got a read-state"
        );
    }
    assert_eq!(fixture.snapshot(), before, "something changed");
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn listing_the_root_never_shows_hidden_entries() {
    let fixture = Fixture::new();
    fixture.write("output/a.md", "a");
    let listing = fixture.workspace.list("", 4, 200).unwrap();
    assert_eq!(
        listed_paths(&listing),
        roots_then(&["output/a.md", "tool-results/call_1.json"])
    );
    let walked = fixture.workspace.walk_files(".", 8, 5000).unwrap();
    let files: Vec<&str> = walked.entries.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(files, ["output/a.md", "tool-results/call_1.json"]);
}
