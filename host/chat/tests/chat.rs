//! Chat files, the frozen prefix and commits, against the fixtures in
//! `tests/fixtures/chats/` and files built in temp directories.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};
use tempfile::TempDir;
use toolhost_chat::{
    BoundChat, COMMIT_API, ChatError, ChatFile, MAX_MESSAGES_PER_BATCH, Role, TEMP_SUFFIX,
    commit_append, commit_replace, generate_chat,
};

mod common;

use common::{CJK, GROUP, LONG, copy_fixture, fixture};

fn write_chat(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, text).unwrap();
    path
}

/// The directory holds exactly `names` (no temp file left behind).
fn assert_only(dir: &Path, names: &[&str]) {
    let mut found: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut expected: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "unexpected files (a temp file left behind?)"
    );
    assert!(!found.iter().any(|f| f.ends_with(TEMP_SUFFIX)));
}

fn malformed(result: Result<ChatFile, ChatError>) -> (PathBuf, usize, String) {
    match result {
        Err(ChatError::Malformed { path, line, reason }) => (path, line, reason),
        Err(other) => panic!("expected chat.malformed, got {other:?}"),
        Ok(file) => panic!(
            "expected chat.malformed, parsed {} messages",
            file.message_count()
        ),
    }
}

fn role_counts(file: &ChatFile) -> (usize, usize, usize) {
    let count = |role| file.messages().iter().filter(|m| m.role() == role).count();
    (
        count(Role::User),
        count(Role::Assistant),
        count(Role::System),
    )
}

fn json(line: &str) -> Value {
    serde_json::from_str(line).unwrap()
}

// ---------------------------------------------------------------- fixtures

#[test]
fn long_character_chat_parses() {
    let file = ChatFile::load(fixture(LONG)).unwrap();
    assert_eq!(file.message_count(), 65);
    assert_eq!(role_counts(&file), (32, 32, 1));
    let header = file.header();
    assert_eq!(header.user_name(), Some("Ren"));
    assert_eq!(header.character_name(), Some("Mirelle"));
    assert_eq!(header.create_date(), Some("2023-5-1 @10h 12m 00s 000ms"));
    assert!(header.has_chat_metadata());
    assert!(!header.is_group_marker());

    let m = file.messages();
    assert_eq!(m[0].index(), 0);
    assert_eq!(m[0].line_number(), 2);
    assert_eq!(m[0].role(), Role::Assistant);
    assert_eq!(m[0].name(), "Mirelle");
    assert_eq!(m[0].swipes(), 3);
    assert!(m[0].text().starts_with("*The rain has not stopped"));
    assert!(
        m[0].text().contains(".*\n\nYou're letting"),
        "multi-line mes"
    );
    assert_eq!(m[1].role(), Role::User);
    assert_eq!(m[1].name(), "Ren");
    assert!(m[1].text().contains("\"Guide wanted"));
    assert_eq!(m[4].swipes(), 2);
    assert_eq!(m[37].swipes(), 2);
    let swiped: Vec<u32> = m
        .iter()
        .filter(|m| m.swipes() > 0)
        .map(|m| m.index())
        .collect();
    assert_eq!(swiped, [0, 4, 37]);
    assert_eq!(m[30].role(), Role::System);
    assert_eq!(m[30].name(), "SillyTavern System");
    assert_eq!(m.iter().filter(|m| m.text().contains('\n')).count(), 8);

    // send_date in every form SillyTavern wrote over the years.
    assert_eq!(m[0].send_date(), Some("1682936100000"));
    assert_eq!(m[6].send_date(), Some("May 1, 2023 10:55am"));
    assert_eq!(m[20].send_date(), Some("2023-5-1 @12h 34m 39s 770ms"));
    assert_eq!(m[30].send_date(), Some("2024-05-15T13:50:59.705Z"));
    assert_eq!(m[64].role(), Role::User);

    let info = BoundChat::bind(fixture(LONG), None).unwrap().info().clone();
    assert_eq!(info.user_name, "Ren");
    assert_eq!(info.character_name, "Mirelle");
    assert!(!info.group);
    assert_eq!(info.message_count, 65);
    assert_eq!(info.speakers, ["Mirelle"]);
}

#[test]
fn group_chat_parses_as_a_group() {
    let file = ChatFile::load(fixture(GROUP)).unwrap();
    assert_eq!(file.message_count(), 21);
    assert_eq!(role_counts(&file), (4, 16, 1));
    assert!(file.header().is_group_marker());
    let m = file.messages();
    let users: Vec<u32> = m
        .iter()
        .filter(|m| m.role() == Role::User)
        .map(|m| m.index())
        .collect();
    assert_eq!(users, [3, 9, 14, 18]);
    assert!(
        m.iter()
            .filter(|m| m.role() == Role::User)
            .all(|m| m.name() == "Sable")
    );
    assert_eq!(m[11].role(), Role::System);
    assert_eq!((m[7].name(), m[7].swipes()), ("Brisa", 2));
    assert_eq!((m[13].name(), m[13].swipes()), ("Brisa", 2));
    assert!(m[7].text().contains("🎵"));
    assert_eq!(m[0].send_date(), Some("March 9, 2024 8:05pm"));

    let bound = BoundChat::bind(fixture(GROUP), None).unwrap();
    let info = bound.info();
    assert!(info.group);
    assert_eq!(info.speakers, ["Aldric", "Brisa", "Corvin"]);
    assert_eq!(info.character_name, "Aldric, Brisa, Corvin");
    assert_eq!(info.user_name, "Sable", "the group header says \"unused\"");
    assert_eq!(bound.reply_name(), "Corvin", "the latest assistant speaker");
    // Frozen before Corvin spoke: the reply goes to the latest speaker then.
    let early = BoundChat::bind(fixture(GROUP), Some(2)).unwrap();
    assert_eq!(early.reply_name(), "Brisa");
    assert_eq!(early.info().speakers, ["Aldric", "Brisa"]);
    assert!(early.info().group);
}

