//! Character and word counts of a text, as every reading tool reports them.
//!
//! - `chars` counts Unicode scalar values (Rust `char`s), not bytes and not
//!   grapheme clusters: `❤️` is 2, `é` written as `e` + U+0301 is 2.
//! - `words` counts maximal runs of alphanumeric characters
//!   ([`char::is_alphanumeric`]), except that every ideograph, kana or hangul
//!   character (see [`is_standalone_word_char`]) is one word on its own, since
//!   those scripts do not separate words with spaces. Everything else (spaces,
//!   punctuation, `_`, symbols, emoji) separates words, with one refinement: a
//!   combining mark (U+0300–U+036F, U+1AB0–U+1AFF, U+1DC0–U+1DFF,
//!   U+20D0–U+20FF, U+FE20–U+FE2F) or variation selector (U+FE00–U+FE0F)
//!   continues the word it follows, so decomposed `café` is one word. So
//!   `don't` is 2 words, `abc123` 1, `snake_case` 2, `今天很好` 4,
//!   `Rust语言` 3.

/// The size of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TextMetrics {
    /// Unicode scalar values.
    pub chars: u64,
    /// Words, as described in the [module documentation](self).
    pub words: u64,
}

/// Both counts in one pass.
pub fn metrics(text: &str) -> TextMetrics {
    let mut counter = WordCounter::default();
    let mut chars = 0_u64;
    for c in text.chars() {
        chars += 1;
        counter.push(c);
    }
    TextMetrics {
        chars,
        words: counter.words,
    }
}

/// The character count alone.
pub fn chars(text: &str) -> u64 {
    text.chars().count() as u64
}

/// The word count alone.
pub fn words(text: &str) -> u64 {
    let mut counter = WordCounter::default();
    for c in text.chars() {
        counter.push(c);
    }
    counter.words
}

#[derive(Default)]
struct WordCounter {
    words: u64,
    in_word: bool,
}

impl WordCounter {
    #[inline]
    fn push(&mut self, c: char) {
        if c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                self.words += u64::from(!self.in_word);
                self.in_word = true;
            } else {
                self.in_word = false;
            }
        } else if is_standalone_word_char(c) {
            self.words += 1;
            self.in_word = false;
        } else if c.is_alphanumeric() {
            self.words += u64::from(!self.in_word);
            self.in_word = true;
        } else if !is_word_continuing_mark(c) {
            self.in_word = false;
        }
    }
}

/// Whether `c` is a word by itself: an alphanumeric character in one of these
/// blocks.
///
/// - CJK ideographs: U+3400–U+4DBF (Extension A), U+4E00–U+9FFF (Unified),
///   U+F900–U+FAFF (Compatibility), U+20000–U+323AF (Extensions B–I and the
///   Compatibility Supplement), and U+3005–U+3007 (`々〆〇`).
/// - Kana: U+3040–U+309F (Hiragana), U+30A0–U+30FF (Katakana, including the
///   prolonged sound mark `ー`), U+31F0–U+31FF (Katakana Phonetic Extensions),
///   U+FF66–U+FF9F (halfwidth katakana), U+1B000–U+1B16F (Kana Supplement,
///   Extended-A, Small Kana Extension).
/// - Hangul: U+AC00–U+D7AF (syllables), U+1100–U+11FF (Jamo), U+3130–U+318F
///   (Compatibility Jamo), U+A960–U+A97F and U+D7B0–U+D7FF (Jamo Extended-A/B),
///   U+FFA0–U+FFDC (halfwidth).
///
/// Punctuation in these blocks (`・`, `゛`, `。` …) is not alphanumeric and
/// so separates words like any other punctuation.
pub fn is_standalone_word_char(c: char) -> bool {
    let cp = u32::from(c);
    if cp < 0x1100 {
        return false;
    }
    let in_block = matches!(
        cp,
        0x1100..=0x11FF
            | 0x3005..=0x3007
            | 0x3040..=0x30FF
            | 0x3130..=0x318F
            | 0x31F0..=0x31FF
            | 0x3400..=0x4DBF
            | 0x4E00..=0x9FFF
            | 0xA960..=0xA97F
            | 0xAC00..=0xD7AF
            | 0xD7B0..=0xD7FF
            | 0xF900..=0xFAFF
            | 0xFF66..=0xFF9F
            | 0xFFA0..=0xFFDC
            | 0x1B000..=0x1B16F
            | 0x20000..=0x323AF
    );
    in_block && c.is_alphanumeric()
}

