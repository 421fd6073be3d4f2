/** UTF-8 bytes of `text` (lone surrogates become U+FFFD). */
export function encode(text: string): Uint8Array;
/** Text of UTF-8 `bytes`, invalid sequences replaced by U+FFFD. */
export function decode(bytes: Uint8Array): string;
/** The same, without native shortcuts (for tests). */
export function decodeLoop(bytes: Uint8Array): string;
/** `text` with every lone surrogate replaced by U+FFFD. */
export function wellFormed(text: unknown): string;
/** `JSON.stringify(value)` with every string (keys too) well formed. */
export function jsonText(value: unknown): string | undefined;
