//! `chat.search`: the query's token expansion, per-message scoring and
//! snippets. Scanning the chat (newest first, `scan_limit`, index range, role
//! filter, the best `limit` kept) is the tool's; [`compare_chat_hits`] gives
//! the final order.
//!
//! - **Normalization** as in [`search`](crate::search::normalize_query), but
//!   the words are not capped at 64 before expansion.
//! - **Expansion** (CJK-friendly without a tokenizer):
//!   - exactly one word: kept if it has ≤ 2 characters; otherwise its
//!     character bigrams, sampled every ⌈(chars − 1) / 32⌉-th, at most 32,
//!     deduplicated, preceded by the whole word if it has ≤ 8 characters (and
//!     so fewer than 32 bigrams);
//!   - several words: a word with no ASCII letter or digit and ≥ 8 characters
//!     becomes its bigrams sampled every ⌈(chars − 1) / 8⌉-th (at most 8);
//!     every other word stays whole;
//!   - then deduplicated, and if more than 64 remain every ⌈n / 64⌉-th is kept.
//! - A **literal** query (no word, e.g. `——`, `...`) is one token searched
//!   verbatim; it is not split into bigrams.
//! - **Scoring** per message: the weights and formula of
//!   [`search`](crate::search) over the folded message text; the earliest
//!   match position is reported in characters of the original text.
//! - **Batches** ([`PreparedChatSearch::score_packed`]): the same scores for
//!   a packed batch of messages at once, each token searched once over the
//!   batch's fold; what `chat.search` uses when every message is scored.
//! - **Snippet** ([`chat_snippet`]): the whole text if it has ≤ 200
//!   characters; else 200 characters starting 40 before the first match, with
//!   `...` on each side that was cut (fewer than 200 when the text ends
//!   sooner); without a match position, `...` and the last 200 characters.

use std::cmp::Ordering;
use std::ops::Range;

use crate::lanes::lower_ascii;
use crate::search::{Expansion, PreparedQuery, fold_case_into, folded, folded_len};

/// Most tokens after expansion.
pub const MAX_QUERY_TOKENS: usize = 64;
/// Most bigrams of a single-word query.
pub const MAX_SINGLE_WORD_BIGRAMS: usize = 32;
/// A single word of at most this many characters is also searched whole.
pub const MAX_WHOLE_WORD_CHARS: usize = 8;
/// In a several-word query, a word without ASCII letters or digits and with
/// at least this many characters is split into bigrams.
pub const MIN_SPLIT_WORD_CHARS: usize = 8;
/// Most bigrams of one such word.
pub const MAX_WORD_BIGRAMS: usize = 8;
/// A message longer than this (in characters) is cut for its snippet.
pub const SNIPPET_MAX_CHARS: usize = 200;
/// Characters kept before the first match in a cut snippet.
pub const SNIPPET_CONTEXT_BEFORE: usize = 40;

/// The tokens of `chat.search`: whole words plus character bigrams (see the
/// [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatRules;

impl Expansion for ChatRules {
    fn expand(words: &str) -> Vec<String> {
        expand(words)
    }
}

/// A `chat.search` query, prepared once and scored against many messages.
pub type PreparedChatSearch = PreparedQuery<ChatRules>;

impl PreparedChatSearch {
    /// The message's score in `0.0..=1.0` (0 when no token matches or the
    /// message is blank) and the position, in characters of `text`, of the
    /// earliest match, for [`chat_snippet`].
    pub fn score_message(&self, text: &str) -> (f64, Option<usize>) {
        let (score, first) = self.score_message_in(text, &mut String::new());
        (score, first.map(|first| first.char_index(text)))
    }

    /// [`score_message`](Self::score_message) folding into `scratch`, so a
    /// scan over many messages reuses one buffer. The match position stays
    /// in folded bytes until [`FirstMatch::char_index`] asks for it: a scan
    /// keeps few of the messages it scores, and counting characters up to
    /// the match costs as much as finding it.
    pub fn score_message_in(&self, text: &str, scratch: &mut String) -> (f64, Option<FirstMatch>) {
        if text.trim().is_empty() {
            return (0.0, None);
        }
        let (score, first_byte) = self.tokens.score(folded(text, scratch));
        (
            score,
            first_byte.map(|folded_byte| FirstMatch { folded_byte }),
        )
    }
}

