// What a run starts from: the prompt SillyTavern would send for the next
// generation — taken from a dry run's CHAT_COMPLETION_PROMPT_READY event —
// as a toolhost prompt snapshot, the chat itself as SillyTavern saves it
// (JSONL), and the name toolhost keeps that chat under.

import { eventTypes } from './app.js';

/** The generation types a run may have, and the dry run each takes. */
export const GENERATION_TYPES = Object.freeze({
    normal: 'normal',
    swipe: 'swipe',
    // A dry run of `regenerate` keeps the reply it would replace in the
    // prompt (SillyTavern drops it only when it really regenerates); a
    // `swipe` dry run leaves the last message out, as regenerating does.
    regenerate: 'swipe',
    continue: 'continue',
});

/** The largest speaker name a snapshot takes, in UTF-8 bytes. */
const MAX_NAME_BYTES = 256;

/**
 * The chat-completion messages SillyTavern would send for a generation
 * of `type`: a dry run, whose prompt-ready event carries them. `null`
 * when the app is not on a chat-completion API (no such event fires).
 */
export async function capturePrompt(ctx, type) {
    const ready = eventTypes(ctx)?.CHAT_COMPLETION_PROMPT_READY;
    if (!ready || ctx.mainApi !== 'openai') return null;
    let captured = null;
    const listener = (data) => {
        if (data && data.dryRun === true && Array.isArray(data.chat)) {
            // Copied now: the array is the app's, about to be dropped.
            captured = data.chat.map((message) => ({ ...message }));
        }
    };
    ctx.eventSource.on(ready, listener);
    try {
        await ctx.generate(GENERATION_TYPES[type], {}, true);
    } finally {
        ctx.eventSource.removeListener(ready, listener);
    }
    return captured;
}

/**
 * The snapshot's messages: roles kept (anything else becomes `system`),
 * content as text (an image part becomes `[image]`), the speaker's name
 * when SillyTavern gave one, and `source: "chatHistory"` on every message
 * that is one of the chat's messages as sent — with or without the
 * `Name: ` SillyTavern may put in front — so the profile's `context` can
 * cut the history and nothing else.
 */
export function snapshotMessages(prompt, chat, substitute = (text) => text) {
    const texts = new Set();
    const speakers = new Set();
    for (const message of chat) {
        if (message?.is_system) continue;
        const text = String(message?.mes ?? '').trim();
        if (text) texts.add(text);
        // As the prompt has it: macros such as {{user}} replaced.
        const sent = String(substitute(text)).trim();
        if (sent) texts.add(sent);
        if (typeof message?.name === 'string' && message.name) speakers.add(message.name);
    }
    const isHistory = (content) => {
        const text = content.trim();
        if (texts.has(text)) return true;
        const colon = text.indexOf(': ');
        return colon > 0 && speakers.has(text.slice(0, colon)) && texts.has(text.slice(colon + 2).trim());
    };
    const messages = [];
    for (const message of prompt) {
        const content = textOf(message?.content);
        if (!content) continue;
        const role = ['system', 'user', 'assistant'].includes(message.role) ? message.role : 'system';
        const out = { role, content };
        const name = message.name;
        if (typeof name === 'string' && name && new TextEncoder().encode(name).length <= MAX_NAME_BYTES) {
            out.name = name;
        }
        if (role !== 'system' && isHistory(content)) out.source = 'chatHistory';
        messages.push(out);
    }
    return messages;
}

function textOf(content) {
    if (typeof content === 'string') return content;
    if (!Array.isArray(content)) return content == null ? '' : String(content);
    return content.map((part) => {
        if (part?.type === 'text') return String(part.text ?? '');
        if (part?.type === 'image_url') return '[image]';
        return part?.type ? `[${part.type}]` : '';
    }).filter(Boolean).join('\n');
}

/** The prompt snapshot of the open chat for `prompt`'s messages. */
export function promptSnapshot(ctx, prompt) {
    return {
        schemaVersion: 1,
        characterName: speakerName(ctx),
        userName: String(ctx.name1 ?? ''),
        chatId: String(currentChatId(ctx)),
        messages: snapshotMessages(prompt, ctx.chat,
            typeof ctx.substituteParams === 'function' ? (text) => ctx.substituteParams(text) : undefined),
    };
}

/** The chat as SillyTavern saves it: its header line, then a line per message. */
export function chatContent(ctx) {
    const header = {
        user_name: String(ctx.name1 ?? ''),
        character_name: speakerName(ctx),
        chat_metadata: ctx.chatMetadata ?? {},
    };
    return [header, ...ctx.chat].map((line) => JSON.stringify(line)).join('\n');
}

export function currentChatId(ctx) {
    return (typeof ctx.getCurrentChatId === 'function' ? ctx.getCurrentChatId() : ctx.chatId) ?? '';
}

/** Who writes the reply: the character, or in a group the member the dry run chose. */
export function speakerName(ctx) {
    const character = ctx.characters?.[ctx.characterId];
    if (ctx.groupId) return String(character?.name ?? ctx.name2 ?? '');
    return String(ctx.name2 || character?.name || '');
}

/**
 * The name toolhost keeps this chat under (`chats/<name>.jsonl`): a
 * readable part of SillyTavern's chat id and a hash of the character or
 * group and that id, so two characters' chats of the same name differ.
 */
export function chatName(ctx) {
    const id = String(currentChatId(ctx));
    const owner = ctx.groupId
        ? 'group\n' + ctx.groupId
        : 'character\n' + (ctx.characters?.[ctx.characterId]?.avatar ?? ctx.characterId);
    const slug = id.normalize('NFKD').replace(/[^A-Za-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40);
    return `st-${slug || 'chat'}-${fnv1a64(owner + '\n' + id)}`;
}

/** FNV-1a, 64 bits, as 16 hex digits: a stable name, not a secret. */
function fnv1a64(text) {
    let hash = 0xcbf29ce484222325n;
    for (const byte of new TextEncoder().encode(text)) {
        hash ^= BigInt(byte);
        hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
    }
    return hash.toString(16).padStart(16, '0');
}
