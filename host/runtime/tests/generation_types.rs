//! A run answering the chat's last reply another way than with a new
//! message — a swipe, a regeneration, a continuation — through the file
//! host: the model reads the chat without the reply it replaces (with the
//! one it continues), and the chat's last line becomes what SillyTavern
//! would write, every other line byte for byte.

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::recording::{RecordingSource, Seen};
use support::*;
use toolhost_runtime::{AgentDirectory, GenerationType, RunStatus};

/// The character's reply the fixture chat ends with once cut.
const LAST_REPLY: &str = "I'll tell you when we're dry.";

async fn answer(generation_type: GenerationType) -> (Fixture, Arc<Seen>, Value) {
    let fixture = Fixture::new().answering_the_last_reply(generation_type);
    let seen = Arc::new(Seen::default());
    let models = Arc::new(RecordingSource {
        book: book(
            json!([{"toolCalls": [write("w", REPLY), commit("c"), finish("f")]}]),
            json!({}),
        ),
        seen: Arc::clone(&seen),
    });
    let summary = fixture
        .run_agents(
            &profile(6, "foreground"),
            models,
            AgentDirectory::default(),
            config(),
        )
        .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let text = String::from_utf8(std::fs::read(&fixture.chat).expect("chat")).expect("utf-8");
    let original = String::from_utf8(fixture.original.clone()).expect("utf-8");
    let (lines, before): (Vec<&str>, Vec<&str>) =
        (text.lines().collect(), original.lines().collect());
    assert_eq!(lines.len(), before.len(), "no new message");
    assert_eq!(
        lines[..lines.len() - 1],
        before[..before.len() - 1],
        "every other line as it was"
    );
    let last: Value = serde_json::from_str(lines[lines.len() - 1]).expect("last line");
    (fixture, seen, last)
}

/// Whether the model's first request held the reply being answered.
fn read_the_last_reply(seen: &Seen) -> bool {
    seen.of("writer")[0]
        .messages
        .iter()
        .any(|message| message.text().contains(LAST_REPLY))
}

#[tokio::test]
async fn a_swipe_becomes_the_shown_swipe_of_the_last_reply_which_the_model_never_read() {
    let (_, seen, last) = answer(GenerationType::Swipe).await;
    assert!(
        !read_the_last_reply(&seen),
        "the reply it replaces is hidden"
    );
    let header = seen.of("writer")[0].messages[0].text();
    assert!(
        header.contains("another version of Mirelle's last reply"),
        "{header}"
    );
    let swipes = last["swipes"].as_array().expect("swipes");
    assert!(swipes.len() >= 2, "{last}");
    assert_eq!(swipes.last().expect("swipe"), REPLY);
    assert_eq!(last["swipe_id"], swipes.len() - 1);
    assert_eq!(last["mes"], REPLY);
    assert!(
        swipes
            .iter()
            .any(|swipe| swipe.as_str().is_some_and(|s| s.starts_with(LAST_REPLY)))
    );
    assert_eq!(
        last["swipe_info"].as_array().map(Vec::len),
        Some(swipes.len()),
        "{last}"
    );
    assert!(
        last["gen_started"].is_string() && last["gen_finished"].is_string(),
        "{last}"
    );
}

#[tokio::test]
async fn a_regeneration_replaces_the_shown_swipe_only() {
    let (fixture, seen, last) = answer(GenerationType::Regenerate).await;
    assert!(!read_the_last_reply(&seen));
    let before: Value = serde_json::from_str(
        std::str::from_utf8(&fixture.original)
            .expect("utf-8")
            .lines()
            .last()
            .expect("line"),
    )
    .expect("json");
    assert_eq!(last["mes"], REPLY);
    let shown = last["swipe_id"].as_u64().unwrap_or(0) as usize;
    assert_eq!(last["swipes"][shown], REPLY, "{last}");
    let count = |value: &Value| value["swipes"].as_array().map_or(1, Vec::len);
    assert_eq!(count(&last), count(&before), "no swipe added");
}

#[tokio::test]
async fn a_continuation_is_read_by_the_model_and_appended_to_the_reply() {
    let (_, seen, last) = answer(GenerationType::Continue).await;
    assert!(
        read_the_last_reply(&seen),
        "the model continues what it reads"
    );
    let header = seen.of("writer")[0].messages[0].text();
    assert!(
        header.contains("continue Mirelle's last message"),
        "{header}"
    );
    let text = last["mes"].as_str().expect("mes");
    assert!(
        text.starts_with(LAST_REPLY) && text.ends_with(REPLY),
        "{text}"
    );
    let shown = last["swipe_id"].as_u64().unwrap_or(0) as usize;
    assert_eq!(last["swipes"][shown], text, "{last}");
}