/// Buffers [`PreparedChatSearch::score_packed`] reuses from batch to batch.
#[derive(Debug, Default)]
pub struct BatchScratch {
    /// The fold of the scored messages, one after another (UTF-8).
    folded: Vec<u8>,
    /// Per message, where its fold ends in `folded`.
    ends: Vec<usize>,
    masks: Vec<u64>,
    firsts: Vec<usize>,
}

impl PreparedChatSearch {
    /// Scores messages `range` of a packed batch (`texts` concatenated,
    /// message `i` ending at byte `ends[i]`, as
    /// [`PackedTexts`](crate::pack::PackedTexts) lays them out) and calls
    /// `hit(i, score, first)` for each one that matches, last message first
    /// (a scan goes newest first). The result is exactly that of
    /// [`score_message_in`](Self::score_message_in) on each message, but the
    /// messages are folded into one buffer (an ASCII batch in one pass) and
    /// each token's searcher runs over the whole of it, jumping to the next
    /// message after a match: one long SIMD scan per token instead of one
    /// short scan per message and token.
    ///
    /// `false`, with no call to `hit`, when `ends` does not describe `texts`
    /// (not ascending, past its end or off a character boundary) or `range`
    /// is not within `ends`.
    pub fn score_packed(
        &self,
        texts: &str,
        ends: &[u32],
        range: Range<usize>,
        scratch: &mut BatchScratch,
        mut hit: impl FnMut(usize, f64, FirstMatch),
    ) -> bool {
        let Some(ends) = ends.get(..range.end) else {
            return false;
        };
        let ends_ok = ends.windows(2).all(|pair| pair[0] <= pair[1])
            && ends.iter().all(|&end| texts.is_char_boundary(end as usize));
        if !ends_ok || range.start > range.end {
            return false;
        }
        let start_of = |i: usize| i.checked_sub(1).map_or(0, |before| ends[before] as usize);
        let BatchScratch {
            folded,
            ends: folded_ends,
            masks,
            firsts,
        } = scratch;
        folded_ends.clear();
        let base = start_of(range.start);
        let span_end = match range.end {
            end if end > range.start => ends[end - 1] as usize,
            _ => base,
        };
        let span = &texts.as_bytes()[base..span_end];
        // The buffer keeps its length from batch to batch, so only growth
        // is zero-filled before the lowering overwrites it.
        folded.resize(span.len(), 0);
        if lower_ascii(span, folded) {
            // Folding ASCII keeps every length: the ends carry over.
            folded_ends.extend(ends[range.clone()].iter().map(|&end| end as usize - base));
        } else {
            folded.clear();
            let mut one = String::new();
            for i in range.clone() {
                let text = &texts[start_of(i)..ends[i] as usize];
                // A blank message scores 0 (as `score_message_in`): fold nothing.
                if !text.trim().is_empty() {
                    one.clear();
                    fold_case_into(text, &mut one);
                    folded.extend_from_slice(one.as_bytes());
                }
                folded_ends.push(folded.len());
            }
        }
        masks.clear();
        masks.resize(folded_ends.len(), 0);
        firsts.clear();
        firsts.resize(folded_ends.len(), usize::MAX);
        let bytes = folded.as_slice();
        for (bit, needle) in self.tokens.iter().map(str::len).enumerate() {
            let mut message = 0;
            self.tokens.for_each_match(bit, bytes, |at| {
                while folded_ends[message] <= at {
                    message += 1;
                }
                let end = folded_ends[message];
                let start = message
                    .checked_sub(1)
                    .map_or(0, |before| folded_ends[before]);
                // An occurrence running into the next message is no match,
                // and neither could be a later one starting in this message.
                if at + needle <= end {
                    masks[message] |= 1 << bit;
                    firsts[message] = firsts[message].min(at - start);
                }
                Some(end)
            });
        }
        for (offset, (&mask, &first)) in masks.iter().zip(firsts.iter()).enumerate().rev() {
            if mask != 0 {
                hit(
                    range.start + offset,
                    self.tokens.score_mask(mask),
                    FirstMatch { folded_byte: first },
                );
            }
        }
        true
    }
}

/// Where a message's earliest match starts, as
/// [`PreparedChatSearch::score_message_in`] found it in the folded text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstMatch {
    folded_byte: usize,
}

