//! Generation types against the fixture chats: what each binds, and the
//! chat each commit leaves — read back the way SillyTavern's `getChat` reads
//! it, and compared line by line with the chat before.

use std::fs;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use toolhost_chat::{
    BoundChat, COMMIT_API, ChatBinding, ChatError, CommitMode, Committed, GenerationType, Reply,
    commit_reply, find_commit,
};

mod common;

use common::{CJK, GROUP, LONG, copy_fixture, fixture_until};

/// 2026-12-07T10:00:00Z.
const STARTED_SECS: u64 = 1_796_637_600;
const STARTED: &str = "2026-12-07T10:00:00.000Z";
const FINISHED: &str = "2026-12-07T10:00:04.500Z";
const MODEL: &str = "gpt-4o-2024-08-06";

fn reply<'a>(text: &'a str, mode: CommitMode, commit_id: &'a str) -> Reply<'a> {
    let started = UNIX_EPOCH + Duration::from_secs(STARTED_SECS);
    Reply {
        text,
        mode,
        commit_id: Some(commit_id),
        model: MODEL,
        speaker: None,
        gen_started: started,
        gen_finished: started + Duration::from_millis(4_500),
    }
}

fn first(bound: &BoundChat, text: &str) -> Committed {
    commit_reply(
        bound,
        None,
        &reply(text, CommitMode::Replace, "run:commit_001"),
    )
    .unwrap()
}

/// The chat as SillyTavern's `getChat` has it: the file split on `\n`, one
/// JSON object a line, the header first, then the messages.
fn get_chat(path: &Path) -> (Value, Vec<Value>) {
    let text = fs::read_to_string(path).unwrap();
    let mut lines = text
        .split('\n')
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).expect("every line is JSON"));
    let header = lines.next().expect("a header");
    assert!(header.get("mes").is_none(), "the header comes first");
    let messages: Vec<Value> = lines.collect();
    assert!(messages.iter().all(Value::is_object));
    (header, messages)
}

/// The reader sees `text` as the shown swipe of `message`.
fn assert_shown(message: &Value, text: &str) {
    let id = message["swipe_id"].as_u64().expect("a swipe_id") as usize;
    assert_eq!(message["mes"], text);
    assert_eq!(message["swipes"][id], text);
    let info = &message["swipe_info"][id];
    assert_eq!(info["send_date"], message["send_date"]);
    assert_eq!(info["gen_started"], STARTED);
    assert_eq!(info["gen_finished"], FINISHED);
    assert_eq!(info["extra"], message["extra"]);
    assert_eq!(message["gen_started"], STARTED);
    assert_eq!(message["gen_finished"], FINISHED);
    assert_eq!(message["extra"]["api"], COMMIT_API);
    assert_eq!(message["extra"]["model"], MODEL);
}

/// Every line but message `index`'s is byte for byte what it was.
fn assert_only_message_changed(old: &[u8], new: &[u8], index: usize) -> (String, String) {
    let old = std::str::from_utf8(old).unwrap();
    let new = std::str::from_utf8(new).unwrap();
    let old_lines: Vec<&str> = old.split('\n').collect();
    let new_lines: Vec<&str> = new.split('\n').collect();
    assert_eq!(old_lines.len(), new_lines.len(), "same number of lines");
    for (i, (a, b)) in old_lines.iter().zip(&new_lines).enumerate() {
        if i != index + 1 {
            assert_eq!(a, b, "line {} changed", i + 1);
        }
    }
    (
        old_lines[index + 1].to_owned(),
        new_lines[index + 1].to_owned(),
    )
}

fn unfit(result: Result<BoundChat, ChatError>) -> String {
    match result {
        Err(error @ ChatError::GenerationTypeUnfit { .. }) => {
            assert_eq!(error.code(), "chat.generation_type_unfit");
            error.to_string()
        }
        Err(other) => panic!("expected chat.generation_type_unfit, got {other:?}"),
        Ok(bound) => panic!("bound {} messages", bound.message_count()),
    }
}

