//! Finding and replacing `old_string` for `workspace.apply_patch` with work
//! linear in the text and the strings, and no allocation beyond the result.
//!
//! The model controls both strings, and this runs inside a synchronous host
//! import that neither fuel nor epochs can interrupt, so every search is a
//! `memmem` (worst case linear), matches are counted before anything is
//! built, and the result's length is checked against the file cap before
//! it is allocated. Every byte examined is charged to the call's
//! [`WorkMeter`].
//!
//! The rules are the ones the tool has always had: overlapping occurrences
//! make `old_string` ambiguous (`aa` in `aaa` is not unique); `replace_all`
//! replaces the non-overlapping occurrences from the left, like
//! `str::replace`.

use memchr::memmem::Finder;
use toolhost_core::{DeadlinePassed, WorkMeter};

/// Where `old_string` occurs, as far as a single replacement cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Occurrence {
    None,
    /// Exactly once, at this byte offset.
    Unique(usize),
    /// At least twice (the two may overlap): byte offsets of the first two.
    Several {
        first: usize,
        second: usize,
    },
}

/// Decide with at most two linear searches whether `old` occurs in `text`
/// once, never, or more than once (overlapping occurrences included).
pub(crate) fn find_unique(
    text: &str,
    old: &str,
    meter: &WorkMeter,
) -> Result<Occurrence, DeadlinePassed> {
    let finder = Finder::new(old.as_bytes());
    let bytes = text.as_bytes();
    let found = finder.find(bytes);
    meter.charge(scanned(bytes.len(), found, old.len()))?;
    let Some(first) = found else {
        return Ok(Occurrence::None);
    };
    // A valid UTF-8 needle only matches at a character boundary, so the
    // next match, overlapping or not, starts after `first`.
    let rest = &bytes[first + 1..];
    let again = finder.find(rest);
    meter.charge(scanned(rest.len(), again, old.len()))?;
    Ok(match again {
        None => Occurrence::Unique(first),
        Some(offset) => Occurrence::Several {
            first,
            second: first + 1 + offset,
        },
    })
}

/// The non-overlapping occurrences of `old` from the left (what
/// `replace_all` replaces), counted in one linear pass.
pub(crate) fn count(text: &str, old: &str, meter: &WorkMeter) -> Result<u64, DeadlinePassed> {
    let mut count = 0_u64;
    let mut from = 0;
    for at in Finder::new(old.as_bytes()).find_iter(text.as_bytes()) {
        meter.charge((at + old.len() - from) as u64)?;
        from = at + old.len();
        count += 1;
    }
    meter.charge((text.len() - from) as u64)?;
    Ok(count)
}

/// The length of `text` after `count` replacements of `old` by `new`, or
/// `None` when it does not fit in a `u64` (certainly over any file cap).
pub(crate) fn replaced_len(
    text_len: usize,
    count: u64,
    old_len: usize,
    new_len: usize,
) -> Option<u64> {
    let removed = count.checked_mul(old_len as u64)?;
    let added = count.checked_mul(new_len as u64)?;
    (text_len as u64).checked_sub(removed)?.checked_add(added)
}

/// Replace the non-overlapping occurrences of `old` (left to right) by
/// `new` into a string of `capacity` bytes (the caller checked
/// [`replaced_len`] against the cap).
pub(crate) fn replace_all(
    text: &str,
    old: &str,
    new: &str,
    capacity: usize,
    meter: &WorkMeter,
) -> Result<String, DeadlinePassed> {
    let mut out = String::with_capacity(capacity);
    let mut from = 0;
    for at in Finder::new(old.as_bytes()).find_iter(text.as_bytes()) {
        meter.charge((at + old.len() - from + new.len()) as u64)?;
        out.push_str(&text[from..at]);
        out.push_str(new);
        from = at + old.len();
    }
    meter.charge((text.len() - from) as u64)?;
    out.push_str(&text[from..]);
    Ok(out)
}

/// `text` with the `old_len` bytes at `at` replaced by `new`.
pub(crate) fn replace_at(text: &str, at: usize, old_len: usize, new: &str) -> String {
    let mut out = String::with_capacity(text.len() - old_len + new.len());
    out.push_str(&text[..at]);
    out.push_str(new);
    out.push_str(&text[at + old_len..]);
    out
}

/// Bytes a search examined: up to the end of its match, or all of them.
fn scanned(len: usize, found: Option<usize>, needle: usize) -> u64 {
    found.map_or(len, |at| (at + needle).min(len)) as u64
}

/// The 1-based line of byte offset `at` (for messages).
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..at]).count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unique(text: &str, old: &str) -> Occurrence {
        find_unique(text, old, &WorkMeter::unbounded()).unwrap()
    }

    #[test]
    fn overlapping_occurrences_are_several() {
        assert_eq!(
            unique("aaa", "aa"),
            Occurrence::Several {
                first: 0,
                second: 1
            }
        );
        assert_eq!(
            unique("abcabc", "abc"),
            Occurrence::Several {
                first: 0,
                second: 3
            }
        );
        assert_eq!(
            unique("日本日本", "日本"),
            Occurrence::Several {
                first: 0,
                second: 6
            }
        );
        assert_eq!(unique("日本", "x"), Occurrence::None);
        assert_eq!(unique("x", "x"), Occurrence::Unique(0));
        assert_eq!(unique("ab日本", "本"), Occurrence::Unique(5));
    }

    #[test]
    fn counts_and_replaces_like_str_replace() {
        let meter = WorkMeter::unbounded();
        for (text, old, new) in [
            ("aaa", "aa", "b"),
            ("abcabc", "abc", ""),
            ("日本日本語", "日本", "にほん"),
            ("none here", "zz", "y"),
        ] {
            let k = count(text, old, &meter).unwrap();
            assert_eq!(k, text.matches(old).count() as u64, "{text} / {old}");
            let len = replaced_len(text.len(), k, old.len(), new.len()).unwrap();
            let replaced = replace_all(text, old, new, len as usize, &meter).unwrap();
            assert_eq!(replaced, text.replace(old, new));
            assert_eq!(replaced.len() as u64, len);
        }
        assert_eq!(replace_at("a-b-c", 1, 1, "+"), "a+b-c");
    }

    #[test]
    fn lengths_that_overflow_are_none() {
        assert_eq!(replaced_len(10, u64::MAX, 1, 2), None);
        assert_eq!(replaced_len(10, 2, 1, 3), Some(14));
        assert_eq!(replaced_len(10, 2, 3, 0), Some(4));
    }

    /// The attack of the review: a 100k-char `old_string` against a 4 MB
    /// file of the same byte. The old code restarted a search one character
    /// after each of the ~4M matches (~4·10¹¹ byte comparisons); now it is
    /// two linear searches.
    #[test]
    fn a_long_self_overlapping_old_string_costs_linear_work() {
        let text = "a".repeat(4 * 1024 * 1024);
        let old = "a".repeat(100_000);
        let meter = WorkMeter::unbounded();
        let found = find_unique(&text, &old, &meter).unwrap();
        assert_eq!(
            found,
            Occurrence::Several {
                first: 0,
                second: 1
            }
        );
        assert!(
            meter.spent() <= 2 * (text.len() + old.len()) as u64,
            "{} units for {} + {} bytes",
            meter.spent(),
            text.len(),
            old.len()
        );
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }
}