impl FirstMatch {
    /// The match's position in characters of `text`, the message it was
    /// found in.
    pub fn char_index(self, text: &str) -> usize {
        original_char_index(text, self.folded_byte)
    }
}

/// The character of `text` whose fold contains byte `folded_byte` of the
/// folded text.
fn original_char_index(text: &str, folded_byte: usize) -> usize {
    let mut end = 0_usize;
    let mut count = 0_usize;
    for c in text.chars() {
        end += folded_len(c);
        if end > folded_byte {
            return count;
        }
        count += 1;
    }
    count
}

/// The token expansion of normalized words (single spaces between them).
fn expand(words: &str) -> Vec<String> {
    let mut expanded: Vec<String> = Vec::new();
    let mut words_iter = words.split(' ');
    let first = words_iter.next().unwrap_or_default();
    let several = words_iter.next().is_some();
    if !several {
        let chars = first.chars().count();
        if chars <= 2 {
            return vec![first.to_owned()];
        }
        if chars <= MAX_WHOLE_WORD_CHARS {
            expanded.push(first.to_owned());
        }
        push_bigrams(first, MAX_SINGLE_WORD_BIGRAMS, &mut expanded);
    } else {
        for word in words.split(' ') {
            let splits = word.chars().count() >= MIN_SPLIT_WORD_CHARS
                && !word.chars().any(|c| c.is_ascii_alphanumeric());
            if splits {
                push_bigrams(word, MAX_WORD_BIGRAMS, &mut expanded);
            } else {
                expanded.push(word.to_owned());
            }
        }
    }

    let mut unique: Vec<String> = Vec::with_capacity(expanded.len());
    for token in expanded {
        if !token.is_empty() && !unique.contains(&token) {
            unique.push(token);
        }
    }
    if unique.len() > MAX_QUERY_TOKENS {
        let step = unique.len().div_ceil(MAX_QUERY_TOKENS);
        unique = unique
            .into_iter()
            .step_by(step)
            .take(MAX_QUERY_TOKENS)
            .collect();
    }
    unique
}

/// Appends the character bigrams of `word` sampled every
/// ⌈(chars − 1) / limit⌉-th (so at most `limit`), skipping ones already
/// produced for this word; a one-character word is its own token.
fn push_bigrams(word: &str, limit: usize, out: &mut Vec<String>) {
    let chars: Vec<char> = word.chars().collect();
    if chars.len() <= 1 {
        out.push(word.to_owned());
        return;
    }
    let pairs = chars.len() - 1;
    let step = pairs.div_ceil(limit.max(1));
    let first_new = out.len();
    for index in (0..pairs).step_by(step) {
        let mut bigram = String::with_capacity(8);
        bigram.push(chars[index]);
        bigram.push(chars[index + 1]);
        if !out[first_new..].contains(&bigram) {
            out.push(bigram);
        }
    }
}

/// The snippet of a matching message (see the [module documentation](self)).
/// `first_match` is a character position, as [`PreparedChatSearch::score_message`]
/// returns it.
pub fn chat_snippet(text: &str, first_match: Option<usize>) -> String {
    let total = text.chars().count();
    if total <= SNIPPET_MAX_CHARS {
        return text.to_owned();
    }
    match first_match {
        Some(position) => {
            let start = position.saturating_sub(SNIPPET_CONTEXT_BEFORE).min(total);
            let end = (start + SNIPPET_MAX_CHARS).min(total);
            let rest = &text[byte_of_char(text, start)..];
            let kept = &rest[..byte_of_char(rest, end - start)];
            let mut out = String::with_capacity(kept.len() + 6);
            if start > 0 {
                out.push_str("...");
            }
            out.push_str(kept);
            if end < total {
                out.push_str("...");
            }
            out
        }
        None => {
            let tail = &text[byte_of_char(text, total - SNIPPET_MAX_CHARS)..];
            let mut out = String::with_capacity(tail.len() + 3);
            out.push_str("...");
            out.push_str(tail);
            out
        }
    }
}

/// Byte offset of character `n` of `text` (its length when `n` is past the end).
fn byte_of_char(text: &str, n: usize) -> usize {
    text.char_indices()
        .nth(n)
        .map_or(text.len(), |(byte, _)| byte)
}

