//! `dice.roll`: roll dice in standard notation with the host's recorded randomness.
//!
//! Grammar (after trimming; no inner whitespace):
//! `formula := SIDES | [COUNT] ('d'|'D') SIDES [('+'|'-') MODIFIER]`, where a
//! bare `SIDES` means `1dSIDES`, COUNT and SIDES are positive integers without
//! a leading zero, and there is exactly one `d` and at most one modifier.
//! Limits: COUNT ≤ 100, SIDES ≤ 1,000,000, |MODIFIER| ≤ 1,000,000.

use std::fmt::Write as _;

use serde::Serialize;
use toolhost_guest::{Arguments, Output, ToolError, random};

pub const MAX_DICE: u64 = 100;
pub const MAX_SIDES: u64 = 1_000_000;
pub const MAX_MODIFIER: u64 = 1_000_000;
const INVALID_FORMULA: &str = "dice.invalid_formula";
const NOTATION_HINT: &str =
    "use NdS with an optional +M or -M, e.g. d6, 1d20, 3d6+4, 2d10-1, or plain 20 for 1d20";

/// A parsed, valid formula.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Formula {
    pub count: u64,
    pub sides: u64,
    pub modifier: i64,
    /// Whether the text carried `+M` / `-M` (even `+0`), so it is echoed back.
    pub has_modifier: bool,
}

impl Formula {
    pub fn parse(text: &str) -> Result<Self, ToolError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(invalid("formula must not be empty".to_owned()));
        }
        if text.chars().any(char::is_whitespace) {
            return Err(invalid(format!(
                "formula `{text}` must not contain spaces; {NOTATION_HINT}"
            )));
        }
        let malformed = || invalid(format!("`{text}` is not dice notation; {NOTATION_HINT}"));

        let Some(d_at) = text.find(['d', 'D']) else {
            let sides = positive(text).ok_or_else(malformed)?;
            return Self::checked(1, sides, 0, false);
        };
        let (count_text, rest) = (&text[..d_at], &text[d_at + 1..]);
        let count = if count_text.is_empty() {
            1
        } else {
            positive(count_text).ok_or_else(malformed)?
        };
        let (sides_text, modifier) = match rest.find(['+', '-']) {
            None => (rest, None),
            Some(sign_at) => {
                let digits = &rest[sign_at + 1..];
                let value = digits_value(digits).ok_or_else(malformed)?;
                (
                    &rest[..sign_at],
                    Some((rest.as_bytes()[sign_at] == b'-', value)),
                )
            }
        };
        let sides = positive(sides_text).ok_or_else(malformed)?;
        match modifier {
            None => Self::checked(count, sides, 0, false),
            Some((_, value)) if value > MAX_MODIFIER => Err(invalid(format!(
                "modifier in `{text}` must be between -{MAX_MODIFIER} and +{MAX_MODIFIER}"
            ))),
            // value ≤ 1,000,000, so the cast cannot wrap.
            Some((negative, value)) => {
                let value = value as i64;
                Self::checked(count, sides, if negative { -value } else { value }, true)
            }
        }
    }

    fn checked(
        count: u64,
        sides: u64,
        modifier: i64,
        has_modifier: bool,
    ) -> Result<Self, ToolError> {
        if count > MAX_DICE {
            return Err(invalid(format!(
                "cannot roll {count} dice at once; the most is {MAX_DICE}"
            )));
        }
        if sides > MAX_SIDES {
            return Err(invalid(format!(
                "a die may have at most {MAX_SIDES} sides, not {sides}"
            )));
        }
        Ok(Self {
            count,
            sides,
            modifier,
            has_modifier,
        })
    }

    /// Canonical spelling: `NdS`, `NdS+M` or `NdS-M`.
    pub fn normalized(&self) -> String {
        match (self.has_modifier, self.modifier < 0) {
            (false, _) => format!("{}d{}", self.count, self.sides),
            (true, false) => format!("{}d{}+{}", self.count, self.sides, self.modifier),
            (true, true) => format!("{}d{}-{}", self.count, self.sides, -self.modifier),
        }
    }

    pub fn min(&self) -> i64 {
        self.count as i64 + self.modifier
    }

    pub fn max(&self) -> i64 {
        (self.count * self.sides) as i64 + self.modifier
    }
}

/// Decimal digits only, no sign; leading zeros allowed (used for the modifier).
fn digits_value(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Saturate: anything longer than u64 is over every limit anyway.
    Some(text.parse().unwrap_or(u64::MAX))
}

/// A positive integer without a leading zero (COUNT and SIDES).
fn positive(text: &str) -> Option<u64> {
    if text.starts_with('0') {
        return None;
    }
    digits_value(text)
}

fn invalid(message: String) -> ToolError {
    ToolError::new(INVALID_FORMULA, message)
}

/// The structured facts of one roll (the tool's output schema).
#[derive(Debug, Serialize)]
struct RollFacts<'a> {
    formula: &'a str,
    rolls: &'a [u64],
    modifier: i64,
    total: i64,
    min: i64,
    max: i64,
}

