//! Editing one JSON line in place: members set, added or removed, array
//! elements replaced or appended, every byte not edited kept as it was (an
//! unknown field, its spacing and escapes survive a commit).
//!
//! Meant for text serde_json has already accepted (the scanners of
//! [`lines`](crate::lines) return `None` on anything unexpected).

use std::ops::Range;

use crate::lines::{Member, array_elements, member_key, object_members};

/// Edits of one text, applied together by [`Splicer::finish`].
pub(crate) struct Splicer<'a> {
    text: &'a str,
    edits: Vec<(Range<usize>, String)>,
}

impl<'a> Splicer<'a> {
    pub fn new(text: &'a str) -> Self {
        Splicer {
            text,
            edits: Vec::new(),
        }
    }

    pub fn replace(&mut self, range: Range<usize>, with: String) {
        self.edits.push((range, with));
    }

    pub fn insert(&mut self, at: usize, text: String) {
        self.edits.push((at..at, text));
    }

    /// The text with every edit applied; `Err` when two edits overlap (a
    /// bug of the caller, never of the input).
    pub fn finish(mut self) -> Result<String, String> {
        // Stable: insertions at one place keep their order, and come before
        // a replacement starting there.
        self.edits
            .sort_by_key(|(range, _)| (range.start, range.end));
        let extra: usize = self.edits.iter().map(|(_, s)| s.len()).sum();
        let mut out = String::with_capacity(self.text.len() + extra);
        let mut pos = 0;
        for (range, with) in self.edits {
            if range.start < pos || range.end > self.text.len() {
                return Err("overlapping edits of the message line".into());
            }
            out.push_str(&self.text[pos..range.start]);
            out.push_str(&with);
            pos = range.end;
        }
        out.push_str(&self.text[pos..]);
        Ok(out)
    }
}

/// A JSON object in a text: its range (braces included) and its members.
#[derive(Debug, Clone)]
pub(crate) struct Object {
    pub range: Range<usize>,
    pub members: Vec<Member>,
}

impl Object {
    pub fn parse(text: &str, range: Range<usize>) -> Option<Object> {
        let members = object_members(text, range.clone())?;
        Some(Object { range, members })
    }

    /// The last member named `key` (JavaScript's `JSON.parse` keeps the
    /// last of duplicate keys).
    pub fn get(&self, text: &str, key: &str) -> Option<&Member> {
        self.members
            .iter()
            .rev()
            .find(|m| member_key(text, m).as_deref() == Some(key))
    }

    /// The raw JSON text of member `key`'s value.
    pub fn raw<'t>(&self, text: &'t str, key: &str) -> Option<&'t str> {
        self.get(text, key).map(|m| &text[m.value.clone()])
    }

    /// Member `key`'s value when it is a JSON string.
    pub fn string(&self, text: &str, key: &str) -> Option<String> {
        self.raw(text, key)
            .and_then(|raw| serde_json::from_str::<String>(raw).ok())
    }

    /// Member `key`'s value when it is a JSON object.
    pub fn object(&self, text: &str, key: &str) -> Option<Object> {
        let member = self.get(text, key)?;
        Object::parse(text, member.value.clone())
    }

    /// The element ranges of member `key`'s value when it is an array.
    pub fn array(&self, text: &str, key: &str) -> Option<Vec<Range<usize>>> {
        array_elements(text, self.get(text, key)?.value.clone())
    }

    /// Set each of `sets` (key, raw JSON value): in place when the key is
    /// there, else added before the closing brace in the given order; and
    /// remove every member named in `removes` with its comma.
    pub fn edit(
        &self,
        splicer: &mut Splicer<'_>,
        text: &str,
        sets: &[(&str, String)],
        removes: &[&str],
    ) {
        let keys: Vec<Option<String>> = self.members.iter().map(|m| member_key(text, m)).collect();
        let removed: Vec<bool> = keys
            .iter()
            .map(|k| k.as_deref().is_some_and(|k| removes.contains(&k)))
            .collect();
        // Runs of removed members go with the comma after them, or before
        // them when they end the object: kept members stay well separated.
        let mut i = 0;
        while i < self.members.len() {
            if !removed[i] {
                i += 1;
                continue;
            }
            let first = i;
            while i < self.members.len() && removed[i] {
                i += 1;
            }
            let last = i - 1;
            let range = if let Some(next) = self.members.get(i) {
                self.members[first].key.start..next.key.start
            } else if first > 0 {
                self.members[first - 1].value.end..self.members[last].value.end
            } else {
                self.members[first].key.start..self.members[last].value.end
            };
            splicer.replace(range, String::new());
        }
        let mut kept = removed.iter().filter(|r| !**r).count();
        let mut added = String::new();
        for (key, value) in sets {
            // The last of duplicate keys is the one a reader sees.
            let found = keys
                .iter()
                .rposition(|k| k.as_deref() == Some(*key))
                .filter(|&at| !removed[at]);
            match found {
                Some(at) => splicer.replace(self.members[at].value.clone(), value.clone()),
                None => {
                    if kept > 0 {
                        added.push(',');
                    }
                    added.push_str(&json_string(key));
                    added.push(':');
                    added.push_str(value);
                    kept += 1;
                }
            }
        }
        if !added.is_empty() {
            splicer.insert(self.range.end - 1, added);
        }
    }
}

