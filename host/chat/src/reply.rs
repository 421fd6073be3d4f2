//! [`commit_reply`]: the run's reply written as SillyTavern's `saveReply`
//! writes one, for the bound chat's [`GenerationType`].
//!
//! - `normal`, first commit: a new line after the last line of the file,
//!   `{"extra":{"api":"toolhost","model":…,"commitId":…},"name":…,
//!   "is_user":false,"is_system":false,"send_date":…,"mes":…,"gen_started":…,
//!   "gen_finished":…,"swipe_info":[{send_date, gen_started, gen_finished,
//!   extra}],"swipe_id":0,"swipes":[mes]}`; in a group chat `extra.gen_id`
//!   and the speaker's `force_avatar` / `original_avatar` (from their latest
//!   message that has them).
//! - `swipe`, first commit: the target gets a new swipe: `swipes` + text
//!   (`[mes, text]` when it had none), `swipe_id` its index, a `swipe_info`
//!   entry for it (and, where missing, one for the swipe shown until now
//!   from the message's own fields, `null` for older ones, as SillyTavern
//!   leaves them), `mes` the text.
//! - `regenerate`, first commit: the target's shown swipe is replaced: `mes`,
//!   `swipes[swipe_id]`, `swipe_info[swipe_id]`.
//! - `continue`, first commit: the text appended to the target's `mes` as the
//!   run read it (no separator: SillyTavern appends the continuation as is),
//!   and to `swipes[swipe_id]`, `swipe_info[swipe_id]` renewed.
//! - Every type: `send_date` (the chat's form, [`SendDateStyle`](crate::SendDateStyle)),
//!   `gen_started`, `gen_finished` and `extra.api` / `extra.model` /
//!   `extra.commitId` set; a swipe or a regeneration also drops
//!   `extra.memory` and `extra.display_text`, as SillyTavern's swipe does (they
//!   belong to the text replaced). A target without a valid `swipes` /
//!   `swipe_id` gets them, as SillyTavern does.
//! - Later commits of the run (`run_message` = the index the first returned)
//!   rewrite the shown swipe of the run's message: replace makes it the
//!   text — for `continue` the target's text as read plus the text, so a
//!   replace rewrites the continuation, never the base —, append adds the
//!   text to it.
//!
//! Only the run's line changes; in it, only the fields above — every other
//! member keeps its bytes. The write itself is [`commit`](fn@crate::commit)'s:
//! prefix checked, atomic, started over if the chat changes meanwhile.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::bound::{BoundChat, target_base};
use crate::commit::{
    COMMIT_API, CommitMode, Committed, append_line, check_prefix, format_send_date, io_other,
    write_planned,
};
use crate::error::ChatError;
use crate::file::Role;
use crate::generation::{ChatTarget, GenerationType};
use crate::lines::{is_blank, split_lines};
use crate::splice::{Object, Splicer, append_elements, json_string};

/// One commit of the run's reply.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    pub text: &'a str,
    /// How a later commit of the run changes its message (the first one
    /// writes `text` as the generation type says).
    pub mode: CommitMode,
    /// Written to `extra.commitId` (and the swipe's `swipe_info` entry), for
    /// [`find_commit`](crate::find_commit); `None` removes an older one.
    pub commit_id: Option<&'a str>,
    /// `extra.model`: the run's model name.
    pub model: &'a str,
    /// The group member the reply is from (`normal` only); `None` or empty:
    /// [`BoundChat::reply_name`].
    pub speaker: Option<&'a str>,
    /// When the generation started and finished (`gen_started`,
    /// `gen_finished`; `send_date` is the finish).
    pub gen_started: SystemTime,
    pub gen_finished: SystemTime,
}

/// Write `reply` into `bound`'s chat as its generation type says (see the
/// module documentation). `run_message` is `None` for the run's first
/// commit, then the index it returned (for a `swipe`, `regenerate` or
/// `continue` run, the target's).
///
/// Errors: `agent.input_history_conflict` (the prefix changed, or the
/// target is no longer the message the run was bound to; nothing written),
/// `chat.message_not_found` (`run_message` is not the run's message: in its
/// input, not an assistant line, or its shown swipe not written by a run),
/// `chat.not_found`, `chat.io_error` (as [`commit`](fn@crate::commit)).
pub fn commit_reply(
    bound: &BoundChat,
    run_message: Option<u32>,
    reply: &Reply<'_>,
) -> Result<Committed, ChatError> {
    let stamps = Stamps {
        send_date: json_string(&bound.send_date_style().format(reply.gen_finished)),
        gen_started: json_string(&format_send_date(reply.gen_started)),
        gen_finished: json_string(&format_send_date(reply.gen_finished)),
    };
    write_planned(bound, |path, current| {
        plan(bound, path, current, run_message, reply, &stamps)
    })
}

