// UTF-8 without TextEncoder/TextDecoder, which QuickJS lacks.

/**
 * `text` with every lone surrogate replaced by U+FFFD. A string crossing
 * into the host must be valid Unicode — the engine traps on one that is not,
 * and a JS string cut in the middle of an emoji is not — so every string the
 * SDK hands over goes through here. Native regex, no per-character loop.
 */
export function wellFormed(text) {
  const s = String(text);
  if (!/[\uD800-\uDFFF]/.test(s)) return s;
  return s.replace(/([\uD800-\uDBFF][\uDC00-\uDFFF])|[\uD800-\uDFFF]/g, (_, pair) => pair ?? '\uFFFD');
}

/**
 * `value` as JSON text the host can parse: `JSON.stringify` writes a lone
 * surrogate as a `\udXXX` escape, which a strict parser (the host's)
 * refuses, so every string in it — keys too — is made well formed first.
 */
export function jsonText(value) {
  const text = JSON.stringify(value);
  if (text === undefined || !/\\u[dD][89a-fA-F]/.test(text)) return text;
  return JSON.stringify(wellFormedDeep(JSON.parse(text)));
}

function wellFormedDeep(value) {
  if (typeof value === 'string') return wellFormed(value);
  if (Array.isArray(value)) return value.map(wellFormedDeep);
  if (value !== null && typeof value === 'object') {
    const out = {};
    for (const [key, item] of Object.entries(value)) out[wellFormed(key)] = wellFormedDeep(item);
    return out;
  }
  return value;
}

/** Bytes of `text` (lone surrogates become U+FFFD). */
export function encode(text) {
  const out = [];
  for (const char of String(text)) {
    let c = char.codePointAt(0);
    if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}

/**
 * Text of `bytes`, each invalid sequence replaced by U+FFFD. Native paths
 * first (an interpreter pays per byte in a JS loop, ~9 k fuel a byte under
 * QuickJS): TextDecoder where the engine has it (SpiderMonkey), else the
 * bytes as Latin-1 and, when not plain ASCII, decodeURIComponent(escape()),
 * which throws on invalid UTF-8; only then the loop below.
 */
export function decode(bytes) {
  if (typeof TextDecoder === 'function') return new TextDecoder().decode(bytes);
  const latin1 = fromBytes(bytes);
  if (!/[\x80-\xff]/.test(latin1)) return latin1;
  try {
    return decodeURIComponent(escape(latin1));
  } catch {
    // A body cut at a byte limit often ends inside a character: decode the
    // rest natively and replace only the cut character.
    const cut = incompleteTail(bytes);
    if (cut > 0) {
      try {
        return `${decodeURIComponent(escape(latin1.slice(0, bytes.length - cut)))}\ufffd`;
      } catch {
        // invalid elsewhere too
      }
    }
    return decodeLoop(bytes);
  }
}

/** How many bytes at the end start a UTF-8 sequence they do not finish (0 to 3). */
function incompleteTail(bytes) {
  for (let back = 1; back <= 3 && back <= bytes.length; back++) {
    const byte = bytes[bytes.length - back];
    if ((byte & 0xc0) !== 0x80) {
      const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
      return need > back ? back : 0;
    }
  }
  return 0;
}

function fromBytes(bytes) {
  let text = '';
  for (let at = 0; at < bytes.length; at += 8192) text += String.fromCharCode.apply(null, bytes.subarray(at, at + 8192));
  return text;
}

/** The decoder written out, for bytes that are not valid UTF-8. */
export function decodeLoop(bytes) {
  let text = '';
  let chunk = [];
  const flush = () => { text += String.fromCodePoint(...chunk); chunk = []; };
  for (let i = 0; i < bytes.length;) {
    const [point, size] = decodeOne(bytes, i);
    chunk.push(point);
    i += size;
    if (chunk.length >= 4096) flush();
  }
  flush();
  return text;
}

function decodeOne(b, i) {
  const first = b[i];
  if (first < 0x80) return [first, 1];
  const size = first >= 0xc2 && first <= 0xdf ? 2 : first >= 0xe0 && first <= 0xef ? 3 : first >= 0xf0 && first <= 0xf4 ? 4 : 0;
  if (size === 0 || i + size > b.length) return [0xfffd, 1];
  let point = first & (0xff >> (size + 1));
  for (let k = 1; k < size; k++) {
    if ((b[i + k] & 0xc0) !== 0x80) return [0xfffd, 1];
    point = (point << 6) | (b[i + k] & 63);
  }
  const min = [0, 0, 0x80, 0x800, 0x10000][size];
  if (point < min || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) return [0xfffd, 1];
  return [point, size];
}
