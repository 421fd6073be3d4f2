//! Generated provider traffic: a reply body of any shape, or any stream of
//! events, decodes to a reply or to a `model.*` error, never a panic; and
//! an event stream frames the same whichever byte it is split at. `make
//! fuzz` runs more cases (`PROPTEST_CASES`).

mod common;

use proptest::prelude::*;
use serde_json::{Map, Value};
use toolhost_core::Classified;
use toolhost_providers::{SseEvent, SseFramer, frame_sse};

/// Field names of the four formats, so random values often take the
/// shapes the decoders look into.
const KEYS: &[&str] = &[
    "id",
    "type",
    "role",
    "content",
    "text",
    "choices",
    "message",
    "tool_calls",
    "function",
    "name",
    "arguments",
    "finish_reason",
    "output",
    "call_id",
    "status",
    "input",
    "stop_reason",
    "candidates",
    "parts",
    "functionCall",
    "args",
    "finishReason",
    "usage",
    "error",
    "delta",
    "index",
    "content_block",
    "item",
    "response",
    "usageMetadata",
    "thoughtSignature",
];

/// Strings the decoders compare against: aliases of the turn, type tags.
const WORDS: &[&str] = &[
    "dice_roll",
    "workspace_read_file",
    "mcp__weather__get-forecast",
    "builtin:dice.roll",
    "assistant",
    "tool_use",
    "function_call",
    "message",
    "stop",
    "tool_calls",
    "STOP",
    "{\"formula\":\"2d6\"}",
    "{",
    "completed",
    "text",
    "",
    "call_1",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(WORDS).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|pairs| {
                Value::Object(
                    pairs
                        .into_iter()
                        .map(|(key, value)| (key.to_owned(), value))
                        .collect::<Map<String, Value>>(),
                )
            }),
        ]
    })
}

fn sse_event() -> impl Strategy<Value = SseEvent> {
    (
        prop::option::of(prop_oneof![
            prop::sample::select(
                &[
                    "message_start",
                    "content_block_delta",
                    "message_stop",
                    "response.completed"
                ][..]
            )
            .prop_map(str::to_owned),
            "[a-z._]{1,12}",
        ]),
        prop_oneof![
            json_value().prop_map(|value| value.to_string()),
            Just("[DONE]".to_owned()),
            "\\PC{0,20}"
        ],
    )
        .prop_map(|(event, data)| SseEvent { event, data })
}

/// An event stream as a server writes it, with the line endings it may use.
fn event_stream() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(sse_event(), 0..6),
        prop::sample::select(&["\n", "\r\n", "\r"][..]),
        any::<bool>(),
    )
        .prop_map(|(events, newline, comment)| {
            let mut body = String::new();
            if comment {
                body.push_str(": keep-alive");
                body.push_str(newline);
            }
            for event in events {
                if let Some(name) = event.event {
                    body.push_str(&format!("event: {name}{newline}"));
                }
                for line in event.data.split('\n') {
                    body.push_str(&format!("data: {line}{newline}"));
                }
                body.push_str(newline);
            }
            body
        })
}

fn framed_in(chunks: &[&[u8]]) -> Result<Vec<SseEvent>, String> {
    let mut framer = SseFramer::new();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(framer.push(chunk).map_err(|error| error.to_string())?);
    }
    Ok(events)
}

proptest! {
    #[test]
    fn a_reply_of_any_shape_decodes_or_is_a_model_error(body in json_value()) {
        let turn = common::turn();
        for provider in common::ALL {
            if let Err(error) = provider.decode_response(&turn, &body) {
                prop_assert!(error.code().starts_with("model."), "{}: {}", provider.name(), error);
            }
        }
    }

    #[test]
    fn a_stream_of_any_events_assembles_or_is_a_model_error(
        events in prop::collection::vec(sse_event(), 0..8),
    ) {
        let turn = common::turn();
        for provider in common::ALL {
            let mut assembler = provider.stream_assembler(&turn);
            let pushed: Result<(), _> = events.iter().try_for_each(|event| assembler.push(event));
            let result = pushed.and_then(|()| assembler.finish().map(|_| ()));
            if let Err(error) = result {
                prop_assert!(error.code().starts_with("model."), "{}: {}", provider.name(), error);
            }
        }
    }

    /// Split at every byte (inside a line, a CRLF pair or a multi-byte
    /// character), the stream frames to the same events as in one piece.
    #[test]
    fn framing_is_the_same_wherever_the_stream_is_split(body in event_stream()) {
        let whole = frame_sse(&body).map_err(|error| error.to_string());
        let bytes = body.as_bytes();
        prop_assert_eq!(&framed_in(&[bytes]), &whole);
        for split in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(split);
            prop_assert_eq!(&framed_in(&[head, tail]), &whole, "split at {}", split);
        }
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        prop_assert_eq!(&framed_in(&single), &whole);
    }
}
