/** @module Interface toolhost:host/random@0.1.4 **/
/**
 * The next value of the stream, uniform over all of u64.
 */
export function nextU64(): bigint;
