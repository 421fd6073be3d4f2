//! Committing the run's reply into its chat.
//!
//! A run owns at most one message. Its first commit appends a new assistant
//! message line after the last line of the file; later commits rewrite that
//! line's `mes` (replace) or add to it (append). Every other line stays byte
//! for byte, and so does every other field of the run's own line (only the
//! `mes` value — and the `swipes` entry at `swipe_id`, when the line has
//! swipes, so SillyTavern shows the same text after a swipe — is spliced).
//!
//! Each commit reads the file, checks the frozen prefix is unchanged
//! (`agent.input_history_conflict` otherwise, the file untouched), writes the
//! new content to a temp file beside the chat (`.<name>.<random>.toolhost-tmp`:
//! same directory so the rename is atomic, a name SillyTavern does not list
//! as a chat), fsyncs it, checks the chat did not change meanwhile (else
//! starts over, at most [`COMMIT_ATTEMPTS`] times), renames it over the chat
//! and fsyncs the directory. A crash leaves the old file or the new one.
//! The file read stays open until then, so the replaced file is freed when
//! the commit lets go of it, not inside the rename (see [`commit`]).

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tempfile::Builder;

use crate::bound::{BoundChat, sha256_hex};
use crate::error::ChatError;
use crate::file::{Json, parse_object};
use crate::lines::{LineSpan, array_elements, is_blank, member_key, object_members, split_lines};

/// `extra.api` of a message written by toolhost; a commit only rewrites a
/// message that carries it.
pub const COMMIT_API: &str = "toolhost";

/// How often a commit starts over when the chat changes while it writes.
pub const COMMIT_ATTEMPTS: usize = 3;

/// Suffix of the temp file a commit writes beside the chat.
pub const TEMP_SUFFIX: &str = ".toolhost-tmp";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitMode {
    /// The run's message becomes `text`.
    Replace,
    /// `text` is added to the end of the run's message (no separator).
    Append,
}

/// Where the run's message is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Its message index (0 = first message after the header). Pass it back
    /// as `run_message` to the next commit.
    pub index: u32,
}

/// Replace the run's message with `text`, creating it when `run_message` is
/// `None`.
pub fn commit_replace(
    bound: &BoundChat,
    run_message: Option<u32>,
    text: &str,
) -> Result<Committed, ChatError> {
    commit(bound, run_message, text, CommitMode::Replace, None)
}

/// Append `text` to the run's message, creating it when `run_message` is
/// `None`.
pub fn commit_append(
    bound: &BoundChat,
    run_message: Option<u32>,
    text: &str,
) -> Result<Committed, ChatError> {
    commit(bound, run_message, text, CommitMode::Append, None)
}

/// Write `text` into the run's message of `bound`'s chat (see the module
/// documentation). `run_message` is the index a previous commit of the same
/// run returned, `None` before the first. `commit_id`, when given, is
/// written into the message's `extra.commitId` (replacing the previous
/// commit's), so [`find_commit`] can tell afterwards whether this commit
/// landed: a run resumed after a crash asks before committing again.
///
/// Errors: `agent.input_history_conflict` (prefix changed; nothing written),
/// `chat.message_not_found` (`run_message` is not the run's message; nothing
/// written), `chat.not_found`, `chat.io_error`. A `chat.io_error` from the
/// final directory fsync comes after the rename: the new content is in
/// place but may not survive a crash, so the caller must not retry with
/// `None` (that would add a second message).
pub fn commit(
    bound: &BoundChat,
    run_message: Option<u32>,
    text: &str,
    mode: CommitMode,
    commit_id: Option<&str>,
) -> Result<Committed, ChatError> {
    let send_date = format_send_date(SystemTime::now());
    let change = Change {
        text,
        mode,
        send_date: &send_date,
        commit_id,
    };
    write_planned(bound, |target, current| {
        plan(bound, target, current, run_message, &change)
    })
}

