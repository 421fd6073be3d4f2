// URLs split the way wasi:http takes them, and redirects resolved. No URL
// global exists in QuickJS, and the rules here are few on purpose: http or
// https, a host, no credentials, no whitespace or control characters.
import { invalidUrl } from './http-error.js';

export const MAX_URL_LENGTH = 8000;

/** { scheme: 'http'|'https', authority, path } of `url` (fragment dropped), or throws http.invalid_url. */
export function splitUrl(url) {
  if (typeof url !== 'string') throw invalidUrl('a URL is a string', String(url));
  if (url.length > MAX_URL_LENGTH) throw invalidUrl(`longer than ${MAX_URL_LENGTH} characters`, url.slice(0, 100));
  if (/[\u0000-\u0020\u007f-\u009f]/.test(url)) throw invalidUrl('it contains whitespace or a control character', url);
  const match = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\/([^/?#]*)([^#]*)/.exec(url);
  if (!match) throw invalidUrl('not an absolute URL', url);
  const scheme = match[1].toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') throw invalidUrl('only http and https URLs', url);
  const authority = match[2];
  if (authority.includes('@')) throw invalidUrl('credentials do not belong in a URL', url);
  if (!/^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(:[0-9]{1,5})?$/.test(authority)) throw invalidUrl('no valid host', url);
  let path = match[3] || '/';
  if (path.startsWith('?')) path = `/${path}`;
  return { scheme, authority, path };
}

/** `location` (a redirect's Location header) read relative to `base`. */
export function resolveUrl(base, location) {
  if (/^[a-zA-Z][a-zA-Z0-9+.-]*:\/\//.test(location)) return location;
  const { scheme, authority, path } = splitUrl(base);
  if (location.startsWith('//')) return `${scheme}:${location}`;
  if (location.startsWith('/')) return `${scheme}://${authority}${location}`;
  const directory = path.split('?', 1)[0].replace(/[^/]*$/, '');
  return `${scheme}://${authority}${directory}${location}`;
}
