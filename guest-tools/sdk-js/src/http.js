// `outbound-http` capability: requests through the standard
// wasi:http/outgoing-handler@0.2.12, blocking on pollables (QuickJS tools
// are built without async). The host admits each request against the hosts
// the user granted; this module only turns its answers into HttpError.
// Importing this module is what makes the component import wasi:http: add
// `outbound-http` and `allowed-hosts` to the manifest.
import { handle } from 'wasi:http/outgoing-handler@0.2.12';
import { Fields, OutgoingRequest, OutgoingBody, IncomingBody, httpErrorCode } from 'wasi:http/types@0.2.12';
import { HttpError, failed, fromErrorCode, fromStreamText, tooLarge } from './http-error.js';
import { splitUrl, resolveUrl } from './url.js';
import { decode, encode } from './utf8.js';

export { HttpError } from './http-error.js';

/** Redirects `fetch` follows (GET and HEAD only). */
export const MAX_REDIRECTS = 5;
/** Default cap on a body read into the guest (the host caps at 8 MiB too). */
export const DEFAULT_MAX_BYTES = 8 * 1024 * 1024;
const READ_CHUNK = 64 * 1024;
const WRITE_CHUNK = 4096;
const METHODS = ['get', 'head', 'post', 'put', 'delete', 'connect', 'options', 'trace', 'patch'];

/** GET `url`, following redirects. */
export function get(url, options = {}) {
  return fetch({ method: 'GET', url, headers: options.headers, maxBytes: options.maxBytes, truncate: options.truncate });
}

/** Send `request`; a GET or HEAD follows up to MAX_REDIRECTS redirects, anything else returns the 3xx. */
export function fetch(request) {
  const method = (request.method ?? 'GET').toUpperCase();
  const follows = method === 'GET' || method === 'HEAD';
  let current = { ...request, method };
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const response = send(current);
    const location = follows && [301, 302, 303, 307, 308].includes(response.status) ? response.header('location') : undefined;
    if (location === undefined) return response;
    current = { ...current, url: resolveUrl(current.url, location) };
  }
  throw failed(`more than ${MAX_REDIRECTS} redirects`);
}

/** One request, no redirect followed. */
export function send(request) {
  const url = request.url;
  const { scheme, authority, path } = splitUrl(url);
  const method = (request.method ?? 'GET').toUpperCase();
  const maxBytes = request.maxBytes ?? DEFAULT_MAX_BYTES;
  // Header names and values may come from the model: a refusal is an
  // HttpError, never an exception that would trap the call.
  const fields = refuseOnError(() => Fields.fromList(headerList(request.headers)), 'a header name or value is not valid');
  const outgoing = new OutgoingRequest(fields);
  const lower = method.toLowerCase();
  refuseOnError(() => outgoing.setMethod(METHODS.includes(lower) ? { tag: lower } : { tag: 'other', val: method }), 'the method is not valid');
  refuseOnError(() => outgoing.setScheme({ tag: scheme === 'https' ? 'HTTPS' : 'HTTP' }), 'the scheme is not valid');
  refuseOnError(() => outgoing.setAuthority(authority), 'the host is not valid');
  refuseOnError(() => outgoing.setPathWithQuery(path), 'the path is not valid');
  const body = refuseOnError(() => outgoing.body(), 'the request body is unavailable');
  const pending = call(() => handle(outgoing, undefined), url);
  if (request.body !== undefined) writeBody(body, request.body, url);
  call(() => OutgoingBody.finish(body, undefined), url);
  const response = wait(pending, url);
  try {
    const status = response.status();
    const headerFields = response.headers();
    const headers = headerFields.entries().map(([name, value]) => [name.toLowerCase(), bytes(value)]);
    dispose(headerFields);
    const [received, truncated] = readBody(response, url, maxBytes, request.truncate === true);
    return makeResponse(status, headers, received, truncated, url);
  } finally {
    dispose(response);
    dispose(pending);
  }
}

