//! Plain-text search of `workspace.search_files` and `skill.search`: query
//! normalization, token scoring per line, and the selection of
//! non-overlapping line windows.
//!
//! - **Normalization** ([`normalize_query`], shared with `chat.search`): trim,
//!   case-fold ([`fold_case_into`]), turn every character that is neither
//!   alphanumeric nor `_` into a space, collapse whitespace. The tokens are
//!   the space-separated words, deduplicated, the first
//!   [`MAX_QUERY_TOKENS`]. A query that leaves no word but is not blank
//!   (`——`, `...`, `❤️`) is one literal token: the trimmed, folded query.
//! - **Scoring** ([`PreparedSearch::score_line`]): `weight(token) =
//!   clamp(chars, 1, 8)`; a token matches when it is a substring of the folded
//!   line; `score = Σ weight(matched) / Σ weight(all)`. A line with any match
//!   is a candidate.
//! - **Windows** ([`PreparedSearch::search_text`]): each candidate line ±
//!   `context_lines`, clamped to the text. Candidates are taken by score
//!   descending, then line ascending; a window overlapping one already taken
//!   is skipped; at most `limit` are taken, in that order. Snippets are
//!   numbered rows `{n:>width} | {line}` (width = digits of the window's last
//!   line). Lines are split as in [`lines`](crate::lines).
//! - **Across texts** ([`merge_hits`]): score descending, path ascending,
//!   start line ascending, the first `limit`.
//!
//! Unlike the reference, the text is always case-folded, with the same fold
//! as the query (see the [crate documentation](crate)).

use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;

use memchr::memmem;

use crate::lines::{push_numbered, saturate};

/// `limit` when omitted.
pub const DEFAULT_LIMIT: usize = 20;
/// Largest `limit`.
pub const MAX_LIMIT: usize = 50;
/// `context_lines` when omitted.
pub const DEFAULT_CONTEXT: u32 = 2;
/// Largest `context_lines`.
pub const MAX_CONTEXT: u32 = 5;
/// Most tokens a query keeps.
pub const MAX_QUERY_TOKENS: usize = 64;
/// Largest token weight (a token's weight is its length in chars, 1..=8).
pub const MAX_TOKEN_WEIGHT: u32 = 8;

/// Appends the case fold of `text` to `out`: each character's full Unicode
/// lowercase ([`char::to_lowercase`], so one character may become several,
/// `İ` → `i̇`), with the final sigma `ς` folded to `σ`. It is applied
/// character by character, so it does not depend on context and query and
/// text always fold alike.
pub fn fold_case_into(text: &str, out: &mut String) {
    out.reserve(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        // Runs of ASCII (most of most texts) are copied and lowered in bulk,
        // which the compiler vectorizes; the rest goes character by character.
        let (ascii, tail) = rest.split_at(ascii_prefix_len(rest.as_bytes()));
        let start = out.len();
        out.push_str(ascii);
        out[start..].make_ascii_lowercase();
        let mut chars = tail.chars();
        for c in chars.by_ref() {
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
                break;
            } else if c == 'ς' {
                out.push('σ');
            } else {
                out.extend(c.to_lowercase());
            }
        }
        rest = chars.as_str();
    }
}

/// Length of the ASCII prefix of `bytes`, checked a chunk at a time.
fn ascii_prefix_len(bytes: &[u8]) -> usize {
    const CHUNK: usize = 32;
    let mut len = 0;
    for chunk in bytes.chunks(CHUNK) {
        if chunk.is_ascii() {
            len += chunk.len();
        } else {
            return len + chunk.iter().take_while(|b| b.is_ascii()).count();
        }
    }
    len
}

/// [`fold_case_into`] into a new string.
pub fn fold_case(text: &str) -> String {
    let mut out = String::new();
    fold_case_into(text, &mut out);
    out
}

/// `text` folded, borrowing `text` itself when folding would not change it
/// (ASCII without capitals), else folding into `buf`.
pub(crate) fn folded<'a>(text: &'a str, buf: &'a mut String) -> &'a str {
    if is_folded_ascii(text.as_bytes()) {
        return text;
    }
    buf.clear();
    fold_case_into(text, buf);
    buf
}

/// Whether `bytes` is ASCII without capitals (folding would not change it).
/// Checked a fixed-size chunk at a time, without an early exit inside a
/// chunk, so the compiler vectorizes it (this runs over every searched byte).
fn is_folded_ascii(bytes: &[u8]) -> bool {
    const CHUNK: usize = 64;
    let folds = |b: u8| (b >= 0x80) | b.is_ascii_uppercase();
    let mut chunks = bytes.chunks_exact(CHUNK);
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |any, &b| any | folds(b)) {
            return false;
        }
    }
    !chunks.remainder().iter().any(|&b| folds(b))
}

