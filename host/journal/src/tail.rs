//! Reading a run's journal (`events.jsonl`) while its run may be writing
//! it: whole lines from a byte offset on, in bounded chunks, without the
//! writer's lock. A line still being written (no newline yet) waits for
//! the next read. Used by whoever follows a journal from outside the run:
//! the service's event streams and run states, the calls waiting for
//! approval and the commits waiting for a chat app.

use std::borrow::Cow;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::path::Path;

use serde::Deserialize;

/// Most bytes one read takes; a longer line is read whole all the same
/// (journal lines are bounded by the journal's own payload limits).
const CHUNK_BYTES: usize = 256 * 1024;
/// A line longer than this is not a journal line: the reader stops there.
const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// One journal line, as read.
#[derive(Debug, Clone)]
pub struct Line {
    pub seq: u64,
    pub event_type: String,
    /// The line without its newline: the event's JSON.
    pub json: String,
}

#[derive(Deserialize)]
struct Head<'a> {
    seq: u64,
    /// Borrowed from the line unless it holds an escape.
    #[serde(rename = "type", borrow)]
    event_type: Cow<'a, str>,
}

/// What one read found.
#[derive(Debug, Default)]
pub struct Chunk {
    pub lines: Vec<Line>,
    /// Where the next read starts.
    pub offset: u64,
}

/// Whole lines of the journal at `path` from byte `offset`, about
/// [`CHUNK_BYTES`] of them. A line that is not an event ends the read (a
/// torn tail a crash left, cut when the run is reopened).
pub fn read_from(path: &Path, offset: u64) -> std::io::Result<Chunk> {
    let mut lines = Vec::new();
    let offset = scan(path, offset, |json, seq, event_type| {
        lines.push(Line {
            seq,
            event_type: event_type.to_owned(),
            json: json.to_owned(),
        });
    })?;
    Ok(Chunk { lines, offset })
}

/// Like [`read_from`], but each event's `seq` and type go to `each`
/// without copying its line: for a pass that only counts. Returns where
/// the next read starts (`offset` itself when there was nothing whole to
/// read).
pub fn scan_types(
    path: &Path,
    offset: u64,
    mut each: impl FnMut(u64, &str),
) -> std::io::Result<u64> {
    scan(path, offset, |_, seq, event_type| each(seq, event_type))
}

/// Every whole event of the journal at `path` whose type `wanted` accepts,
/// in order, as JSON, to `each` — read in bounded chunks while the run may
/// be writing, only the wanted lines copied. `each` ends the pass early
/// with [`ControlFlow::Break`]. A line that is not JSON is passed over.
pub fn each_event(
    path: &Path,
    wanted: impl Fn(&str) -> bool,
    mut each: impl FnMut(&str, serde_json::Value) -> ControlFlow<()>,
) -> std::io::Result<()> {
    let mut offset = 0;
    loop {
        let mut stopped = false;
        let next = scan(path, offset, |json, _, event_type| {
            if stopped || !wanted(event_type) {
                return;
            }
            if let Ok(event) = serde_json::from_str(json) {
                stopped = each(event_type, event).is_break();
            }
        })?;
        if stopped || next == offset {
            return Ok(());
        }
        offset = next;
    }
}

/// One bounded read from `offset`: each whole event line to `take` (the
/// line, `seq`, type) until a line is not an event.
fn scan(path: &Path, offset: u64, mut take: impl FnMut(&str, u64, &str)) -> std::io::Result<u64> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(offset))?;
    let mut buffer = Vec::with_capacity(CHUNK_BYTES.min(64 * 1024));
    let mut taken = (&mut file).take(CHUNK_BYTES as u64);
    taken.read_to_end(&mut buffer)?;
    // A line longer than a chunk: read on to its end (bounded).
    while !buffer.is_empty() && !buffer.contains(&b'\n') && buffer.len() < MAX_LINE_BYTES {
        let before = buffer.len();
        (&mut file)
            .take(CHUNK_BYTES as u64)
            .read_to_end(&mut buffer)?;
        if buffer.len() == before {
            break;
        }
    }
    let mut next = offset;
    let mut start = 0;
    while let Some(end) = buffer[start..].iter().position(|b| *b == b'\n') {
        let Some((line, head)) = event(&buffer[start..start + end]) else {
            break;
        };
        take(line, head.seq, &head.event_type);
        start += end + 1;
        next = offset + start as u64;
    }
    Ok(next)
}

/// Whether an event whose type `wanted` accepts is among the whole lines
/// of the journal's last `window` bytes: a quick look at a journal's end
/// (a terminal event, say) before a whole pass. `false` says nothing about
/// the rest of the file: a line cut by the window's start and a torn last
/// line are not looked at, and a line that is not an event makes the
/// answer `false`, as a reader from the start would stop there.
pub fn tail_has(path: &Path, window: u64, wanted: impl Fn(&str) -> bool) -> std::io::Result<bool> {
    let mut file = File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(window);
    file.seek(SeekFrom::Start(start))?;
    let mut buffer = Vec::new();
    file.take(window).read_to_end(&mut buffer)?;
    let mut whole = buffer.as_slice();
    if start > 0 {
        // The window may begin inside a line: skip to the next one.
        let Some(first_newline) = whole.iter().position(|b| *b == b'\n') else {
            return Ok(false);
        };
        whole = &whole[first_newline + 1..];
    }
    // What follows the last newline is a line still being written, or torn.
    let Some(last_newline) = whole.iter().rposition(|b| *b == b'\n') else {
        return Ok(false);
    };
    let mut found = false;
    for raw in whole[..last_newline].split(|b| *b == b'\n') {
        let Some((_, head)) = event(raw) else {
            return Ok(false);
        };
        found |= wanted(&head.event_type);
    }
    Ok(found)
}