#[test]
fn two_speakers_make_a_group_without_the_header_marker() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_chat(
        &dir,
        "c.jsonl",
        concat!(
            r#"{"user_name":"U","character_name":"A","create_date":"x","chat_metadata":{}}"#,
            "\n",
            r#"{"name":"A","is_user":false,"mes":"hi"}"#,
            "\n",
            r#"{"name":"B","is_user":false,"mes":"hello"}"#,
        ),
    );
    assert!(BoundChat::bind(&path, None).unwrap().info().group);
    assert!(!BoundChat::bind(&path, Some(1)).unwrap().info().group);
}

#[test]
fn cjk_chat_parses() {
    let file = ChatFile::load(fixture(CJK)).unwrap();
    assert_eq!(
        file.message_count(),
        16,
        "the trailing line ending adds no message"
    );
    assert_eq!(role_counts(&file), (8, 8, 0));
    assert_eq!(file.header().user_name(), Some("葵"));
    assert_eq!(file.header().character_name(), Some("小雪"));
    let m = file.messages();
    assert!(m[0].text().contains("图书馆"));
    assert!(m[12].text().contains("🐈\u{200d}⬛"));
    assert!(m[15].text().ends_with("🇯🇵✨"));
    assert!(
        m.iter()
            .filter(|m| m.role() == Role::Assistant)
            .all(|m| m.swipes() == 1)
    );
    assert_eq!(m[15].line_ending(), "\n");
}

#[test]
fn raw_lines_are_the_exact_file_lines() {
    for name in [LONG, GROUP, CJK] {
        for crlf in [false, true] {
            let (_dir, path) = copy_fixture(name, crlf);
            let text = fs::read_to_string(&path).unwrap();
            let ending = if crlf { "\r\n" } else { "\n" };
            let lines: Vec<&str> = text.split_terminator(ending).collect();
            let file = ChatFile::load(&path).unwrap();
            assert_eq!(file.header().raw_line(), lines[0]);
            assert_eq!(file.messages().len() + 1, lines.len(), "{name}");
            for message in file.messages() {
                let line = lines[message.line_number() - 1];
                assert_eq!(
                    message.raw_line(),
                    line,
                    "{name} message {}",
                    message.index()
                );
                assert_eq!(json(line)["mes"].as_str(), Some(message.text()));
            }
            assert_eq!(file.bytes(), text.as_bytes());
        }
    }
}

// ---------------------------------------------------------------- malformed

const HEADER: &str = r#"{"user_name":"U","character_name":"C","create_date":"2024-05-01@10h12m00s","chat_metadata":{}}"#;

fn message_line(i: usize) -> String {
    let user = i % 2 == 1;
    format!(
        r#"{{"name":"{}","is_user":{user},"send_date":"May 1, 2024 10:{:02}am","mes":"message {i}"}}"#,
        if user { "U" } else { "C" },
        i % 60
    )
}

/// A header and `n` messages; `bad` replaces the line with that 1-based number.
fn chat_with(n: usize, bad: Option<(usize, &str)>) -> String {
    let mut lines = vec![HEADER.to_owned()];
    lines.extend((0..n).map(message_line));
    if let Some((line, text)) = bad {
        lines[line - 1] = text.to_owned();
    }
    lines.join("\n")
}