/// The three dates of a commit, as JSON strings.
struct Stamps {
    send_date: String,
    gen_started: String,
    gen_finished: String,
}

fn plan(
    bound: &BoundChat,
    path: &Path,
    current: &[u8],
    run_message: Option<u32>,
    reply: &Reply<'_>,
    stamps: &Stamps,
) -> Result<(Vec<u8>, u32), ChatError> {
    let lines = split_lines(current);
    let Some(last) = lines.iter().rposition(|s| !is_blank(&current[s.content()])) else {
        return Err(ChatError::conflict(path, "the chat file is now empty"));
    };
    check_prefix(bound, path, current, lines[0])?;
    // Message lines are lines[1..=last]; message i is lines[i + 1].
    let message_lines = last;
    let generation_type = bound.generation_type();

    let index = match (run_message, bound.target()) {
        (None, None) => {
            let index = u32::try_from(message_lines)
                .map_err(|_| io_other(path, "the chat has too many messages"))?;
            let line = new_reply_line(bound, reply, stamps);
            return Ok((append_line(current, &lines, last, &line), index));
        }
        (Some(index), _) => index,
        (None, Some(target)) => target.index,
    };
    let not_ours = |reason: String| ChatError::NotRunMessage {
        path: path.to_owned(),
        index,
        reason,
    };
    let changed = |reason: &str| {
        ChatError::conflict(
            path,
            format!("message {index}, the one the run writes into, {reason}"),
        )
    };
    match bound.target() {
        Some(target) if target.index != index => {
            return Err(not_ours(format!(
                "the run writes into message {}",
                target.index
            )));
        }
        None if index < bound.message_count() => {
            return Err(not_ours(format!(
                "it is part of the run's input history (messages 0..{})",
                bound.message_count()
            )));
        }
        _ => {}
    }
    let Some(span) = lines
        .get(index as usize + 1)
        .filter(|_| (index as usize) < message_lines)
    else {
        return Err(match run_message {
            None => changed("is gone"),
            Some(_) => not_ours(format!("the chat has {message_lines} messages")),
        });
    };
    let line = std::str::from_utf8(&current[span.content()])
        .map_err(|_| not_ours("the line is not UTF-8 text".into()))?;
    let message =
        Message::parse(line).ok_or_else(|| not_ours("the line is not a message".into()))?;
    if message.role != Role::Assistant {
        return Err(match run_message {
            None => changed("is no longer an assistant message"),
            Some(_) => not_ours("it is not an assistant message".into()),
        });
    }

    let (slot, text) = match run_message {
        None => {
            // `bound.target()` is `Some` here.
            let base = bound
                .target()
                .and_then(|target| unchanged_base(&message.mes, target))
                .ok_or_else(|| changed("changed since the run started"))?;
            match generation_type {
                GenerationType::Swipe => (Slot::New, reply.text.to_owned()),
                GenerationType::Continue => (Slot::Shown, format!("{base}{}", reply.text)),
                _ => (Slot::Shown, reply.text.to_owned()),
            }
        }
        Some(_) => {
            if !message.written_by_run(line, reply.commit_id) {
                return Err(not_ours(format!(
                    "its shown text was not written by this run (`extra.api` is not \"{COMMIT_API}\", or `extra.commitId` is another run's)"
                )));
            }
            let text = match reply.mode {
                CommitMode::Append => format!("{}{}", message.mes, reply.text),
                CommitMode::Replace => match bound.target() {
                    Some(target) if generation_type.reads_target() => {
                        let base = target_base(&message.mes, target).ok_or_else(|| {
                            changed("no longer starts with the text it continued")
                        })?;
                        format!("{base}{}", reply.text)
                    }
                    _ => reply.text.to_owned(),
                },
            };
            (Slot::Shown, text)
        }
    };
    let first_of_new_text = run_message.is_none()
        && matches!(
            generation_type,
            GenerationType::Swipe | GenerationType::Regenerate
        );
    let rewritten = rewrite(
        line,
        &message,
        &Rewrite {
            slot,
            text: &text,
            reply,
            stamps,
            drop_stale_extra: first_of_new_text,
        },
    )
    .map_err(not_ours)?;
    let mut updated = Vec::with_capacity(current.len() + rewritten.len());
    updated.extend_from_slice(&current[..span.start]);
    updated.extend_from_slice(rewritten.as_bytes());
    updated.extend_from_slice(&current[span.end..]);
    Ok((updated, index))
}

