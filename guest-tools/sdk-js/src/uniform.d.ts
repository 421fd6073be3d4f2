/** One u64 as a bigint from `draw` (a bigint, or a Number as QuickJS gives: then two draws). */
export function u64From(draw: () => bigint | number): bigint;
/** A uniform integer in low..=high drawn from `next` (values in 0..2^64). */
export function uniformInclusiveFrom(low: number, high: number, next: () => bigint): number;