/// Read the chat, have `plan` make its new content (and the run message's
/// index) from the bytes read, and write that atomically (see the module
/// documentation); `plan` runs again when the chat changed meanwhile.
pub(crate) fn write_planned(
    bound: &BoundChat,
    mut plan: impl FnMut(&Path, &[u8]) -> Result<(Vec<u8>, u32), ChatError>,
) -> Result<Committed, ChatError> {
    // Write through a symlink to the real file, and keep the temp file on
    // its filesystem.
    let target = fs::canonicalize(bound.path()).map_err(|e| ChatError::io(bound.path(), e))?;
    let dir = match target.parent() {
        Some(dir) => dir.to_owned(),
        None => return Err(io_other(&target, "the chat file has no parent directory")),
    };
    for attempt in 1..=COMMIT_ATTEMPTS {
        // The chat read stays open until the commit is over: the rename
        // then leaves the replaced file's inode to this handle, so freeing
        // its blocks (a synchronous discard on a file system mounted with
        // `discard`) happens when it is dropped, not inside the rename,
        // which holds the chat directory locked: every other run's commit
        // into the same directory waited for it (docs/benchmarks.md,
        // stop 34).
        let (replaced, current) = read_held(&target)?;
        let (updated, index) = plan(&target, &current)?;
        let temp = write_temp(&target, &dir, &updated)?;
        let now = fs::read(&target).map_err(|e| ChatError::io(&target, e))?;
        if now != current {
            tracing::debug!(chat = %target.display(), attempt, "chat changed during commit; starting over");
            continue; // `temp` is removed on drop.
        }
        temp.persist(&target)
            .map_err(|e| ChatError::io(&target, e.error))?;
        sync_dir(&dir).inspect_err(|e| {
            tracing::warn!(chat = %target.display(), error = %e, "chat committed, directory fsync failed");
        })?;
        drop(replaced);
        tracing::debug!(chat = %target.display(), index, "committed the run's message");
        return Ok(Committed { index });
    }
    Err(io_other(
        &target,
        format!("the chat kept changing during the commit ({COMMIT_ATTEMPTS} attempts)"),
    ))
}

/// The index of the message whose `extra.commitId` is `commit_id` — or
/// whose `swipe_info` has an entry whose `extra.commitId` is (a swipe the
/// user swiped away from in SillyTavern) — among the messages after the
/// run's frozen input history (a `swipe`, `regenerate` or `continue`
/// target included); `None` when no message carries it (the commit never
/// landed, or a later commit of the same run replaced its id: commits of a
/// run are sequential, so only the latest can be in doubt after a crash).
pub fn find_commit(bound: &BoundChat, commit_id: &str) -> Result<Option<u32>, ChatError> {
    let current = fs::read(bound.path()).map_err(|e| ChatError::io(bound.path(), e))?;
    let lines = split_lines(&current);
    let first = 1 + bound.prefix().message_count as usize;
    for (line_number, span) in lines.iter().enumerate().skip(first) {
        let content = &current[span.content()];
        if is_blank(content) {
            continue;
        }
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(content) else {
            continue;
        };
        let carries = |extra: Option<&serde_json::Value>| {
            let field = |key: &str| extra.and_then(|e| e.get(key)?.as_str());
            field("api") == Some(COMMIT_API) && field("commitId") == Some(commit_id)
        };
        let swipes = message
            .get("swipe_info")
            .and_then(serde_json::Value::as_array);
        if carries(message.get("extra"))
            || swipes.is_some_and(|info| info.iter().any(|entry| carries(entry.get("extra"))))
        {
            let index = u32::try_from(line_number - 1)
                .map_err(|_| io_other(bound.path(), "the chat has too many messages"))?;
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// The chat's bytes, and the open file they were read from.
fn read_held(target: &Path) -> Result<(File, Vec<u8>), ChatError> {
    let mut file = File::open(target).map_err(|e| ChatError::io(target, e))?;
    // `File::read_to_end` reserves the file's size first, as `fs::read` did.
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| ChatError::io(target, e))?;
    Ok((file, bytes))
}

pub(crate) fn io_other(path: &Path, message: impl Into<String>) -> ChatError {
    ChatError::Io {
        path: path.to_owned(),
        source: io::Error::other(message.into()),
    }
}

fn write_temp(
    target: &Path,
    dir: &Path,
    bytes: &[u8],
) -> Result<tempfile::NamedTempFile, ChatError> {
    let permissions = fs::metadata(target)
        .map_err(|e| ChatError::io(target, e))?
        .permissions();
    synced_temp(target, dir, bytes, permissions)
}

/// `bytes` in a new file of `dir` named after `target` (hidden, with
/// [`TEMP_SUFFIX`]), with `permissions`, synced: ready to be renamed over
/// `target`. Removed when dropped.
pub(crate) fn synced_temp(
    target: &Path,
    dir: &Path,
    bytes: &[u8],
    permissions: fs::Permissions,
) -> Result<tempfile::NamedTempFile, ChatError> {
    let mut temp = Builder::new()
        .prefix(&temp_prefix(target))
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)
        .map_err(|e| ChatError::io(dir, e))?;
    let temp_path: PathBuf = temp.path().to_owned();
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().set_permissions(permissions))
        .and_then(|()| temp.as_file().sync_all())
        .map_err(|e| ChatError::io(&temp_path, e))?;
    Ok(temp)
}

