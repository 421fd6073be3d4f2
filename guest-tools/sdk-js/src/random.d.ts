/** The next value of the call's recorded random stream (capability `random`), uniform over u64. */
export function nextU64(): bigint;
/** A uniform integer in low..=high (safe integers, low <= high), without modulo bias. */
export function uniformInclusive(low: number, high: number): number;
/** One element of a non-empty array, uniformly. */
export function pick<T>(items: readonly T[]): T;
