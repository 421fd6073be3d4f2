//! Generated searches over random Unicode: no query and no text makes a
//! search panic, and with no context lines the hits are exactly the lines
//! whose case-folded text holds a query token (every hit real, none
//! missed). `make fuzz` runs more cases (`PROPTEST_CASES`).

use std::collections::BTreeSet;

use proptest::prelude::*;
use toolhost_text::search::{PreparedSearch, fold_case};

/// Text where matches are likely and case folding matters: letters whose
/// folds change length (`İ`, `ẞ`), final sigma, CJK, combining marks, and
/// line breaks.
fn unicode_text(max: usize) -> impl Strategy<Value = String> {
    let alphabet = vec![
        'a', 'A', 'b', 'İ', 'i', 'ß', 'ẞ', 'Σ', 'σ', 'ς', '日', 'é', '\u{301}', ' ', '\n', '\r',
        '-', '"',
    ];
    prop_oneof![
        prop::collection::vec(prop::sample::select(alphabet), 0..max)
            .prop_map(|chars| chars.into_iter().collect()),
        any::<String>(),
    ]
}

/// The lines as the search numbers them: a trailing `\n` opens no line.
fn lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    if text.ends_with('\n') || text.is_empty() {
        lines.pop();
    }
    lines
}

proptest! {
    #[test]
    fn hits_are_exactly_the_lines_holding_a_token(
        query in unicode_text(12),
        text in unicode_text(400),
    ) {
        let Some(search) = PreparedSearch::new(&query) else {
            return Ok(());
        };
        let lines = lines(&text);
        let windows = search.scan_text(&text, 0, lines.len() + 1);
        let hit: BTreeSet<u32> = windows.iter().map(|window| window.line).collect();
        prop_assert_eq!(hit.len(), windows.len(), "one window per line");
        let tokens: Vec<&str> = search.tokens().collect();
        let expected: BTreeSet<u32> = lines
            .iter()
            .enumerate()
            .filter(|(_, line)| {
                let folded = fold_case(line);
                tokens.iter().any(|token| folded.contains(token))
            })
            .map(|(index, _)| index as u32 + 1)
            .collect();
        prop_assert_eq!(&hit, &expected, "tokens {:?}", tokens);
        for window in &windows {
            prop_assert!(window.score > 0.0 && window.score <= 1.0);
            prop_assert!(text.get(window.byte_range.clone()).is_some(), "a char-boundary range");
            let _ = window.snippet(&text);
        }
    }

    #[test]
    fn searching_with_context_never_panics(
        query in any::<String>(),
        text in unicode_text(300),
        context in 0_u32..5,
        limit in 0_usize..8,
    ) {
        if let Some(search) = PreparedSearch::new(&query) {
            let hits = search.search_text(&text, context, limit);
            prop_assert!(hits.len() <= limit);
        }
    }
}

mod chat {
    use proptest::prelude::*;
    use toolhost_text::search::fold_case;
    use toolhost_text::{BatchScratch, PreparedChatSearch};

    proptest! {
        /// A packed batch scores every message exactly as scoring it alone
        /// does, and a message scores only when its fold holds a token.
        #[test]
        fn packed_scores_equal_single_scores_and_hits_are_real(
            query in super::unicode_text(10),
            messages in prop::collection::vec(super::unicode_text(60), 0..12),
        ) {
            let Some(search) = PreparedChatSearch::new(&query) else {
                return Ok(());
            };
            let texts: String = messages.concat();
            let ends: Vec<u32> = messages
                .iter()
                .scan(0_u32, |end, text| {
                    *end += text.len() as u32;
                    Some(*end)
                })
                .collect();
            let mut packed = vec![None; messages.len()];
            let mut scratch = BatchScratch::default();
            let described = search.score_packed(&texts, &ends, 0..messages.len(), &mut scratch, |i, score, first| {
                packed[i] = Some((score, first.char_index(&messages[i])));
            });
            prop_assert!(described);
            let tokens: Vec<&str> = search.tokens().collect();
            for (i, text) in messages.iter().enumerate() {
                let (score, first) = search.score_message(text);
                let alone = (score > 0.0).then(|| (score, first.unwrap_or(usize::MAX)));
                prop_assert_eq!(packed[i], alone, "message {} {:?}", i, text);
                let folded = fold_case(text);
                let holds = !text.trim().is_empty() && tokens.iter().any(|token| folded.contains(token));
                prop_assert_eq!(score > 0.0, holds, "message {} {:?}", i, text);
            }
        }
    }
}
