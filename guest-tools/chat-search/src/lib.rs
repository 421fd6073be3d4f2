//! `chat.search`: search the run's chat, newest messages first.
//!
//! Query expansion, scoring and snippets are the shared rules of
//! `toolhost-text` (`PreparedChatSearch`: whole words plus character bigrams,
//! so CJK text is found without a tokenizer). Messages are fetched from the
//! host in batches of 1,000 from the newest backwards, within
//! `start_message..=end_message`, at most `scan_limit` of them, filtered by
//! role; the best `limit` are kept (score descending, newer first on ties).
//! Only the run's frozen prefix is visible. Zero hits is a success.

use serde::Serialize;
use toolhost_guest::catalog;
use toolhost_guest::knowledge::{self, Chat, PackedMessage, Role};
use toolhost_guest::markdown::code;
use toolhost_guest::text::chat_search::compare_chat_hits;
use toolhost_guest::text::{BatchScratch, FirstMatch, PreparedChatSearch, chat_snippet, metrics};
use toolhost_guest::{Arguments, Output, ToolError};

pub const DEFAULT_LIMIT: u64 = 20;
pub const MAX_LIMIT: u64 = 50;
pub const MAX_SCAN_LIMIT: u64 = 100_000;

toolhost_guest::builtin_tool!(ChatSearch, |args| search_chat(&args, &knowledge::Host));

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Hit {
    index: u32,
    role: &'static str,
    name: String,
    score: f64,
    snippet: String,
    chars: u64,
    words: u64,
    #[serde(rename = "ref")]
    reference: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    query: &'a str,
    hits: &'a [Hit],
    scanned_messages: u64,
    total_messages: u32,
}

fn inconsistent_batch(at: usize) -> ToolError {
    ToolError::new(
        "chat.read_failed",
        format!("the host sent an inconsistent batch at message {at}"),
    )
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::invalid_arguments(message)
}

fn role_filter(args: &Arguments) -> Result<Option<Role>, ToolError> {
    Ok(match args.optional_str("role") {
        Ok(None) => None,
        Ok(Some("user")) => Some(Role::User),
        Ok(Some("assistant")) => Some(Role::Assistant),
        Ok(Some("system")) => Some(Role::System),
        Ok(Some(_)) | Err(_) => {
            return Err(invalid("role must be `user`, `assistant` or `system`"));
        }
    })
}

fn index(args: &Arguments, key: &str) -> Result<Option<u32>, ToolError> {
    args.optional_u64(key)?
        .map(|value| u32::try_from(value).map_err(|_| invalid(format!("{key} is too large"))))
        .transpose()
}

/// A hit kept for the results: owned, since its batch is dropped.
struct Kept {
    index: u32,
    role: Role,
    name: String,
    text: String,
}

impl From<PackedMessage<'_>> for Kept {
    fn from(message: PackedMessage<'_>) -> Self {
        Self {
            index: message.index,
            role: message.role,
            name: message.name.to_owned(),
            text: message.text.to_owned(),
        }
    }
}