/// Bytes `c` takes once folded.
pub(crate) fn folded_len(c: char) -> usize {
    if c.is_ascii() {
        1
    } else if c == 'ς' {
        'σ'.len_utf8()
    } else {
        c.to_lowercase().map(char::len_utf8).sum()
    }
}

/// A query after normalization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NormalizedQuery {
    /// Words (alphanumeric or `_` runs) separated by single spaces.
    Words(String),
    /// No word, but not blank: the trimmed, folded query, to find verbatim.
    Literal(String),
}

/// Normalizes a query (see the [module documentation](self)); `None` when it
/// is blank.
pub fn normalize_query(query: &str) -> Option<NormalizedQuery> {
    let literal = fold_case(query.trim());
    if literal.is_empty() {
        return None;
    }
    let mut words = String::with_capacity(literal.len());
    for c in literal.chars() {
        if c.is_alphanumeric() || c == '_' {
            words.push(c);
        } else if !words.is_empty() && !words.ends_with(' ') {
            words.push(' ');
        }
    }
    if words.ends_with(' ') {
        words.pop();
    }
    Some(if words.is_empty() {
        NormalizedQuery::Literal(literal)
    } else {
        NormalizedQuery::Words(words)
    })
}

/// `clamp(chars, 1, 8)`.
pub fn token_weight(token: &str) -> u32 {
    saturate(token.chars().count()).clamp(1, MAX_TOKEN_WEIGHT)
}

/// A search token and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) text: String,
    pub(crate) weight: u32,
}

/// Weighted tokens of a prepared query, each with a substring searcher
/// built once for every text it is run against.
#[derive(Debug, Clone)]
pub(crate) struct Tokens {
    tokens: Vec<Token>,
    total_weight: u32,
    finders: Vec<memmem::Finder<'static>>,
    /// Per token, its 64-positions-a-step scanner (`None` for one-byte
    /// tokens): in wasm it outruns memchr's searcher (see `lanes`).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pairs: Vec<Option<crate::lanes::PairNeedle>>,
}

impl PartialEq for Tokens {
    fn eq(&self, other: &Self) -> bool {
        self.tokens == other.tokens
    }
}

impl Tokens {
    /// `texts` must be non-empty and deduplicated.
    pub(crate) fn new(texts: Vec<String>) -> Self {
        let tokens: Vec<Token> = texts
            .into_iter()
            .map(|text| Token {
                weight: token_weight(&text),
                text,
            })
            .collect();
        let total_weight = tokens.iter().map(|token| token.weight).sum();
        let finders = tokens
            .iter()
            .map(|token| memmem::Finder::new(token.text.as_bytes()).into_owned())
            .collect();
        Self {
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            pairs: tokens
                .iter()
                .map(|token| crate::lanes::PairNeedle::new(token.text.as_bytes()))
                .collect(),
            tokens,
            total_weight,
            finders,
        }
    }

    /// Calls `found(at)` for occurrences of token `index` in `haystack`,
    /// leftmost first; `found` returns where the search goes on (at least
    /// `at + 1`), or `None` to stop. One call per long haystack: what a scan
    /// over a whole batch of messages uses.
    pub(crate) fn for_each_match(
        &self,
        index: usize,
        haystack: &[u8],
        mut found: impl FnMut(usize) -> Option<usize>,
    ) {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if let Some(Some(pair)) = self.pairs.get(index) {
            return pair.for_each::<core::arch::wasm32::v128>(haystack, found);
        }
        let Some(finder) = self.finders.get(index) else {
            return;
        };
        let mut from = 0;
        while let Some(position) = haystack.get(from..).and_then(|rest| finder.find(rest)) {
            let at = from + position;
            let Some(resume) = found(at) else {
                return;
            };
            from = resume.max(at + 1);
        }
    }

    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &str> {
        self.tokens.iter().map(|token| token.text.as_str())
    }

    /// Score of the tokens whose bits are set in `mask` (bit i = token i).
    pub(crate) fn score_mask(&self, mask: u64) -> f64 {
        let matched: u32 = self
            .tokens
            .iter()
            .enumerate()
            .filter(|(index, _)| mask & (1 << index) != 0)
            .map(|(_, token)| token.weight)
            .sum();
        f64::from(matched) / f64::from(self.total_weight)
    }

    /// Score of an already folded haystack, and the byte offset (in it) of
    /// the earliest match.
    pub(crate) fn score(&self, haystack: &str) -> (f64, Option<usize>) {
        let mut matched = 0_u32;
        let mut first: Option<usize> = None;
        for (token, finder) in self.tokens.iter().zip(&self.finders) {
            if let Some(position) = finder.find(haystack.as_bytes()) {
                matched += token.weight;
                first = Some(first.map_or(position, |earlier| earlier.min(position)));
            }
        }
        if matched == 0 {
            return (0.0, None);
        }
        (f64::from(matched) / f64::from(self.total_weight), first)
    }
}

