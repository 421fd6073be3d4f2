/** Milliseconds since the Unix epoch, now (capability `clock`). */
export function nowMs(): number;
/** Nanoseconds since the call started; never decreases within a call. */
export function elapsedNs(): number;