#[test]
fn malformed_lines_name_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, usize, &str)] = &[
        (
            r#"{"name":"C","is_user":false,"mes":"cut off"#,
            17,
            "not valid JSON",
        ),
        (
            r#"{"name":"C","is_user":false,"mes":42}"#,
            17,
            "`mes` must be a string, found a number",
        ),
        (r#"{"name":"C","is_user":false}"#, 9, "`mes` is missing"),
        (
            r#"{"name":"C","is_user":"false","mes":"x"}"#,
            5,
            "`is_user` must be a boolean, found a string",
        ),
        (r#"{"name":"C","mes":"x"}"#, 5, "`is_user` is missing"),
        (
            r#"{"name":7,"is_user":false,"mes":"x"}"#,
            3,
            "`name` must be a string",
        ),
        (
            r#"{"name":"C","is_user":false,"is_system":1,"mes":"x"}"#,
            3,
            "`is_system` must be a boolean",
        ),
        (
            r#"{"name":"C","is_user":false,"send_date":{},"mes":"x"}"#,
            3,
            "`send_date` must be a string or a number",
        ),
        (
            r#"{"name":"C","is_user":false,"mes":"x","swipes":"x"}"#,
            3,
            "`swipes` must be an array",
        ),
        (r#"["name","C"]"#, 12, "not a JSON object but an array"),
        (r#""just a string""#, 12, "not a JSON object but a string"),
        ("not json at all", 12, "not valid JSON"),
        (
            r#"{"name":"C","is_user":false,"mes":"x"} trailing"#,
            20,
            "not valid JSON",
        ),
        (r#"{"user_name":7}"#, 1, "`user_name` must be a string"),
        ("", 10, "blank line before the last message"),
    ];
    for (i, (text, line, expected)) in cases.iter().enumerate() {
        let path = write_chat(
            &dir,
            &format!("bad{i}.jsonl"),
            &chat_with(25, Some((*line, text))),
        );
        let (err_path, err_line, reason) = malformed(ChatFile::load(&path));
        assert_eq!(err_path, path);
        assert_eq!(err_line, *line, "case {i}: {reason}");
        assert!(
            reason.contains(expected),
            "case {i}: {reason:?} lacks {expected:?}"
        );
        let shown = ChatFile::load(&path).unwrap_err().to_string();
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        assert!(shown.contains(&format!("line {line}")), "{shown}");
        assert_eq!(ChatFile::load(&path).unwrap_err().code(), "chat.malformed");
    }
}

#[test]
fn bad_json_on_line_17_is_reported_on_line_17() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_chat(
        &dir,
        "c.jsonl",
        &chat_with(30, Some((17, "{\"mes\": \"oops\",,}"))),
    );
    let err = ChatFile::load(&path).unwrap_err();
    assert_eq!(err.code(), "chat.malformed");
    let (_, line, reason) = malformed(Err(err));
    assert_eq!(line, 17);
    assert!(
        reason.starts_with("not valid JSON") && reason.contains("column"),
        "{reason}"
    );
}

#[test]
fn empty_files_and_missing_headers_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [("empty.jsonl", ""), ("blank.jsonl", "\n  \n\r\n")] {
        let (_, line, reason) = malformed(ChatFile::load(write_chat(&dir, name, text)));
        assert_eq!(line, 1);
        assert!(reason.contains("empty"), "{reason}");
    }
    // A file that starts with a message (an old headerless group chat).
    let headless = (0..5).map(message_line).collect::<Vec<_>>().join("\n");
    let (_, line, reason) = malformed(ChatFile::load(write_chat(
        &dir,
        "headless.jsonl",
        &headless,
    )));
    assert_eq!(line, 1);
    assert!(reason.contains("not the chat header"), "{reason}");
    // The header alone is a chat with no messages.
    let only = ChatFile::load(write_chat(&dir, "only.jsonl", HEADER)).unwrap();
    assert_eq!(only.message_count(), 0);
}

#[test]
fn non_utf8_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = chat_with(6, None).into_bytes();
    let at = bytes.windows(9).position(|w| w == b"message 4").unwrap();
    bytes[at] = 0xff;
    let path = dir.path().join("c.jsonl");
    fs::write(&path, bytes).unwrap();
    let (_, line, reason) = malformed(ChatFile::load(&path));
    assert_eq!(line, 6, "message 4 is on line 6");
    assert!(reason.contains("UTF-8"));
}

#[test]
fn missing_file_is_not_found() {
    let err = ChatFile::load("/nonexistent/dir/chat.jsonl").unwrap_err();
    assert_eq!(err.code(), "chat.not_found");
    assert!(matches!(err, ChatError::NotFound { .. }));
    assert_eq!(ChatError::NotBound.code(), "chat.not_found");
    let err = BoundChat::bind("/nonexistent/chat.jsonl", None).unwrap_err();
    assert_eq!(err.code(), "chat.not_found");
}

#[test]
fn trailing_blank_lines_crlf_and_bom_are_tolerated() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "\u{feff}{}\r\n\r\n  \n\n",
        chat_with(4, None).replace('\n', "\r\n")
    );
    let path = write_chat(&dir, "c.jsonl", &text);
    let file = ChatFile::load(&path).unwrap();
    assert_eq!(file.message_count(), 4);
    assert_eq!(file.header().user_name(), Some("U"));
    assert_eq!(file.messages()[0].raw_line(), message_line(0));
    assert_eq!(file.messages()[0].line_ending(), "\r\n");
    assert_eq!(file.messages()[3].text(), "message 3");
}

#[test]
fn unknown_fields_and_liberal_values_are_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let text = [
        r#"{"user_name":"U","character_name":"C","create_date":1682935920000,"chat_metadata":{"x":[1]},"future":{"a":null}}"#,
        r#"{"mes":"no name","is_user":false,"name":null,"is_system":null,"send_date":null,"swipes":null,"extra":{"nested":{"deep":[{"x":"}"}]}},"unknown":true}"#,
        r#"{"name":"C","is_user":false,"mes":"","send_date":1682935920000.5,"swipes":[1,{"a":"b"},"c"],"swipe_id":"weird"}"#,
    ]
    .join("\n");
    let file = ChatFile::load(write_chat(&dir, "c.jsonl", &text)).unwrap();
    assert_eq!(file.header().create_date(), Some("1682935920000"));
    let m = file.messages();
    assert_eq!(
        (m[0].name(), m[0].send_date(), m[0].swipes()),
        ("", None, 0)
    );
    assert_eq!(m[0].role(), Role::Assistant);
    assert_eq!((m[1].text(), m[1].swipes()), ("", 3));
    assert_eq!(m[1].send_date(), Some("1682935920000.5"));
}