#[test]
fn a_type_that_does_not_fit_the_chat_is_refused_at_bind() {
    // The long chat ends with the user's message.
    let (_dir, path) = copy_fixture(LONG, false);
    for t in [
        GenerationType::Swipe,
        GenerationType::Regenerate,
        GenerationType::Continue,
    ] {
        let message = unfit(BoundChat::bind_for(&path, t));
        assert!(message.contains(&format!("cannot {t}")), "{message}");
        assert!(message.contains("(64) is the user's"), "{message}");
    }
    assert_eq!(
        BoundChat::bind_for(&path, GenerationType::Normal)
            .unwrap()
            .message_count(),
        65
    );
    // Message 11 of the group chat is a narrator's system note.
    let (_dir, system) = fixture_until(GROUP, 11);
    let message = unfit(BoundChat::bind_for(&system, GenerationType::Swipe));
    assert!(message.contains("(11) is a system note"), "{message}");
    // A header and nothing else.
    let (_dir, empty) = fixture_until(CJK, 0);
    fs::write(
        &empty,
        fs::read_to_string(&empty).unwrap().lines().next().unwrap(),
    )
    .unwrap();
    let message = unfit(BoundChat::bind_for(&empty, GenerationType::Continue));
    assert!(message.contains("no messages"), "{message}");
}

#[test]
fn swipe_and_regenerate_hide_the_target_and_continue_reads_it() {
    let (_dir, path) = fixture_until(LONG, 37);
    let without_target = BoundChat::bind(&path, Some(37)).unwrap();
    let target_text = BoundChat::bind(&path, None)
        .unwrap()
        .message(37)
        .unwrap()
        .text()
        .to_owned();
    for t in [GenerationType::Swipe, GenerationType::Regenerate] {
        let bound = BoundChat::bind_for(&path, t).unwrap();
        assert_eq!(bound.generation_type(), t);
        assert_eq!(bound.message_count(), 37);
        assert!(
            bound.message(37).is_err(),
            "the model never reads the reply it replaces"
        );
        assert_eq!(bound.target().unwrap().index, 37);
        assert_eq!(bound.prefix_sha256(), without_target.prefix_sha256());
    }
    let bound = BoundChat::bind_for(&path, GenerationType::Continue).unwrap();
    assert_eq!(bound.message_count(), 38);
    assert_eq!(bound.message(37).unwrap().text(), target_text);
    assert_eq!(bound.target().unwrap().index, 37);
    // Hashed without the target: the commit changes it.
    assert_eq!(bound.prefix_sha256(), without_target.prefix_sha256());
    let normal = BoundChat::bind_for(&path, GenerationType::Normal).unwrap();
    assert_eq!(normal.message_count(), 38);
    assert_eq!(normal.target(), None);
}

