// toolhost serve's API as the extension uses it: JSON requests with the
// bearer token in a header (never in a URL), every refusal a
// `ToolhostError` carrying the server's `{code, message}`, and a run's
// journal followed as Server-Sent Events over fetch (an EventSource
// cannot send the token).

import { serverBase } from './settings.js';

/** Largest SSE frame taken before the stream is given up as broken. */
const MAX_FRAME_CHARS = 8 * 1024 * 1024;

export class ToolhostError extends Error {
    /**
     * @param {string} code the server's error code, or the extension's own
     *   (`extension.*`) when no server answered
     * @param {string} message
     * @param {number} status the HTTP status, 0 when there was none
     */
    constructor(code, message, status = 0) {
        super(message);
        this.code = code;
        this.status = status;
    }
}

export class Toolhost {
    constructor({ serverUrl, token }) {
        this.base = serverBase(serverUrl);
        this.token = token || '';
    }

    headers(extra = {}) {
        return this.token ? { ...extra, Authorization: 'Bearer ' + this.token } : { ...extra };
    }

    async request(method, path, body, { signal } = {}) {
        let response;
        try {
            response = await fetch(this.base + path, {
                method,
                headers: this.headers(body === undefined ? {} : { 'Content-Type': 'application/json' }),
                body: body === undefined ? undefined : JSON.stringify(body),
                mode: 'cors',
                credentials: 'omit',
                cache: 'no-store',
                signal,
            });
        } catch (error) {
            if (signal?.aborted) throw error;
            throw await this.unreached();
        }
        return answer(response);
    }

    /**
     * Why no answer could be read. A page the server refused gets none
     * (its CORS check failed), exactly like an unreachable server; a
     * request no page can be refused (`no-cors`, nothing readable comes
     * back) tells the two apart.
     */
    async unreached() {
        const page = globalThis.location?.origin ?? 'this page';
        if (globalThis.location?.protocol === 'https:' && this.base.startsWith('http:')) {
            return new ToolhostError('extension.mixed_content',
                `this page is served over https, so the browser will not call ${this.base} (http): serve toolhost over https (--tls-cert, --tls-key)`);
        }
        try {
            await fetch(this.base + '/v1/health', { mode: 'no-cors', credentials: 'omit', cache: 'no-store' });
        } catch {
            return new ToolhostError('extension.server_unreachable',
                `toolhost is not reachable at ${this.base}: is toolhost serve running, and is the URL in the settings right?`);
        }
        return new ToolhostError('serve.origin_refused',
            `toolhost at ${this.base} refused this page's origin (${page}): start it with --allow-origin ${page}`);
    }

    health() { return this.request('GET', '/v1/health'); }
    tools() { return this.request('GET', '/v1/tools'); }
    startRun(body) { return this.request('POST', '/v1/runs', body); }
    run(id) { return this.request('GET', runPath(id)); }
    cancel(id) { return this.request('POST', runPath(id, '/cancel')); }
    approvals(id) { return this.request('GET', runPath(id, '/approvals')); }
    decide(id, callId, decision, note) {
        return this.request('POST', runPath(id, '/approvals/' + encodeURIComponent(callId)),
            note ? { decision, note } : { decision });
    }
    commits(id) { return this.request('GET', runPath(id, '/commits')); }
    answerCommit(id, commitId, outcome) {
        return this.request('POST', runPath(id, '/commits/' + encodeURIComponent(commitId)), outcome);
    }

    /**
     * The run's journal events after seq `after`, as they are written;
     * ends when the server ends the stream (the run's loop ended, or the
     * server stopped). Each event is one journal line, parsed.
     */
    async *events(id, { after = 0, signal } = {}) {
        let response;
        try {
            response = await fetch(this.base + runPath(id, '/events'), {
                headers: this.headers(after > 0
                    ? { Accept: 'text/event-stream', 'Last-Event-ID': String(after) }
                    : { Accept: 'text/event-stream' }),
                mode: 'cors',
                credentials: 'omit',
                cache: 'no-store',
                signal,
            });
        } catch (error) {
            if (signal?.aborted) return;
            throw await this.unreached();
        }
        if (!response.ok) await answer(response);
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        try {
            for (;;) {
                const { value, done } = await reader.read();
                if (done) return;
                buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
                let end;
                while ((end = buffer.indexOf('\n\n')) >= 0) {
                    const frame = buffer.slice(0, end);
                    buffer = buffer.slice(end + 2);
                    const data = frame.split('\n')
                        .filter((line) => line.startsWith('data:'))
                        .map((line) => line.slice(5).replace(/^ /, ''))
                        .join('\n');
                    if (!data) continue;
                    let event;
                    try {
                        event = JSON.parse(data);
                    } catch {
                        throw new ToolhostError('extension.bad_event', 'an event of the run does not read as JSON');
                    }
                    if (event && typeof event === 'object') yield event;
                }
                if (buffer.length > MAX_FRAME_CHARS) {
                    throw new ToolhostError('extension.bad_event', 'an event of the run is larger than 8 MiB');
                }
            }
        } catch (error) {
            if (signal?.aborted) return;
            throw error;
        } finally {
            reader.cancel().catch(() => {});
        }
    }
}

function runPath(id, rest = '') {
    return '/v1/runs/' + encodeURIComponent(id) + rest;
}

/** A response's JSON body, or its `{code, message}` as a ToolhostError. */
async function answer(response) {
    const text = await response.text();
    let body = null;
    try {
        body = text ? JSON.parse(text) : null;
    } catch {
        body = null;
    }
    if (response.ok) return body;
    const code = typeof body?.code === 'string' ? body.code : 'serve.http_' + response.status;
    const message = typeof body?.message === 'string' ? body.message : text.slice(0, 300) || response.statusText;
    throw new ToolhostError(code, message, response.status);
}
