//! The text rules shared by the tools that read and search text
//! (`workspace.read_file`, `workspace.search_files`, `chat.search`,
//! `chat.read_messages`, `skill.read`, `skill.search`,
//! `worldinfo.read_activated`) and by the host, which reports the same
//! metrics. Pure Rust with one dependency (memchr); it compiles natively
//! and for `wasm32-wasip2`, and it is written for running under fuel: texts are
//! borrowed rather than copied where the result is a slice of the input, and
//! each line or message is case-folded once, not once per token.
//!
//! - [`metrics`](mod@metrics): character and word counts ([`TextMetrics`]).
//! - [`lines`]: the 1-based line-window read contract ([`lines::select`],
//!   [`LineWindow`]).
//! - [`search`]: query normalization, token scoring and per-text line hits of
//!   `workspace.search_files` / `skill.search` ([`PreparedSearch`]).
//! - [`chat_search`]: the token expansion, message scoring and snippets of
//!   `chat.search` ([`PreparedChatSearch`]).
//! - `lanes` (private): in wasm builds with `simd128`, the substring search
//!   and ASCII lowering under both searches, 64 bytes per loop step.
//!
//! # Decisions where the reference is silent or quirky
//!
//! - **Lines** are separated by `\n`. A trailing `\n` ends the last line and
//!   does not open an empty extra line: `"a\nb\n"` has 2 lines, `"a\n\n"` has
//!   2 (`"a"`, `""`), `"\n"` has 1 (an empty line) and `""` has 0. Search
//!   line numbers use the same rule, so a search hit's line range can be read
//!   back with `start_line`/`line_count`.
//! - **CRLF**: only `\n` separates lines; a `\r` before it stays part of the
//!   line (it is counted as a character and shown in numbered output), so
//!   that what a read shows is exactly what the file holds.
//! - **Case folding**: the reference lowercases the query fully but the text
//!   only when some token has an ASCII letter, so an all-Cyrillic query
//!   `привет` misses `ПРИВЕТ`. Here both sides are always folded with the same
//!   per-character full Unicode lowercase ([`search::fold_case_into`]), with
//!   the Greek final sigma `ς` folded to `σ` so that word-final and word-inner
//!   sigma agree (`ΟΔΟΣ` finds `οδος`).
//! - **Literal queries**: a query with no letter, digit or `_` (`——`, `...`,
//!   `❤️`) is searched as one literal token: its trimmed, folded text,
//!   inner whitespace included, and in `chat.search` it is not split into
//!   bigrams.

pub mod chat_search;
mod lanes;
pub mod lines;
pub mod metrics;
pub mod pack;
pub mod search;

pub use chat_search::{BatchScratch, FirstMatch, PreparedChatSearch, chat_snippet};
pub use lines::{LineRangeError, LineWindow, ReadLimits};
pub use metrics::{TextMetrics, metrics};
pub use pack::PackedTexts;
pub use search::{BestHits, KeyedHit, PreparedSearch, TextHit, TextWindow, merge_hits};