#[test]
fn swipe_adds_a_new_selected_swipe_in_a_character_chat() {
    let (_dir, path) = fixture_until(LONG, 37);
    let before = fs::read(&path).unwrap();
    let bound = BoundChat::bind_for(&path, GenerationType::Swipe).unwrap();
    let text = "*The ferryman squints.* \"Fine. In you get — mind the eels.\" 🌊";
    assert_eq!(first(&bound, text), Committed { index: 37 });

    let after = fs::read(&path).unwrap();
    let (old_line, new_line) = assert_only_message_changed(&before, &after, 37);
    let old: Value = serde_json::from_str(&old_line).unwrap();
    let (_header, messages) = get_chat(&path);
    let message = &messages[37];
    assert_eq!(message["swipe_id"], 2);
    assert_eq!(message["swipes"].as_array().unwrap().len(), 3);
    assert_shown(message, text);
    // The older swipes and their entries are untouched.
    assert_eq!(message["swipes"][0], old["swipes"][0]);
    assert_eq!(message["swipes"][1], old["swipes"][1]);
    assert_eq!(message["swipe_info"][0], old["swipe_info"][0]);
    assert_eq!(message["swipe_info"][1], old["swipe_info"][1]);
    assert_eq!(
        message["send_date"], FINISHED,
        "the chat's dates are ISO 8601"
    );
    assert_eq!(message["extra"]["commitId"], "run:commit_001");
    // Fields the swipe does not own keep their bytes.
    assert!(new_line.starts_with(r#"{"name":"Mirelle","is_user":false,"send_date":"#));
    assert!(new_line.contains(r#""reasoning":"","reasoning_duration":null,"token_count":30"#));
    assert!(new_line.contains(r#""title":"""#));
    assert_eq!(find_commit(&bound, "run:commit_001").unwrap(), Some(37));
}

#[test]
fn swipe_of_a_reply_without_swipes_in_a_group_chat() {
    let (_dir, path) = copy_fixture(GROUP, false);
    let before = fs::read(&path).unwrap();
    let bound = BoundChat::bind_for(&path, GenerationType::Swipe).unwrap();
    first(
        &bound,
        "*Corvin fans the smoke away with his hat.* Less smoke. Noted.",
    );
    let after = fs::read(&path).unwrap();
    let (old_line, _) = assert_only_message_changed(&before, &after, 20);
    let old: Value = serde_json::from_str(&old_line).unwrap();

    let (header, messages) = get_chat(&path);
    assert_eq!(header["user_name"], "unused");
    let message = &messages[20];
    assert_eq!(message["swipe_id"], 1);
    assert_shown(
        message,
        "*Corvin fans the smoke away with his hat.* Less smoke. Noted.",
    );
    // SillyTavern's swipe makes the first swipe from the message itself.
    assert_eq!(message["swipes"][0], old["mes"]);
    assert_eq!(
        message["swipe_info"][0],
        json!({
            "send_date": old["send_date"],
            "gen_started": old["gen_started"],
            "gen_finished": old["gen_finished"],
            "extra": old["extra"],
        })
    );
    assert_eq!(message["name"], "Corvin");
    assert_eq!(message["force_avatar"], old["force_avatar"]);
    assert_eq!(message["original_avatar"], old["original_avatar"]);
    // The group's generation id stays with the message.
    assert_eq!(message["extra"]["gen_id"], old["extra"]["gen_id"]);
}

#[test]
fn regenerate_replaces_the_shown_swipe_in_the_chats_date_form() {
    // Message 7 (Brisa) has 2 swipes and a `March 9, 2024 8:25pm` date.
    let (_dir, path) = fixture_until(GROUP, 7);
    let before = fs::read(&path).unwrap();
    let bound = BoundChat::bind_for(&path, GenerationType::Regenerate).unwrap();
    first(&bound, "🎵 *A better verse, at last.* 🎵");
    let after = fs::read(&path).unwrap();
    let (old_line, _) = assert_only_message_changed(&before, &after, 7);
    let old: Value = serde_json::from_str(&old_line).unwrap();

    let (_header, messages) = get_chat(&path);
    let message = &messages[7];
    assert_eq!(message["swipe_id"], 0);
    assert_shown(message, "🎵 *A better verse, at last.* 🎵");
    assert_eq!(message["swipes"].as_array().unwrap().len(), 2);
    assert_eq!(message["swipes"][1], old["swipes"][1]);
    assert_eq!(message["swipe_info"][1], old["swipe_info"][1]);
    assert_eq!(message["send_date"], "December 7, 2026 10:00am");
}

#[test]
fn continue_appends_and_a_later_replace_keeps_the_text_it_continued() {
    // Message 14 (小雪) has one swipe; CJK, a ZWJ emoji.
    let (_dir, path) = fixture_until(CJK, 14);
    let before = fs::read(&path).unwrap();
    let bound = BoundChat::bind_for(&path, GenerationType::Continue).unwrap();
    let base = bound.message(14).unwrap().text().to_owned();
    let continuation = "还有一只黑猫 🐈‍⬛ 在星图的角落里。";
    first(&bound, continuation);
    let after = fs::read(&path).unwrap();
    let (_, new_line) = assert_only_message_changed(&before, &after, 14);
    let (_header, messages) = get_chat(&path);
    assert_shown(&messages[14], &format!("{base}{continuation}"));
    assert_eq!(messages[14]["swipes"].as_array().unwrap().len(), 1);
    // UTF-8 as is, no escapes.
    assert!(new_line.contains(&format!("\"mes\":\"{base}{continuation}\"")));

    let later = |text: &str, mode, id| {
        commit_reply(&bound, Some(14), &reply(text, mode, id)).unwrap();
        get_chat(&path).1[14]["mes"].as_str().unwrap().to_owned()
    };
    assert_eq!(
        later("另一个结尾", CommitMode::Replace, "run:commit_002"),
        format!("{base}另一个结尾")
    );
    assert_eq!(
        later("！", CommitMode::Append, "run:commit_003"),
        format!("{base}另一个结尾！")
    );
    assert_eq!(find_commit(&bound, "run:commit_003").unwrap(), Some(14));
    assert_eq!(find_commit(&bound, "run:commit_001").unwrap(), None);
    assert_only_message_changed(&before, &fs::read(&path).unwrap(), 14);

    // Reopened, the run reads the text it continued, not its own.
    let again = BoundChat::rebind_for(&path, &bound.binding()).unwrap();
    assert_eq!(again.binding(), bound.binding());
    assert_eq!(again.message(14).unwrap().text(), base);
}

#[test]
fn later_commits_rewrite_the_runs_swipe() {
    let (_dir, path) = fixture_until(LONG, 37);
    let before = fs::read(&path).unwrap();
    let bound = BoundChat::bind_for(&path, GenerationType::Swipe).unwrap();
    first(&bound, "one");
    commit_reply(
        &bound,
        Some(37),
        &reply("two", CommitMode::Replace, "run:commit_002"),
    )
    .unwrap();
    commit_reply(
        &bound,
        Some(37),
        &reply(" three", CommitMode::Append, "run:commit_003"),
    )
    .unwrap();
    assert_only_message_changed(&before, &fs::read(&path).unwrap(), 37);
    let message = &get_chat(&path).1[37];
    assert_eq!(message["swipes"].as_array().unwrap().len(), 3);
    assert_eq!(message["swipe_info"].as_array().unwrap().len(), 3);
    assert_shown(message, "two three");
    assert_eq!(message["extra"]["commitId"], "run:commit_003");
    // Another message is not the run's.
    let err = commit_reply(&bound, Some(36), &reply("x", CommitMode::Replace, "c")).unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found");
}

#[test]
fn normal_reply_is_the_line_save_reply_writes() {
    let (_dir, path) = copy_fixture(LONG, false);
    let before = fs::read(&path).unwrap();
    let bound = BoundChat::bind_for(&path, GenerationType::Normal).unwrap();
    assert_eq!(first(&bound, "Pennywort brays."), Committed { index: 65 });
    let after = fs::read(&path).unwrap();
    assert!(after.starts_with(&before), "every old byte stays");
    let added = std::str::from_utf8(&after[before.len()..]).unwrap();
    let extra = r#"{"api":"toolhost","model":"gpt-4o-2024-08-06","commitId":"run:commit_001"}"#;
    assert_eq!(
        added,
        format!(
            "\n{{\"extra\":{extra},\"name\":\"Mirelle\",\"is_user\":false,\"is_system\":false,\
             \"send_date\":\"{FINISHED}\",\"mes\":\"Pennywort brays.\",\"gen_started\":\"{STARTED}\",\
             \"gen_finished\":\"{FINISHED}\",\"swipe_info\":[{{\"send_date\":\"{FINISHED}\",\
             \"gen_started\":\"{STARTED}\",\"gen_finished\":\"{FINISHED}\",\"extra\":{extra}}}],\
             \"swipe_id\":0,\"swipes\":[\"Pennywort brays.\"]}}"
        )
    );
    assert_shown(&get_chat(&path).1[65], "Pennywort brays.");
    commit_reply(
        &bound,
        Some(65),
        &reply(" Twice.", CommitMode::Append, "run:commit_002"),
    )
    .unwrap();
    assert_shown(&get_chat(&path).1[65], "Pennywort brays. Twice.");
    assert_eq!(find_commit(&bound, "run:commit_002").unwrap(), Some(65));
}

#[test]
fn a_group_reply_carries_its_speakers_avatars() {
    let (_dir, path) = copy_fixture(GROUP, false);
    let bound = BoundChat::bind_for(&path, GenerationType::Normal).unwrap();
    let mut aldric = reply("Forward!", CommitMode::Replace, "run:commit_001");
    aldric.speaker = Some("Aldric");
    commit_reply(&bound, None, &aldric).unwrap();
    let message = &get_chat(&path).1[21];
    assert_shown(message, "Forward!");
    assert_eq!(message["name"], "Aldric");
    assert_eq!(message["original_avatar"], "Aldric.png");
    assert_eq!(
        message["force_avatar"],
        "/thumbnail?type=avatar&file=Aldric.png"
    );
    assert_eq!(message["extra"]["gen_id"], STARTED_SECS * 1000);
    // Without a speaker: the latest one, Corvin.
    let (_dir, path) = copy_fixture(GROUP, false);
    let bound = BoundChat::bind_for(&path, GenerationType::Normal).unwrap();
    first(&bound, "Hm.");
    let message = &get_chat(&path).1[21];
    assert_eq!(message["name"], "Corvin");
    assert_eq!(message["original_avatar"], "Corvin.png");
}

#[test]
fn a_changed_target_or_prefix_is_a_conflict_and_nothing_is_written() {
    for t in [
        GenerationType::Swipe,
        GenerationType::Regenerate,
        GenerationType::Continue,
    ] {
        let (_dir, path) = fixture_until(LONG, 37);
        let bound = BoundChat::bind_for(&path, t).unwrap();
        // The user swipes to the other reply in SillyTavern meanwhile.
        let text = fs::read_to_string(&path).unwrap();
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        let mut target: Value = serde_json::from_str(&lines[38]).unwrap();
        target["mes"] = target["swipes"][1].clone();
        target["swipe_id"] = json!(1);
        lines[38] = target.to_string();
        fs::write(&path, lines.join("\n")).unwrap();
        let swiped = fs::read(&path).unwrap();
        let err = first_err(&bound);
        assert_eq!(err.code(), "agent.input_history_conflict", "{t}: {err}");
        assert_eq!(fs::read(&path).unwrap(), swiped);
        if t == GenerationType::Continue {
            let err = BoundChat::rebind_for(&path, &bound.binding()).unwrap_err();
            assert_eq!(err.code(), "agent.input_history_conflict");
        }

        // An edited message before it.
        let (_dir, path) = fixture_until(LONG, 37);
        let bound = BoundChat::bind_for(&path, t).unwrap();
        let edited = fs::read_to_string(&path)
            .unwrap()
            .replacen("Pennywort", "Pennyroyal", 1);
        fs::write(&path, &edited).unwrap();
        assert_eq!(first_err(&bound).code(), "agent.input_history_conflict");
        assert_eq!(fs::read_to_string(&path).unwrap(), edited);
    }
}

fn first_err(bound: &BoundChat) -> ChatError {
    commit_reply(bound, None, &reply("x", CommitMode::Replace, "c")).unwrap_err()
}

#[test]
fn a_swipe_swiped_away_is_still_found_but_no_longer_rewritten() {
    let (_dir, path) = fixture_until(LONG, 37);
    let bound = BoundChat::bind_for(&path, GenerationType::Swipe).unwrap();
    first(&bound, "ours");
    // SillyTavern's swipe left: the first swipe shown, its `extra` back.
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let mut target: Value = serde_json::from_str(&lines[38]).unwrap();
    target["mes"] = target["swipes"][0].clone();
    target["extra"] = target["swipe_info"][0]["extra"].clone();
    target["swipe_id"] = json!(0);
    lines[38] = target.to_string();
    fs::write(&path, lines.join("\n")).unwrap();

    assert_eq!(find_commit(&bound, "run:commit_001").unwrap(), Some(37));
    let err = commit_reply(&bound, Some(37), &reply("x", CommitMode::Replace, "c")).unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found", "{err}");
}

#[test]
fn rebinding_gives_the_same_prefix_and_target_before_and_after_a_commit() {
    for t in GenerationType::ALL {
        let (_dir, path) = fixture_until(LONG, 37);
        let bound = BoundChat::bind_for(&path, t).unwrap();
        let binding = bound.binding();
        let json = serde_json::to_value(&binding).unwrap();
        assert_eq!(json["generationType"], t.as_str());
        let back: ChatBinding = serde_json::from_value(json).unwrap();
        assert_eq!(back, binding);
        let check = |again: BoundChat| {
            assert_eq!(again.binding(), binding, "{t}");
            assert_eq!(again.message_count(), bound.message_count());
            let last = bound.message_count().saturating_sub(1);
            assert_eq!(
                again.message(last).unwrap().text(),
                bound.message(last).unwrap().text()
            );
        };
        check(BoundChat::rebind_for(&path, &binding).unwrap());
        first(&bound, "reply");
        check(BoundChat::rebind_for(&path, &binding).unwrap());
    }
    // A record whose target does not fit its type.
    let (_dir, path) = fixture_until(LONG, 37);
    let mut binding = BoundChat::bind_for(&path, GenerationType::Swipe)
        .unwrap()
        .binding();
    binding.generation_type = GenerationType::Continue;
    let err = BoundChat::rebind_for(&path, &binding).unwrap_err();
    assert_eq!(err.code(), "chat.generation_type_unfit");
}

#[test]
fn the_greeting_can_be_swiped_and_continued() {
    // Only the greeting (3 swipes): an empty frozen prefix.
    for t in [GenerationType::Swipe, GenerationType::Continue] {
        let (_dir, path) = fixture_until(LONG, 0);
        let before = fs::read(&path).unwrap();
        let bound = BoundChat::bind_for(&path, t).unwrap();
        first(&bound, " More rain.");
        commit_reply(
            &bound,
            Some(0),
            &reply(" Much more.", CommitMode::Append, "c2"),
        )
        .unwrap();
        assert_only_message_changed(&before, &fs::read(&path).unwrap(), 0);
        let message = &get_chat(&path).1[0];
        let swipes = message["swipes"].as_array().unwrap().len();
        assert_eq!(swipes, if t == GenerationType::Swipe { 4 } else { 3 });
    }
}

/// A later commit rewrites only this run's reply: a user who swiped back
/// to another run's swipe does not have that one overwritten.
#[test]
fn a_later_commit_rewrites_only_this_runs_reply() {
    let (_dir, path) = fixture_until(LONG, 37);
    let bound = BoundChat::bind_for(&path, GenerationType::Swipe).unwrap();
    first(&bound, "ours");
    let err = commit_reply(
        &bound,
        Some(37),
        &reply("theirs", CommitMode::Replace, "other:commit_002"),
    )
    .unwrap_err();
    assert_eq!(err.code(), "chat.message_not_found", "{err}");
    let again = commit_reply(
        &bound,
        Some(37),
        &reply("ours, again", CommitMode::Replace, "run:commit_002"),
    )
    .unwrap();
    assert_eq!(again.index, 37);
}