/// The start of a temp file's name beside `target`: hidden, named after
/// it (with [`TEMP_SUFFIX`] at the end, such files are told apart).
pub(crate) fn temp_prefix(target: &Path) -> String {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!(".{name}.")
}

/// Sync directory `dir`, so a rename in it survives a crash.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ChatError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ChatError::io(dir, e))
}

/// What one commit writes into the run's message.
struct Change<'a> {
    text: &'a str,
    mode: CommitMode,
    send_date: &'a str,
    commit_id: Option<&'a str>,
}

/// The new file content and the run message's index.
fn plan(
    bound: &BoundChat,
    path: &Path,
    current: &[u8],
    run_message: Option<u32>,
    change: &Change<'_>,
) -> Result<(Vec<u8>, u32), ChatError> {
    let &Change {
        text,
        mode,
        send_date,
        commit_id,
    } = change;
    let lines = split_lines(current);
    let Some(last) = lines.iter().rposition(|s| !is_blank(&current[s.content()])) else {
        return Err(ChatError::conflict(path, "the chat file is now empty"));
    };
    check_prefix(bound, path, current, lines[0])?;
    // Message lines are lines[1..=last]; message i is lines[i + 1].
    let message_lines = last;

    match run_message {
        None => {
            let index = u32::try_from(message_lines)
                .map_err(|_| io_other(path, "the chat has too many messages"))?;
            let line = new_message_line(bound.reply_name(), text, send_date, commit_id);
            Ok((append_line(current, &lines, last, &line), index))
        }
        Some(index) => {
            let not_ours = |reason: String| ChatError::NotRunMessage {
                path: path.to_owned(),
                index,
                reason,
            };
            if index < bound.message_count() {
                return Err(not_ours(format!(
                    "it is part of the run's input history (messages 0..{})",
                    bound.message_count()
                )));
            }
            let Some(span) = lines
                .get(index as usize + 1)
                .filter(|_| (index as usize) < message_lines)
            else {
                return Err(not_ours(format!("the chat has {message_lines} messages")));
            };
            let line = std::str::from_utf8(&current[span.content()])
                .map_err(|_| not_ours("the line is not UTF-8 text".into()))?;
            let rewritten =
                rewrite_run_message(path, index, line, text, mode, commit_id).map_err(not_ours)?;
            let mut updated = Vec::with_capacity(current.len() + text.len() + 16);
            updated.extend_from_slice(&current[..span.start]);
            updated.extend_from_slice(rewritten.as_bytes());
            updated.extend_from_slice(&current[span.end..]);
            Ok((updated, index))
        }
    }
}