/// A query prepared once and run against many texts: its tokens, made from
/// its words by the rules `R` ([`LineRules`] for [`PreparedSearch`],
/// [`ChatRules`](crate::chat_search::ChatRules) for
/// [`PreparedChatSearch`](crate::chat_search::PreparedChatSearch)), or one
/// literal token when it has no word. Each search's scoring is its own
/// `impl` on its alias.
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedQuery<R> {
    pub(crate) tokens: Tokens,
    literal: bool,
    rules: PhantomData<R>,
}

/// How a query's normalized words (joined by single spaces) become its
/// tokens.
pub trait Expansion {
    fn expand(words: &str) -> Vec<String>;
}

impl<R: Expansion> PreparedQuery<R> {
    /// Prepares `query`; `None` when it is blank (the tool's "query must not
    /// be empty" error).
    pub fn new(query: &str) -> Option<Self> {
        let (texts, literal) = match normalize_query(query)? {
            NormalizedQuery::Literal(literal) => (vec![literal], true),
            NormalizedQuery::Words(words) => (R::expand(&words), false),
        };
        Some(Self {
            tokens: Tokens::new(texts),
            literal,
            rules: PhantomData,
        })
    }
}

impl<R> PreparedQuery<R> {
    /// The tokens, in order.
    pub fn tokens(&self) -> impl ExactSizeIterator<Item = &str> {
        self.tokens.iter()
    }

    /// Whether the query is one literal token (it had no word).
    pub fn is_literal(&self) -> bool {
        self.literal
    }
}

/// The tokens of `workspace.search_files` / `skill.search`: the distinct
/// words in query order, at most [`MAX_QUERY_TOKENS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRules;

impl Expansion for LineRules {
    fn expand(words: &str) -> Vec<String> {
        let mut texts: Vec<String> = Vec::new();
        for word in words.split(' ') {
            if texts.len() == MAX_QUERY_TOKENS {
                break;
            }
            if !texts.iter().any(|seen| seen == word) {
                texts.push(word.to_owned());
            }
        }
        texts
    }
}

/// A `workspace.search_files` / `skill.search` query, prepared once and run
/// against many texts.
pub type PreparedSearch = PreparedQuery<LineRules>;

impl PreparedSearch {
    /// The score of one line in `0.0..=1.0`; 0 when no token matches. Folds
    /// the line; [`search_text`](Self::search_text) reuses one buffer instead.
    pub fn score_line(&self, line: &str) -> f64 {
        let mut buf = String::new();
        self.tokens.score(folded(line, &mut buf)).0
    }

    /// The best non-overlapping windows of `text`, at most `limit`, best
    /// first (see the [module documentation](self)), with numbered
    /// snippets. Empty when nothing matches or `limit` is 0. Callers validate
    /// `limit` and `context_lines` against [`MAX_LIMIT`] and [`MAX_CONTEXT`]
    /// first ([`resolve_limit`], [`resolve_context`]).
    pub fn search_text(&self, text: &str, context_lines: u32, limit: usize) -> Vec<TextHit> {
        self.scan_text(text, context_lines, limit)
            .into_iter()
            .map(|window| window.into_hit(text))
            .collect()
    }

    /// [`search_text`](Self::search_text) without building the snippets,
    /// for a caller that keeps only the best windows of many texts and
    /// renders just those ([`TextWindow::snippet`]).
    ///
    /// The text is folded once and each token's prebuilt searcher runs over
    /// all of it in one pass; a token matches a line exactly
    /// when it is a substring of the folded line (tokens hold no `\n`, so an
    /// occurrence never spans lines, and folding keeps every `\n`).
    pub fn scan_text(&self, text: &str, context_lines: u32, limit: usize) -> Vec<TextWindow> {
        if limit == 0 || text.is_empty() {
            return Vec::new();
        }
        let line_starts = line_starts(text);
        let mut buf = String::new();
        let folded = folded(text, &mut buf);
        // Folding can change byte lengths (`İ` → `i̇`), never the lines.
        // ASCII folds byte for byte, so its lines start where the text's
        // do; otherwise equal total lengths prove nothing (`ẞ` → `ss` and
        // `İ` → `i̇` can cancel out before a line break), so the folded
        // text's own starts are used.
        let folded_starts = if text.is_ascii() {
            None
        } else {
            Some(line_starts_of(folded))
        };
        let starts = folded_starts.as_deref().unwrap_or(&line_starts);
        let bytes = folded.as_bytes();

        let mut masks: Vec<u64> = vec![0; starts.len()];
        for (index, token) in self.tokens.iter().enumerate() {
            if token.contains('\n') {
                continue; // a line never contains one
            }
            let bit = 1_u64 << index;
            // One pass per token; matches come in order, so the line they
            // fall on only moves forward, and once a line matches the search
            // goes on from the next one.
            let mut line = 0;
            self.tokens.for_each_match(index, bytes, |at| {
                while line + 1 < starts.len() && starts[line + 1] <= at {
                    line += 1;
                }
                masks[line] |= bit;
                Some(starts.get(line + 1).copied().unwrap_or(bytes.len()))
            });
        }
        let mut candidates: Vec<(f64, u32)> = masks
            .iter()
            .enumerate()
            .filter(|(_, mask)| **mask != 0)
            .map(|(index, mask)| (self.tokens.score_mask(*mask), saturate(index + 1)))
            .collect();
        if candidates.is_empty() {
            return Vec::new();
        }
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));

        let total = saturate(line_starts.len());
        let line_end = |number: u32| -> usize {
            match line_starts.get(number as usize) {
                Some(next_start) => next_start - 1,
                None => text.len() - usize::from(text.ends_with('\n')),
            }
        };
        let mut windows: Vec<TextWindow> = Vec::new();
        for (score, line) in candidates {
            let start_line = line.saturating_sub(context_lines).max(1);
            let end_line = line.saturating_add(context_lines).min(total);
            if windows
                .iter()
                .any(|hit| hit.start_line <= end_line && start_line <= hit.end_line)
            {
                continue;
            }
            windows.push(TextWindow {
                line,
                start_line,
                end_line,
                score,
                byte_range: line_starts[start_line as usize - 1]..line_end(end_line),
            });
            if windows.len() == limit {
                break;
            }
        }
        windows
    }
}