function wait(pending, url) {
  for (;;) {
    const ready = pending.get();
    if (ready === undefined || ready === null) {
      const pollable = pending.subscribe();
      pollable.block();
      dispose(pollable);
      continue;
    }
    // option<result<result<incoming-response, error-code>>>
    if (ready.tag === 'err') throw failed('the response was already taken');
    const inner = ready.val;
    if (inner.tag === 'err') throw fromErrorCode(inner.val, url);
    return inner.val;
  }
}

function readBody(response, url, maxBytes, truncate) {
  const incoming = response.consume();
  const stream = incoming.stream();
  const chunks = [];
  let size = 0;
  let truncated = false;
  try {
    for (;;) {
      let chunk;
      try {
        chunk = bytes(stream.blockingRead(READ_CHUNK));
      } catch (error) {
        const payload = errorPayload(error);
        if (payload?.tag === 'closed') break;
        throw streamError(payload, url, error);
      }
      if (size + chunk.length > maxBytes) {
        if (!truncate) throw tooLarge();
        // Keep what fits and stop reading: the rest never enters the sandbox.
        chunks.push(chunk.subarray(0, maxBytes - size));
        size = maxBytes;
        truncated = true;
        break;
      }
      size += chunk.length;
      chunks.push(chunk);
    }
  } finally {
    // A child resource goes before its parent: the stream before the body.
    dispose(stream);
    dispose(IncomingBody.finish(incoming));
  }
  return [concat(chunks, size), truncated];
}

function writeBody(body, content, url) {
  const data = typeof content === 'string' ? encode(content) : bytes(content);
  const stream = body.write();
  try {
    for (let at = 0; at < data.length; at += WRITE_CHUNK) {
      try {
        stream.blockingWriteAndFlush(data.subarray(at, at + WRITE_CHUNK));
      } catch (error) {
        throw streamError(errorPayload(error), url, error);
      }
    }
  } finally {
    dispose(stream);
  }
}

function streamError(payload, url, original) {
  if (payload?.tag === 'last-operation-failed') {
    const ioError = payload.val;
    const code = httpErrorCode(ioError);
    const mapped = code === undefined || code === null ? fromStreamText(ioError.toDebugString()) : fromErrorCode(code, url);
    dispose(ioError);
    return mapped;
  }
  if (payload?.tag === 'closed') return failed('the connection closed');
  return failed(String(original?.message ?? original));
}

function makeResponse(status, headers, body, truncated, url) {
  return {
    status,
    headers,
    body,
    truncated,
    url,
    /** The first value of header `name` (any case), as text. */
    header(name) {
      const wanted = name.toLowerCase();
      const found = headers.find(([key]) => key === wanted);
      return found === undefined ? undefined : decode(found[1]);
    },
    text() {
      return decode(body);
    },
    json() {
      try {
        return JSON.parse(decode(body));
      } catch (error) {
        throw failed(`the response is not the JSON expected: ${error.message}`);
      }
    },
  };
}

// A function returning result<_, error-code> throws its error: jco's
// SpiderMonkey bindings wrap it in an Error with `payload`, QuickJS throws it bare.
function call(fn, url) {
  try {
    return fn();
  } catch (error) {
    const payload = errorPayload(error);
    if (payload && typeof payload === 'object' && 'tag' in payload) throw fromErrorCode(payload, url);
    throw failed(String(error?.message ?? error));
  }
}

function refuseOnError(fn, why) {
  try {
    return fn();
  } catch {
    throw failed(why);
  }
}

function errorPayload(error) {
  return error !== null && typeof error === 'object' && 'payload' in error ? error.payload : error;
}

function headerList(headers) {
  const list = [];
  for (const [name, value] of Object.entries(headers ?? {})) list.push([String(name).toLowerCase(), encode(String(value))]);
  return list;
}

// A list<u8> as a Uint8Array without copying when it is one already. Not
// `instanceof`: SpiderMonkey's bindings hand over typed arrays that fail it,
// and Uint8Array.from() then walks the iterator byte by byte (2 G fuel for
// 100 kB without a JIT).
function bytes(value) {
  if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  return Uint8Array.from(value);
}

function concat(chunks, size) {
  const out = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

function dispose(resource) {
  const method = typeof Symbol.dispose === 'symbol' ? resource?.[Symbol.dispose] : undefined;
  if (typeof method === 'function') method.call(resource);
}