// ---------------------------------------------------------------- frozen prefix

#[test]
fn later_messages_stay_invisible() {
    let (_dir, path) = copy_fixture(LONG, false);
    let bound = BoundChat::bind(&path, None).unwrap();
    assert_eq!(bound.message_count(), 65);

    // SillyTavern appends two messages after the run started.
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(b"\n");
    bytes.extend_from_slice(message_line(65).as_bytes());
    bytes.extend_from_slice(b"\n");
    bytes.extend_from_slice(message_line(66).as_bytes());
    fs::write(&path, &bytes).unwrap();
    assert_eq!(ChatFile::load(&path).unwrap().message_count(), 67);

    assert_eq!(bound.message_count(), 65);
    assert_eq!(bound.info().message_count, 65);
    assert_eq!(bound.messages(60, 100).len(), 5);
    assert_eq!(bound.messages(60, 100).last().unwrap().index(), 64);
    let err = bound.message(65).unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found");
    assert!(matches!(
        err,
        ChatError::MessageNotFound {
            index: 65,
            total: 65
        }
    ));
    assert!(err.to_string().contains("total messages: 65"));
}

#[test]
fn visible_messages_freezes_a_shorter_prefix() {
    let bound = BoundChat::bind(fixture(LONG), Some(10)).unwrap();
    assert_eq!(bound.message_count(), 10);
    assert_eq!(bound.info().message_count, 10);
    assert_eq!(bound.message(9).unwrap().index(), 9);
    assert_eq!(
        bound.message(10).unwrap_err().code(),
        "chat.message_not_found"
    );
    assert_eq!(bound.messages(5, 100).len(), 5);
    assert!(bound.messages(10, 5).is_empty());
    assert!(bound.messages(u32::MAX, u32::MAX).is_empty());
    assert_eq!(bound.messages(0, 0).len(), 0);
    let batch: Vec<u32> = bound.messages(3, 4).iter().map(|m| m.index()).collect();
    assert_eq!(batch, [3, 4, 5, 6]);

    let none = BoundChat::bind(fixture(LONG), Some(0)).unwrap();
    assert_eq!(none.message_count(), 0);
    assert!(none.messages(0, 10).is_empty());

    let err = BoundChat::bind(fixture(LONG), Some(66)).unwrap_err();
    assert_eq!(err.code(), "agent.input_history_conflict");
}

#[test]
fn batches_are_capped_at_one_thousand() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_chat(&dir, "big.jsonl", &generate_chat(2_500, 7));
    let bound = BoundChat::bind(&path, None).unwrap();
    assert_eq!(MAX_MESSAGES_PER_BATCH, 1_000);
    assert_eq!(bound.messages(0, 5_000).len(), 1_000);
    assert_eq!(bound.messages(0, u32::MAX).len(), 1_000);
    assert_eq!(bound.messages(2_000, 1_000).len(), 500);
    assert_eq!(bound.messages(1_999, 1_000)[0].index(), 1_999);
    let frozen = BoundChat::bind(&path, Some(1_200)).unwrap();
    assert_eq!(frozen.messages(500, 1_000).len(), 700);
}

#[test]
fn prefix_hash_covers_the_visible_message_lines() {
    for crlf in [false, true] {
        let (_dir, path) = copy_fixture(LONG, crlf);
        let bytes = fs::read(&path).unwrap();
        let ending: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let body = &bytes[bytes.iter().position(|&b| b == b'\n').unwrap() + 1..];
        let all = BoundChat::bind(&path, None).unwrap();
        assert_eq!(all.prefix_len(), body.len() as u64);
        assert_eq!(all.prefix_sha256(), hex::encode(Sha256::digest(body)));

        // The first 3 messages: three lines, the endings between them but
        // not the one after the third.
        let three = BoundChat::bind(&path, Some(3)).unwrap();
        let end = body
            .windows(ending.len())
            .enumerate()
            .filter(|(_, w)| *w == ending)
            .nth(2)
            .unwrap()
            .0;
        assert_eq!(
            three.prefix_sha256(),
            hex::encode(Sha256::digest(&body[..end]))
        );

        let again = BoundChat::rebind(&path, 3, three.prefix_sha256()).unwrap();
        assert_eq!(again.message_count(), 3);
        let err = BoundChat::rebind(&path, 3, all.prefix_sha256()).unwrap_err();
        assert_eq!(err.code(), "agent.input_history_conflict");
    }
}