/// Byte offsets where each line of `text` starts (as [`crate::lines::lines`]
/// splits it: a trailing `\n` opens no extra line).
fn line_starts(text: &str) -> Vec<usize> {
    line_starts_of(text)
}

fn line_starts_of(text: &str) -> Vec<usize> {
    let mut starts = Vec::with_capacity(text.len() / 40 + 1);
    if text.is_empty() {
        return starts;
    }
    starts.push(0);
    starts.extend(
        memchr::memchr_iter(b'\n', text.as_bytes())
            .map(|at| at + 1)
            .filter(|start| *start < text.len()),
    );
    starts
}

/// A window of [`PreparedSearch::scan_text`], before its snippet is built.
#[derive(Debug, Clone, PartialEq)]
pub struct TextWindow {
    /// The matching line.
    pub line: u32,
    pub start_line: u32,
    pub end_line: u32,
    /// The matching line's score, in `0.0..=1.0`.
    pub score: f64,
    /// The window's lines in the searched text.
    pub byte_range: Range<usize>,
}

impl TextWindow {
    /// The window's lines of `text` (the text it was scanned in), numbered.
    pub fn snippet(&self, text: &str) -> String {
        let mut snippet = String::new();
        push_numbered(
            &mut snippet,
            &text[self.byte_range.clone()],
            self.start_line,
            self.end_line,
        );
        snippet
    }

    /// The hit this window is in `text`, its snippet built.
    pub fn into_hit(self, text: &str) -> TextHit {
        TextHit {
            snippet: self.snippet(text),
            line: self.line,
            start_line: self.start_line,
            end_line: self.end_line,
            score: self.score,
            byte_range: self.byte_range,
        }
    }
}

/// The best `limit` windows over many texts, kept in final order (score
/// descending, key ascending, start line ascending). A window's snippet and
/// metrics are rendered only when it is admitted, so a search where every
/// line of every text matches renders `limit` snippets per improvement, not
/// one per matching line. `E` is what the caller keeps per text (a sha256).
#[derive(Debug, Clone)]
pub struct BestHits<E> {
    limit: usize,
    hits: Vec<KeyedHit<E>>,
}

/// An admitted window with its text's key and the caller's data.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyedHit<E> {
    pub key: String,
    pub hit: TextHit,
    /// Metrics of the window's lines (without numbering).
    pub chars: u64,
    pub words: u64,
    pub extra: E,
}

impl<E: Clone> BestHits<E> {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            hits: Vec::with_capacity(limit + 1),
        }
    }

    /// Offer the windows [`PreparedSearch::scan_text`] found in `text`
    /// (best first, as it returns them). Returns how many were admitted.
    pub fn offer(&mut self, key: &str, text: &str, extra: &E, windows: Vec<TextWindow>) -> usize {
        let mut admitted = 0;
        for window in windows {
            let at = self.hits.partition_point(|kept| {
                compare_keyed(
                    &kept.key,
                    kept.hit.score,
                    kept.hit.start_line,
                    key,
                    window.score,
                    window.start_line,
                )
                .is_lt()
            });
            if at >= self.limit {
                // This text's windows come best first: none later gets in.
                break;
            }
            let counted = crate::metrics::metrics(&text[window.byte_range.clone()]);
            let hit = window.into_hit(text);
            self.hits.insert(
                at,
                KeyedHit {
                    key: key.to_owned(),
                    hit,
                    chars: counted.chars,
                    words: counted.words,
                    extra: extra.clone(),
                },
            );
            self.hits.truncate(self.limit);
            admitted += 1;
        }
        admitted
    }

    /// The kept hits, best first.
    pub fn into_hits(self) -> Vec<KeyedHit<E>> {
        self.hits
    }
}