/// The final order of chat hits given as `(score, message index)`: score
/// descending, then the newer (higher) index first.
pub fn compare_chat_hits(a: (f64, usize), b: (f64, usize)) -> Ordering {
    b.0.total_cmp(&a.0).then(b.1.cmp(&a.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(query: &str) -> Vec<String> {
        PreparedChatSearch::new(query)
            .expect("query is not blank")
            .tokens()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn scoring_a_batch_at_once_equals_scoring_each_message() {
        let messages = [
            "The Silver river bends",
            "",
            "   ",
            "ends with sil",
            "ver starts this one, then SILVER",
            "no match at all",
            "riverriver",
            "LANTERN",
            "la",
            "nt",
            "İstanbul ΣΟΦΟΣ straße lantern",
            "天气很好，今天天气",
        ];
        let mut pack = crate::pack::PackedTexts::default();
        for text in messages {
            pack.push(text, "");
        }
        let ascii = 0..10;
        let all = 0..messages.len();
        let mut scratch = BatchScratch::default();
        for query in [
            "silver river",
            "lantern",
            "天气",
            "——",
            "i\u{307}stanbul σοφος",
            "ver",
            "r",
        ] {
            let prepared = PreparedChatSearch::new(query).expect("not blank");
            for range in [all.clone(), ascii.clone(), 3..5, 4..11, 2..2] {
                let mut expected = Vec::new();
                for i in range.clone() {
                    let (score, first) = prepared.score_message_in(messages[i], &mut String::new());
                    if score > 0.0 {
                        expected.push((i, score, first.map(|f| f.char_index(messages[i]))));
                    }
                }
                let mut got = Vec::new();
                let consistent = prepared.score_packed(
                    &pack.texts,
                    &pack.text_ends,
                    range.clone(),
                    &mut scratch,
                    |i, score, first| got.push((i, score, Some(first.char_index(messages[i])))),
                );
                assert!(consistent);
                expected.reverse(); // hits come last message first
                assert_eq!(got, expected, "{query:?} over {range:?}");
            }
        }
        // A pack whose ends do not describe its texts is refused.
        let prepared = PreparedChatSearch::new("silver").expect("not blank");
        let mut never = |_: usize, _: f64, _: FirstMatch| panic!("scored an inconsistent pack");
        assert!(!prepared.score_packed("abc", &[2, 1], 0..2, &mut scratch, &mut never));
        assert!(!prepared.score_packed("abc", &[4], 0..1, &mut scratch, &mut never));
        assert!(!prepared.score_packed("é", &[1], 0..1, &mut scratch, &mut never));
        assert!(!prepared.score_packed("abc", &[3], 0..2, &mut scratch, &mut never));
    }

    fn chars(from: u32, n: u32) -> String {
        (from..from + n)
            .map(|cp| char::from_u32(cp).unwrap())
            .collect()
    }

    #[test]
    fn blank_queries_are_rejected() {
        assert!(PreparedChatSearch::new("").is_none());
        assert!(PreparedChatSearch::new(" \n ").is_none());
    }

    #[test]
    fn a_short_single_word_is_kept() {
        assert_eq!(tokens("hi"), ["hi"]);
        assert_eq!(tokens("Hi!"), ["hi"]);
        assert_eq!(tokens("a"), ["a"]);
        assert_eq!(tokens("天气"), ["天气"]);
    }

    #[test]
    fn a_cjk_query_becomes_bigrams_after_the_whole_word() {
        assert_eq!(
            tokens("今天天气很好"),
            ["今天天气很好", "今天", "天天", "天气", "气很", "很好"]
        );
    }

    #[test]
    fn a_short_ascii_word_is_searched_whole_and_as_bigrams() {
        assert_eq!(
            tokens("Lantern"),
            ["lantern", "la", "an", "nt", "te", "er", "rn"]
        );
        // Repeated bigrams are dropped.
        assert_eq!(tokens("banana"), ["banana", "ba", "an", "na"]);
        assert_eq!(tokens("abc"), ["abc", "ab", "bc"]);
        // 8 characters is still whole.
        assert_eq!(tokens("eightchr").len(), 8);
        assert_eq!(tokens("eightchr")[0], "eightchr");
    }

    #[test]
    fn a_long_single_word_is_only_bigrams() {
        assert_eq!(
            tokens("encyclopedia"),
            [
                "en", "nc", "cy", "yc", "cl", "lo", "op", "pe", "ed", "di", "ia"
            ]
        );
    }

    #[test]
    fn bigrams_of_a_single_word_are_sampled_to_at_most_32() {
        // 33 characters: 32 bigrams, every one.
        let word = chars(0x4E00, 33);
        let got = tokens(&word);
        assert_eq!(got.len(), 32);
        assert_eq!(got[31], chars(0x4E00 + 31, 2));
        // 34 characters: 33 bigrams, step 2, so 17.
        let got = tokens(&chars(0x4E00, 34));
        assert_eq!(got.len(), 17);
        assert_eq!(got[16], chars(0x4E00 + 32, 2));
        // 41 characters: 40 bigrams, step 2, so 20.
        let got = tokens(&chars(0x4E00, 41));
        assert_eq!(got.len(), 20);
        assert_eq!(got[0], chars(0x4E00, 2));
        assert_eq!(got[1], chars(0x4E00 + 2, 2));
        assert_eq!(got[19], chars(0x4E00 + 38, 2));
    }

    #[test]
    fn several_words_split_only_long_words_without_ascii() {
        // 7 characters: stays whole.
        assert_eq!(tokens("hello 今天天气很好吗"), ["hello", "今天天气很好吗"]);
        // 9 characters: 8 bigrams, step 1.
        assert_eq!(
            tokens("hello 今天天气很好非常好"),
            [
                "hello", "今天", "天天", "天气", "气很", "很好", "好非", "非常", "常好"
            ]
        );
        // 10 characters: 9 bigrams, step 2, so 5.
        assert_eq!(
            tokens("今天天气很好非常好啊 hello"),
            ["今天", "天气", "很好", "非常", "好啊", "hello"]
        );
        // Long ASCII words, and words with any ASCII letter or digit, stay whole.
        assert_eq!(
            tokens("encyclopedia britannica"),
            ["encyclopedia", "britannica"]
        );
        assert_eq!(tokens("v2今天天气很好呢 x"), ["v2今天天气很好呢", "x"]);
        // Bigrams shared between words are deduplicated.
        assert_eq!(
            tokens("今天 今天天气很好非常好")
                .iter()
                .filter(|t| *t == "今天")
                .count(),
            1
        );
    }

    #[test]
    fn tokens_are_deduplicated_and_sampled_to_64() {
        assert_eq!(tokens("foo FOO bar foo"), ["foo", "bar"]);
        let words = |n: usize| (0..n).map(|i| format!("a{i:02}")).collect::<Vec<_>>();
        assert_eq!(tokens(&words(64).join(" ")).len(), 64);
        // 65 → every 2nd → 33.
        let got = tokens(&words(65).join(" "));
        assert_eq!(got.len(), 33);
        assert_eq!(got[32], "a64");
        // 100 → every 2nd → 50, reaching the end of the query.
        let got = tokens(&words(100).join(" "));
        assert_eq!(got.len(), 50);
        assert_eq!(&got[..3], ["a00", "a02", "a04"]);
        assert_eq!(got[49], "a98");
    }

    #[test]
    fn punctuation_only_queries_are_one_literal_token() {
        for (query, message) in [("——", "pause——go"), ("...", "well..."), ("❤️", "love ❤️")]
        {
            let prepared = PreparedChatSearch::new(query).unwrap();
            assert!(prepared.is_literal());
            assert_eq!(tokens(query), [query]);
            assert_eq!(prepared.score_message(message).0, 1.0, "{query:?}");
        }
        assert!(!PreparedChatSearch::new("x").unwrap().is_literal());
    }

    #[test]
    fn messages_are_scored_with_token_weights() {
        let prepared = PreparedChatSearch::new("hello world").unwrap();
        assert_eq!(
            prepared.score_message("Say HELLO to the World"),
            (1.0, Some(4))
        );
        assert_eq!(prepared.score_message("hello there"), (0.5, Some(0)));
        assert_eq!(prepared.score_message("nothing"), (0.0, None));
        assert_eq!(prepared.score_message("   "), (0.0, None));
        assert_eq!(prepared.score_message(""), (0.0, None));

        // Whole word (6) + 5 bigrams (2 each) = 16; only "天气" matches.
        let prepared = PreparedChatSearch::new("今天天气很好").unwrap();
        assert_eq!(prepared.score_message("天气"), (2.0 / 16.0, Some(0)));
        assert_eq!(prepared.score_message("我说今天天气很好"), (1.0, Some(2)));
    }

    #[test]
    fn the_match_position_is_in_characters_of_the_original_text() {
        let prepared = PreparedChatSearch::new("天气").unwrap();
        assert_eq!(prepared.score_message("我说今天天气很好").1, Some(4));
        // `İ` folds to two characters (3 bytes); positions stay in the original.
        let prepared = PreparedChatSearch::new("hello").unwrap();
        assert_eq!(prepared.score_message("İİ HELLO").1, Some(3));
        assert_eq!(prepared.score_message("😀 hello").1, Some(2));
        // Both sides fold: Cyrillic capitals in the message.
        let prepared = PreparedChatSearch::new("привет").unwrap();
        assert_eq!(prepared.score_message("Он сказал ПРИВЕТ"), (1.0, Some(10)));
    }

    fn alphabet(n: usize) -> String {
        (0..n).map(|i| char::from(b'a' + (i % 26) as u8)).collect()
    }

    fn slice(text: &str, from: usize, to: usize) -> String {
        text.chars().skip(from).take(to - from).collect()
    }

    #[test]
    fn short_messages_are_whole_snippets() {
        assert_eq!(chat_snippet("short", Some(2)), "short");
        assert_eq!(chat_snippet("short", None), "short");
        let exactly = alphabet(200);
        assert_eq!(chat_snippet(&exactly, Some(150)), exactly);
    }

    #[test]
    fn long_messages_are_cut_around_the_first_match() {
        let text = alphabet(300);
        assert_eq!(
            chat_snippet(&text, Some(100)),
            format!("...{}...", slice(&text, 60, 260))
        );
        // Near the start: no leading marker.
        assert_eq!(
            chat_snippet(&text, Some(10)),
            format!("{}...", slice(&text, 0, 200))
        );
        assert_eq!(
            chat_snippet(&text, Some(40)),
            format!("{}...", slice(&text, 0, 200))
        );
        assert_eq!(
            chat_snippet(&text, Some(41)),
            format!("...{}...", slice(&text, 1, 201))
        );
        // Near the end: shorter than 200 and no trailing marker.
        assert_eq!(
            chat_snippet(&text, Some(290)),
            format!("...{}", slice(&text, 250, 300))
        );
        // 201 characters is cut.
        let text = alphabet(201);
        assert_eq!(
            chat_snippet(&text, Some(0)),
            format!("{}...", slice(&text, 0, 200))
        );
        // A position past the end does not panic.
        assert_eq!(chat_snippet(&text, Some(10_000)), "...");
    }

    #[test]
    fn without_a_match_the_snippet_is_the_tail() {
        let text = alphabet(300);
        assert_eq!(
            chat_snippet(&text, None),
            format!("...{}", slice(&text, 100, 300))
        );
    }

    #[test]
    fn snippets_cut_on_character_boundaries() {
        let text = "天".repeat(150) + &"气".repeat(150);
        let snippet = chat_snippet(&text, Some(100));
        assert_eq!(
            snippet,
            format!("...{}{}...", "天".repeat(90), "气".repeat(110))
        );
        let snippet = chat_snippet(&text, Some(150));
        assert_eq!(
            snippet,
            format!("...{}{}", "天".repeat(40), "气".repeat(150))
        );
        let snippet = chat_snippet(&text, None);
        assert_eq!(
            snippet,
            format!("...{}{}", "天".repeat(50), "气".repeat(150))
        );

        // End to end: the position score_message returns feeds the snippet.
        let text = format!("{}ПРИВЕТ{}", "ж".repeat(100), "ж".repeat(200));
        let prepared = PreparedChatSearch::new("привет").unwrap();
        let (_, position) = prepared.score_message(&text);
        assert_eq!(position, Some(100));
        let snippet = chat_snippet(&text, position);
        assert!(snippet.starts_with(&format!("...{}ПРИВЕТ", "ж".repeat(40))));
        assert_eq!(snippet.chars().count(), 206);
    }

    #[test]
    fn hits_order_by_score_then_newest() {
        let mut hits = vec![(0.5, 3), (1.0, 1), (0.5, 7), (1.0, 2)];
        hits.sort_by(|a, b| compare_chat_hits(*a, *b));
        assert_eq!(hits, [(1.0, 2), (1.0, 1), (0.5, 7), (0.5, 3)]);
    }
}
