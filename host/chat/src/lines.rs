//! Splitting a chat file into lines without losing a byte, and a small
//! scanner that finds the members of an (already validated) JSON object so a
//! rewrite can splice one value and keep every other byte.

use std::ops::Range;

/// One line of a file: `start..end` is its content (without `\n` or `\r\n`),
/// `end..next` its terminator (empty for a last line without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LineSpan {
    pub start: usize,
    pub end: usize,
    pub next: usize,
}

impl LineSpan {
    pub fn content(self) -> Range<usize> {
        self.start..self.end
    }

    pub fn terminator(self) -> Range<usize> {
        self.end..self.next
    }
}

/// Every line of `bytes`. A final `\n` ends the last line (it does not start
/// an empty one); `\r\n` counts as one terminator.
pub(crate) fn split_lines(bytes: &[u8]) -> Vec<LineSpan> {
    let mut lines = Vec::with_capacity(bytes.len() / 256 + 1);
    let mut start = 0;
    while start < bytes.len() {
        match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(offset) => {
                let newline = start + offset;
                let end = if newline > start && bytes[newline - 1] == b'\r' {
                    newline - 1
                } else {
                    newline
                };
                lines.push(LineSpan {
                    start,
                    end,
                    next: newline + 1,
                });
                start = newline + 1;
            }
            None => {
                lines.push(LineSpan {
                    start,
                    end: bytes.len(),
                    next: bytes.len(),
                });
                start = bytes.len();
            }
        }
    }
    lines
}

/// Only JSON whitespace (a stray `\r` included).
pub(crate) fn is_blank(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// The UTF-8 byte order mark some editors put at the start of a file.
pub(crate) const BOM: &str = "\u{feff}";

/// One member of a JSON object: the byte ranges of its key (with the quotes)
/// and of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// The members of the JSON object in `text[range]`, in file order. Meant for
/// text serde_json has already accepted: anything unexpected gives `None`.
pub(crate) fn object_members(text: &str, range: Range<usize>) -> Option<Vec<Member>> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, range.start);
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    pos = skip_ws(bytes, pos + 1);
    let mut members = Vec::new();
    if bytes.get(pos) == Some(&b'}') {
        return Some(members);
    }
    loop {
        if bytes.get(pos) != Some(&b'"') {
            return None;
        }
        let key_end = scan_string(bytes, pos)?;
        let key = pos..key_end;
        pos = skip_ws(bytes, key_end);
        if bytes.get(pos) != Some(&b':') {
            return None;
        }
        let value_start = skip_ws(bytes, pos + 1);
        let value_end = scan_value(bytes, value_start)?;
        members.push(Member {
            key,
            value: value_start..value_end,
        });
        pos = skip_ws(bytes, value_end);
        match bytes.get(pos) {
            Some(b',') => pos = skip_ws(bytes, pos + 1),
            Some(b'}') if pos < range.end => return Some(members),
            _ => return None,
        }
    }
}

/// The elements of the JSON array in `text[range]`, in order.
pub(crate) fn array_elements(text: &str, range: Range<usize>) -> Option<Vec<Range<usize>>> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, range.start);
    if bytes.get(pos) != Some(&b'[') {
        return None;
    }
    pos = skip_ws(bytes, pos + 1);
    let mut elements = Vec::new();
    if bytes.get(pos) == Some(&b']') {
        return Some(elements);
    }
    loop {
        let end = scan_value(bytes, pos)?;
        elements.push(pos..end);
        pos = skip_ws(bytes, end);
        match bytes.get(pos) {
            Some(b',') => pos = skip_ws(bytes, pos + 1),
            Some(b']') if pos < range.end => return Some(elements),
            _ => return None,
        }
    }
}

/// The decoded key of `member` (keys may contain escapes).
pub(crate) fn member_key(text: &str, member: &Member) -> Option<String> {
    serde_json::from_str(&text[member.key.clone()]).ok()
}

fn skip_ws(bytes: &[u8], mut pos: usize) -> usize {
    while matches!(bytes.get(pos), Some(b' ' | b'\t' | b'\r' | b'\n')) {
        pos += 1;
    }
    pos
}

/// `bytes[start]` is `"`; the index just past the closing quote.
fn scan_string(bytes: &[u8], start: usize) -> Option<usize> {
    let mut pos = start + 1;
    loop {
        match bytes.get(pos)? {
            b'"' => return Some(pos + 1),
            b'\\' => pos += 2,
            _ => pos += 1,
        }
    }
}

/// The index just past the value starting at `start`.
fn scan_value(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => scan_string(bytes, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut pos = start;
            loop {
                match bytes.get(pos)? {
                    b'"' => {
                        pos = scan_string(bytes, pos)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(pos + 1);
                        }
                    }
                    _ => {}
                }
                pos += 1;
            }
        }
        _ => {
            let mut pos = start;
            while let Some(b) = bytes.get(pos) {
                if matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                    break;
                }
                pos += 1;
            }
            (pos > start).then_some(pos)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_every_byte() {
        let text = b"a\r\nb\n\nc";
        let lines = split_lines(text);
        assert_eq!(lines.len(), 4);
        assert_eq!(&text[lines[0].content()], b"a");
        assert_eq!(&text[lines[0].terminator()], b"\r\n");
        assert_eq!(&text[lines[2].content()], b"");
        assert_eq!(&text[lines[3].content()], b"c");
        assert_eq!(&text[lines[3].terminator()], b"");
        assert_eq!(split_lines(b"x\n").len(), 1);
        assert!(split_lines(b"").is_empty());
    }

    #[test]
    fn members_and_elements_are_found_in_order() {
        let text = r#"{"a" : 1, "b":{"x":"}]\"["}, "c":[true, null ,"d\\"], "e":-1.5e3}"#;
        let members = object_members(text, 0..text.len()).unwrap();
        let keys: Vec<_> = members
            .iter()
            .map(|m| member_key(text, m).unwrap())
            .collect();
        assert_eq!(keys, ["a", "b", "c", "e"]);
        assert_eq!(&text[members[1].value.clone()], r#"{"x":"}]\"["}"#);
        assert_eq!(&text[members[3].value.clone()], "-1.5e3");
        let elements = array_elements(text, members[2].value.clone()).unwrap();
        let elements: Vec<_> = elements.into_iter().map(|r| &text[r]).collect();
        assert_eq!(elements, ["true", "null", r#""d\\""#]);
        assert_eq!(object_members("{}", 0..2).unwrap(), vec![]);
        assert_eq!(array_elements("[ ]", 0..3).unwrap(), vec![]);
        assert!(object_members("[1]", 0..3).is_none());
    }
}