fn compare_keyed(
    key_a: &str,
    score_a: f64,
    start_a: u32,
    key_b: &str,
    score_b: f64,
    start_b: u32,
) -> Ordering {
    score_b
        .total_cmp(&score_a)
        .then_with(|| key_a.cmp(key_b))
        .then(start_a.cmp(&start_b))
}

/// One window of a text around a matching line.
#[derive(Debug, Clone, PartialEq)]
pub struct TextHit {
    /// The matching line.
    pub line: u32,
    /// First line of the window.
    pub start_line: u32,
    /// Last line of the window.
    pub end_line: u32,
    /// The matching line's score, in `0.0..=1.0`.
    pub score: f64,
    /// The window's lines, numbered.
    pub snippet: String,
    /// The window's lines in the searched text (without numbering), e.g. for
    /// their [`metrics`](crate::metrics::metrics).
    pub byte_range: Range<usize>,
}

/// Orders hits from several texts (score descending, key ascending, start
/// line ascending) and keeps the first `limit`. `P` is the text's key, its
/// path for `workspace.search_files`.
pub fn merge_hits<P: Ord>(hits: &mut Vec<(P, TextHit)>, limit: usize) {
    hits.sort_by(|(path_a, a), (path_b, b)| compare_hits(path_a, a, path_b, b));
    hits.truncate(limit);
}

/// The cross-text order of [`merge_hits`].
pub fn compare_hits<P: Ord>(path_a: &P, a: &TextHit, path_b: &P, b: &TextHit) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then_with(|| path_a.cmp(path_b))
        .then(a.start_line.cmp(&b.start_line))
}

/// An invalid `limit` or `context_lines`; the tool maps it to its error code
/// (`workspace.search_limit_invalid`, `…_limit_too_large`,
/// `…_context_too_large`, or `tool.invalid_arguments` for `chat.search`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchArgError {
    LimitZero,
    LimitTooLarge,
    ContextTooLarge,
}

impl fmt::Display for SearchArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LimitZero => f.write_str("limit must be >= 1"),
            Self::LimitTooLarge => write!(f, "limit must be <= {MAX_LIMIT}"),
            Self::ContextTooLarge => write!(f, "context_lines must be <= {MAX_CONTEXT}"),
        }
    }
}

impl std::error::Error for SearchArgError {}

/// `limit`: [`DEFAULT_LIMIT`] when omitted, else 1..=[`MAX_LIMIT`].
pub fn resolve_limit(limit: Option<u64>) -> Result<usize, SearchArgError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(0) => Err(SearchArgError::LimitZero),
        Some(n) if n > MAX_LIMIT as u64 => Err(SearchArgError::LimitTooLarge),
        Some(n) => Ok(n as usize),
    }
}

