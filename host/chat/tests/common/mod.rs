//! The fixture chats of `tests/fixtures/chats/` (see its README), copied
//! into temp directories: whole, or cut after a message so it ends where a
//! test needs it (a reply with swipes, a system note). One builder for every
//! test file of the crate.

// Each test file uses part of this module.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

pub const LONG: &str = "long_character_chat.jsonl";
pub const GROUP: &str = "group_chat.jsonl";
pub const CJK: &str = "cjk_chat.jsonl";

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/chats")
        .join(name)
}

/// A copy of fixture `name` in a fresh temp dir, optionally with CRLF line
/// endings (`mes` newlines are `\n` escapes, so only line endings change).
pub fn copy_fixture(name: &str, crlf: bool) -> (TempDir, PathBuf) {
    let mut bytes = fs::read(fixture(name)).unwrap();
    if crlf {
        bytes = String::from_utf8(bytes)
            .unwrap()
            .replace('\n', "\r\n")
            .into_bytes();
    }
    write_copy(name, &bytes)
}

/// Fixture `name` cut after message `last` (its header and messages
/// `0..=last`, byte for byte, no line ending after the last one — as
/// SillyTavern writes a chat).
pub fn fixture_until(name: &str, last: usize) -> (TempDir, PathBuf) {
    let bytes = fs::read(fixture(name)).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(last + 2 <= lines.len(), "{name} has no message {last}");
    write_copy(name, lines[..last + 2].join("\n").as_bytes())
}

fn write_copy(name: &str, bytes: &[u8]) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, bytes).unwrap();
    (dir, path)
}
