// A stand-in for SillyTavern's page, for the toolhost extension's browser
// test: `window.SillyTavern.getContext()` with the members the extension
// uses, shaped as SillyTavern 1.12's `public/script.js` returns them — a
// real chat array, `eventSource` with `eventTypes` (the same names and
// values), `generate(type, {}, dryRun)` whose dry run emits
// CHAT_COMPLETION_PROMPT_READY with `{chat, dryRun}` as
// `public/scripts/openai.js` does (the prompt manager's default order),
// `addOneMessage`, `saveChat` (counted, the chat kept as saved; a failure
// only logged, as the app's) with the app's `/api/chats/get` to read it
// back, the extension settings and the slash-command parser — and
// `toastr`. Written
// from SillyTavern's source; none of it copied.

const fixture = await (await fetch('/harness/chat.json')).json();

const eventTypes = Object.freeze({
    APP_READY: 'app_ready',
    MESSAGE_SWIPED: 'message_swiped',
    MESSAGE_SENT: 'message_sent',
    MESSAGE_RECEIVED: 'message_received',
    MESSAGE_EDITED: 'message_edited',
    MESSAGE_DELETED: 'message_deleted',
    CHAT_CHANGED: 'chat_id_changed',
    GENERATION_STARTED: 'generation_started',
    GENERATION_STOPPED: 'generation_stopped',
    GENERATION_ENDED: 'generation_ended',
    USER_MESSAGE_RENDERED: 'user_message_rendered',
    CHARACTER_MESSAGE_RENDERED: 'character_message_rendered',
    CHAT_COMPLETION_PROMPT_READY: 'chat_completion_prompt_ready',
});

/** SillyTavern's emitter: listeners awaited one after another, in order. */
class EventEmitter {
    constructor() { this.events = {}; }
    on(event, listener) { (this.events[event] ??= []).push(listener); }
    removeListener(event, listener) {
        const list = this.events[event] ?? [];
        const at = list.indexOf(listener);
        if (at >= 0) list.splice(at, 1);
    }
    async emit(event, ...args) {
        harness.emitted.push([event, ...args]);
        for (const listener of [...(this.events[event] ?? [])]) {
            // As SillyTavern's emitter: a listener's error is logged, not thrown.
            try {
                await listener.apply(this, args);
            } catch (error) {
                console.error(error);
            }
        }
    }
}

const chat = fixture.chat.map((message) => structuredClone(message));
const characters = [fixture.character];
const chatMetadata = structuredClone(fixture.header.chat_metadata);
const eventSource = new EventEmitter();
const extensionSettings = {};
const commands = new Map();
const name1 = fixture.header.user_name;
const name2 = fixture.character.name;
const chatId = 'Mirelle - 2026-12-07@09h12m03s';

/** What the test reads back: saves, events, the prompts of dry runs. */
const harness = {
    saves: [],
    emitted: [],
    prompts: [],
    mainApi: 'openai',
    namesInCompletion: false,
};

const substituteParams = (text) => String(text ?? '').replaceAll('{{user}}', name1).replaceAll('{{char}}', name2);

/**
 * The chat-completion prompt of a generation, in the prompt manager's
 * default order: main prompt, character description, personality,
 * scenario, example dialogue, the new-chat marker, the history (what
 * `Generate` keeps: no `is_system` message; a swipe leaves the last one
 * out), and for `continue` the continue nudge.
 */
function completionPrompt(type) {
    const c = fixture.character;
    const prompt = [
        { role: 'system', content: substituteParams("Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}.") },
        { role: 'system', content: substituteParams(c.description) },
        { role: 'system', content: substituteParams(`[{{char}}'s personality: ${c.personality}]`) },
        { role: 'system', content: substituteParams(`[Circumstances and context of the dialogue: ${c.scenario}]`) },
        { role: 'system', content: substituteParams(c.mes_example.replace('<START>\n', '[Example Chat]\n')) },
        { role: 'system', content: '[Start a new Chat]' },
    ];
    let history = chat.filter((message) => !message.is_system);
    if (type === 'swipe') history = history.slice(0, -1);
    for (const message of history) {
        const entry = { role: message.is_user ? 'user' : 'assistant', content: substituteParams(message.mes) };
        if (harness.namesInCompletion) entry.name = message.name;
        prompt.push(entry);
    }
    if (type === 'continue') {
        const last = history[history.length - 1];
        prompt.push({ role: 'system', content: `[Continue the following message. Do not include ANY parts of the original message. Use capitalization and punctuation as if your reply is a part of the original message: ${last?.mes ?? ''}]` });
    }
    return prompt;
}

async function generate(type, options = {}, dryRun = false) {
    await eventSource.emit(eventTypes.GENERATION_STARTED, type, options, dryRun);
    if (!dryRun) throw new Error('the harness only assembles prompts (dry runs)');
    // As Generate does, dry run or not: the greeting follows the names.
    if (chat.length) chat[0].mes = substituteParams(chat[0].mes);
    if (harness.mainApi !== 'openai') return;
    const prompt = completionPrompt(type);
    harness.prompts.push({ type, prompt: structuredClone(prompt) });
    await eventSource.emit(eventTypes.CHAT_COMPLETION_PROMPT_READY, { chat: prompt, dryRun });
}

function render(message, id) {
    const node = document.createElement('div');
    node.className = 'mes';
    node.setAttribute('mesid', String(id));
    const name = document.createElement('span');
    name.className = 'name_text';
    name.textContent = message.name;
    const counter = document.createElement('span');
    counter.className = 'swipe_counter';
    const text = document.createElement('div');
    text.className = 'mes_text';
    node.append(name, counter, text);
    return node;
}

