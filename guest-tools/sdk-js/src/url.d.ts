export const MAX_URL_LENGTH: number;
/** The parts wasi:http takes; throws HttpError http.invalid_url. */
export function splitUrl(url: string): { scheme: 'http' | 'https'; authority: string; path: string };
/** A redirect's Location resolved against the URL it came from. */
export function resolveUrl(base: string, location: string): string;