pub(crate) fn check_prefix(
    bound: &BoundChat,
    path: &Path,
    current: &[u8],
    header: LineSpan,
) -> Result<(), ChatError> {
    let prefix = bound.prefix();
    let start = header.next;
    let end = start + prefix.len;
    let changed = || {
        ChatError::conflict(
            path,
            format!(
                "messages 0..{} are no longer what the run read",
                prefix.message_count
            ),
        )
    };
    if current.len() < end {
        return Err(changed());
    }
    if sha256_hex(&current[start..end]) != prefix.sha256 {
        return Err(changed());
    }
    // The last prefix line must still end there (the hash stops before
    // its line ending); an empty prefix has no last line.
    if prefix.message_count > 0 && !matches!(current.get(end), None | Some(b'\n' | b'\r')) {
        return Err(changed());
    }
    Ok(())
}

#[derive(Serialize)]
struct NewMessage<'a> {
    name: &'a str,
    is_user: bool,
    is_system: bool,
    send_date: &'a str,
    mes: &'a str,
    extra: NewExtra<'a>,
}

#[derive(Serialize)]
struct NewExtra<'a> {
    api: &'static str,
    #[serde(rename = "commitId", skip_serializing_if = "Option::is_none")]
    commit_id: Option<&'a str>,
}

/// `current` with `line` added after its last non-blank line `last`, ended
/// the way the header line is (a newline when it has none).
pub(crate) fn append_line(current: &[u8], lines: &[LineSpan], last: usize, line: &str) -> Vec<u8> {
    let ending: &[u8] = match &current[lines[0].terminator()] {
        b"" => b"\n",
        ending => ending,
    };
    let at = lines[last].end;
    let mut updated = Vec::with_capacity(current.len() + line.len() + 2);
    updated.extend_from_slice(&current[..at]);
    updated.extend_from_slice(ending);
    updated.extend_from_slice(line.as_bytes());
    updated.extend_from_slice(&current[at..]);
    updated
}

/// The line of a new run message, compact like SillyTavern's
/// `JSON.stringify`.
fn new_message_line(name: &str, text: &str, send_date: &str, commit_id: Option<&str>) -> String {
    let message = NewMessage {
        name,
        is_user: false,
        is_system: false,
        send_date,
        mes: text,
        extra: NewExtra {
            api: COMMIT_API,
            commit_id,
        },
    };
    // Serializing strings and booleans into a String cannot fail.
    serde_json::to_string(&message).unwrap_or_default()
}

#[derive(serde::Deserialize)]
struct RunMessageFields {
    is_user: Option<Json>,
    is_system: Option<Json>,
    mes: Option<Json>,
    swipe_id: Option<Json>,
}

/// The run's line with its new `mes`, or why it is not the run's message.
fn rewrite_run_message(
    path: &Path,
    index: u32,
    line: &str,
    text: &str,
    mode: CommitMode,
    commit_id: Option<&str>,
) -> Result<String, String> {
    let fields: RunMessageFields =
        parse_object(path, index as usize + 2, line).map_err(|e| e.to_string())?;
    if matches!(fields.is_user, Some(Json::Bool(true)))
        || matches!(fields.is_system, Some(Json::Bool(true)))
    {
        return Err("it is not an assistant message".into());
    }
    let old = match fields.mes {
        Some(Json::String(old)) => old,
        _ => return Err("its `mes` is not a string".into()),
    };
    let members = object_members(line, 0..line.len()).ok_or("the line could not be scanned")?;
    let find = |name: &str| {
        members
            .iter()
            .find(|m| member_key(line, m).as_deref() == Some(name))
    };
    let extra = find("extra");
    let extra_members = extra.and_then(|extra| object_members(line, extra.value.clone()));
    let extra_member = |name: &str| {
        extra_members
            .iter()
            .flatten()
            .find(|m| member_key(line, m).as_deref() == Some(name))
    };
    let api = extra_member("api")
        .and_then(|api| serde_json::from_str::<String>(&line[api.value.clone()]).ok());
    if api.as_deref() != Some(COMMIT_API) {
        return Err(format!(
            "it was not written by a run (`extra.api` is not \"{COMMIT_API}\")"
        ));
    }
    let new_text = match mode {
        CommitMode::Replace => text.to_owned(),
        CommitMode::Append => old + text,
    };
    let encoded = serde_json::to_string(&new_text).map_err(|e| e.to_string())?;
    let mes = find("mes").ok_or("the line has no `mes`")?;
    let mut splices = vec![(mes.value.clone(), encoded.clone())];
    // Keep the displayed swipe in step with `mes`.
    if let Some(commit_id) = commit_id {
        let encoded_id = serde_json::to_string(commit_id).map_err(|e| e.to_string())?;
        match (extra_member("commitId"), extra) {
            (Some(member), _) => splices.push((member.value.clone(), encoded_id)),
            // `api` was found above, so `extra` is an object with a member:
            // the id goes in before its closing brace.
            (None, Some(extra)) => {
                let close = extra.value.end - 1;
                splices.push((close..close, format!(",\"commitId\":{encoded_id}")));
            }
            (None, None) => {}
        }
    }
    if let (Some(swipes), Some(Json::Number(swipe_id))) = (find("swipes"), fields.swipe_id)
        && let Ok(swipe_id) = swipe_id.parse::<usize>()
        && let Some(elements) = array_elements(line, swipes.value.clone())
        && let Some(element) = elements.get(swipe_id)
        && line[element.clone()].starts_with('"')
    {
        splices.push((element.clone(), encoded));
    }
    splices.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
    let mut rewritten = line.to_owned();
    for (range, value) in splices {
        rewritten.replace_range(range, &value);
    }
    Ok(rewritten)
}

