// The extension's settings: where toolhost serve is, the token, the
// profile and the model a run uses. Kept in SillyTavern's own
// extension settings (`extensionSettings.toolhost`), saved with its
// `saveSettingsDebounced`; the token never goes into a URL.

import { element } from './dom.js';

export const KEY = 'toolhost';

export const DEFAULTS = Object.freeze({
    serverUrl: 'http://127.0.0.1:7700',
    token: '',
    profile: '',
    model: '',
    agents: '',
});

/** The settings now, with defaults filled in. */
export function settings(ctx) {
    const store = ctx.extensionSettings;
    if (!store[KEY] || typeof store[KEY] !== 'object') {
        store[KEY] = {};
    }
    const mine = store[KEY];
    for (const [name, value] of Object.entries(DEFAULTS)) {
        if (typeof mine[name] !== 'string') mine[name] = value;
    }
    return mine;
}

/** The server's base URL, checked: http(s), no path, no credentials. */
export function serverBase(url) {
    let parsed;
    try {
        parsed = new URL(String(url).trim());
    } catch {
        throw new SettingsError('the toolhost server URL is not a URL: ' + String(url).slice(0, 100));
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
        throw new SettingsError('the toolhost server URL must start with http:// or https://');
    }
    if (parsed.username || parsed.password) {
        throw new SettingsError('put the token in its own field, never in the URL');
    }
    return parsed.origin + parsed.pathname.replace(/\/+$/, '');
}

/** The agents setting as profile names: `researcher, critic` → both. */
export function agentNames(text) {
    return String(text ?? '').split(/[\s,]+/).filter(Boolean);
}

export class SettingsError extends Error {
    constructor(message) {
        super(message);
        this.code = 'extension.settings';
    }
}

const FIELDS = [
    { name: 'serverUrl', label: 'toolhost server URL', type: 'url', hint: 'where toolhost serve listens' },
    { name: 'token', label: 'Bearer token', type: 'password', hint: 'empty for a local server without a tokens file' },
    { name: 'profile', label: 'Profile', type: 'text', hint: 'one of the tenant\'s profiles; empty: the built-in writer' },
    { name: 'model', label: 'Model', type: 'text', hint: 'a name from the server\'s models.json' },
    { name: 'agents', label: 'Agents', type: 'text', hint: 'the tenant\'s profiles a run may delegate or hand off to, comma-separated; empty: none' },
];

/**
 * The settings drawer in SillyTavern's Extensions panel. `onCheck` runs
 * the connection check and says what it found.
 */
export function renderSettings(ctx, container, onCheck) {
    const current = settings(ctx);
    const drawer = element('div', { class: 'toolhost-settings inline-drawer', id: 'toolhost_settings' });
    const header = element('div', { class: 'inline-drawer-toggle inline-drawer-header' },
        element('b', {}, 'toolhost agent'),
        element('div', { class: 'inline-drawer-icon fa-solid fa-circle-chevron-down down' }));
    const content = element('div', { class: 'inline-drawer-content' });
    for (const field of FIELDS) {
        const id = 'toolhost_' + field.name;
        const input = element('input', {
            id, class: 'text_pole', type: field.type, value: current[field.name],
            autocomplete: field.type === 'password' ? 'off' : 'on', spellcheck: 'false',
        });
        input.addEventListener('input', () => {
            settings(ctx)[field.name] = input.value.trim();
            ctx.saveSettingsDebounced();
        });
        content.append(
            element('label', { for: id }, field.label),
            input,
            element('small', { class: 'toolhost-hint' }, field.hint));
    }
    const status = element('div', { class: 'toolhost-check', id: 'toolhost_check_status', role: 'status' });
    const check = element('button', { type: 'button', class: 'menu_button', id: 'toolhost_check' }, 'Check connection');
    check.addEventListener('click', async () => {
        status.textContent = 'Checking…';
        status.textContent = await onCheck();
    });
    content.append(element('div', { class: 'toolhost-row' }, check, status));
    drawer.append(header, content);
    container.append(drawer);
    return drawer;
}
