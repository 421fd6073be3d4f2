//! Substring search and ASCII lowering over 64 bytes per loop step, for
//! wasm's 128-bit SIMD as wasmtime's Cranelift compiles it.
//!
//! Why not just memchr: its wasm `simd128` searcher tests 16 positions per
//! loop step, and under Cranelift every step also pays a fuel check, an
//! epoch check and reloads of values spilled around those checks' calls:
//! about 50 x86 instructions per 16 bytes in the compiled component. Here
//! one step tests 64 positions (four vectors, one branch) in about 85, so
//! that overhead is paid once per 64 bytes. Natively memchr's AVX2 searcher
//! stays the faster one, so [`Tokens`](crate::search) uses these only in
//! wasm builds with `simd128` (`docs/benchmarks.md` has the figures).
//!
//! The algorithms are written once, over [`Lanes`]: wasm's `v128` in the
//! guests, and a plain-array [`Portable`] in the unit tests, whose checked
//! indexing also proves every load in bounds.

// Natively only the tests run the vector code (with `Portable`).
#![cfg_attr(
    not(any(test, all(target_arch = "wasm32", target_feature = "simd128"))),
    allow(dead_code)
)]

use memchr::arch::all::packedpair::Pair;

/// Lowercases ASCII `bytes` into `out` (of the same length) and says whether
/// they were all ASCII; when not, `out` holds garbage.
pub(crate) fn lower_ascii(bytes: &[u8], out: &mut [u8]) -> bool {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return lower_ascii_with::<core::arch::wasm32::v128>(bytes, out);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    lower_ascii_scalar(bytes, out)
}

/// [`lower_ascii`] written for a compiler's vectorizer (natively LLVM's
/// does well): no early exit, one reduction, the letter test as signed byte
/// compares. In wasm it lowers what the 64-byte steps leave over.
fn lower_ascii_scalar(bytes: &[u8], out: &mut [u8]) -> bool {
    let mut seen = 0_u8;
    for (&byte, target) in bytes.iter().zip(out) {
        seen |= byte;
        let signed = byte as i8;
        let upper = (signed > b'A' as i8 - 1) & (signed < b'Z' as i8 + 1);
        *target = byte | (u8::from(upper) << 5);
    }
    seen < 0x80
}

/// The 16-byte vector operations the scans need.
pub(crate) trait Lanes: Copy {
    fn splat(byte: u8) -> Self;
    fn load(bytes: &[u8; 16]) -> Self;
    fn store(self, out: &mut [u8; 16]);
    fn eq(self, other: Self) -> Self;
    fn and(self, other: Self) -> Self;
    fn or(self, other: Self) -> Self;
    /// Lane-wise wrapping addition.
    fn add(self, other: Self) -> Self;
    /// Lane-wise `self < other` as signed bytes (all ones where true).
    fn less_signed(self, other: Self) -> Self;
    fn any_set(self) -> bool;
    /// The top bit of each lane, lane 0 in bit 0.
    fn top_bits(self) -> u16;
}

/// The 64 bytes of `bytes` from `at`, as four vectors' worth, if there are
/// that many.
#[inline(always)]
fn block_at(bytes: &[u8], at: usize) -> Option<&[[u8; 16]; 4]> {
    bytes.get(at..)?.as_chunks::<16>().0.first_chunk::<4>()
}

/// [`lower_ascii`] 64 bytes per step.
fn lower_ascii_with<L: Lanes>(bytes: &[u8], out: &mut [u8]) -> bool {
    // `b + 0x3f` maps 'A'..='Z' onto the 26 smallest signed bytes, -128..=-103:
    // one add and one compare find the capitals.
    let shift = L::splat(0x3f);
    let below = L::splat(0x9a); // -102
    let case_bit = L::splat(0x20);
    let mut seen = L::splat(0);
    let (sources, source_tail) = bytes.as_chunks::<64>();
    let (targets, target_tail) = out.as_chunks_mut::<64>();
    for (source, target) in sources.iter().zip(targets) {
        let sources = source.as_chunks::<16>().0;
        let targets = target.as_chunks_mut::<16>().0;
        for (source, target) in sources.iter().zip(targets) {
            let v = L::load(source);
            v.or(v.add(shift).less_signed(below).and(case_bit))
                .store(target);
            seen = seen.or(v);
        }
    }
    // The last (fewer than 64) bytes one by one.
    lower_ascii_scalar(source_tail, target_tail) && seen.top_bits() == 0
}

