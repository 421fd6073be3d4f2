// Unbiased integers from a u64 stream, without a host import (so node tests
// can drive it).
const U64 = 1n << 64n;
const TWO_32 = 2 ** 32;

/**
 * One u64 as a bigint from `draw`, whichever way the engine hands a WIT u64
 * over: a bigint (SpiderMonkey) is exact. A Number (QuickJS) is the value
 * rounded to 53 significant bits, whose low bits are zero above 2^53: only
 * its top 32 bits are used, two draws per value. (Rounding moves a value
 * across a 2^32 boundary with probability 2^-22; a draw rounded up to 2^64
 * is redrawn.)
 */
export function u64From(draw) {
  const first = draw();
  if (typeof first === 'bigint') return first;
  return (BigInt(high32(first, draw)) << 32n) | BigInt(high32(draw(), draw));
}

function high32(value, draw) {
  for (;;) {
    const high = Math.floor(value / TWO_32);
    if (high < TWO_32) return high;
    value = draw();
  }
}

/**
 * A uniform integer in low..=high drawn from next() (-> bigint in 0..2^64):
 * values from the biased top of the u64 range are redrawn.
 * low and high are safe integers with low <= high.
 */
export function uniformInclusiveFrom(low, high, next) {
  if (!Number.isSafeInteger(low) || !Number.isSafeInteger(high) || low > high) {
    throw new RangeError(`uniformInclusive: need safe integers low <= high, got ${low}, ${high}`);
  }
  const range = BigInt(high) - BigInt(low) + 1n;
  // The largest multiple of range that fits in 2^64, minus one.
  const acceptedMax = U64 - (U64 % range) - 1n;
  for (;;) {
    const value = next();
    if (value <= acceptedMax) return low + Number(value % range);
  }
}
