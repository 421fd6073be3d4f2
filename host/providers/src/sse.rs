//! Server-sent events: framing a byte stream into events ([`SseFramer`],
//! [`frame_sse`]) and the interface every provider's stream assembler
//! implements ([`StreamAssembler`]).
//!
//! Framing follows the WHATWG "event stream" interpretation rules: lines end
//! with CRLF, LF or CR; `:` starts a comment; `data` lines of one event are
//! joined with `\n`; a blank line dispatches the event unless its data is
//! empty; an event cut off by the end of the stream is not dispatched; `id`
//! and `retry` are ignored (the adapters never reconnect). The well-kept
//! crates that parse SSE (`eventsource-stream`, `sse-stream`) do it over
//! async byte streams only; the HTTP client will feed this framer chunk by
//! chunk instead, so no runtime or futures dependency is needed here.

use toolhost_core::AgentModelResponse;

use crate::error::{DecodeError, invalid};

/// One framed event. `event` is `None` when the stream named no event type
/// (the SSE default, `message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    pub fn new(event: Option<&str>, data: impl Into<String>) -> Self {
        Self {
            event: event.map(str::to_owned),
            data: data.into(),
        }
    }
}

/// Incremental framing: feed bytes as they arrive, at any boundary (inside a
/// line, a CRLF pair or a multi-byte character), get complete events.
#[derive(Debug)]
pub struct SseFramer {
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The last byte was a CR: an LF right after it ends nothing more.
    after_cr: bool,
    /// Nothing framed yet: a leading byte-order mark is dropped.
    at_start: bool,
    event: Option<String>,
    data: Option<String>,
}

impl SseFramer {
    pub fn new() -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            at_start: true,
            event: None,
            data: None,
        }
    }

    /// Frame the next bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, DecodeError> {
        let mut events = Vec::new();
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line)? {
                        events.push(event);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                }
            }
        }
        Ok(events)
    }

    fn line_done(&mut self, line: &[u8]) -> Result<Option<SseEvent>, DecodeError> {
        let mut line = std::str::from_utf8(line)
            .map_err(|error| invalid(format!("the event stream is not UTF-8: {error}")))?;
        if std::mem::take(&mut self.at_start) {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            let event = self.event.take();
            return Ok(self.data.take().map(|data| SseEvent { event, data }));
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            // `id`, `retry` and unknown fields: nothing an adapter uses.
            _ => {}
        }
        Ok(None)
    }
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::new()
    }
}

/// Frame a complete event-stream body. A last event without its blank line
/// is dropped, as the SSE rules say; if it was the terminal event, the
/// provider's assembler reports the stream as incomplete.
pub fn frame_sse(body: &str) -> Result<Vec<SseEvent>, DecodeError> {
    SseFramer::new().push(body.as_bytes())
}

/// Turns one provider's stream of events into the reply a non-streaming
/// call would have decoded to. Feed every event in order, then `finish`.
/// Names are resolved through the request's turn only, when the call is
/// whole, as in `decode_response`: a call to an unknown alias is kept as an
/// `UnknownToolCall` part for the run loop to answer.
pub trait StreamAssembler {
    fn push(&mut self, event: &SseEvent) -> Result<(), DecodeError>;

    /// The stream ended: the reply, or `model.stream_incomplete` when the
    /// provider's terminal event never came.
    fn finish(self: Box<Self>) -> Result<AgentModelResponse, DecodeError>;
}

/// A field a stream sends once per call (its id, its name) and may repeat,
/// but never change.
pub(crate) fn set_once(
    slot: &mut Option<String>,
    value: Option<&str>,
    what: &str,
) -> Result<(), DecodeError> {
    match (slot.as_deref(), value) {
        (_, None) => Ok(()),
        (None, Some(value)) => {
            *slot = Some(value.to_owned());
            Ok(())
        }
        (Some(old), Some(new)) if old == new => Ok(()),
        (Some(old), Some(new)) => Err(invalid(format!(
            "{what} changed from `{old}` to `{new}` mid-stream"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> Vec<SseEvent> {
        frame_sse(body).expect("frames")
    }

    #[test]
    fn events_fields_comments_and_multiline_data() {
        let body = ": keep-alive\nevent: message_start\ndata: {\"a\":1}\n\ndata: first\ndata:second\nid: 7\nretry: 10\n\n";
        assert_eq!(
            frame(body),
            vec![
                SseEvent::new(Some("message_start"), "{\"a\":1}"),
                SseEvent::new(None, "first\nsecond"),
            ]
        );
    }

    #[test]
    fn every_line_ending_and_a_leading_bom() {
        let body = "\u{feff}data: a\r\n\r\ndata: b\r\rdata: c\n\n";
        assert_eq!(
            frame(body),
            vec![
                SseEvent::new(None, "a"),
                SseEvent::new(None, "b"),
                SseEvent::new(None, "c"),
            ]
        );
    }

    #[test]
    fn an_event_without_data_or_without_its_blank_line_is_not_dispatched() {
        assert_eq!(
            frame("event: ping\n\ndata: cut off"),
            Vec::<SseEvent>::new()
        );
        // An empty `data:` line is data (the empty string).
        assert_eq!(frame("data:\n\n"), vec![SseEvent::new(None, "")]);
    }

    #[test]
    fn bytes_split_anywhere_frame_the_same() {
        let body =
            "event: delta\r\ndata: {\"text\":\"h\u{e9}llo \u{1f3b2}\"}\r\n\r\ndata: [DONE]\n\n";
        let whole = frame(body);
        assert_eq!(whole.len(), 2);
        let bytes = body.as_bytes();
        for split in 0..=bytes.len() {
            let mut framer = SseFramer::new();
            let mut events = framer.push(&bytes[..split]).expect("first half");
            events.extend(framer.push(&bytes[split..]).expect("second half"));
            assert_eq!(events, whole, "split at byte {split}");
        }
        let mut framer = SseFramer::new();
        let one_by_one: Vec<SseEvent> = bytes
            .iter()
            .flat_map(|byte| framer.push(std::slice::from_ref(byte)).expect("byte"))
            .collect();
        assert_eq!(one_by_one, whole);
    }

    #[test]
    fn invalid_utf8_is_an_invalid_response() {
        let error = SseFramer::new()
            .push(b"data: \xff\n\n")
            .expect_err("not utf-8");
        assert!(error.to_string().starts_with("model.invalid_response"));
    }
}