/// `context_lines`: [`DEFAULT_CONTEXT`] when omitted, else 0..=[`MAX_CONTEXT`].
pub fn resolve_context(context_lines: Option<u64>) -> Result<u32, SearchArgError> {
    match context_lines {
        None => Ok(DEFAULT_CONTEXT),
        Some(n) if n > u64::from(MAX_CONTEXT) => Err(SearchArgError::ContextTooLarge),
        Some(n) => Ok(n as u32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(query: &str) -> PreparedSearch {
        PreparedSearch::new(query).expect("query is not blank")
    }

    fn tokens(query: &str) -> Vec<String> {
        search(query).tokens().map(str::to_owned).collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    /// Found by the generated-search property: `ẞ` folds 3 bytes to 2 and
    /// `İ` 2 to 3, so this text folds to the same length with its line
    /// break elsewhere; the hit was reported on line 1.
    #[test]
    fn a_match_after_length_changing_folds_is_on_its_own_line() {
        let text = "ẞİẞẞẞİİİẞ\naİ";
        assert_eq!(fold_case(text).len(), text.len());
        let windows = search("a").scan_text(text, 0, 10);
        assert_eq!(windows.len(), 1);
        assert_eq!(windows[0].line, 2);
    }

    #[test]
    fn blank_queries_are_rejected() {
        assert!(PreparedSearch::new("").is_none());
        assert!(PreparedSearch::new("  \t\n ").is_none());
        assert_eq!(normalize_query(" "), None);
    }

    #[test]
    fn normalization_splits_on_everything_but_alphanumerics_and_underscore() {
        assert_eq!(
            normalize_query("  Hello, World!  snake_case-x  "),
            Some(NormalizedQuery::Words("hello world snake_case x".into()))
        );
        assert_eq!(tokens("foo.bar/baz"), ["foo", "bar", "baz"]);
        assert_eq!(tokens("今天 天气"), ["今天", "天气"]);
        assert!(!search("a").is_literal());
    }

    #[test]
    fn tokens_are_deduplicated_after_folding() {
        assert_eq!(tokens("foo FOO Foo bar foo"), ["foo", "bar"]);
    }

    #[test]
    fn at_most_64_tokens_are_kept() {
        let query: Vec<String> = (0..70).map(|i| format!("w{i:03}x")).collect();
        let prepared = search(&query.join(" "));
        assert_eq!(prepared.tokens().len(), MAX_QUERY_TOKENS);
        assert_eq!(prepared.tokens().last(), Some("w063x"));
        assert_eq!(prepared.score_line("w069x"), 0.0);
        assert!(close(prepared.score_line("w063x"), 1.0 / 64.0));
        // Duplicates do not use up the cap.
        let repeated = format!("{} {}", "dup ".repeat(100), query.join(" "));
        assert_eq!(search(&repeated).tokens().nth(1), Some("w000x"));
    }

    #[test]
    fn weights_are_token_length_clamped_to_1_through_8() {
        assert_eq!(token_weight("a"), 1);
        assert_eq!(token_weight("bb"), 2);
        assert_eq!(token_weight("eightchr"), 8);
        assert_eq!(token_weight("muchlongerthaneight"), 8);
        assert_eq!(token_weight("今天"), 2);
        assert_eq!(token_weight(""), 1);

        // Weights 1 + 2 + 8 = 11.
        let prepared = search("a bb cccccccccc");
        assert!(close(prepared.score_line("xx bb"), 2.0 / 11.0));
        assert!(close(prepared.score_line("cccccccccc"), 8.0 / 11.0));
        assert!(close(prepared.score_line("a cccccccccc"), 9.0 / 11.0));
        assert!(close(prepared.score_line("a bb cccccccccc"), 1.0));
        // Substring, not word, matching.
        assert!(close(prepared.score_line("abba"), 3.0 / 11.0));
        assert_eq!(prepared.score_line("nothing here"), 0.0);
    }

    #[test]
    fn punctuation_only_queries_match_literally() {
        for (query, line) in [
            ("——", "pause——continue"),
            ("...", "and then..."),
            ("❤️", "status: ❤️"),
            ("  ?!  ", "really?!"),
        ] {
            let prepared = search(query);
            assert!(prepared.is_literal(), "{query:?}");
            assert_eq!(prepared.tokens().len(), 1, "{query:?}");
            assert_eq!(prepared.score_line(line), 1.0, "{query:?} in {line:?}");
            let hits = prepared.search_text(&format!("first\n{line}\nlast"), 0, 5);
            assert_eq!(hits.len(), 1, "{query:?}");
            assert_eq!(hits[0].line, 2);
        }
        // The literal is the whole trimmed query, inner space included.
        let prepared = search("… …");
        assert_eq!(tokens("… …"), ["… …"]);
        assert_eq!(prepared.score_line("……"), 0.0);
        assert_eq!(prepared.score_line("… …"), 1.0);
        assert_eq!(search("...").score_line("a.b.c"), 0.0);
    }

    #[test]
    fn zero_hits_is_an_empty_result() {
        let prepared = search("needle");
        assert!(prepared.search_text("hay\nstack", 2, 20).is_empty());
        assert!(prepared.search_text("", 2, 20).is_empty());
        assert!(prepared.search_text("needle", 2, 0).is_empty());
    }

    #[test]
    fn a_hit_has_a_numbered_window_and_its_byte_range() {
        let text = "alpha\nblue lantern under bridge\nomega\n";
        let hits = search("blue lantern").search_text(text, 1, 5);
        assert_eq!(hits.len(), 1);
        let hit = &hits[0];
        assert_eq!((hit.line, hit.start_line, hit.end_line), (2, 1, 3));
        assert_eq!(hit.score, 1.0);
        assert_eq!(
            hit.snippet,
            "1 | alpha\n2 | blue lantern under bridge\n3 | omega"
        );
        assert_eq!(
            &text[hit.byte_range.clone()],
            "alpha\nblue lantern under bridge\nomega"
        );
    }

    #[test]
    fn context_is_clamped_at_the_edges_of_the_text() {
        let text = (1..=10)
            .map(|n| format!("l{n}"))
            .collect::<Vec<_>>()
            .join("\n");
        let first = search("l1").search_text(&text, 2, 1);
        // "l1" also matches "l10"; line 1 wins the tie.
        assert_eq!((first[0].start_line, first[0].end_line), (1, 3));
        let last = search("l10").search_text(&text, 5, 5);
        assert_eq!(last.len(), 1);
        assert_eq!((last[0].start_line, last[0].end_line), (5, 10));
        assert!(last[0].snippet.starts_with(" 5 | l5\n"));
        assert!(last[0].snippet.ends_with("\n10 | l10"));
        let whole = search("l5").search_text(&text, u32::MAX, 5);
        assert_eq!((whole[0].start_line, whole[0].end_line), (1, 10));
        let alone = search("l5").search_text(&text, 0, 5);
        assert_eq!((alone[0].start_line, alone[0].end_line), (5, 5));
        assert_eq!(alone[0].snippet, "5 | l5");
    }

    #[test]
    fn overlapping_windows_keep_the_better_one() {
        let text = "a\nb\nfoo\nfoo bar\nc\nd\ne\nf\nfoo\ng";
        let hits = search("foo bar").search_text(text, 1, 20);
        // Line 4 scores 1.0 (window 3-5); line 3 (0.5, window 2-4) overlaps
        // it; line 9 (0.5, window 8-10) does not.
        let got: Vec<_> = hits
            .iter()
            .map(|h| (h.line, h.start_line, h.end_line))
            .collect();
        assert_eq!(got, [(4, 3, 5), (9, 8, 10)]);
        assert_eq!(hits[0].score, 1.0);
        assert_eq!(hits[1].score, 0.5);
        // Adjacent windows (1-2, 3-4) are both kept; sharing a line (1-3, 2-4) is an overlap.
        let text = "x\n-\n-\nx";
        assert_eq!(search("x").search_text(text, 1, 20).len(), 2);
        assert_eq!(search("x").search_text(text, 2, 20).len(), 1);
        // Windows 1-3 and 3-5 share line 3.
        let hits = search("x").search_text("-\nx\n-\nx\n-", 1, 20);
        let got: Vec<_> = hits.iter().map(|h| (h.start_line, h.end_line)).collect();
        assert_eq!(got, [(1, 3)]);
    }

    #[test]
    fn ties_go_to_the_earlier_line_and_the_limit_applies() {
        let text = "foo 1\nbar\nfoo 2\nbar\nfoo 3\nfoo bar";
        let hits = search("foo").search_text(text, 0, 20);
        let lines: Vec<u32> = hits.iter().map(|h| h.line).collect();
        assert_eq!(lines, [1, 3, 5, 6]);
        let hits = search("foo").search_text(text, 0, 2);
        let lines: Vec<u32> = hits.iter().map(|h| h.line).collect();
        assert_eq!(lines, [1, 3]);
        // Higher scores come first regardless of position.
        let hits = search("foo bar").search_text(text, 0, 2);
        let lines: Vec<u32> = hits.iter().map(|h| h.line).collect();
        assert_eq!(lines, [6, 1]);
    }

    #[test]
    fn unicode_case_is_folded_on_both_sides() {
        assert_eq!(search("ПРИВЕТ").score_line("ну привет"), 1.0);
        assert_eq!(search("привет").score_line("НУ ПРИВЕТ"), 1.0);
        assert_eq!(search("Straße").score_line("STRAẞE"), 1.0);
        // Final and inner sigma fold alike.
        assert_eq!(search("ΟΔΟΣ").score_line("οδος"), 1.0);
        assert_eq!(search("οδος").score_line("ΟΔΟΣ"), 1.0);
        assert_eq!(search("Lantern").score_line("the blue LANTERN"), 1.0);
        // CJK has no case and matches as is.
        assert_eq!(search("天气").score_line("今天天气很好"), 1.0);
        let hits = search("ПРИВЕТ").search_text("a\nПривет, мир\nb", 0, 5);
        assert_eq!(hits[0].snippet, "2 | Привет, мир");
        assert_eq!(fold_case("İΣ"), "i\u{307}σ");
        assert_eq!(folded_len('İ'), 3);
    }

    #[test]
    fn bulk_ascii_folding_matches_character_by_character() {
        let by_char = |text: &str| -> String {
            text.chars()
                .flat_map(|c| {
                    let c = if c == 'ς' { 'σ' } else { c };
                    c.to_lowercase()
                })
                .collect()
        };
        // ASCII runs ending inside and at the edge of a 32-byte chunk, and
        // non-ASCII at the very start, the very end and back to back.
        let samples = [
            String::new(),
            "ABC".to_owned(),
            "Ä".to_owned(),
            format!("{}É", "X".repeat(31)),
            format!("{}É{}", "Y".repeat(32), "Z".repeat(40)),
            format!("ΣΟΦΟΣ Straße İ{}ς", "Word ".repeat(20)),
            "日本語ABC한국어😀DEF".to_owned(),
        ];
        for sample in samples {
            assert_eq!(fold_case(&sample), by_char(&sample), "{sample:?}");
        }
    }

    #[test]
    fn lines_are_split_like_reads() {
        let text = "one\r\ntwo\r\n";
        let hits = search("two").search_text(text, 3, 5);
        assert_eq!((hits[0].start_line, hits[0].end_line), (1, 2));
        assert_eq!(hits[0].snippet, "1 | one\r\n2 | two\r");
        assert_eq!(&text[hits[0].byte_range.clone()], "one\r\ntwo\r");
    }

    #[test]
    fn merged_hits_order_by_score_then_path_then_line() {
        let hit = |start_line: u32, score: f64| TextHit {
            line: start_line,
            start_line,
            end_line: start_line,
            score,
            snippet: String::new(),
            byte_range: 0..0,
        };
        let mut hits = vec![
            ("b.md", hit(1, 0.5)),
            ("a.md", hit(9, 0.5)),
            ("c.md", hit(3, 1.0)),
            ("a.md", hit(2, 0.5)),
            ("a.md", hit(4, 0.25)),
        ];
        merge_hits(&mut hits, 4);
        let got: Vec<_> = hits.iter().map(|(p, h)| (*p, h.start_line)).collect();
        assert_eq!(got, [("c.md", 3), ("a.md", 2), ("a.md", 9), ("b.md", 1)]);
        merge_hits(&mut hits, 0);
        assert!(hits.is_empty());
    }

    #[test]
    fn search_arguments_are_validated() {
        assert_eq!(resolve_limit(None), Ok(DEFAULT_LIMIT));
        assert_eq!(resolve_limit(Some(0)), Err(SearchArgError::LimitZero));
        assert_eq!(resolve_limit(Some(50)), Ok(50));
        assert_eq!(resolve_limit(Some(51)), Err(SearchArgError::LimitTooLarge));
        assert_eq!(resolve_context(None), Ok(DEFAULT_CONTEXT));
        assert_eq!(resolve_context(Some(0)), Ok(0));
        assert_eq!(resolve_context(Some(5)), Ok(5));
        assert_eq!(
            resolve_context(Some(6)),
            Err(SearchArgError::ContextTooLarge)
        );
        assert_eq!(
            SearchArgError::LimitTooLarge.to_string(),
            "limit must be <= 50"
        );
    }

    /// The whole-text scan must score every line exactly as scoring each
    /// folded line on its own would (the rule the module documents).
    #[test]
    fn the_whole_text_scan_agrees_with_per_line_scoring() {
        let texts = [
            "alpha beta\nBeta GAMMA\n\ngamma alpha beta\n",
            "İstanbul İs big\nistanbul\nİİİ stan\nno match here",
            "ΟΔΟΣ and οδος\nσίγμα ς\r\nΣ\n",
            "a--b\n——\n— —\n...\n",
            "needle at end without newline needle",
            "\n\n\nneedle\n\n",
        ];
        let queries = [
            "beta gamma",
            "alpha",
            "istanbul stan",
            "οδος σ",
            "——",
            "— —",
            "...",
            "needle",
            "b a",
        ];
        for text in texts {
            for query in queries {
                let Some(prepared) = PreparedSearch::new(query) else {
                    continue;
                };
                let scanned = prepared.scan_text(text, 0, usize::MAX >> 1);
                // Naive: every line folded and scored on its own.
                let mut naive: Vec<(f64, u32)> = crate::lines::lines(text)
                    .enumerate()
                    .map(|(index, line)| (prepared.score_line(line), index as u32 + 1))
                    .filter(|(score, _)| *score > 0.0)
                    .collect();
                naive.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                let got: Vec<(f64, u32)> = scanned.iter().map(|w| (w.score, w.line)).collect();
                assert_eq!(got, naive, "{query:?} in {text:?}");
            }
        }
    }

    #[test]
    fn best_hits_keep_the_final_order_and_render_only_what_is_kept() {
        let prepared = PreparedSearch::new("needle").expect("query");
        let mut best: BestHits<u32> = BestHits::new(3);
        let texts = [
            ("b.md", "needle\nx\nneedle\n"),
            ("a.md", "needle needle\n"),
            ("c.md", "needle\n"),
        ];
        let mut admitted = 0;
        for (n, (key, text)) in texts.iter().enumerate() {
            admitted += best.offer(key, text, &(n as u32), prepared.scan_text(text, 0, 3));
        }
        let hits = best.into_hits();
        let order: Vec<(&str, u32, u32)> = hits
            .iter()
            .map(|kept| (kept.key.as_str(), kept.hit.start_line, kept.extra))
            .collect();
        // Equal scores: key ascending, then start line.
        assert_eq!(order, [("a.md", 1, 1), ("b.md", 1, 0), ("b.md", 3, 0)]);
        assert_eq!(hits[0].hit.snippet, "1 | needle needle");
        assert_eq!(hits[0].chars, 13);
        // c.md came last with an equal score and a later key: never rendered.
        assert_eq!(admitted, 3);
    }
}