/// `send_date` of a committed message: ISO 8601 in UTC with milliseconds
/// (`2024-05-01T10:12:00.000Z`), the form SillyTavern writes for
/// `gen_started`/`gen_finished` and reads first in `timestampToMoment`;
/// unlike its older `May 1, 2024 10:12am` it carries the time zone.
pub fn format_send_date(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let millis = since.subsec_millis();
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn send_date_is_iso_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_714_558_320_045);
        assert_eq!(format_send_date(t), "2024-05-01T10:12:00.045Z");
        assert_eq!(format_send_date(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(format_send_date(t), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn rewrite_splices_mes_and_the_current_swipe_only() {
        let line = r#"{"name":"Lyra","is_user":false,"mes":"a","swipes":["old","a"],"swipe_id":1,"extra":{"api":"toolhost","x":[1, 2]},"z":"}"}"#;
        let out = rewrite_run_message(Path::new("c"), 3, line, "b\n\"", CommitMode::Append, None)
            .unwrap();
        assert_eq!(
            out,
            r#"{"name":"Lyra","is_user":false,"mes":"ab\n\"","swipes":["old","ab\n\""],"swipe_id":1,"extra":{"api":"toolhost","x":[1, 2]},"z":"}"}"#
        );
        let foreign = r#"{"name":"Lyra","is_user":false,"mes":"a","extra":{"api":"openai"}}"#;
        let err = rewrite_run_message(Path::new("c"), 3, foreign, "b", CommitMode::Replace, None)
            .unwrap_err();
        assert!(err.contains("extra.api"), "{err}");
        let user = r#"{"name":"Ser","is_user":true,"mes":"a","extra":{"api":"toolhost"}}"#;
        assert!(
            rewrite_run_message(Path::new("c"), 3, user, "b", CommitMode::Replace, None).is_err()
        );
    }

    #[test]
    fn rewrite_replaces_or_adds_the_commit_id() {
        let with_id = r#"{"mes":"a","extra":{"api":"toolhost","commitId":"r:commit_001"}}"#;
        let out = rewrite_run_message(
            Path::new("c"),
            3,
            with_id,
            "b",
            CommitMode::Replace,
            Some("r:commit_002"),
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"mes":"b","extra":{"api":"toolhost","commitId":"r:commit_002"}}"#
        );
        let without = r#"{"mes":"a","extra":{"api":"toolhost"}}"#;
        let out = rewrite_run_message(
            Path::new("c"),
            3,
            without,
            "b",
            CommitMode::Append,
            Some("r:commit_002"),
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"mes":"ab","extra":{"api":"toolhost","commitId":"r:commit_002"}}"#
        );
    }
}
