import { test } from 'node:test';
import assert from 'node:assert/strict';
import { uniformInclusiveFrom, u64From } from '../src/uniform.js';
import { splitUrl, resolveUrl } from '../src/url.js';
import { encode, decode, decodeLoop } from '../src/utf8.js';
import { fromErrorCode, fromStreamText, HttpError } from '../src/http-error.js';

const source = (values) => { let i = 0; return () => { if (i >= values.length) throw new Error('exhausted'); return values[i++]; }; };
const MAX = (1n << 64n) - 1n;

test('uniformInclusive maps into the range and redraws the biased tail', () => {
  assert.deepEqual([0n, 5n, 6n, 11n].map((v) => uniformInclusiveFrom(1, 6, source([v]))), [1, 6, 1, 6]);
  // 2^64 mod 6 = 4: the top four values are redrawn.
  assert.equal(uniformInclusiveFrom(1, 6, source([MAX, MAX - 3n, MAX - 4n])), 1 + Number((MAX - 4n) % 6n));
  assert.equal(uniformInclusiveFrom(9, 9, source([123n])), 9);
  assert.equal(uniformInclusiveFrom(-5, 5, source([0n])), -5);
  assert.throws(() => uniformInclusiveFrom(2, 1, source([])), RangeError);
  assert.throws(() => uniformInclusiveFrom(0.5, 1, source([])), RangeError);
});

test('u64From takes bigints as they are and builds Numbers from two top halves', () => {
  assert.equal(u64From(source([7n])), 7n);
  const high = 0x12345678 * 2 ** 32;
  assert.equal(u64From(source([high, 0x9abcdef0 * 2 ** 32])), 0x123456789abcdef0n);
  // A Number rounded up to 2^64 is redrawn, not wrapped.
  assert.equal(u64From(source([2 ** 64, 2 ** 32, 0])), 1n << 32n);
});

test('splitUrl accepts http(s) with a host and refuses the rest', () => {
  assert.deepEqual(splitUrl('HTTP://x.example:8080'), { scheme: 'http', authority: 'x.example:8080', path: '/' });
  assert.deepEqual(splitUrl('https://a.b/p?q=1#frag'), { scheme: 'https', authority: 'a.b', path: '/p?q=1' });
  assert.deepEqual(splitUrl('http://[::1]:80/x'), { scheme: 'http', authority: '[::1]:80', path: '/x' });
  assert.deepEqual(splitUrl('http://a.b?x'), { scheme: 'http', authority: 'a.b', path: '/?x' });
  for (const bad of ['ftp://x.example/', '/relative', 'https://user:pw@x.example/', 'nonsense', 'http:///x', 'http://a b/', 'http://a.b/\n', 'http://a:99999999/', 5, 'http://x/' + 'a'.repeat(9000)]) {
    assert.throws(() => splitUrl(bad), (e) => e instanceof HttpError && e.code === 'http.invalid_url', String(bad).slice(0, 40));
  }
});

test('redirects resolve against the URL they came from', () => {
  const base = 'https://api.example.com/v1/items?page=2';
  assert.equal(resolveUrl(base, '/v2/items'), 'https://api.example.com/v2/items');
  assert.equal(resolveUrl(base, 'other'), 'https://api.example.com/v1/other');
  assert.equal(resolveUrl(base, '//cdn.example.net/x'), 'https://cdn.example.net/x');
  assert.equal(resolveUrl(base, 'http://elsewhere.example/'), 'http://elsewhere.example/');
});

test('UTF-8 round-trips and replaces invalid bytes', () => {
  const text = 'héllo ✓ 😀';
  assert.equal(decode(encode(text)), text);
  assert.equal(decodeLoop(encode(text)), text);
  assert.deepEqual([...encode('\ud800')], [0xef, 0xbf, 0xbd]);
  for (const decoder of [decode, decodeLoop]) {
    assert.equal(decoder(Uint8Array.from([0x61, 0xff, 0x62])), 'a\ufffdb');
    assert.equal(decoder(Uint8Array.from([0xc0, 0x80])), '\ufffd\ufffd');
    assert.equal(decoder(Uint8Array.from([0xed, 0xa0, 0x80])), '\ufffd\ufffd\ufffd');
  }
  // A body cut inside a character.
  assert.equal(decodeLoop(encode('ab✓').subarray(0, 4)), 'ab\ufffd\ufffd');
});

test('the decoder without TextDecoder (as under QuickJS) agrees', () => {
  const saved = globalThis.TextDecoder;
  globalThis.TextDecoder = undefined;
  try {
    assert.equal(decode(encode('plain ascii')), 'plain ascii');
    assert.equal(decode(encode('héllo ✓ 😀')), 'héllo ✓ 😀');
    assert.equal(decode(encode('ab✓').subarray(0, 4)), 'ab\ufffd');
    assert.equal(decode(Uint8Array.from([0x61, 0xff, 0x62])), 'a\ufffdb');
  } finally {
    globalThis.TextDecoder = saved;
  }
});

test('wasi:http error codes map to the Rust SDK codes', () => {
  const code = (tag, val) => fromErrorCode({ tag, val }, 'http://x/').code;
  assert.equal(code('HTTP-request-denied'), 'http.denied');
  assert.equal(code('destination-IP-prohibited'), 'http.denied');
  assert.equal(code('HTTP-response-body-size', 9n), 'http.response_too_large');
  assert.equal(code('connection-read-timeout'), 'http.timeout');
  assert.equal(code('internal-error', 'toolhost: this call already made 8 requests'), 'http.too_many_requests');
  assert.equal(code('internal-error', 'other'), 'http.failed');
  assert.match(fromErrorCode({ tag: 'DNS-error', val: { rcode: 'x', infoCode: 3n } }, 'u').message, /DNS-error: \{"rcode":"x","infoCode":3\}/);
  assert.equal(fromStreamText('response body size exceeds limit: 8').code, 'http.response_too_large');
  assert.equal(fromStreamText('read timeout\nbacktrace').code, 'http.timeout');
  assert.equal(fromStreamText('boom\nbacktrace').message, 'the request failed: boom');
  const asTool = fromErrorCode({ tag: 'HTTP-request-denied' }, 'http://x/').toToolError();
  assert.equal(asTool.code, 'http.denied');
});

test('wellFormed replaces lone surrogates and keeps pairs', async () => {
  const { wellFormed } = await import('../src/utf8.js');
  const emoji = '\u{1F600}';
  assert.equal(wellFormed(`a${emoji}b`), `a${emoji}b`);
  assert.equal(wellFormed(`cut ${emoji}`.slice(0, -1)), 'cut \uFFFD');
  assert.equal(wellFormed('\uDC00x\uD800'), '\uFFFDx\uFFFD');
  assert.equal(wellFormed('plain'), 'plain');
});