/// Append `values` (raw JSON) to the array at `range`, which has `len`
/// elements.
pub(crate) fn append_elements(
    splicer: &mut Splicer<'_>,
    range: &Range<usize>,
    len: usize,
    values: &[String],
) {
    if values.is_empty() {
        return;
    }
    let mut added = String::new();
    for (i, value) in values.iter().enumerate() {
        if len > 0 || i > 0 {
            added.push(',');
        }
        added.push_str(value);
    }
    splicer.insert(range.end - 1, added);
}

/// `text` as a JSON string, compact like `JSON.stringify`.
pub(crate) fn json_string(text: &str) -> String {
    // Serializing a string into a String cannot fail.
    serde_json::to_string(text).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edited(text: &str, sets: &[(&str, &str)], removes: &[&str]) -> String {
        let object = Object::parse(text, 0..text.len()).unwrap();
        let mut splicer = Splicer::new(text);
        let sets: Vec<(&str, String)> = sets.iter().map(|(k, v)| (*k, v.to_string())).collect();
        object.edit(&mut splicer, text, &sets, removes);
        let out = splicer.finish().unwrap();
        serde_json::from_str::<serde_json::Value>(&out).expect("still JSON");
        out
    }

    #[test]
    fn members_are_set_added_and_removed_in_place() {
        let text = r#"{"a":1, "b" : "x\u0041", "c":[1,2],"d":{}}"#;
        assert_eq!(
            edited(text, &[("b", "2"), ("e", "true"), ("f", "null")], &[]),
            r#"{"a":1, "b" : 2, "c":[1,2],"d":{},"e":true,"f":null}"#
        );
        assert_eq!(
            edited(text, &[], &["a"]),
            r#"{"b" : "x\u0041", "c":[1,2],"d":{}}"#
        );
        assert_eq!(
            edited(text, &[], &["d"]),
            r#"{"a":1, "b" : "x\u0041", "c":[1,2]}"#
        );
        assert_eq!(
            edited(text, &[], &["c", "d"]),
            r#"{"a":1, "b" : "x\u0041"}"#
        );
        assert_eq!(edited(text, &[], &["a", "b"]), r#"{"c":[1,2],"d":{}}"#);
        assert_eq!(
            edited(text, &[("x", "1")], &["a", "b", "c", "d"]),
            r#"{"x":1}"#
        );
        assert_eq!(
            edited(text, &[("c", "0")], &["b", "d"]),
            r#"{"a":1, "c":0}"#
        );
        assert_eq!(edited("{}", &[("k", "\"v\"")], &["z"]), r#"{"k":"v"}"#);
        // Duplicate keys: the last one is the one set.
        assert_eq!(
            edited(r#"{"a":1,"a":2}"#, &[("a", "3")], &[]),
            r#"{"a":1,"a":3}"#
        );
    }

    #[test]
    fn elements_are_appended() {
        let text = r#"{"s":["a"],"e":[]}"#;
        let object = Object::parse(text, 0..text.len()).unwrap();
        let mut splicer = Splicer::new(text);
        let s = object.get(text, "s").unwrap().value.clone();
        let e = object.get(text, "e").unwrap().value.clone();
        append_elements(&mut splicer, &s, 1, &["\"b\"".into(), "null".into()]);
        append_elements(&mut splicer, &e, 0, &["1".into(), "2".into()]);
        assert_eq!(
            splicer.finish().unwrap(),
            r#"{"s":["a","b",null],"e":[1,2]}"#
        );
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let mut splicer = Splicer::new("abcdef");
        splicer.replace(1..4, "x".into());
        splicer.replace(2..5, "y".into());
        assert!(splicer.finish().is_err());
    }
}
