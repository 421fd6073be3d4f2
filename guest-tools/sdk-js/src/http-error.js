// Typed outbound-HTTP errors, the same codes as the Rust SDK's HttpError,
// and the mapping from wasi:http's error-code. No host import: node tests
// drive it.
import { ToolError } from './errors.js';

export class HttpError extends Error {
  /** @param {'http.invalid_url'|'http.denied'|'http.too_many_requests'|'http.response_too_large'|'http.timeout'|'http.failed'} code */
  constructor(code, message) {
    super(message);
    this.name = 'HttpError';
    this.code = code;
  }

  /** The ToolError a tool returns it as (throw it from `run`). */
  toToolError() {
    return new ToolError(this.code, this.message);
  }
}

export const invalidUrl = (why, url) => new HttpError('http.invalid_url', `not a URL this tool can request: ${why}: ${clip(url)}`);
export const denied = (url) => new HttpError('http.denied', `the host refused the request to ${clip(url)}: its host is not granted to this extension`);
export const tooLarge = () => new HttpError('http.response_too_large', 'the response body is larger than the host allows');
export const timeout = () => new HttpError('http.timeout', 'the server did not answer in time');
export const failed = (why) => new HttpError('http.failed', `the request failed: ${why}`);

/** An HttpError for a wasi:http `error-code` ({ tag, val }). */
export function fromErrorCode(code, url) {
  const tag = String(code?.tag ?? code);
  switch (tag.toLowerCase()) {
    case 'http-request-denied':
    case 'destination-ip-prohibited':
      return denied(url);
    case 'http-response-body-size':
      return tooLarge();
    case 'connection-read-timeout':
    case 'connection-timeout':
    case 'http-response-timeout':
    case 'dns-timeout':
      return timeout();
    case 'internal-error':
      if (typeof code.val === 'string' && code.val.startsWith('toolhost: this call already made')) {
        return new HttpError('http.too_many_requests', code.val);
      }
      break;
  }
  const detail = code?.val === undefined || code?.val === null ? '' : `: ${clip(JSON.stringify(code.val, (_, v) => (typeof v === 'bigint' ? Number(v) : v)))}`;
  return failed(`${tag}${detail}`);
}

/**
 * An HttpError for a body stream's failure that wasi:http gave only as text
 * (wasmtime-wasi-http reports its size cap and read timeout this way).
 */
export function fromStreamText(text) {
  if (text.includes('response body size exceeds limit')) return tooLarge();
  if (text.includes('read timeout')) return timeout();
  return failed(clip(text.split('\n', 1)[0]));
}

function clip(text) {
  const s = String(text);
  return s.length > 300 ? `${s.slice(0, 300)}…` : s;
}
