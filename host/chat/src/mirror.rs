//! A chat file taken whole from the chat app that owns the chat: a
//! SillyTavern extension sends the chat as the app has it now, and the
//! app saves the run's reply itself (host commit). The caller checks the
//! bytes as a chat file ([`ChatFile::parse`]) before anything is written;
//! they are put in place of the old copy atomically and durably (temp
//! file, fsync, rename, directory fsync) — never through a link, which is
//! replaced, not followed.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::commit::synced_temp;
use crate::error::ChatError;
use crate::file::ChatFile;

/// Make `chat` — the app's copy, checked with [`ChatFile::parse`] — the
/// file at `path`.
pub fn replace_whole(path: &Path, chat: &ChatFile) -> Result<(), ChatError> {
    let dir = path
        .parent()
        .ok_or_else(|| ChatError::io(path, std::io::Error::other("no parent directory")))?;
    // The old copy's mode, when there is a plain file to keep it from.
    let mode = fs::symlink_metadata(path)
        .ok()
        .filter(|meta| meta.is_file())
        .map_or(0o600, |meta| meta.permissions().mode() & 0o777);
    let temp = synced_temp(path, dir, chat.bytes(), fs::Permissions::from_mode(mode))?;
    temp.persist(path)
        .map_err(|e| ChatError::io(path, e.error))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ChatError::io(dir, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<ChatFile, ChatError> {
        ChatFile::parse(Path::new("chatContent"), text.as_bytes().to_vec())
    }

    const CHAT: &str = concat!(
        r#"{"user_name":"You","character_name":"Seraphina","create_date":"2024-10-11@12h34m56s","chat_metadata":{}}"#,
        "\n",
        r#"{"name":"Seraphina","is_user":false,"mes":"Welcome.","send_date":"October 11, 2024 12:34pm"}"#,
    );

    #[test]
    fn the_apps_copy_replaces_the_old_one_byte_for_byte() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("c.jsonl");
        fs::write(&path, "old").expect("old");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).expect("chmod");
        let chat = parsed(CHAT).expect("a chat");
        assert_eq!(chat.message_count(), 1);
        replace_whole(&path, &chat).expect("replaced");
        assert_eq!(fs::read_to_string(&path).expect("read"), CHAT);
        let mode = fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        let leftovers = fs::read_dir(dir.path()).expect("dir").count();
        assert_eq!(leftovers, 1, "no temp file is left");
    }

    #[test]
    fn a_bad_chat_is_refused_naming_its_line() {
        let bad = format!("{CHAT}\n{{\"mes\": 3");
        let error = parsed(&bad).expect_err("bad");
        assert_eq!(error.code(), "chat.malformed");
        assert!(
            error
                .to_string()
                .starts_with("chat file chatContent line 3"),
            "{error}"
        );
    }

    #[test]
    fn a_link_in_its_place_is_replaced_not_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "keep").expect("outside");
        let path = dir.path().join("c.jsonl");
        std::os::unix::fs::symlink(&outside, &path).expect("link");
        replace_whole(&path, &parsed(CHAT).expect("a chat")).expect("replaced");
        assert_eq!(fs::read_to_string(&outside).expect("outside"), "keep");
        assert!(fs::symlink_metadata(&path).expect("meta").is_file());
    }
}