/// Combining marks and variation selectors that belong to the word before
/// them rather than ending it.
fn is_word_continuing_mark(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0300..=0x036F
            | 0x1AB0..=0x1AFF
            | 0x1DC0..=0x1DFF
            | 0x20D0..=0x20FF
            | 0xFE00..=0xFE0F
            | 0xFE20..=0xFE2F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> (u64, u64) {
        let metrics = metrics(text);
        assert_eq!(metrics.chars, chars(text), "chars() agrees for {text:?}");
        assert_eq!(metrics.words, words(text), "words() agrees for {text:?}");
        (metrics.chars, metrics.words)
    }

    #[test]
    fn empty_text() {
        assert_eq!(m(""), (0, 0));
        assert_eq!(m("   \n\t"), (5, 0));
    }

    #[test]
    fn ascii_words_are_alphanumeric_runs() {
        assert_eq!(m("hello world"), (11, 2));
        assert_eq!(m("  hello,   world!  "), (19, 2));
        assert_eq!(m("abc123 4.5"), (10, 3));
        assert_eq!(m("don't snake_case"), (16, 4));
        assert_eq!(m("one\ntwo\r\nthree"), (14, 3));
    }

    #[test]
    fn punctuation_only_has_no_words() {
        assert_eq!(m("... —— !?"), (9, 0));
        assert_eq!(m("_"), (1, 0));
    }

    #[test]
    fn each_cjk_ideograph_is_a_word() {
        assert_eq!(m("今天天气很好"), (6, 6));
        assert_eq!(m("今天，天气很好。"), (8, 6));
        // Extension B ideograph (4 bytes in UTF-8) and the iteration mark.
        assert_eq!(m("𠀀々"), (2, 2));
        // Compatibility ideographs.
        assert_eq!(m("\u{F900}\u{2F800}"), (2, 2));
    }

    #[test]
    fn kana_and_hangul_characters_are_words() {
        assert_eq!(m("ひらがな"), (4, 4));
        assert_eq!(m("カタカナー"), (5, 5));
        // The middle dot is punctuation.
        assert_eq!(m("ア・イ"), (3, 2));
        assert_eq!(m("ｶﾀｶﾅ"), (4, 4));
        assert_eq!(m("안녕하세요 세계"), (8, 7));
    }

    #[test]
    fn mixed_scripts() {
        assert_eq!(m("Rust语言"), (6, 3));
        assert_eq!(m("I love 東京 and Москва"), (20, 6));
        assert_eq!(m("版本v2发布"), (6, 5));
        assert_eq!(m("naïve café"), (10, 2));
    }

    #[test]
    fn combining_marks_continue_a_word() {
        // `e` + U+0301: two chars, one word.
        assert_eq!(m("cafe\u{301} ok"), (8, 2));
        // Decomposed `résumé`: the marks sit inside the word.
        assert_eq!(m("re\u{301}sume\u{301}"), (8, 1));
        // A mark alone does not start a word.
        assert_eq!(m("\u{301}"), (1, 0));
    }

    #[test]
    fn emoji_are_characters_but_not_words() {
        assert_eq!(m("❤️"), (2, 0));
        assert_eq!(m("hi 👋 there"), (10, 2));
        assert_eq!(m("a👋b"), (3, 2));
    }
}
