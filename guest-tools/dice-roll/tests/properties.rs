//! Generated dice formulas: any text a model sends parses or is refused
//! with `dice.invalid_formula` (never a panic); a valid formula re-parses
//! from its normalized spelling, and every roll lies within its bounds.
//! `make fuzz` runs more cases (`PROPTEST_CASES`).

use dice_roll::{Formula, MAX_DICE, MAX_MODIFIER, MAX_SIDES, roll};
use proptest::prelude::*;
use serde_json::Value;
use toolhost_guest::Arguments;

/// Formula-like text: digits, `d`/`D`, signs, spaces, zeros and noise.
fn formula_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9dD+\\- ]{0,12}",
        "[0-9]{0,4}[dD][0-9]{0,8}([+-][0-9]{0,9})?",
        any::<String>(),
    ]
}

fn valid_formula() -> impl Strategy<Value = (u64, u64, i64)> {
    (
        1..=MAX_DICE,
        1..=MAX_SIDES,
        -(MAX_MODIFIER as i64)..=(MAX_MODIFIER as i64),
    )
}

proptest! {
    #[test]
    fn any_text_parses_or_is_refused(text in formula_text()) {
        match Formula::parse(&text) {
            Err(error) => prop_assert_eq!(error.code, "dice.invalid_formula"),
            Ok(formula) => {
                prop_assert!((1..=MAX_DICE).contains(&formula.count));
                prop_assert!((1..=MAX_SIDES).contains(&formula.sides));
                prop_assert!(formula.min() <= formula.max());
                let again = Formula::parse(&formula.normalized()).expect("normalized parses");
                prop_assert_eq!(again, formula);
            }
        }
    }

    #[test]
    fn rolls_stay_within_their_bounds(
        (count, sides, modifier) in valid_formula(),
        seed in any::<u64>(),
    ) {
        let text = if modifier < 0 {
            format!("{count}d{sides}{modifier}")
        } else {
            format!("{count}d{sides}+{modifier}")
        };
        let arguments = Arguments::parse(&serde_json::json!({"formula": text}).to_string())
            .expect("arguments");
        let mut state = seed;
        let mut next = || {
            // splitmix64: a different stream per seed.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let output = roll(&arguments, &mut next).expect("a valid formula rolls");
        let facts: Value =
            serde_json::from_str(output.structured.as_deref().expect("facts")).expect("json");
        let rolls = facts["rolls"].as_array().expect("rolls");
        prop_assert_eq!(rolls.len() as u64, count);
        for value in rolls {
            let value = value.as_u64().expect("a die");
            prop_assert!((1..=sides).contains(&value), "{} on a d{}", value, sides);
        }
        let total = facts["total"].as_i64().expect("total");
        let sum: i64 = rolls.iter().map(|v| v.as_u64().unwrap_or(0) as i64).sum();
        prop_assert_eq!(total, sum + modifier);
        prop_assert!(facts["min"].as_i64() <= Some(total) && Some(total) <= facts["max"].as_i64());
    }
}