/// The target's text when it is still exactly the text the run was bound to.
fn unchanged_base<'t>(mes: &'t str, target: &ChatTarget) -> Option<&'t str> {
    target_base(mes, target).filter(|base| base.len() == mes.len())
}

/// Which swipe a rewrite writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// A new swipe after the others, shown.
    New,
    /// The swipe shown now (`swipe_id`).
    Shown,
}

/// The fields of a message line a rewrite reads.
struct Message {
    object: Object,
    role: Role,
    mes: String,
    /// `swipes` (element ranges) and `swipe_id`, when `swipes` is an array
    /// and `swipe_id` an index into it.
    swipes: Option<(Vec<std::ops::Range<usize>>, usize)>,
}

impl Message {
    fn parse(line: &str) -> Option<Message> {
        let object = Object::parse(line, 0..line.len())?;
        let flag = |key: &str| object.raw(line, key) == Some("true");
        let role = if flag("is_user") {
            Role::User
        } else if flag("is_system") {
            Role::System
        } else {
            Role::Assistant
        };
        let mes = object.string(line, "mes")?;
        let swipes = object.array(line, "swipes").and_then(|elements| {
            let id = object.raw(line, "swipe_id")?.parse::<usize>().ok()?;
            (id < elements.len()).then_some((elements, id))
        });
        Some(Message {
            object,
            role,
            mes,
            swipes,
        })
    }

    /// Whether its shown text is a run's (`extra.api` is toolhost's) — and,
    /// given this commit's id (`<runId>:commit_NNN`), this run's: a user who
    /// swiped back to another run's reply does not have it overwritten.
    fn written_by_run(&self, line: &str, commit_id: Option<&str>) -> bool {
        let extra = self.object.object(line, "extra");
        let field = |name: &str| extra.as_ref().and_then(|extra| extra.string(line, name));
        if field("api").as_deref() != Some(COMMIT_API) {
            return false;
        }
        let Some(run) = commit_id
            .and_then(|id| id.rsplit_once(":commit_"))
            .map(|(run, _)| run)
        else {
            return true;
        };
        field("commitId").is_some_and(|written| {
            written
                .strip_prefix(run)
                .is_some_and(|rest| rest.starts_with(":commit_"))
        })
    }
}

struct Rewrite<'a> {
    slot: Slot,
    text: &'a str,
    reply: &'a Reply<'a>,
    stamps: &'a Stamps,
    /// `extra.memory` / `extra.display_text` describe the text replaced.
    drop_stale_extra: bool,
}

/// `line` with `change.text` in the chosen swipe, shown.
fn rewrite(line: &str, message: &Message, change: &Rewrite<'_>) -> Result<String, String> {
    let object = &message.object;
    let stamps = change.stamps;
    let extra = new_extra(line, object.object(line, "extra").as_ref(), change)?;
    let entry = swipe_entry(
        Some(stamps.send_date.as_str()),
        Some(stamps.gen_started.as_str()),
        Some(stamps.gen_finished.as_str()),
        &extra,
    );
    let text = json_string(change.text);

    let mut splicer = Splicer::new(line);
    let mut sets: Vec<(&str, String)> = vec![
        ("mes", text.clone()),
        ("send_date", stamps.send_date.clone()),
        ("gen_started", stamps.gen_started.clone()),
        ("gen_finished", stamps.gen_finished.clone()),
        ("extra", extra.clone()),
    ];
    let info = object.array(line, "swipe_info");
    let info_member = object.get(line, "swipe_info").map(|m| m.value.clone());
    match (&message.swipes, change.slot) {
        (Some((elements, shown)), slot) => {
            let at = match slot {
                Slot::Shown => {
                    // `shown` is an index into `elements` (`Message::parse`).
                    splicer.replace(elements[*shown].clone(), text);
                    *shown
                }
                Slot::New => {
                    let swipes = object.get(line, "swipes").ok_or("`swipes` vanished")?;
                    append_elements(&mut splicer, &swipes.value, elements.len(), &[text]);
                    sets.push(("swipe_id", elements.len().to_string()));
                    elements.len()
                }
            };
            // The entries up to `at`: kept, made up where missing, then this one.
            let held = info.as_ref().map_or(0, Vec::len);
            let mut added = Vec::new();
            for i in held..at {
                added.push(if i == *shown {
                    old_entry(line, object)
                } else {
                    "null".to_owned()
                });
            }
            match (&info, info_member) {
                (Some(info), _) if at < info.len() => {
                    splicer.replace(info[at].clone(), entry);
                }
                (Some(info), Some(range)) => {
                    added.push(entry);
                    append_elements(&mut splicer, &range, info.len(), &added);
                }
                _ => {
                    added.push(entry);
                    sets.push(("swipe_info", format!("[{}]", added.join(","))));
                }
            }
        }
        (None, Slot::New) => {
            let old = json_string(&message.mes);
            sets.push(("swipe_id", "1".into()));
            sets.push(("swipes", format!("[{old},{text}]")));
            sets.push((
                "swipe_info",
                format!("[{},{entry}]", old_entry(line, object)),
            ));
        }
        (None, Slot::Shown) => {
            sets.push(("swipe_id", "0".into()));
            sets.push(("swipes", format!("[{text}]")));
            sets.push(("swipe_info", format!("[{entry}]")));
        }
    }
    object.edit(&mut splicer, line, &sets, &[]);
    splicer.finish()
}

