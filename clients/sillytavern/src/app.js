// The app around the extension: SillyTavern's context, read fresh each
// time (it is a snapshot of the app's state), and its toasts, where every
// refusal shows with its code.

import { ToolhostError } from './client.js';

/** SillyTavern's event names (`eventTypes`; `event_types` in older releases). */
export function eventTypes(ctx) {
    return ctx.eventTypes ?? ctx.event_types;
}

export function context() {
    return globalThis.SillyTavern.getContext();
}

/** A toast in SillyTavern's corner; the code is the title. */
export function toast(kind, message, code) {
    const title = code ? 'toolhost · ' + code : 'toolhost';
    globalThis.toastr?.[kind]?.(message, title, kind === 'error' ? { timeOut: 15000 } : undefined);
}

export function reportError(error) {
    if (error instanceof ToolhostError || typeof error?.code === 'string') {
        toast('error', explain(error), error.code);
    } else {
        toast('error', String(error?.message ?? error), 'extension.error');
    }
    console.error('[toolhost]', error);
}

/** What a refusal means for the person clicking. */
function explain(error) {
    switch (error.code) {
        case 'serve.unauthorized':
            return 'toolhost refused the token: put a token from the server\'s tokens file in the extension\'s settings. ' + error.message;
        case 'serve.unknown_profile':
            return 'toolhost has no such profile for this token\'s tenant (profiles/<name>.json): ' + error.message;
        case 'serve.unknown_model':
            return 'toolhost has no such model: ' + error.message;
        default:
            return error.message;
    }
}

export class ExtensionError extends Error {
    constructor(code, message) {
        super(message);
        this.code = code;
    }
}