pub fn search_chat(args: &Arguments, chat: &impl Chat) -> Result<Output, ToolError> {
    args.only(&[
        "query",
        "limit",
        "role",
        "start_message",
        "end_message",
        "scan_limit",
    ])?;
    let query = args.required_str("query")?;
    let limit = args.optional_u64("limit")?.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(invalid(format!("limit must be between 1 and {MAX_LIMIT}")));
    }
    let role = role_filter(args)?;
    let start = index(args, "start_message")?;
    let end = index(args, "end_message")?;
    if let (Some(start), Some(end)) = (start, end)
        && start > end
    {
        return Err(invalid("start_message must not be after end_message"));
    }
    let scan_limit = args.optional_u64("scan_limit")?.unwrap_or(MAX_SCAN_LIMIT);
    if !(1..=MAX_SCAN_LIMIT).contains(&scan_limit) {
        return Err(invalid(format!(
            "scan_limit must be between 1 and {MAX_SCAN_LIMIT}"
        )));
    }
    let Some(prepared) = PreparedChatSearch::new(query) else {
        return Err(invalid("query must not be empty"));
    };

    let info = chat.info()?;
    let limit = limit as usize;
    // Best first: score descending, then the newer message.
    let mut best: Vec<(f64, Option<FirstMatch>, Kept)> = Vec::with_capacity(limit + 1);
    let mut scanned = 0u64;
    let mut scratch = String::new();
    let mut batch_scratch = BatchScratch::default();
    if info.message_count > 0 {
        let low = start.unwrap_or(0);
        let high = end.unwrap_or(u32::MAX).min(info.message_count - 1);
        // Newest first, a batch at a time, until the range or the scan limit ends.
        let mut next_high = Some(high).filter(|high| *high >= low);
        while let Some(high) = next_high {
            if scanned >= scan_limit {
                break;
            }
            let batch_low = high.saturating_sub(knowledge::MAX_CHAT_BATCH - 1).max(low);
            let batch = chat.scan(batch_low, high - batch_low + 1)?;
            // The newest `take` messages of the batch are within the scan limit.
            let take = usize::try_from(scan_limit - scanned)
                .unwrap_or(usize::MAX)
                .min(batch.len());
            let scanned_range = batch.len() - take..batch.len();
            scanned += take as u64;
            let message_at = |at: usize| batch.get(at).ok_or_else(|| inconsistent_batch(at));
            // Hits come newest first; only those that enter the best
            // `limit` are read back as messages.
            let mut keep = |at: usize, score: f64, first: Option<FirstMatch>| {
                // A hit scoring below the worst kept one (when all `limit`
                // places are taken) loses whatever its index.
                if best.len() == limit && best.last().is_some_and(|worst| worst.0 > score) {
                    return Ok(());
                }
                let index = (batch.start as usize).saturating_add(at);
                let place = best.partition_point(|(kept, _, kept_message)| {
                    compare_chat_hits((*kept, kept_message.index as usize), (score, index)).is_lt()
                });
                if place < limit {
                    best.insert(place, (score, first, Kept::from(message_at(at)?)));
                    best.truncate(limit);
                }
                Ok(())
            };
            match role {
                // Every message is scored: all at once.
                None => {
                    let mut failed: Result<(), ToolError> = Ok(());
                    let consistent = prepared.score_packed(
                        &batch.texts,
                        &batch.text_ends,
                        scanned_range.clone(),
                        &mut batch_scratch,
                        |at, score, first| {
                            if failed.is_ok() {
                                failed = keep(at, score, Some(first));
                            }
                        },
                    );
                    failed?;
                    if !consistent {
                        return Err(inconsistent_batch(scanned_range.start));
                    }
                }
                // Few are: one at a time, skipping the others unread.
                Some(wanted) => {
                    for at in scanned_range.rev() {
                        let message = message_at(at)?;
                        if message.role != wanted {
                            continue;
                        }
                        let (score, first) = prepared.score_message_in(message.text, &mut scratch);
                        if score > 0.0 {
                            keep(at, score, first)?;
                        }
                    }
                }
            }
            next_high = batch_low.checked_sub(1).filter(|next| *next >= low);
        }
    }
    let hits: Vec<Hit> = best
        .into_iter()
        .map(|(score, first, message)| {
            let snippet = chat_snippet(
                &message.text,
                first.map(|first| first.char_index(&message.text)),
            );
            let counted = metrics(&message.text);
            Hit {
                index: message.index,
                role: knowledge::role_name(message.role),
                name: message.name,
                score,
                snippet,
                chars: counted.chars,
                words: counted.words,
                reference: knowledge::chat_ref(message.index),
            }
        })
        .collect();

    let mut content = String::new();
    if hits.is_empty() {
        content.push_str(&format!(
            "No message of the chat matched {} ({scanned} message(s) searched).",
            code(query)
        ));
    } else {
        content.push_str(&format!(
            "Search {} matched {} message(s) ({scanned} searched, newest first among equal scores).{}",
            code(query),
            hits.len(),
            catalog::pointer(
                "chat.read_messages",
                " Read a whole message with {} and its index."
            )
        ));
        for hit in &hits {
            content.push_str(&format!(
                "\n\n- message {} ({}, {}) score {:.3} ref {}",
                hit.index, hit.role, hit.name, hit.score, hit.reference
            ));
            for line in hit.snippet.lines() {
                content.push_str("\n  > ");
                content.push_str(line);
            }
        }
    }
    let structured = Structured {
        query,
        hits: &hits,
        scanned_messages: scanned,
        total_messages: info.message_count,
    };
    Ok(Output::text(content)
        .structured(structured)
        .resource_refs_from(hits.iter().map(|hit| hit.reference.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::testing::{MemoryChat, call, transcript};

    fn indexes(output: &Output) -> Vec<u64> {
        output.structured_value().expect("structured")["hits"]
            .as_array()
            .expect("hits")
            .iter()
            .map(|hit| hit["index"].as_u64().expect("index"))
            .collect()
    }

    fn chat() -> MemoryChat {
        MemoryChat::with(&[
            (Role::User, "User", "Where is the silver lantern?"),
            (
                Role::Assistant,
                "Seraphina",
                "The lantern hangs by the old bridge.",
            ),
            (Role::System, "System", "The night grows cold."),
            (Role::User, "User", "Take me to the bridge."),
            (
                Role::Assistant,
                "Seraphina",
                "Follow me to the silver lantern, then.",
            ),
        ])
    }

    #[test]
    fn best_scores_first_and_newer_wins_ties() {
        let output =
            call(search_chat, &chat(), json!({"query": "silver lantern"})).expect("search");
        // 0 and 4 match both words (4 is newer), 1 matches one.
        assert_eq!(indexes(&output), [4, 0, 1]);
        assert!(
            output
                .content
                .contains("- message 4 (assistant, Seraphina) score 1.000 ref chat:current#4")
        );
        assert_eq!(output.resource_refs[0], "chat:current#4");
    }

    #[test]
    fn role_range_and_scan_limit_filter() {
        let chat = chat();
        let output = call(
            search_chat,
            &chat,
            json!({"query": "lantern", "role": "user"}),
        )
        .expect("search");
        assert_eq!(indexes(&output), [0]);
        let output = call(
            search_chat,
            &chat,
            json!({"query": "lantern", "start_message": 1, "end_message": 3}),
        )
        .expect("search");
        assert_eq!(indexes(&output), [1]);
        let output = call(
            search_chat,
            &chat,
            json!({"query": "lantern", "scan_limit": 1}),
        )
        .expect("search");
        assert_eq!(indexes(&output), [4], "only the newest message was scanned");
        assert_eq!(output.structured_value().expect("s")["scannedMessages"], 1);
    }

    #[test]
    fn cjk_queries_match_by_bigrams() {
        let chat = MemoryChat::with(&[
            (Role::User, "User", "今天天气很好，我们去公园吧。"),
            (Role::Assistant, "Seraphina", "明天会下雨。"),
        ]);
        let output = call(search_chat, &chat, json!({"query": "天气很好"})).expect("search");
        assert_eq!(indexes(&output), [0]);
    }

    #[test]
    fn zero_hits_is_success_and_arguments_are_checked() {
        let chat = chat();
        let output = call(search_chat, &chat, json!({"query": "dragon"})).expect("zero hits");
        assert!(
            output
                .content
                .starts_with("No message of the chat matched `dragon`")
        );
        for args in [
            json!({"query": "x", "limit": 0}),
            json!({"query": "x", "limit": 51}),
            json!({"query": "x", "role": "tool"}),
            json!({"query": "x", "start_message": 3, "end_message": 1}),
            json!({"query": "x", "scan_limit": 0}),
            json!({"query": "x", "scan_limit": 100001}),
            json!({"query": " "}),
            json!({"query": "x", "offset": 2}),
        ] {
            assert_eq!(
                call(search_chat, &chat, args.clone())
                    .expect_err("refused")
                    .code,
                "tool.invalid_arguments",
                "{args}"
            );
        }
    }

    #[test]
    fn long_chats_are_read_in_batches_newest_first() {
        let texts: Vec<String> = (0..2500).map(|n| format!("message number {n}")).collect();
        let messages: Vec<(Role, &str, &str)> = texts
            .iter()
            .map(|text| (Role::User, "User", text.as_str()))
            .collect();
        let chat = MemoryChat::with(&messages);
        let output =
            call(search_chat, &chat, json!({"query": "number", "limit": 3})).expect("search");
        assert_eq!(indexes(&output), [2499, 2498, 2497]);
        assert_eq!(
            *chat.batches.borrow(),
            3,
            "2,500 messages in batches of 1,000"
        );
    }

    /// The model-facing output, byte for byte: pinned so a refactor of the
    /// shared records cannot change what the model or a program reads.
    #[test]
    fn the_output_is_pinned() {
        let args = json!({"query": "silver lantern"});
        assert_eq!(
            transcript(&call(search_chat, &chat(), args)),
            "Search `silver lantern` matched 3 message(s) (5 searched, newest first among equal scores).\n\n- message 4 (assistant, Seraphina) score 1.000 ref chat:current#4\n  > Follow me to the silver lantern, then.\n\n- message 0 (user, User) score 1.000 ref chat:current#0\n  > Where is the silver lantern?\n\n- message 1 (assistant, Seraphina) score 0.538 ref chat:current#1\n  > The lantern hangs by the old bridge.\n{\"query\":\"silver lantern\",\"hits\":[{\"index\":4,\"role\":\"assistant\",\"name\":\"Seraphina\",\"score\":1.0,\"snippet\":\"Follow me to the silver lantern, then.\",\"chars\":38,\"words\":7,\"ref\":\"chat:current#4\"},{\"index\":0,\"role\":\"user\",\"name\":\"User\",\"score\":1.0,\"snippet\":\"Where is the silver lantern?\",\"chars\":28,\"words\":5,\"ref\":\"chat:current#0\"},{\"index\":1,\"role\":\"assistant\",\"name\":\"Seraphina\",\"score\":0.5384615384615384,\"snippet\":\"The lantern hangs by the old bridge.\",\"chars\":36,\"words\":7,\"ref\":\"chat:current#1\"}],\"scannedMessages\":5,\"totalMessages\":5}\n[\"chat:current#4\", \"chat:current#0\", \"chat:current#1\"]\n"
        );
    }
}