/// The message's new `extra`: the old one's members kept (but
/// `memory`/`display_text` for a new text), `api`, `model` and `commitId`
/// set; a fresh object when it had none.
fn new_extra(line: &str, old: Option<&Object>, change: &Rewrite<'_>) -> Result<String, String> {
    let reply = change.reply;
    let mut sets = vec![
        ("api", json_string(COMMIT_API)),
        ("model", json_string(reply.model)),
    ];
    let mut removes = Vec::new();
    match reply.commit_id {
        Some(id) => sets.push(("commitId", json_string(id))),
        None => removes.push("commitId"),
    }
    if change.drop_stale_extra {
        removes.extend(["memory", "display_text"]);
    }
    let Some(old) = old else {
        let members: Vec<String> = sets
            .iter()
            .map(|(k, v)| format!("{}:{v}", json_string(k)))
            .collect();
        return Ok(format!("{{{}}}", members.join(",")));
    };
    // Edited on its own text, so the same bytes go into `swipe_info`.
    let text = &line[old.range.clone()];
    let local = Object::parse(text, 0..text.len()).ok_or("`extra` could not be scanned")?;
    let mut splicer = Splicer::new(text);
    local.edit(&mut splicer, text, &sets, &removes);
    splicer.finish()
}

/// A `swipe_info` entry as SillyTavern builds one (a field it does not have
/// is left out, as `JSON.stringify` leaves out `undefined`).
fn swipe_entry(
    send_date: Option<&str>,
    gen_started: Option<&str>,
    gen_finished: Option<&str>,
    extra: &str,
) -> String {
    let mut fields = Vec::with_capacity(4);
    for (key, value) in [
        ("send_date", send_date),
        ("gen_started", gen_started),
        ("gen_finished", gen_finished),
    ] {
        if let Some(value) = value {
            fields.push(format!("\"{key}\":{value}"));
        }
    }
    fields.push(format!("\"extra\":{extra}"));
    format!("{{{}}}", fields.join(","))
}

/// The entry of the swipe shown before this commit, from the message's
/// own fields (what SillyTavern's swipe makes when it has none).
fn old_entry(line: &str, object: &Object) -> String {
    let extra = object
        .object(line, "extra")
        .map_or("{}", |extra| &line[extra.range]);
    swipe_entry(
        object.raw(line, "send_date"),
        object.raw(line, "gen_started"),
        object.raw(line, "gen_finished"),
        extra,
    )
}