#[test]
fn a_message_appended_after_a_last_line_without_newline_is_no_conflict() {
    // SillyTavern writes chats without a trailing newline; appending the
    // next message adds one to what was the last line. The history the run
    // froze has not changed.
    let (_dir, path) = copy_fixture(LONG, false);
    let before = fs::read(&path).unwrap();
    assert!(
        !before.ends_with(b"\n"),
        "the fixture ends without a newline"
    );
    let bound = BoundChat::bind(&path, None).unwrap();
    let mut after = before.clone();
    after.extend_from_slice(
        br#"
{"name":"Ren","is_user":true,"is_system":false,"send_date":"2024-05-16T10:00:00.000Z","mes":"Later."}"#,
    );
    fs::write(&path, &after).unwrap();
    let again = BoundChat::rebind(&path, bound.message_count(), bound.prefix_sha256()).unwrap();
    assert_eq!(again.message_count(), bound.message_count());
    // But glueing text onto the last frozen line is a change.
    let mut glued = before.clone();
    glued.extend_from_slice(b" ");
    fs::write(&path, &glued).unwrap();
    assert_eq!(
        BoundChat::rebind(&path, bound.message_count(), bound.prefix_sha256())
            .map(|_| ())
            .unwrap_err()
            .code(),
        "agent.input_history_conflict"
    );
}

// ---------------------------------------------------------------- commits

/// The file after a first commit is the old file with one line added after
/// the last message, in the file's line-ending style; returns that line.
fn assert_appended(old: &[u8], new: &[u8], ending: &str) -> String {
    let old_text = std::str::from_utf8(old).unwrap();
    let new_text = std::str::from_utf8(new).unwrap();
    if let Some(body) = old_text.strip_suffix(ending) {
        // The file ended with a line ending: the new line gets one too.
        assert!(new_text.starts_with(old_text), "old bytes changed");
        let line = new_text[old_text.len()..].strip_suffix(ending).unwrap();
        assert!(!body.is_empty());
        line.to_owned()
    } else {
        let rest = new_text.strip_prefix(old_text).expect("old bytes changed");
        rest.strip_prefix(ending).unwrap().to_owned()
    }
}

/// `new` is `old` with line `line` (0-based, as split on `ending`) replaced;
/// returns the (old, new) versions of that line.
fn assert_only_line_changed(old: &[u8], new: &[u8], line: usize, ending: &str) -> (String, String) {
    let old_lines: Vec<&[u8]> = old.split_inclusive(|&b| b == b'\n').collect();
    let new_lines: Vec<&[u8]> = new.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(old_lines.len(), new_lines.len());
    for (i, (a, b)) in old_lines.iter().zip(&new_lines).enumerate() {
        if i != line {
            assert_eq!(a, b, "line {} changed", i + 1);
        }
    }
    let strip = |l: &[u8]| {
        let l = std::str::from_utf8(l).unwrap();
        l.strip_suffix(ending).unwrap_or(l).to_owned()
    };
    (strip(old_lines[line]), strip(new_lines[line]))
}

