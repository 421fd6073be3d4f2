/** The `tool-error` record of `toolhost:tool/types@0.1.0`. */
export interface ToolErrorRecord {
  code: string;
  message: string;
  structured: string | undefined;
}

/**
 * A recoverable failure: the model reads `message` and the run continues.
 * Throw it from `run`. Any other exception is a system error (the call traps).
 */
export class ToolError extends Error {
  /** @throws TypeError when `code` is not dotted lowercase ("weather.unknown_city"). */
  constructor(code: string, message: string, structured?: unknown);
  readonly code: string;
  /** Any JSON value; serialized into the record's `structured`. */
  readonly structured: unknown;
  toRecord(): ToolErrorRecord;
}

/** A ToolError with code `tool.invalid_arguments`. */
export function invalidArguments(message: string): ToolError;