/// One roll: parse the arguments, draw each die from `next_u64`, render.
pub fn roll(args: &Arguments, next_u64: &mut impl FnMut() -> u64) -> Result<Output, ToolError> {
    args.only(&["formula"])?;
    let formula = Formula::parse(args.required_str("formula")?)?;
    let rolls: Vec<u64> = (0..formula.count)
        .map(|_| random::uniform_inclusive(1, formula.sides, next_u64))
        .collect();
    let total = rolls.iter().sum::<u64>() as i64 + formula.modifier;
    let normalized = formula.normalized();

    // One buffer, no intermediate strings: this runs on every call.
    let mut content = String::with_capacity(32 + 10 * rolls.len());
    let _ = write!(content, "Rolled {normalized}: ");
    if rolls.len() > 1 || formula.has_modifier {
        for (at, value) in rolls.iter().enumerate() {
            let _ = write!(content, "{}{value}", if at == 0 { "" } else { " + " });
        }
        if formula.has_modifier {
            let sign = if formula.modifier < 0 { '-' } else { '+' };
            let _ = write!(content, " {sign} {}", formula.modifier.unsigned_abs());
        }
        content.push_str(" = ");
    }
    let _ = write!(content, "{total}.");

    Ok(Output::text(content).structured(RollFacts {
        formula: &normalized,
        rolls: &rolls,
        modifier: formula.modifier,
        total,
        min: formula.min(),
        max: formula.max(),
    }))
}

toolhost_guest::builtin_tool!(DiceRoll, |args| roll(&args, &mut random::next_u64));

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<Formula, ToolError> {
        Formula::parse(text)
    }

    fn roll_with(formula: &str, draws: &[u64]) -> Output {
        let args = Arguments::parse(&json!({ "formula": formula }).to_string()).expect("object");
        let mut draws = draws.iter().copied().cycle();
        roll(&args, &mut || draws.next().expect("cycle")).expect("valid formula")
    }

    #[test]
    fn accepts_the_reference_grammar() {
        let cases = [
            ("d6", 1, 6, 0),
            ("1d20", 1, 20, 0),
            ("3d6+4", 3, 6, 4),
            ("2d10-1", 2, 10, -1),
            ("20", 1, 20, 0),
            ("2D8", 2, 8, 0),
            ("  4d4  ", 4, 4, 0),
            ("1d6+0", 1, 6, 0),
            ("1d6+007", 1, 6, 7),
            ("100d1000000-1000000", 100, 1_000_000, -1_000_000),
        ];
        for (text, count, sides, modifier) in cases {
            let formula = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(
                (formula.count, formula.sides, formula.modifier),
                (count, sides, modifier),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_what_the_reference_rejects() {
        for text in [
            "",
            "1d20+4-2",
            "1d20++4",
            "1d20+",
            "1dd20",
            "0d6",
            "1d0",
            "01d6",
            "d06",
            "0",
            "020",
            "d",
            "1d",
            "d+3",
            "1d6*2",
            "-1d6",
            "+1d6",
            "1d6-",
            "x",
            "1d6 + 2",
            "1 d6",
            "1d\t6",
            "１d6",
            "1d6+1.5",
            "1d6+-1",
            "99999999999999999999999d6",
        ] {
            let error = parse(text).expect_err(text);
            assert_eq!(error.code, "dice.invalid_formula", "{text}");
        }
        assert!(
            parse("1 d6")
                .expect_err("space")
                .message
                .contains("must not contain spaces")
        );
    }

    #[test]
    fn enforces_the_limits() {
        assert!(parse("100d6").is_ok());
        assert!(
            parse("101d6")
                .expect_err("count")
                .message
                .contains("the most is 100")
        );
        assert!(parse("1d1000000").is_ok());
        assert!(
            parse("1d1000001")
                .expect_err("sides")
                .message
                .contains("at most 1000000 sides")
        );
        assert!(parse("1d6+1000000").is_ok());
        assert!(
            parse("1d6-1000001")
                .expect_err("modifier")
                .message
                .contains("between")
        );
    }

    #[test]
    fn normalizes_the_formula() {
        assert_eq!(parse("d6").map(|f| f.normalized()), Ok("1d6".to_owned()));
        assert_eq!(parse("20").map(|f| f.normalized()), Ok("1d20".to_owned()));
        assert_eq!(
            parse("3D6+04").map(|f| f.normalized()),
            Ok("3d6+4".to_owned())
        );
        assert_eq!(
            parse("2d10-1").map(|f| f.normalized()),
            Ok("2d10-1".to_owned())
        );
    }

    #[test]
    fn renders_rolls_and_total() {
        // uniform_inclusive(1, 6, v) = 1 + v % 6 for small v.
        let output = roll_with("3d6+4", &[1, 4, 5]);
        assert_eq!(output.content, "Rolled 3d6+4: 2 + 5 + 6 + 4 = 17.");
        assert_eq!(
            output.structured_value(),
            Some(
                json!({"formula":"3d6+4","rolls":[2,5,6],"modifier":4,"total":17,"min":7,"max":22})
            )
        );
        assert_eq!(roll_with("1d20", &[13]).content, "Rolled 1d20: 14.");
        assert_eq!(
            roll_with("2d10-1", &[2, 6]).content,
            "Rolled 2d10-1: 3 + 7 - 1 = 9."
        );
        assert_eq!(roll_with("1d6+0", &[0]).content, "Rolled 1d6+0: 1 + 0 = 1.");
    }

    #[test]
    fn every_roll_stays_within_min_and_max() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let args = Arguments::parse(r#"{"formula":"100d1000000-5"}"#).expect("object");
        for _ in 0..50 {
            let output = roll(&args, &mut next).expect("valid");
            let structured = output.structured_value().expect("structured");
            let total = structured["total"].as_i64().expect("total");
            assert!((95..=100_000_000 - 5).contains(&total), "{total}");
        }
    }

    #[test]
    fn rejects_unknown_and_missing_arguments() {
        let args = Arguments::parse(r#"{"formula":"d6","seed":3}"#).expect("object");
        let error = roll(&args, &mut || 0).expect_err("unknown key");
        assert_eq!(error.code, "tool.invalid_arguments");
        let error = roll(&Arguments::default(), &mut || 0).expect_err("missing");
        assert_eq!(error.message, "formula is required");
    }
}
