/** Codes as the Rust SDK's HttpError. */
export type HttpErrorCode =
  | 'http.invalid_url' | 'http.denied' | 'http.too_many_requests'
  | 'http.response_too_large' | 'http.timeout' | 'http.failed';

/** Why a request gave no response. `throw error.toToolError()` to return it to the model. */
export class HttpError extends Error {
  readonly code: HttpErrorCode;
  toToolError(): import('./errors.js').ToolError;
}

export interface Request {
  /** Default GET. */
  method?: string;
  /** http:// or https://, no credentials. */
  url: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Read at most this many body bytes, else http.response_too_large. Default 8 MiB. */
  maxBytes?: number;
  /** With maxBytes: keep the first maxBytes bytes and set `truncated` instead of failing. */
  truncate?: boolean;
}

export interface Response {
  status: number;
  /** Names lowercase, in the order received. */
  headers: [string, Uint8Array][];
  body: Uint8Array;
  /** The body was cut at maxBytes (only with `truncate`). */
  truncated: boolean;
  /** The URL that answered (after redirects). */
  url: string;
  /** The first value of header `name` (any case), as text. */
  header(name: string): string | undefined;
  /** The body as UTF-8, invalid sequences replaced. */
  text(): string;
  /** The body parsed as JSON; throws HttpError http.failed. */
  json(): unknown;
}

export const MAX_REDIRECTS: number;
export const DEFAULT_MAX_BYTES: number;

/** GET `url`, following up to MAX_REDIRECTS redirects. Throws HttpError. */
export function get(url: string, options?: { headers?: Record<string, string>; maxBytes?: number; truncate?: boolean }): Response;
/** Send `request`; GET/HEAD follow redirects, others return the 3xx. Throws HttpError. */
export function fetch(request: Request): Response;
/** One request, no redirect followed. Throws HttpError. */
export function send(request: Request): Response;
