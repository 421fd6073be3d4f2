//! Randomness from the host's `random` capability.
//!
//! The host records the seed of every call's random stream, so a run replays
//! with the same values. Draw only through this module (never from WASI
//! random or the clock) and the tool stays replayable.

use crate::bindings::toolhost::host::random as host;

/// The next value of this call's recorded random stream.
pub fn next_u64() -> u64 {
    host::next_u64()
}

/// A uniform integer in `low..=high`, drawn from `next` without modulo bias
/// (values from the biased tail of the u64 range are rejected and redrawn).
///
/// # Panics
/// If `low > high`.
pub fn uniform_inclusive(low: u64, high: u64, next: &mut impl FnMut() -> u64) -> u64 {
    assert!(low <= high, "uniform_inclusive: low {low} > high {high}");
    let Some(range) = (high - low).checked_add(1) else {
        return next(); // the whole u64 range
    };
    // 2^64 mod range values at the top would make small results more likely.
    let accepted_max = u64::MAX - (u64::MAX - range + 1) % range;
    loop {
        let value = next();
        if value <= accepted_max {
            return low + value % range;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(values: &[u64]) -> impl FnMut() -> u64 + '_ {
        let mut values = values.iter();
        move || *values.next().expect("test source exhausted")
    }

    #[test]
    fn maps_into_the_inclusive_range() {
        let mut next = source(&[0, 5, 6, 11]);
        let drawn: Vec<u64> = (0..4).map(|_| uniform_inclusive(1, 6, &mut next)).collect();
        assert_eq!(drawn, vec![1, 6, 1, 6]);
    }

    #[test]
    fn rejects_the_biased_tail() {
        // For range 6, 2^64 mod 6 = 4: the top four values are redrawn.
        let mut next = source(&[u64::MAX, u64::MAX - 3, u64::MAX - 4]);
        assert_eq!(uniform_inclusive(1, 6, &mut next), 1 + (u64::MAX - 4) % 6);
    }

    #[test]
    fn full_range_and_single_value() {
        assert_eq!(uniform_inclusive(0, u64::MAX, &mut source(&[42])), 42);
        assert_eq!(uniform_inclusive(9, 9, &mut source(&[123_456])), 9);
    }
}