#[test]
fn commit_replace_append_replace_on_the_run_message() {
    for crlf in [false, true] {
        let ending = if crlf { "\r\n" } else { "\n" };
        let (dir, path) = copy_fixture(LONG, crlf);
        let bound = BoundChat::bind(&path, None).unwrap();
        let v0 = fs::read(&path).unwrap();

        let first = commit_replace(&bound, None, "Hello").unwrap();
        assert_eq!(first.index, 65);
        let v1 = fs::read(&path).unwrap();
        let line = assert_appended(&v0, &v1, ending);
        let message = json(&line);
        assert_eq!(message["name"], "Mirelle");
        assert_eq!(message["is_user"], false);
        assert_eq!(message["is_system"], false);
        assert_eq!(message["mes"], "Hello");
        assert_eq!(message["extra"], serde_json::json!({"api": COMMIT_API}));
        let date = message["send_date"].as_str().unwrap();
        assert!(
            date.len() == 24 && date.ends_with('Z') && date.as_bytes()[10] == b'T',
            "{date}"
        );
        assert!(
            line.starts_with(
                r#"{"name":"Mirelle","is_user":false,"is_system":false,"send_date":""#
            )
        );
        assert_only(dir.path(), &[LONG]);

        let second = commit_append(&bound, Some(first.index), " world\nand more").unwrap();
        assert_eq!(second.index, 65);
        let v2 = fs::read(&path).unwrap();
        let (before, after) = assert_only_line_changed(&v1, &v2, 66, ending);
        assert_eq!(before, line);
        assert_eq!(json(&after)["mes"], "Hello world\nand more");
        assert_eq!(
            after,
            line.replace(r#""mes":"Hello""#, r#""mes":"Hello world\nand more""#)
        );

        let third = commit_replace(&bound, Some(second.index), "Final \"answer\" ✨").unwrap();
        assert_eq!(third.index, 65);
        let v3 = fs::read(&path).unwrap();
        let (_, last) = assert_only_line_changed(&v2, &v3, 66, ending);
        assert_eq!(json(&last)["mes"], "Final \"answer\" ✨");
        assert_eq!(
            last,
            line.replace(r#""mes":"Hello""#, r#""mes":"Final \"answer\" ✨""#)
        );

        // The file is still a valid chat, the reply last, the prefix intact.
        let file = ChatFile::load(&path).unwrap();
        assert_eq!(file.message_count(), 66);
        assert_eq!(file.messages()[65].role(), Role::Assistant);
        assert_eq!(
            file.messages()[65].line_ending(),
            "",
            "no line ending added at the end"
        );
        assert_eq!(&v3[..v0.len()], &v0[..]);
        // And still invisible to the run.
        assert_eq!(bound.message_count(), 65);
        assert_only(dir.path(), &[LONG]);
    }
}

#[test]
fn a_chat_of_only_its_header_takes_a_second_commit() {
    // An empty prefix has no last line whose end the commit could check:
    // the run's own first message starts right where it ends.
    let dir = tempfile::tempdir().unwrap();
    let path = write_chat(
        &dir,
        "new.jsonl",
        "{\"user_name\":\"Ren\",\"character_name\":\"Mirelle\"}\n",
    );
    let bound = BoundChat::bind(&path, None).unwrap();
    let first = commit_replace(&bound, None, "Hello.").unwrap();
    assert_eq!(first.index, 0);
    commit_append(&bound, Some(first.index), " Again.").unwrap();
    let file = ChatFile::load(&path).unwrap();
    assert_eq!(file.messages()[0].text(), "Hello. Again.");
}

#[test]
fn first_commit_in_append_mode_creates_the_message() {
    let (dir, path) = copy_fixture(CJK, false);
    let bound = BoundChat::bind(&path, None).unwrap();
    let old = fs::read(&path).unwrap();
    let first = commit_append(&bound, None, "第一段。").unwrap();
    assert_eq!(first.index, 16);
    let new = fs::read(&path).unwrap();
    // The file ended with "\n": the new line goes after it and gets one too.
    let line = assert_appended(&old, &new, "\n");
    assert_eq!(json(&line)["name"], "小雪");
    assert_eq!(json(&line)["mes"], "第一段。");
    assert!(new.ends_with(b"\n"));
    commit_append(&bound, Some(first.index), "第二段 🐱").unwrap();
    let file = ChatFile::load(&path).unwrap();
    assert_eq!(file.messages()[16].text(), "第一段。第二段 🐱");
    assert_only(dir.path(), &[CJK]);
}

#[test]
fn group_chat_commit_speaks_as_the_latest_character() {
    let (_dir, path) = copy_fixture(GROUP, false);
    let bound = BoundChat::bind(&path, None).unwrap();
    let committed = commit_replace(&bound, None, "*Corvin waves the smoke away.*").unwrap();
    assert_eq!(committed.index, 21);
    let file = ChatFile::load(&path).unwrap();
    assert_eq!(file.messages()[21].name(), "Corvin");
    assert!(file.header().is_group_marker());
}

#[test]
fn rewrite_keeps_unknown_fields_of_the_run_message() {
    for crlf in [false, true] {
        let ending = if crlf { "\r\n" } else { "\n" };
        let (dir, path) = copy_fixture(LONG, crlf);
        let bound = BoundChat::bind(&path, None).unwrap();
        let first = commit_replace(&bound, None, "draft").unwrap();

        // SillyTavern (or an extension) adds fields to the run's message and
        // a swipe; then the user sends a message after it.
        let text = fs::read_to_string(&path).unwrap();
        let (head, ours) = text.rsplit_once(ending).unwrap();
        let decorated = ours.replace(
            r#","extra":{"api":"toolhost"}}"#,
            r#","extra":{"api":"toolhost","token_count":1,"display_text":"d\"}"},"title":"","swipe_id":1,"swipes":["older take","draft"],"swipe_info":[{},{}],"x-custom":{"keep":[1, 2 ,3]} }"#,
        );
        let follow_up = message_line(67);
        fs::write(
            &path,
            format!("{head}{ending}{decorated}{ending}{follow_up}"),
        )
        .unwrap();
        let v1 = fs::read(&path).unwrap();

        let second = commit_append(&bound, Some(first.index), " — done").unwrap();
        assert_eq!(second.index, 65);
        let v2 = fs::read(&path).unwrap();
        let (before, after) = assert_only_line_changed(&v1, &v2, 66, ending);
        assert_eq!(before, decorated);
        let expected = decorated
            .replace(r#""mes":"draft""#, r#""mes":"draft — done""#)
            .replace(
                r#"["older take","draft"]"#,
                r#"["older take","draft — done"]"#,
            );
        assert_eq!(after, expected, "only `mes` and the current swipe change");
        assert!(v2.ends_with(follow_up.as_bytes()));
        assert_only(dir.path(), &[LONG]);
    }
}

#[test]
fn changed_prefix_is_a_conflict_and_the_file_stays() {
    type Edit = fn(&str) -> String;
    let edits: &[(&str, Edit)] = &[
        ("an edited message", |t| {
            t.replacen("Dawn it is.", "Dusk it is.", 1)
        }),
        ("a deleted last message", |t| {
            t.rsplit_once('\n').unwrap().0.to_owned()
        }),
        ("a deleted first message", |t| {
            let (header, rest) = t.split_once('\n').unwrap();
            format!("{header}\n{}", rest.split_once('\n').unwrap().1)
        }),
        ("a swipe on message 4", |t| {
            t.replacen(r#""chid":3,"swipe_id":0"#, r#""chid":3,"swipe_id":1"#, 1)
        }),
        ("an emptied file", |_| String::new()),
    ];
    for (what, edit) in edits {
        let (dir, path) = copy_fixture(LONG, false);
        let bound = BoundChat::bind(&path, None).unwrap();
        let edited = edit(&fs::read_to_string(&path).unwrap());
        assert!(
            edited != fs::read_to_string(&path).unwrap(),
            "{what}: the edit did nothing"
        );
        fs::write(&path, &edited).unwrap();
        let err = commit_replace(&bound, None, "reply").unwrap_err();
        assert_eq!(err.code(), "agent.input_history_conflict", "{what}: {err}");
        assert!(matches!(err, ChatError::InputHistoryConflict { .. }));
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            edited,
            "{what}: file touched"
        );
        assert_only(dir.path(), &[LONG]);
    }
}

#[test]
fn conflict_on_a_later_commit_leaves_the_file() {
    let (dir, path) = copy_fixture(LONG, false);
    let bound = BoundChat::bind(&path, Some(20)).unwrap();
    let first = commit_replace(&bound, None, "one").unwrap();
    assert_eq!(
        first.index, 65,
        "appended after the last line, not after the prefix"
    );
    let edited = fs::read_to_string(&path)
        .unwrap()
        .replacen("Who wants a", "Who needs a", 1)
        .replacen("That's me. Mirelle Aubade", "That's me. Mirelle Aubarde", 1);
    fs::write(&path, &edited).unwrap();
    let err = commit_replace(&bound, Some(first.index), "two").unwrap_err();
    assert_eq!(err.code(), "agent.input_history_conflict");
    assert_eq!(fs::read_to_string(&path).unwrap(), edited);
    assert_only(dir.path(), &[LONG]);
}

#[test]
fn changes_outside_the_prefix_are_not_conflicts() {
    let (dir, path) = copy_fixture(LONG, false);
    let bound = BoundChat::bind(&path, Some(40)).unwrap();
    let text = fs::read_to_string(&path).unwrap();
    // SillyTavern rewrites chat_metadata and edits a message after the prefix.
    let edited = text
        .replacen(
            r#""lastInContextMessageId":63"#,
            r#""lastInContextMessageId":64,"note":"x""#,
            1,
        )
        .replacen("We'll make it.", "We will make it.", 1);
    assert_ne!(edited, text);
    fs::write(&path, &edited).unwrap();
    let committed = commit_replace(&bound, None, "reply").unwrap();
    assert_eq!(committed.index, 65);
    assert!(fs::read_to_string(&path).unwrap().starts_with(&edited));
    assert_only(dir.path(), &[LONG]);
}

#[test]
fn messages_appended_after_bind_come_before_the_reply() {
    let (dir, path) = copy_fixture(LONG, false);
    let bound = BoundChat::bind(&path, None).unwrap();
    let mut text = fs::read_to_string(&path).unwrap();
    text.push('\n');
    text.push_str(&message_line(65));
    fs::write(&path, &text).unwrap();
    let first = commit_replace(&bound, None, "reply").unwrap();
    assert_eq!(first.index, 66);
    commit_replace(&bound, Some(first.index), "better reply").unwrap();
    let file = ChatFile::load(&path).unwrap();
    assert_eq!(file.message_count(), 67);
    assert_eq!(file.messages()[65].text(), "message 65");
    assert_eq!(file.messages()[66].text(), "better reply");
    assert_only(dir.path(), &[LONG]);
}

#[test]
fn commits_only_touch_the_run_message() {
    let (dir, path) = copy_fixture(LONG, false);
    let bound = BoundChat::bind(&path, Some(60)).unwrap();
    let before = fs::read(&path).unwrap();
    // Inside the prefix.
    let err = commit_replace(&bound, Some(3), "x").unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found");
    assert!(matches!(err, ChatError::NotRunMessage { index: 3, .. }));
    // After the prefix, but written by SillyTavern, not by a run.
    let err = commit_replace(&bound, Some(63), "x").unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found");
    assert!(err.to_string().contains("extra.api"), "{err}");
    // A user message is never the run's.
    let err = commit_replace(&bound, Some(62), "x").unwrap_err();
    assert!(
        err.to_string().contains("not an assistant message"),
        "{err}"
    );
    // Past the end.
    let err = commit_append(&bound, Some(65), "x").unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found");
    let err = commit_append(&bound, Some(u32::MAX), "x").unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found");
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_only(dir.path(), &[LONG]);
}

#[cfg(unix)]
#[test]
fn commit_keeps_permissions_and_writes_through_a_symlink() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = copy_fixture(CJK, false);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("link.jsonl");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    let bound = BoundChat::bind(&link, None).unwrap();
    commit_replace(&bound, None, "via link").unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert_eq!(
        ChatFile::load(&path).unwrap().messages()[16].text(),
        "via link"
    );
    assert_only(dir.path(), &[CJK, "link.jsonl"]);
}

#[test]
fn commit_to_a_vanished_chat_is_not_found() {
    let (dir, path) = copy_fixture(CJK, false);
    let bound = BoundChat::bind(&path, None).unwrap();
    fs::remove_file(&path).unwrap();
    let err = commit_replace(&bound, None, "x").unwrap_err();
    assert_eq!(err.code(), "chat.not_found");
    assert_only(dir.path(), &[]);
}

// ---------------------------------------------------------------- generator

#[test]
fn generated_chats_are_deterministic_and_realistic() {
    let a = generate_chat(2_000, 42);
    assert_eq!(a, generate_chat(2_000, 42));
    assert_ne!(a, generate_chat(2_000, 43));
    assert!(!a.ends_with('\n'));
    let dir = tempfile::tempdir().unwrap();
    let file = ChatFile::load(write_chat(&dir, "g.jsonl", &a)).unwrap();
    assert_eq!(file.message_count(), 2_000);
    let per_message = (a.len() - file.header().raw_line().len()) / 2_000;
    assert!(
        (250..=350).contains(&per_message),
        "{per_message} bytes per message"
    );
    let (user, assistant, system) = role_counts(&file);
    assert_eq!(system, 2_000 / 97);
    assert!(user > 900 && assistant > 900);
    assert!(file.messages().iter().any(|m| m.swipes() == 2));
    assert!(file.messages().iter().any(|m| m.text().contains("\n\n")));
    let distinct: std::collections::HashSet<&str> =
        file.messages().iter().map(|m| m.text()).collect();
    assert!(distinct.len() > 1_990, "varied texts");
    assert_eq!(generate_chat(0, 1).lines().count(), 1, "header only");
}

#[test]
fn a_hundred_thousand_message_chat_loads() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let text = generate_chat(100_000, 2024);
    let generated = started.elapsed();
    let path = write_chat(&dir, "big.jsonl", &text);
    let started = Instant::now();
    let bound = BoundChat::bind(&path, None).unwrap();
    let loaded = started.elapsed();
    assert_eq!(bound.message_count(), 100_000);
    let started = Instant::now();
    let mut total = 0;
    let mut start = 0;
    while start < bound.message_count() {
        total += bound.messages(start, MAX_MESSAGES_PER_BATCH).len();
        start += MAX_MESSAGES_PER_BATCH;
    }
    assert_eq!(total, 100_000);
    let batched = started.elapsed();
    let started = Instant::now();
    let committed = commit_replace(&bound, None, "reply").unwrap();
    let commit = started.elapsed();
    assert_eq!(committed.index, 100_000);
    eprintln!(
        "100k messages, {:.1} MB: generate {generated:?}, bind (load + parse + hash) {loaded:?}, \
         100 batches {batched:?}, first commit {commit:?}",
        text.len() as f64 / 1e6
    );
}

#[test]
fn a_pack_holds_the_same_messages_as_the_batch() {
    for name in [GROUP, CJK] {
        let bound = BoundChat::bind(fixture(name), None).unwrap();
        let count = bound.message_count();
        for (start, want) in [(0, count), (1, 3), (count - 1, 5), (count + 3, 2)] {
            let batch = bound.messages(start, want);
            let pack = bound.pack(start, want);
            assert_eq!(pack.packed.text_ends.len(), batch.len(), "{name} {start}");
            assert_eq!(pack.roles.len(), batch.len());
            let mut from = 0usize;
            for (at, message) in batch.iter().enumerate() {
                assert_eq!(pack.start + at as u32, message.index());
                let end = pack.packed.text_ends[at] as usize;
                assert_eq!(
                    &pack.packed.texts[from..end],
                    message.text(),
                    "{name} #{}",
                    message.index()
                );
                assert_eq!(pack.roles[at], message.role());
                assert_eq!(
                    pack.packed.names[pack.packed.name_ids[at] as usize],
                    message.name()
                );
                from = end;
            }
            let distinct: std::collections::BTreeSet<&str> =
                batch.iter().map(|m| m.name()).collect();
            assert_eq!(pack.packed.names.len(), distinct.len(), "each name once");
        }
    }
}

#[test]
fn a_commit_id_is_found_only_after_its_commit_landed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chat.jsonl");
    std::fs::write(
        &path,
        "{\"user_name\":\"Ser\",\"character_name\":\"Lyra\"}\n{\"name\":\"Ser\",\"is_user\":true,\"mes\":\"hi\"}\n",
    )
    .unwrap();
    let bound = toolhost_chat::BoundChat::bind(&path, None).unwrap();
    assert_eq!(
        toolhost_chat::find_commit(&bound, "run_a:commit_001").unwrap(),
        None
    );
    let first = toolhost_chat::commit(
        &bound,
        None,
        "draft",
        toolhost_chat::CommitMode::Replace,
        Some("run_a:commit_001"),
    )
    .unwrap();
    assert_eq!(
        toolhost_chat::find_commit(&bound, "run_a:commit_001").unwrap(),
        Some(first.index)
    );
    toolhost_chat::commit(
        &bound,
        Some(first.index),
        " and more",
        toolhost_chat::CommitMode::Append,
        Some("run_a:commit_002"),
    )
    .unwrap();
    // The later commit's id replaced the first one's on the run's message.
    assert_eq!(
        toolhost_chat::find_commit(&bound, "run_a:commit_001").unwrap(),
        None
    );
    assert_eq!(
        toolhost_chat::find_commit(&bound, "run_a:commit_002").unwrap(),
        Some(first.index)
    );
    // Another run's id is not this one's.
    assert_eq!(
        toolhost_chat::find_commit(&bound, "run_b:commit_002").unwrap(),
        None
    );
}
