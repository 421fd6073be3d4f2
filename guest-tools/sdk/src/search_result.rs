//! What the line-searching tools (`workspace.search_files`, `skill.search`)
//! share around `toolhost-text`'s search rules: their arguments checked
//! (`limit`, `context_lines`, a non-blank query), the texts scanned with the
//! unreadable ones counted, one record per hit, and the Markdown the model
//! reads of it. Each tool keeps what is its own: where the texts come from,
//! its error codes' domain, the words around the hits.

use serde::Serialize;

use crate::markdown::{code, fenced_into};
use crate::text::search::{self, BestHits, KeyedHit, PreparedSearch, SearchArgError};
use crate::{Arguments, ToolError};

/// The checked search arguments: the query prepared once, the number of
/// hits kept and the context lines around each.
#[derive(Debug)]
pub struct LineSearch {
    pub prepared: PreparedSearch,
    pub limit: usize,
    pub context: u32,
}

impl LineSearch {
    /// `limit` and `context_lines` from `args`, then `query` prepared. A bad
    /// limit is `{domain}.search_limit_invalid` / `_too_large`, too much
    /// context `{domain}.search_context_too_large`, a blank query
    /// `blank_query_code`. The caller reads `query` itself, before the
    /// arguments it checks in between (a path), so the first error of a
    /// call stays the first one named.
    pub fn parse(
        args: &Arguments,
        query: &str,
        domain: &str,
        blank_query_code: &str,
    ) -> Result<Self, ToolError> {
        let argument_error = |error: SearchArgError| {
            let what = match error {
                SearchArgError::LimitZero => "search_limit_invalid",
                SearchArgError::LimitTooLarge => "search_limit_too_large",
                SearchArgError::ContextTooLarge => "search_context_too_large",
            };
            ToolError::new(format!("{domain}.{what}"), error.to_string())
        };
        let limit = search::resolve_limit(args.optional_u64("limit")?).map_err(argument_error)?;
        let context =
            search::resolve_context(args.optional_u64("context_lines")?).map_err(argument_error)?;
        let Some(prepared) = PreparedSearch::new(query) else {
            return Err(ToolError::new(blank_query_code, "query must not be empty"));
        };
        Ok(Self {
            prepared,
            limit,
            context,
        })
    }

    /// Scans each of `texts` — `(path, text, extra)` as `read` gives it, or
    /// `None` for one that cannot be read as text (binary, too large, gone),
    /// which is counted and passed over — keeping the best `limit` windows.
    pub fn scan<I, E: Clone>(
        &self,
        texts: I,
        mut read: impl FnMut(I::Item) -> Option<(String, String, E)>,
    ) -> Scanned<E>
    where
        I: IntoIterator,
    {
        let mut best: BestHits<E> = BestHits::new(self.limit);
        let (mut searched, mut skipped) = (0u64, 0u64);
        for item in texts {
            let Some((path, text, extra)) = read(item) else {
                skipped += 1;
                continue;
            };
            searched += 1;
            let windows = self.prepared.scan_text(&text, self.context, self.limit);
            best.offer(&path, &text, &extra, windows);
        }
        Scanned {
            found: best.into_hits(),
            searched,
            skipped,
        }
    }
}

/// What [`LineSearch::scan`] found: the kept windows, best first, keyed by
/// their text's path, and how many texts were searched and passed over.
#[derive(Debug)]
pub struct Scanned<E> {
    pub found: Vec<KeyedHit<E>>,
    pub searched: u64,
    pub skipped: u64,
}

impl<E> Scanned<E> {
    /// `Searched N file(s).`, and the skipped ones when there are any.
    pub fn tally_into(&self, content: &mut String) {
        content.push_str(&format!("\n\nSearched {} file(s).", self.searched));
        if self.skipped > 0 {
            content.push_str(&format!(
                " Skipped {} file(s) that could not be read as text.",
                self.skipped
            ));
        }
    }
}

/// One hit of a line search, as the structured result reports it: its
/// place, score and numbered snippet, the facts of its file when the tool
/// reports them, and the reference a later read can cite.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LineHit {
    pub path: String,
    pub score: f64,
    pub start_line: u32,
    pub end_line: u32,
    pub snippet: String,
    /// Flattened between the snippet and the reference; none is no keys.
    #[serde(flatten)]
    pub facts: Option<HitFacts>,
    #[serde(rename = "ref")]
    pub reference: String,
}

/// The size of a hit's window and the version of its file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HitFacts {
    pub chars: u64,
    pub words: u64,
    pub sha256: String,
}

