//! The example host runs its agent to the end, and the reply lands in the
//! application's own chat store.

use std::sync::Arc;

use embed_host::{MemoryChat, run_agent};
use toolhost_runtime::RunStatus;

#[tokio::test(flavor = "current_thread")]
async fn the_reply_lands_in_the_applications_own_chat() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chat = Arc::new(MemoryChat::default());
    let summary = run_agent(&dir.path().join("run"), Arc::clone(&chat))
        .await
        .expect("runs");
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    assert_eq!((summary.rounds, summary.tool_calls), (3, 4));
    assert_eq!(chat.messages(), vec!["The goblin acts first.".to_owned()]);
    let journal = std::fs::read_to_string(dir.path().join("run/events.jsonl")).expect("journal");
    assert!(journal.contains("\"type\":\"chat_commit_completed\""));
}