/// A line of the journal as text and its event's head; `None` when it is
/// not an event (not UTF-8, not an event's JSON, a type no writer would
/// write — the file may have been edited, or rebuilt from a cluster).
fn event(raw: &[u8]) -> Option<(&str, Head<'_>)> {
    let line = std::str::from_utf8(raw).ok()?;
    let head: Head<'_> = serde_json::from_str(line).ok()?;
    crate::journal::is_event_type(&head.event_type).then_some((line, head))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_stored_line_whose_type_no_writer_writes_is_not_an_event() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut file = File::create(&path).expect("create");
        writeln!(file, r#"{{"seq":1,"type":"run_started","payload":{{}}}}"#).expect("write");
        // An escaped newline in the type: as an SSE `event:` it would end
        // the field and forge the rest.
        writeln!(
            file,
            r#"{{"seq":2,"type":"run_started
data: forged","payload":{{}}}}"#
        )
        .expect("write");
        writeln!(file, r#"{{"seq":3,"type":"Run-Started","payload":{{}}}}"#).expect("write");
        let read = read_from(&path, 0).expect("read");
        assert_eq!(read.lines.len(), 1, "the read stops at the forged line");
        assert_eq!(read.lines[0].event_type, "run_started");
        assert!(!tail_has(&path, 1 << 20, |_| true).expect("tail"));
    }

    #[test]
    fn whole_lines_only_and_a_torn_tail_stops_the_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut file = File::create(&path).expect("create");
        writeln!(file, r#"{{"seq":1,"type":"run_started","payload":{{}}}}"#).expect("write");
        write!(file, r#"{{"seq":2,"type":"run_comp"#).expect("write");
        let read = read_from(&path, 0).expect("read");
        assert_eq!(read.lines.len(), 1);
        assert_eq!(read.lines[0].seq, 1);
        writeln!(file, r#"leted","payload":{{}}}}"#).expect("write");
        let next = read_from(&path, read.offset).expect("read");
        assert_eq!(next.lines.len(), 1);
        assert_eq!(next.lines[0].event_type, "run_completed");
        assert_eq!(read_from(&path, next.offset).expect("read").lines.len(), 0);
        // The counting pass sees the same events and stops at the same place.
        let mut seen = Vec::new();
        let end =
            scan_types(&path, 0, |seq, kind| seen.push((seq, kind.to_owned()))).expect("scan");
        assert_eq!(end, next.offset);
        assert_eq!(
            seen,
            vec![
                (1, "run_started".to_owned()),
                (2, "run_completed".to_owned())
            ]
        );
    }

    #[test]
    fn the_tail_has_a_wanted_event_only_in_whole_event_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let line = |seq: u64, kind: &str| {
            format!(
                r#"{{"seq":{seq},"type":"{kind}","payload":{{"pad":"{}"}}}}"#,
                "x".repeat(100)
            )
        };
        let ended = |window| tail_has(&path, window, |kind| kind == "run_completed").expect("tail");
        let mut text = String::new();
        for (seq, kind) in [
            (1, "run_started"),
            (2, "tool_call_completed"),
            (3, "run_completed"),
        ] {
            text.push_str(&line(seq, kind));
            text.push('\n');
        }
        std::fs::write(&path, &text).expect("write");
        assert!(ended(64 * 1024));
        // A window cutting into the last line sees no whole line.
        assert!(!ended(50));
        // Events after the end (a direct call) still leave it in view.
        text.push_str(&format!(
            "{}\n{}\n",
            line(4, "run_resumed"),
            line(5, "tool_call_completed")
        ));
        std::fs::write(&path, &text).expect("write");
        assert!(ended(64 * 1024));
        // Out of the window: not seen (the caller reads the whole file).
        assert!(!ended(2 * line(5, "tool_call_completed").len() as u64 + 2));
        // A torn last line is not an event yet.
        std::fs::write(
            &path,
            format!("{}\n{}", line(1, "run_started"), line(2, "run_completed")),
        )
        .expect("write");
        assert!(!ended(64 * 1024));
        // A line that is not an event: a reader from the start stops there.
        std::fs::write(&path, format!("not json\n{}\n", line(2, "run_completed"))).expect("write");
        assert!(!ended(64 * 1024));
    }

    #[test]
    fn each_event_gives_the_wanted_events_in_order_until_told_to_stop() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("events.jsonl");
        let mut file = File::create(&path).expect("create");
        for (seq, kind) in [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "a")] {
            writeln!(file, r#"{{"seq":{seq},"type":"{kind}","payload":{{}}}}"#).expect("write");
        }
        // A torn last line: not read.
        write!(file, r#"{{"seq":6,"type":"a""#).expect("write");
        let mut seen = Vec::new();
        each_event(
            &path,
            |kind| kind != "b",
            |kind, event| {
                seen.push((kind.to_owned(), event["seq"].as_u64().unwrap_or(0)));
                if kind == "c" {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
        .expect("read");
        assert_eq!(
            seen,
            vec![
                ("a".to_owned(), 1),
                ("a".to_owned(), 3),
                ("c".to_owned(), 4)
            ]
        );
    }
}
