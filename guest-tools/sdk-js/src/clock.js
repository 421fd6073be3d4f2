// `clock` capability (toolhost:clock/clock@0.1.0): the time, recorded with
// the call so a replay reads the same values. (WASI's own wall clock stands
// still at the call's start; this one moves.)
import { nowMs as hostNowMs, elapsedNs as hostElapsedNs } from 'toolhost:clock/clock@0.1.0';

/** Milliseconds since the Unix epoch, now. */
export const nowMs = () => Number(hostNowMs());

/** Nanoseconds since the call started (exact: a call lasts far less than 2^53 ns, 104 days). */
export const elapsedNs = () => Number(hostElapsedNs());
