//! Reading a run's journal (`events.jsonl`) while its run may be writing
//! it: whole lines from a byte offset on, in bounded chunks, without the
//! writer's lock. A line still being written (no newline yet) waits for
//! the next read. Used by whoever follows a journal from outside the run:
//! the service's event streams and run states, the calls waiting for
//! approval.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
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
struct Head {
    seq: u64,
    #[serde(rename = "type")]
    event_type: String,
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
    let mut found = Chunk {
        lines: Vec::new(),
        offset,
    };
    let mut start = 0;
    while let Some(end) = buffer[start..].iter().position(|b| *b == b'\n') {
        let raw = &buffer[start..start + end];
        let Ok(head) = serde_json::from_slice::<Head>(raw) else {
            break;
        };
        let Ok(json) = String::from_utf8(raw.to_vec()) else {
            break;
        };
        found.lines.push(Line {
            seq: head.seq,
            event_type: head.event_type,
            json,
        });
        start += end + 1;
        found.offset = offset + start as u64;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
    }
}