function fill(node, message) {
    node.setAttribute('swipeid', String(message.swipe_id ?? 0));
    node.querySelector('.mes_text').textContent = message.mes;
    node.querySelector('.swipe_counter').textContent = Array.isArray(message.swipes) && message.swipes.length > 1
        ? `${(message.swipe_id ?? 0) + 1}/${message.swipes.length}` : '';
}

/** As `addOneMessage`: a new block for the last message, or (`type: 'swipe'`) the last block drawn again. */
function addOneMessage(message, { type = 'normal', forceId = null } = {}) {
    const id = typeof forceId === 'number' ? forceId : chat.length - 1;
    const area = document.getElementById('chat');
    let node = area.querySelector(`.mes[mesid="${id}"]`);
    if (type !== 'swipe' || !node) {
        node = render(message, id);
        area.append(node);
    }
    fill(node, message);
}

/** The chat as the app's server keeps it: the fixture until the page saves. */
let serverChat = structuredClone(fixture.chat);

/**
 * As `saveChatConditional`: the chat to the app's server — and, as it
 * does, a failed save is only logged (`harness.failSaves` makes it fail).
 */
async function saveChat() {
    if (harness.failSaves) {
        console.warn('Error saving chat (the harness failed it)');
        return;
    }
    serverChat = JSON.parse(JSON.stringify(chat));
    harness.saves.push([{ ...fixture.header, chat_metadata: chatMetadata }, ...serverChat]);
}

/** As `reloadCurrentChat`: the chat read again from the app's server and shown. */
async function reloadCurrentChat() {
    chat.splice(0, chat.length, ...structuredClone(serverChat));
    document.getElementById('chat').replaceChildren();
    chat.forEach((message, id) => {
        const node = render(message, id);
        document.getElementById('chat').append(node);
        fill(node, message);
    });
    harness.reloads = (harness.reloads ?? 0) + 1;
}

/** The app's server as the page reaches it: the chat as saved (`/api/chats/get`). */
const pageFetch = window.fetch.bind(window);
window.fetch = async (url, options = {}) => {
    const path = typeof url === 'string' ? url : url.url;
    if (path === '/api/chats/get' && options.method === 'POST') {
        const body = JSON.parse(options.body);
        const known = body.file_name === chatId && body.avatar_url === fixture.character.avatar;
        const saved = known ? [{ ...fixture.header, chat_metadata: chatMetadata }, ...serverChat] : {};
        return new Response(JSON.stringify(saved), { headers: { 'Content-Type': 'application/json' } });
    }
    return pageFetch(url, options);
};

const SlashCommandParser = {
    addCommand(name, callback, aliases, helpString) {
        commands.set(name, { callback, aliases, helpString });
    },
};

/** `/name key=value … text`, as the parser hands a command its arguments. */
async function executeSlashCommands(text) {
    const match = /^\/(\S+)\s*(.*)$/s.exec(text.trim());
    const command = match && commands.get(match[1]);
    if (!command) throw new Error('no such command: ' + text);
    const named = {};
    let rest = match[2];
    for (let arg; (arg = /^(\w+)=(\S+)\s*/.exec(rest)); rest = rest.slice(arg[0].length)) named[arg[1]] = arg[2];
    return command.callback(named, rest);
}

window.SillyTavern = {
    getContext() {
        return {
            chat,
            characters,
            groups: [],
            name1,
            name2,
            characterId: '0',
            groupId: null,
            chatId,
            getCurrentChatId: () => chatId,
            chatMetadata,
            eventSource,
            eventTypes,
            event_types: eventTypes,
            mainApi: harness.mainApi,
            addOneMessage,
            generate,
            saveChat,
            reloadCurrentChat,
            getRequestHeaders: () => ({ 'Content-Type': 'application/json', 'X-CSRF-Token': 'harness' }),
            substituteParams,
            extensionSettings,
            saveSettingsDebounced: () => { harness.settingsSaved = (harness.settingsSaved ?? 0) + 1; },
            SlashCommandParser,
            executeSlashCommands,
            getThumbnailUrl: (kind, file) => `/thumbnail?type=${kind}&file=${encodeURIComponent(file)}`,
        };
    },
};

/** toastr as SillyTavern configures it (escapeHtml: true): text only. */
function toast(kind) {
    return (message, title) => {
        const node = document.createElement('div');
        node.className = 'toast toast-' + kind;
        const head = document.createElement('div');
        head.className = 'toast-title';
        head.textContent = title ?? '';
        const body = document.createElement('div');
        body.className = 'toast-message';
        body.textContent = message ?? '';
        node.append(head, body);
        document.getElementById('toast-container').append(node);
    };
}
window.toastr = { error: toast('error'), warning: toast('warning'), info: toast('info'), success: toast('success') };

document.getElementById('options_button').addEventListener('click', () => {
    const options = document.getElementById('options');
    options.style.display = options.style.display === 'none' ? 'block' : 'none';
});

chat.forEach((message, id) => {
    const node = render(message, id);
    document.getElementById('chat').append(node);
    fill(node, message);
});
window.harness = harness;
window.harnessChat = chat;

// As SillyTavern loads a third-party extension: its manifest's `js`.
const manifest = await (await fetch('/scripts/extensions/third-party/toolhost/manifest.json')).json();
await import(`/scripts/extensions/third-party/toolhost/${manifest.js}`);
harness.loaded = true;