/// A `normal` reply's new line, in the order `saveReply` builds it.
fn new_reply_line(bound: &BoundChat, reply: &Reply<'_>, stamps: &Stamps) -> String {
    let name = reply
        .speaker
        .filter(|s| !s.is_empty())
        .unwrap_or(bound.reply_name());
    let group = bound.info().group;
    let mut extra = vec![
        format!("\"api\":{}", json_string(COMMIT_API)),
        format!("\"model\":{}", json_string(reply.model)),
    ];
    if let Some(id) = reply.commit_id {
        extra.push(format!("\"commitId\":{}", json_string(id)));
    }
    if group {
        // SillyTavern's `group_generation_id`: a time in milliseconds.
        let millis = reply
            .gen_started
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        extra.push(format!("\"gen_id\":{millis}"));
    }
    let extra = format!("{{{}}}", extra.join(","));
    let text = json_string(reply.text);
    let mut line = format!(
        "{{\"extra\":{extra},\"name\":{},\"is_user\":false,\"is_system\":false,\
         \"send_date\":{},\"mes\":{text},\"gen_started\":{},\"gen_finished\":{}",
        json_string(name),
        stamps.send_date,
        stamps.gen_started,
        stamps.gen_finished
    );
    if group {
        for (key, value) in avatars(bound, name) {
            line.push_str(&format!(",\"{key}\":{value}"));
        }
    }
    let entry = swipe_entry(
        Some(stamps.send_date.as_str()),
        Some(stamps.gen_started.as_str()),
        Some(stamps.gen_finished.as_str()),
        &extra,
    );
    line.push_str(&format!(
        ",\"swipe_info\":[{entry}],\"swipe_id\":0,\"swipes\":[{text}]}}"
    ));
    line
}

/// `force_avatar` and `original_avatar` (raw JSON) of `speaker`'s latest
/// message in the prefix that has either.
fn avatars(bound: &BoundChat, speaker: &str) -> Vec<(&'static str, String)> {
    for message in bound.visible_messages().iter().rev() {
        if message.role() != Role::Assistant || message.name() != speaker {
            continue;
        }
        let line = message.raw_line();
        let Some(object) = Object::parse(line, 0..line.len()) else {
            continue;
        };
        let found: Vec<(&'static str, String)> = ["force_avatar", "original_avatar"]
            .into_iter()
            .filter_map(|key| Some((key, object.raw(line, key)?.to_owned())))
            .collect();
        if !found.is_empty() {
            return found;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(line: &str, slot: Slot, drop_stale_extra: bool) -> serde_json::Value {
        let reply = Reply {
            text: "new",
            mode: CommitMode::Replace,
            commit_id: None,
            model: "m",
            speaker: None,
            gen_started: UNIX_EPOCH,
            gen_finished: UNIX_EPOCH,
        };
        let stamps = Stamps {
            send_date: "\"S\"".into(),
            gen_started: "\"G\"".into(),
            gen_finished: "\"F\"".into(),
        };
        let message = Message::parse(line).unwrap();
        let change = Rewrite {
            slot,
            text: "new",
            reply: &reply,
            stamps: &stamps,
            drop_stale_extra,
        };
        serde_json::from_str(&rewrite(line, &message, &change).unwrap()).unwrap()
    }

    #[test]
    fn missing_swipe_info_entries_are_made_up_as_sillytavern_does() {
        // Two swipes, the second shown, no `swipe_info` (an old chat).
        let line = r#"{"mes":"b","swipes":["a","b"],"swipe_id":1,"send_date":"D","extra":{"api":"x","memory":"m","display_text":"t","commitId":"old"}}"#;
        let out = rewritten(line, Slot::New, true);
        assert_eq!(out["swipe_id"], 2);
        assert_eq!(out["swipes"], serde_json::json!(["a", "b", "new"]));
        let new_extra = serde_json::json!({"api": "toolhost", "model": "m"});
        assert_eq!(
            out["swipe_info"],
            serde_json::json!([
                null,
                {"send_date": "D", "extra": {"api": "x", "memory": "m", "display_text": "t", "commitId": "old"}},
                {"send_date": "S", "gen_started": "G", "gen_finished": "F", "extra": new_extra},
            ])
        );
        assert_eq!(out["extra"], new_extra);
        // A `swipe_id` past its `swipes`: treated as no swipes.
        let broken = r#"{"mes":"b","swipes":["a"],"swipe_id":4}"#;
        let out = rewritten(broken, Slot::Shown, false);
        assert_eq!(out["swipes"], serde_json::json!(["new"]));
        assert_eq!(out["swipe_id"], 0);
        assert_eq!(out["swipe_info"][0]["send_date"], "S");
    }

    #[test]
    fn a_shown_swipe_keeps_the_extra_it_does_not_own() {
        let line = r#"{"mes":"a","swipes":["a"],"swipe_id":0,"swipe_info":[{"send_date":"D","extra":{}}],"extra":{"reasoning":"r","memory":"m"}}"#;
        let out = rewritten(line, Slot::Shown, false);
        assert_eq!(out["extra"]["memory"], "m");
        assert_eq!(out["extra"]["reasoning"], "r");
        assert_eq!(out["swipe_info"][0]["extra"], out["extra"]);
        assert_eq!(out["swipe_info"].as_array().unwrap().len(), 1);
    }
}
