// `web.fetch_text`: one GET through @toolhost/guest's http, the body as text.
// The host admits the request against the hosts the user granted; this code
// never decides who may be called. Redirects are followed by the SDK (up to
// 5, each hop admitted by the host on its own).
import { defineTool } from '@toolhost/guest';
import * as http from '@toolhost/guest/http';
import * as log from '@toolhost/guest/log';

// Enough for an API answer or an article; small enough not to flood the context.
const MAX_CHARS = 20_000;
// A character is at most 4 UTF-8 bytes: reading more could never be shown
// (the SDK stops reading there, so a huge body costs the sandbox nothing).
const MAX_BYTES = 4 * MAX_CHARS + 4;

export const tool = defineTool({
  name: 'web.fetch_text',
  title: 'Fetch text',
  description: `GET an http(s) URL and return the status, content type and body as text (at most ${MAX_CHARS} characters). Only hosts the user granted can be reached.`,
  input: {
    type: 'object',
    properties: { url: { type: 'string', description: 'The http:// or https:// URL to GET.', minLength: 1, maxLength: 8000 } },
    required: ['url'],
    additionalProperties: false,
  },
  output: {
    type: 'object',
    properties: {
      status: { type: 'integer' },
      contentType: { type: ['string', 'null'] },
      url: { type: 'string' },
      text: { type: 'string' },
      truncated: { type: 'boolean' },
    },
  },
  annotations: { readOnly: true, idempotent: false, openWorld: true, sourceKind: 'web' },
  run({ url }) {
    log.info(`GET ${url}`);
    const response = http.get(url, { maxBytes: MAX_BYTES, truncate: true });
    const full = response.text();
    // Never cut a character in two (a surrogate pair at the boundary).
    const end = /[\uD800-\uDBFF]/.test(full.charAt(MAX_CHARS - 1)) ? MAX_CHARS - 1 : MAX_CHARS;
    const text = full.slice(0, end);
    const truncated = response.truncated || full.length > MAX_CHARS;
    const contentType = response.header('content-type') ?? null;
    const head = `GET ${response.url} → HTTP ${response.status}${contentType ? ` (${contentType})` : ''}`;
    const note = truncated ? `\nThe body is longer than ${MAX_CHARS} characters: only the first are shown.` : '';
    return {
      content: `${head}${note}\n\n${text || '(empty body)'}`,
      structured: { status: response.status, contentType, url: response.url, text, truncated },
      resourceRefs: [response.url],
    };
  },
});
