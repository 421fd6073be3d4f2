//! `chat.read_messages`: read up to 20 messages of the run's chat by index,
//! each whole or by 1-based line window.
//!
//! All messages of one call share a 20,000-character budget; a message that
//! does not fit is previewed (a successful read that names the next
//! `start_line`), and messages after the budget is spent are listed as not
//! read, to ask for again. Index 0 is the first message after the chat
//! file's header; only the run's frozen prefix is visible.

use serde::Serialize;
use serde_json::Value;
use toolhost_guest::knowledge::{self, Chat};
use toolhost_guest::line_read::WindowRecord;
use toolhost_guest::markdown::fenced_into;
use toolhost_guest::text::lines::{self, ReadLimits};
use toolhost_guest::{Arguments, Output, ToolError};

pub const MAX_MESSAGES: usize = 20;
pub const MAX_TOTAL_CHARS: usize = 20_000;

toolhost_guest::builtin_tool!(ReadMessages, |args| read_messages(&args, &knowledge::Host));

struct Request {
    index: u32,
    start_line: Option<u32>,
    line_count: Option<u32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Read {
    index: u32,
    role: &'static str,
    name: String,
    send_date: Option<String>,
    #[serde(flatten)]
    window: WindowRecord,
    text: String,
    #[serde(rename = "ref")]
    reference: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Structured<'a> {
    total_messages: u32,
    messages: &'a [Read],
    /// Requested but not read: the character budget was spent.
    not_read: &'a [u32],
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::invalid_arguments(message)
}

fn requests(args: &Arguments) -> Result<Vec<Request>, ToolError> {
    args.only(&["messages"])?;
    let Some(Value::Array(items)) = args.get("messages") else {
        return Err(invalid(
            "messages must be an array of {index, start_line?, line_count?}",
        ));
    };
    if items.is_empty() {
        return Err(invalid("messages must list at least one message"));
    }
    if items.len() > MAX_MESSAGES {
        return Err(invalid(format!(
            "read at most {MAX_MESSAGES} messages per call"
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(position, item)| {
            let item = Arguments::from_value(item.clone())
                .map_err(|_| invalid(format!("messages[{position}] must be an object")))?;
            item.only(&["index", "start_line", "line_count"])
                .map_err(|error| invalid(format!("messages[{position}]: {}", error.message)))?;
            let number = |key: &str| -> Result<Option<u32>, ToolError> {
                item.optional_u64(key)
                    .map_err(|error| invalid(format!("messages[{position}]: {}", error.message)))?
                    .map(|value| {
                        u32::try_from(value).map_err(|_| {
                            invalid(format!("messages[{position}].{key} is too large"))
                        })
                    })
                    .transpose()
            };
            Ok(Request {
                index: number("index")?
                    .ok_or_else(|| invalid(format!("messages[{position}].index is required")))?,
                start_line: number("start_line")?,
                line_count: number("line_count")?,
            })
        })
        .collect()
}

pub fn read_messages(args: &Arguments, chat: &impl Chat) -> Result<Output, ToolError> {
    let requests = requests(args)?;
    let info = chat.info()?;
    let mut reads: Vec<Read> = Vec::new();
    let mut not_read: Vec<u32> = Vec::new();
    let mut used = 0usize;
    for request in &requests {
        let message = chat
            .messages(request.index, 1)?
            .into_iter()
            .next()
            .filter(|message| message.index == request.index)
            .ok_or_else(|| {
                ToolError::new(
                    "chat.message_not_found",
                    format!(
                        "message index {} does not exist in this chat; total messages: {}",
                        request.index, info.message_count
                    ),
                )
            })?;
        let budget = MAX_TOTAL_CHARS - used;
        if budget == 0 {
            not_read.push(request.index);
            continue;
        }
        let window = lines::select(
            &message.text,
            request.start_line,
            request.line_count,
            ReadLimits::with_max_chars(budget),
        )
        .map_err(|error| {
            ToolError::new(
                "chat.invalid_message_range",
                format!("message {}: {error}", request.index),
            )
        })?;
        used += window.chars as usize;
        let reference = if window.is_full() {
            knowledge::chat_ref(message.index)
        } else {
            format!(
                "{}:L{}-L{}",
                knowledge::chat_ref(message.index),
                window.start_line,
                window.end_line
            )
        };
        reads.push(Read {
            index: message.index,
            role: knowledge::role_name(message.role),
            name: message.name.clone(),
            send_date: message.send_date.clone(),
            window: WindowRecord::new(&window, &message.text),
            text: window.text.to_owned(),
            reference,
        });
    }

    let mut content = String::new();
    for read in &reads {
        if !content.is_empty() {
            content.push_str("\n\n");
        }
        let when = read
            .send_date
            .as_deref()
            .map(|date| format!(", {date}"))
            .unwrap_or_default();
        if read.window.next_start_line.is_none() && read.window.start_line <= 1 {
            content.push_str(&format!(
                "### Message {} — {} ({}{when})\n\n",
                read.index, read.name, read.role
            ));
        } else {
            content.push_str(&format!(
                "### Message {} — {} ({}{when}), lines {}-{} of {}\n\n",
                read.index,
                read.name,
                read.role,
                read.window.start_line,
                read.window.end_line,
                read.window.total_lines
            ));
        }
        fenced_into(&read.text, &mut content);
        if let Some(next) = read.window.next_start_line {
            content.push_str(&format!(
                "\n\nPreview ended before the end of message {}. Continue with index={} and start_line={next}.",
                read.index, read.index
            ));
        }
    }
    if !not_read.is_empty() {
        let list: Vec<String> = not_read.iter().map(u32::to_string).collect();
        content.push_str(&format!(
            "\n\nNot read, the {MAX_TOTAL_CHARS}-character total of one call was reached: message(s) {}. Ask for them in another call.",
            list.join(", ")
        ));
    }
    let structured = Structured {
        total_messages: info.message_count,
        messages: &reads,
        not_read: &not_read,
    };
    Ok(Output::text(content)
        .structured(structured)
        .resource_refs_from(reads.iter().map(|read| read.reference.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolhost_guest::knowledge::Role;
    use toolhost_guest::testing::{MemoryChat, call, transcript};

    #[test]
    fn reads_whole_messages_with_names_and_refs() {
        let chat = MemoryChat::with(&[
            (Role::User, "User", "Hello there."),
            (Role::Assistant, "Seraphina", "Greetings,\ntraveller."),
        ]);
        let output = call(
            read_messages,
            &chat,
            json!({"messages": [{"index": 1}, {"index": 0}]}),
        )
        .expect("read");
        assert_eq!(
            output.content,
            "### Message 1 — Seraphina (assistant)\n\n```\nGreetings,\ntraveller.\n```\n\n### Message 0 — User (user)\n\n```\nHello there.\n```"
        );
        assert_eq!(output.resource_refs, ["chat:current#1", "chat:current#0"]);
    }

    #[test]
    fn line_windows_and_previews() {
        let long: String = (1..=50).map(|n| format!("line {n}\n")).collect();
        let chat = MemoryChat::with(&[(Role::Assistant, "Seraphina", &long)]);
        let output = call(
            read_messages,
            &chat,
            json!({"messages": [{"index": 0, "start_line": 10, "line_count": 2}]}),
        )
        .expect("read");
        let structured = output.structured_value().expect("structured");
        assert_eq!(structured["messages"][0]["text"], "line 10\nline 11");
        assert_eq!(structured["messages"][0]["nextStartLine"], 12);
        assert_eq!(output.resource_refs, ["chat:current#0:L10-L11"]);
        assert!(
            output
                .content
                .contains("Continue with index=0 and start_line=12.")
        );
    }

    #[test]
    fn the_total_budget_previews_then_defers() {
        let big = "word ".repeat(3_000) + "\n"; // 15,001 chars on one line
        let chat = MemoryChat::with(&[
            (Role::User, "User", &big),
            (Role::User, "User", &big),
            (Role::User, "User", "small"),
        ]);
        let output = call(
            read_messages,
            &chat,
            json!({"messages": [{"index": 0}, {"index": 1}, {"index": 2}]}),
        )
        .expect("read");
        let structured = output.structured_value().expect("structured");
        let first = &structured["messages"][0];
        assert_eq!(first["lineTruncated"], false);
        let second = &structured["messages"][1];
        assert_eq!(
            second["lineTruncated"], true,
            "clipped to what is left of 20,000"
        );
        let shown: u64 = structured["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .map(|message| message["chars"].as_u64().expect("chars"))
            .sum();
        assert!(shown <= 20_000, "{shown}");
        assert_eq!(structured["notRead"], json!([2]));
        assert!(output.content.contains(
            "Not read, the 20000-character total of one call was reached: message(s) 2."
        ));
    }

    #[test]
    fn errors_name_what_to_fix() {
        let chat = MemoryChat::with(&[(Role::User, "User", "one\ntwo")]);
        let error =
            call(read_messages, &chat, json!({"messages": [{"index": 5}]})).expect_err("missing");
        assert_eq!(error.code, "chat.message_not_found");
        assert_eq!(
            error.message,
            "message index 5 does not exist in this chat; total messages: 1"
        );
        let error = call(
            read_messages,
            &chat,
            json!({"messages": [{"index": 0, "start_line": 9}]}),
        )
        .expect_err("range");
        assert_eq!(error.code, "chat.invalid_message_range");
        for args in [
            json!({"messages": []}),
            json!({"messages": "0"}),
            json!({"messages": [{"start_line": 1}]}),
            json!({"messages": [{"index": 0, "start_char": 1}]}),
            json!({"messages": (0..21).map(|index| json!({"index": index})).collect::<Vec<_>>()}),
        ] {
            assert_eq!(
                call(read_messages, &chat, args.clone())
                    .expect_err("refused")
                    .code,
                "tool.invalid_arguments",
                "{args}"
            );
        }
    }

    /// The model-facing output, byte for byte: pinned so a refactor of the
    /// shared records cannot change what the model or a program reads.
    #[test]
    fn the_output_is_pinned() {
        let chat = MemoryChat::with(&[
            (Role::User, "User", "Hello there."),
            (
                Role::Assistant,
                "Seraphina",
                "Greetings,\ntraveller.\nWelcome.",
            ),
        ]);
        let got: String = [
            json!({"messages": [{"index": 1, "start_line": 2, "line_count": 1}, {"index": 0}]}),
            json!({"messages": [{"index": 1, "start_line": 4294967296u64}]}),
            json!({"messages": [{"index": 1, "line_count": -1}]}),
        ]
        .into_iter()
        .map(|args| transcript(&call(read_messages, &chat, args)))
        .collect();
        assert_eq!(
            got,
            "### Message 1 — Seraphina (assistant), lines 2-2 of 3\n\n```\ntraveller.\n```\n\nPreview ended before the end of message 1. Continue with index=1 and start_line=3.\n\n### Message 0 — User (user)\n\n```\nHello there.\n```\n{\"totalMessages\":2,\"messages\":[{\"index\":1,\"role\":\"assistant\",\"name\":\"Seraphina\",\"sendDate\":null,\"totalLines\":3,\"startLine\":2,\"endLine\":2,\"chars\":10,\"words\":1,\"totalChars\":30,\"totalWords\":3,\"lineTruncated\":false,\"nextStartLine\":3,\"text\":\"traveller.\",\"ref\":\"chat:current#1:L2-L2\"},{\"index\":0,\"role\":\"user\",\"name\":\"User\",\"sendDate\":null,\"totalLines\":1,\"startLine\":1,\"endLine\":1,\"chars\":12,\"words\":2,\"totalChars\":12,\"totalWords\":2,\"lineTruncated\":false,\"nextStartLine\":null,\"text\":\"Hello there.\",\"ref\":\"chat:current#0\"}],\"notRead\":[]}\n[\"chat:current#1:L2-L2\", \"chat:current#0\"]\ntool.invalid_arguments: messages[0].start_line is too large\ntool.invalid_arguments: messages[0]: line_count must be a non-negative integer\n"
        );
    }
}
