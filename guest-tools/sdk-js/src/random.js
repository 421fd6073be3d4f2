// `random` capability (toolhost:host/random@0.1.4): the call's recorded
// random stream, so a run replays with the same values. Draw only from
// here (not Math.random, which is not recorded) and the tool stays replayable.
import { nextU64 as hostNextU64 } from 'toolhost:host/random@0.1.4';
import { uniformInclusiveFrom, u64From } from './uniform.js';

/**
 * The next value of the stream, uniform over all of u64, as a bigint.
 * SpiderMonkey hands the host's u64 over exactly; QuickJS as a Number
 * (53 significant bits), so there it is built from two draws (uniform.js).
 */
export const nextU64 = () => u64From(hostNextU64);

/** A uniform integer in low..=high (safe integers), without modulo bias. */
export const uniformInclusive = (low, high) => uniformInclusiveFrom(low, high, nextU64);

/** One element of a non-empty array, uniformly. */
export function pick(items) {
  if (!Array.isArray(items) || items.length === 0) throw new RangeError('pick: need a non-empty array');
  return items[uniformInclusive(0, items.length - 1)];
}
