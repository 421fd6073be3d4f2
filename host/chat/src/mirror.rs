//! A chat file taken whole from the chat app that owns the chat: a
//! SillyTavern extension sends the chat as the app has it now, and the
//! app saves the run's reply itself (host commit). The caller checks the
//! bytes as a chat file ([`ChatFile::parse`]) before anything is written;
//! they are put in place of the old copy atomically and durably (temp
//! file, fsync, rename, directory fsync) — never through a link, which is
//! replaced, not followed — and the old copy is kept aside until the caller
//! knows the new one stays.

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use tempfile::{Builder, NamedTempFile};

use crate::commit::{TEMP_SUFFIX, sync_dir, synced_temp, temp_prefix};
use crate::error::ChatError;
use crate::file::ChatFile;

/// Make `chat` — the app's copy, checked with [`ChatFile::parse`] — the
/// file at `path`. The old file, if there was one, is kept aside (a hard
/// link) until the caller says whether the copy stays: [`Replaced::keep`],
/// or [`Replaced::undo`] when what it was for (a run) could not start.
pub fn replace_whole(path: &Path, chat: &ChatFile) -> Result<Replaced, ChatError> {
    let dir = path
        .parent()
        .ok_or_else(|| ChatError::io(path, std::io::Error::other("no parent directory")))?;
    let old = fs::symlink_metadata(path)
        .ok()
        .filter(|meta| meta.is_file());
    // The old copy's mode, when there is a plain file to keep it from.
    let mode = old
        .as_ref()
        .map_or(0o600, |meta| meta.permissions().mode() & 0o777);
    let backup = match old {
        None => None,
        Some(_) => Some(
            Builder::new()
                .prefix(&temp_prefix(path))
                .suffix(TEMP_SUFFIX)
                .make_in(dir, |aside| fs::hard_link(path, aside))
                .map_err(|e| ChatError::io(path, e))?,
        ),
    };
    let temp = synced_temp(path, dir, chat.bytes(), fs::Permissions::from_mode(mode))?;
    temp.persist(path)
        .map_err(|e| ChatError::io(path, e.error))?;
    sync_dir(dir)?;
    Ok(Replaced {
        path: path.to_owned(),
        backup,
    })
}

/// The app's copy in place, the old file kept aside until
/// [`keep`](Self::keep) or [`undo`](Self::undo); dropped, it keeps.
#[derive(Debug)]
pub struct Replaced {
    path: PathBuf,
    backup: Option<NamedTempFile<()>>,
}

impl Replaced {
    /// The copy stays; the old file goes.
    pub fn keep(self) {
        drop(self);
    }

    /// Put the old file back in place of the copy (none: remove the copy).
    pub fn undo(mut self) -> Result<(), ChatError> {
        match self.backup.take() {
            Some(backup) => {
                backup
                    .persist(&self.path)
                    .map_err(|e| ChatError::io(&self.path, e.error))?;
            }
            None => fs::remove_file(&self.path).map_err(|e| ChatError::io(&self.path, e))?,
        }
        match self.path.parent() {
            Some(dir) => sync_dir(dir),
            None => Ok(()),
        }
    }
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
        replace_whole(&path, &chat).expect("replaced").keep();
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
        replace_whole(&path, &parsed(CHAT).expect("a chat"))
            .expect("replaced")
            .keep();
        assert_eq!(fs::read_to_string(&outside).expect("outside"), "keep");
        assert!(fs::symlink_metadata(&path).expect("meta").is_file());
    }

    #[test]
    fn an_undone_copy_puts_the_old_file_back_or_none() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("c.jsonl");
        fs::write(&path, "the old bytes").expect("old");
        let chat = parsed(CHAT).expect("a chat");
        let replaced = replace_whole(&path, &chat).expect("replaced");
        assert_eq!(fs::read_to_string(&path).expect("read"), CHAT);
        replaced.undo().expect("undone");
        assert_eq!(fs::read_to_string(&path).expect("read"), "the old bytes");
        assert_eq!(
            fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "no backup left"
        );

        let new = dir.path().join("new.jsonl");
        replace_whole(&new, &chat)
            .expect("made")
            .undo()
            .expect("undone");
        assert!(
            !new.exists(),
            "a copy that made the file takes it away again"
        );
    }
}