/// A needle with the two bytes (by memchr's rarity ranking) a scan tests
/// before comparing it whole.
#[derive(Debug, Clone)]
pub(crate) struct PairNeedle {
    needle: Vec<u8>,
    index1: usize,
    index2: usize,
}

impl PairNeedle {
    /// `None` for needles too short for a pair (under two bytes).
    pub(crate) fn new(needle: &[u8]) -> Option<Self> {
        let pair = Pair::new(needle)?;
        Some(Self {
            needle: needle.to_vec(),
            index1: usize::from(pair.index1()),
            index2: usize::from(pair.index2()),
        })
    }

    /// Calls `found(at)` for occurrences of the needle in `haystack`, leftmost
    /// first. `found` returns where the scan goes on (positions before it are
    /// skipped; it is at least `at + 1`), or `None` to stop.
    pub(crate) fn for_each<L: Lanes>(
        &self,
        haystack: &[u8],
        mut found: impl FnMut(usize) -> Option<usize>,
    ) {
        let needle = self.needle.as_slice();
        let Some(last) = haystack.len().checked_sub(needle.len()) else {
            return;
        };
        let (index1, index2) = (self.index1, self.index2);
        let (byte1, byte2) = (needle[index1], needle[index2]);
        let (splat1, splat2) = (L::splat(byte1), L::splat(byte2));
        // The pair's two (distinct) positions are all of a two-byte needle.
        let paired = needle.len() == 2;
        let matches_at = |at: usize| paired || haystack.get(at..at + needle.len()) == Some(needle);
        let mut at = 0;
        // Whole blocks: candidates at..at + 64, all at most `last`.
        while at + 63 <= last {
            let (Some(first), Some(second)) = (
                block_at(haystack, at + index1),
                block_at(haystack, at + index2),
            ) else {
                break; // never: index1, index2 < needle.len()
            };
            let [a0, a1, a2, a3] = first.each_ref().map(L::load);
            let [b0, b1, b2, b3] = second.each_ref().map(L::load);
            let m0 = a0.eq(splat1).and(b0.eq(splat2));
            let m1 = a1.eq(splat1).and(b1.eq(splat2));
            let m2 = a2.eq(splat1).and(b2.eq(splat2));
            let m3 = a3.eq(splat1).and(b3.eq(splat2));
            let mut next = at + 64;
            if m0.or(m1).or(m2.or(m3)).any_set() {
                let mut bits = u64::from(m0.top_bits())
                    | u64::from(m1.top_bits()) << 16
                    | u64::from(m2.top_bits()) << 32
                    | u64::from(m3.top_bits()) << 48;
                while bits != 0 {
                    let candidate = at + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if !matches_at(candidate) {
                        continue;
                    }
                    let Some(resume) = found(candidate) else {
                        return;
                    };
                    let resume = resume.max(candidate + 1);
                    if resume >= at + 64 {
                        next = resume;
                        break;
                    }
                    bits &= u64::MAX << (resume - at);
                }
            }
            at = next;
        }
        // The last (fewer than 64) candidates, byte by byte.
        while at <= last {
            if haystack[at + index1] == byte1 && haystack[at + index2] == byte2 && matches_at(at) {
                let Some(resume) = found(at) else {
                    return;
                };
                at = resume.max(at + 1);
            } else {
                at += 1;
            }
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm {
    use core::arch::wasm32::{
        i8x16_add, i8x16_bitmask, i8x16_eq, i8x16_lt, u8x16_splat, v128, v128_and, v128_any_true,
        v128_load, v128_or, v128_store,
    };

    impl super::Lanes for v128 {
        #[inline(always)]
        fn splat(byte: u8) -> Self {
            u8x16_splat(byte)
        }
        #[inline(always)]
        fn load(bytes: &[u8; 16]) -> Self {
            // SAFETY: the reference holds 16 readable bytes; wasm loads need
            // no alignment.
            unsafe { v128_load(bytes.as_ptr().cast()) }
        }
        #[inline(always)]
        fn store(self, out: &mut [u8; 16]) {
            // SAFETY: the reference holds 16 writable bytes; wasm stores
            // need no alignment.
            unsafe { v128_store(out.as_mut_ptr().cast(), self) }
        }
        #[inline(always)]
        fn eq(self, other: Self) -> Self {
            i8x16_eq(self, other)
        }
        #[inline(always)]
        fn and(self, other: Self) -> Self {
            v128_and(self, other)
        }
        #[inline(always)]
        fn or(self, other: Self) -> Self {
            v128_or(self, other)
        }
        #[inline(always)]
        fn add(self, other: Self) -> Self {
            i8x16_add(self, other)
        }
        #[inline(always)]
        fn less_signed(self, other: Self) -> Self {
            i8x16_lt(self, other)
        }
        #[inline(always)]
        fn any_set(self) -> bool {
            v128_any_true(self)
        }
        #[inline(always)]
        fn top_bits(self) -> u16 {
            i8x16_bitmask(self)
        }
    }
}

/// Sixteen bytes in an array: [`Lanes`] for the tests, on any target.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Portable([u8; 16]);

#[cfg(test)]
impl Portable {
    fn zip(self, other: Self, f: impl Fn(u8, u8) -> u8) -> Self {
        Self(std::array::from_fn(|i| f(self.0[i], other.0[i])))
    }
}

#[cfg(test)]
impl Lanes for Portable {
    fn splat(byte: u8) -> Self {
        Self([byte; 16])
    }
    fn load(bytes: &[u8; 16]) -> Self {
        Self(*bytes)
    }
    fn store(self, out: &mut [u8; 16]) {
        *out = self.0;
    }
    fn eq(self, other: Self) -> Self {
        self.zip(other, |a, b| if a == b { 0xff } else { 0 })
    }
    fn and(self, other: Self) -> Self {
        self.zip(other, |a, b| a & b)
    }
    fn or(self, other: Self) -> Self {
        self.zip(other, |a, b| a | b)
    }
    fn add(self, other: Self) -> Self {
        self.zip(other, u8::wrapping_add)
    }
    fn less_signed(self, other: Self) -> Self {
        self.zip(other, |a, b| if (a as i8) < (b as i8) { 0xff } else { 0 })
    }
    fn any_set(self) -> bool {
        self.0.iter().any(|&lane| lane != 0)
    }
    fn top_bits(self) -> u16 {
        self.0
            .iter()
            .enumerate()
            .fold(0, |bits, (i, &lane)| bits | u16::from(lane >> 7) << i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64: the same cases on every run.
    struct Cases(u64);

    impl Cases {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        fn bytes(&mut self, len: usize, alphabet: &[u8]) -> Vec<u8> {
            (0..len)
                .map(|_| alphabet[self.below(alphabet.len())])
                .collect()
        }
    }

    fn lowered<L: Lanes>(bytes: &[u8]) -> (bool, Vec<u8>) {
        let mut out = vec![0xee; bytes.len()];
        let ascii = lower_ascii_with::<L>(bytes, &mut out);
        (ascii, out)
    }

    #[test]
    fn vector_lowering_equals_the_scalar_one() {
        let every_byte: Vec<u8> = (0..=255).collect();
        assert!(!lowered::<Portable>(&every_byte).0);
        let ascii: Vec<u8> = (0..128).collect();
        assert_eq!(
            lowered::<Portable>(&ascii),
            (true, ascii.to_ascii_lowercase())
        );

        let mut cases = Cases(0x1234_5678_9abc_def1);
        let mostly_ascii = b"AZaz@[`{ 09Qq\n\x7f";
        for len in 0..300 {
            let mut bytes = cases.bytes(len, mostly_ascii);
            let expected = (true, bytes.to_ascii_lowercase());
            assert_eq!(lowered::<Portable>(&bytes), expected, "{bytes:?}");
            let mut scalar = vec![0; len];
            assert!(lower_ascii_scalar(&bytes, &mut scalar));
            assert_eq!(scalar, expected.1);
            if len > 0 {
                // One non-ASCII byte anywhere, in a block or in the tail.
                let at = cases.below(len);
                bytes[at] = 0x80 | cases.next() as u8;
                assert!(!lowered::<Portable>(&bytes).0, "{len} bytes, {at}");
                assert!(!lower_ascii_scalar(&bytes, &mut scalar));
            }
        }
    }

    /// What `for_each` must report: occurrences leftmost first, each search
    /// going on where `resume` says.
    fn model(
        haystack: &[u8],
        needle: &[u8],
        mut resume: impl FnMut(usize) -> Option<usize>,
    ) -> Vec<usize> {
        let mut found = Vec::new();
        let mut at = 0;
        while at + needle.len() <= haystack.len() {
            if haystack[at..].starts_with(needle) {
                found.push(at);
                match resume(at) {
                    Some(next) => at = next.max(at + 1),
                    None => break,
                }
            } else {
                at += 1;
            }
        }
        found
    }

    fn scanned(
        pair: &PairNeedle,
        haystack: &[u8],
        mut resume: impl FnMut(usize) -> Option<usize>,
    ) -> Vec<usize> {
        let mut found = Vec::new();
        pair.for_each::<Portable>(haystack, |at| {
            found.push(at);
            resume(at)
        });
        found
    }

    #[test]
    fn the_pair_scan_finds_what_a_byte_by_byte_search_finds() {
        let mut cases = Cases(0x0dd_b1a5_e5ca_1ab1);
        for round in 0..3000 {
            // Small alphabets: many candidates, many matches.
            let alphabet: &[u8] = if round % 2 == 0 { b"ab" } else { b"abcde " };
            let (haystack_len, needle_len) = (cases.below(400), 2 + cases.below(5));
            let haystack = cases.bytes(haystack_len, alphabet);
            let needle = cases.bytes(needle_len, alphabet);
            let pair = PairNeedle::new(&needle).expect("two bytes or more");
            let every = |at: usize| Some(at + 1);
            let past = |at: usize| Some(at + needle.len());
            // Like a message batch: on to the next multiple of 37.
            let next_message = |at: usize| Some((at / 37 + 1) * 37);
            let backwards = |_: usize| Some(0); // a resume of 0 still moves on
            let context = format!("{needle:?} in {haystack:?}");
            assert_eq!(
                scanned(&pair, &haystack, every),
                model(&haystack, &needle, every),
                "{context}"
            );
            assert_eq!(
                scanned(&pair, &haystack, past),
                model(&haystack, &needle, past),
                "{context}"
            );
            let all: Vec<usize> = memchr::memmem::find_iter(&haystack, &needle).collect();
            assert_eq!(scanned(&pair, &haystack, past), all, "{context}");
            assert_eq!(
                scanned(&pair, &haystack, next_message),
                model(&haystack, &needle, next_message),
                "{context}"
            );
            assert_eq!(
                scanned(&pair, &haystack, backwards),
                model(&haystack, &needle, backwards),
                "{context}"
            );
            let mut left = 3;
            let mut three = |at: usize| {
                left -= 1;
                (left > 0).then_some(at + 1)
            };
            let expected = model(&haystack, &needle, every);
            assert_eq!(
                scanned(&pair, &haystack, &mut three),
                expected[..expected.len().min(3)],
                "{context}"
            );
        }
    }

    #[test]
    fn needles_shorter_than_a_pair_have_no_pair_scan() {
        assert!(PairNeedle::new(b"").is_none());
        assert!(PairNeedle::new(b"a").is_none());
        assert!(PairNeedle::new(b"ab").is_some());
    }
}