impl LineHit {
    /// The record of `kept`, its reference made by `reference` from the
    /// path and the first and last line.
    pub fn new<E>(kept: &KeyedHit<E>, reference: impl FnOnce(&str, u32, u32) -> String) -> Self {
        Self {
            reference: reference(&kept.key, kept.hit.start_line, kept.hit.end_line),
            path: kept.key.clone(),
            score: kept.hit.score,
            start_line: kept.hit.start_line,
            end_line: kept.hit.end_line,
            snippet: kept.hit.snippet.clone(),
            facts: None,
        }
    }

    pub fn facts(mut self, facts: HitFacts) -> Self {
        self.facts = Some(facts);
        self
    }

    /// The hit as the model reads it: the path, lines, score and reference,
    /// then the snippet fenced.
    pub fn render_into(&self, content: &mut String) {
        content.push_str(&format!(
            "\n\n{} lines {}-{}, score {:.3}, ref {}\n",
            code(&self.path),
            self.start_line,
            self.end_line,
            self.score,
            self.reference
        ));
        fenced_into(&self.snippet, content);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::args;
    use serde_json::json;

    #[test]
    fn arguments_are_checked_with_the_domains_codes() {
        let parsed = LineSearch::parse(&args(json!({})), "needle", "demo", "demo.blank")
            .expect("the defaults");
        assert_eq!(
            (parsed.limit, parsed.context),
            (search::DEFAULT_LIMIT, search::DEFAULT_CONTEXT)
        );
        for (value, query, code) in [
            (json!({"limit": 0}), "x", "demo.search_limit_invalid"),
            (json!({"limit": 51}), "x", "demo.search_limit_too_large"),
            (
                json!({"context_lines": 6}),
                "x",
                "demo.search_context_too_large",
            ),
            (json!({"limit": "5"}), "x", "tool.invalid_arguments"),
            (json!({}), " ", "demo.blank"),
            // The limits are named before the query.
            (json!({"limit": 0}), " ", "demo.search_limit_invalid"),
        ] {
            let error = LineSearch::parse(&args(value.clone()), query, "demo", "demo.blank")
                .expect_err("refused");
            assert_eq!(error.code, code, "{value}");
        }
    }

    #[test]
    fn a_scan_keeps_the_best_hits_and_counts_what_it_could_not_read() {
        let search = LineSearch::parse(&args(json!({"context_lines": 0})), "needle", "d", "b")
            .expect("parse");
        let texts = [
            ("a.md", Some("hay\nneedle\n")),
            ("b.bin", None),
            ("c.md", Some("needle here\n")),
        ];
        let scanned = search.scan(texts, |(path, text)| {
            text.map(|text| (path.to_owned(), text.to_owned(), path.len()))
        });
        assert_eq!((scanned.searched, scanned.skipped), (2, 1));
        let paths: Vec<&str> = scanned.found.iter().map(|kept| kept.key.as_str()).collect();
        assert_eq!(paths, ["a.md", "c.md"]);
        let mut content = String::new();
        scanned.tally_into(&mut content);
        assert_eq!(
            content,
            "\n\nSearched 2 file(s). Skipped 1 file(s) that could not be read as text."
        );
    }

    #[test]
    fn a_hit_serializes_its_facts_between_the_snippet_and_the_reference() {
        let search = LineSearch::parse(&args(json!({"context_lines": 0})), "needle", "d", "b")
            .expect("parse");
        let scanned = search.scan([("a.md", "hay\nneedle\n")], |(path, text)| {
            Some((path.to_owned(), text.to_owned(), ()))
        });
        let hit = LineHit::new(&scanned.found[0], |path, start, end| {
            format!("demo:{path}#L{start}-L{end}")
        });
        assert_eq!(
            serde_json::to_string(&hit).expect("json"),
            r#"{"path":"a.md","score":1.0,"startLine":2,"endLine":2,"snippet":"2 | needle","ref":"demo:a.md#L2-L2"}"#
        );
        let with_facts = hit.clone().facts(HitFacts {
            chars: 6,
            words: 1,
            sha256: "abc".into(),
        });
        assert_eq!(
            serde_json::to_string(&with_facts).expect("json"),
            r#"{"path":"a.md","score":1.0,"startLine":2,"endLine":2,"snippet":"2 | needle","chars":6,"words":1,"sha256":"abc","ref":"demo:a.md#L2-L2"}"#
        );
        let mut content = String::new();
        hit.render_into(&mut content);
        assert_eq!(
            content,
            "\n\n`a.md` lines 2-2, score 1.000, ref demo:a.md#L2-L2\n```\n2 | needle\n```"
        );
    }
}
