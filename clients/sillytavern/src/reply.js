// A run's commit written into SillyTavern's own chat the way the app
// writes a reply (`saveReply`): a new message, a new swipe of the last
// reply, its shown swipe regenerated, or its text continued — with
// `swipes`, `swipe_id`, `swipe_info`, `send_date`, `gen_started`,
// `gen_finished` and `extra.api` / `extra.model` — then shown with
// `addOneMessage`, announced with the events the app emits for a reply,
// saved with `saveChat` and read back from the app's server, which is the
// only way to know the save landed (`saveChat` keeps its errors). Later
// commits of the same run rewrite what its first one wrote. Anything that
// no longer fits — another chat open, messages added or removed, the
// reply swiped or edited meanwhile — is refused, and a commit that fails
// half-way is taken back out of the chat: never written somewhere else,
// never left behind after a `failed` answer.

import { eventTypes } from './app.js';
import { currentChatId } from './prompt.js';

export class CommitRefused extends Error {}

/** What of a message a run must find unchanged before it writes into it. */
function stateOf(message) {
    return JSON.stringify([message.mes, message.swipe_id, message.swipes?.length ?? 0]);
}

/** The members a commit changes, to put back if it fails. */
const WRITTEN = ['mes', 'title', 'send_date', 'gen_started', 'gen_finished', 'extra', 'swipe_id', 'swipes', 'swipe_info'];

/**
 * What one run writes: the chat and the message it was started for,
 * and, once its first commit landed, the message it wrote.
 */
export class RunReply {
    constructor(ctx, { chatId, generationType, model, startedAt }) {
        const chat = ctx.chat;
        this.chatId = chatId;
        this.generationType = generationType;
        this.model = model;
        this.startedAt = startedAt;
        this.length = chat.length;
        // The reply a swipe, regeneration or continuation goes into, as the
        // run's prompt had it.
        this.target = generationType === 'normal' ? null : chat[chat.length - 1] ?? null;
        this.targetState = this.target ? stateOf(this.target) : null;
        this.base = this.target ? String(this.target.mes ?? '') : '';
        this.message = null;
        this.swipe = null;
        /** commitId → the index it was saved at (a re-offered commit is answered again). */
        this.saved = new Map();
    }

    /**
     * Write `commit` (a pending commit of `GET …/commits`), save the chat
     * and check the save landed; the index of the message written. When
     * anything fails after the page was changed, the change is taken back
     * out — and saved, and the chat shown again from the app's server —
     * before this throws.
     */
    async write(ctx, commit, speaker) {
        const known = this.saved.get(commit.commitId);
        if (known !== undefined) return known;
        const where = chatOf(ctx);
        if (where.id !== String(this.chatId)) {
            throw new CommitRefused('another chat is open now; open the chat the run was started in, then commit again');
        }
        const chat = ctx.chat;
        const now = new Date();
        const undo = this.message === null ? this.undoFirst(chat) : this.undoLater(chat);
        // Refused before anything was written: nothing to take back.
        const [index, how] = this.message === null
            ? this.first(chat, commit.text, speaker, now)
            : this.later(chat, commit, now);
        try {
            await show(ctx, this.message, index, how);
            await ctx.saveChat();
            await checkSaved(where, chat, this.message);
        } catch (error) {
            await this.takeBack(undo);
            throw error;
        }
        this.written = stateOf(this.message);
        this.saved.set(commit.commitId, index);
        this.lastUndo = { commitId: commit.commitId, undo };
        return index;
    }

    /**
     * Take the last commit back out of the chat: the run stopped waiting
     * for it (it timed out, or ended) after the page saved it.
     */
    async takeBackLast(commitId) {
        if (this.lastUndo?.commitId !== commitId) return;
        this.saved.delete(commitId);
        await this.takeBack(this.lastUndo.undo);
        this.lastUndo = null;
    }

    /**
     * Undo a write in the page — only in the run's chat, still open — save
     * that, and show the chat again as the app's server has it now.
     */
    async takeBack(undo) {
        const ctx = globalThis.SillyTavern.getContext();
        if (chatOf(ctx).id !== String(this.chatId)) return;
        undo(ctx);
        this.written = this.message ? stateOf(this.message) : null;
        await ctx.saveChat();
        if (typeof ctx.reloadCurrentChat === 'function') await ctx.reloadCurrentChat();
    }

    /** The run's first commit, as its generation type says. */
    first(chat, text, speaker, now) {
        if (this.generationType === 'normal') {
            if (chat.length !== this.length) {
                throw new CommitRefused(`the chat changed while the run went (${this.length} messages when it started, ${chat.length} now)`);
            }
            // The members in the order SillyTavern's `saveReply` sets them.
            const message = {
                extra: {}, name: speaker.name, is_user: false, send_date: '', mes: '', title: '',
                gen_started: this.startedAt, gen_finished: now,
            };
            if (speaker.avatar !== undefined) {
                message.force_avatar = speaker.thumbnail;
                message.original_avatar = speaker.avatar;
                message.extra.gen_id = now.getTime();
            }
            chat.push(message);
            this.stamp(message, text, now);
            this.message = message;
            this.swipe = message.swipe_id;
            return [chat.length - 1, 'normal'];
        }
        const index = chat.length - 1;
        const target = this.target;
        if (!target || chat[index] !== target || chat.length !== this.length) {
            throw new CommitRefused('the message the run was started for is no longer the chat\'s last');
        }
        if (stateOf(target) !== this.targetState) {
            throw new CommitRefused('the reply was swiped or edited while the run went');
        }
        if (!Array.isArray(target.swipes) || !Number.isInteger(target.swipe_id)) {
            target.swipes = [String(target.mes ?? '')];
            target.swipe_id = 0;
        }
        if (!Array.isArray(target.swipe_info)) target.swipe_info = [];
        if (this.generationType === 'swipe') {
            // The swipe shown until now keeps what it was written with.
            target.swipe_info[target.swipe_id] ??= infoOf(target);
            target.swipes.push('');
            target.swipe_id = target.swipes.length - 1;
        }
        if (this.generationType !== 'continue' && target.extra && typeof target.extra === 'object') {
            // They belong to the text replaced, as in SillyTavern's swipe.
            delete target.extra.display_text;
            delete target.extra.memory;
        }
        this.stamp(target, this.generationType === 'continue' ? this.base + text : text, now);
        this.message = target;
        this.swipe = target.swipe_id;
        return [index, 'swipe'];
    }

    /** A later commit: the run's message, still last and showing the run's swipe, rewritten. */
    later(chat, commit, now) {
        const index = chat.indexOf(this.message);
        if (index < 0) throw new CommitRefused('the message the run wrote was deleted');
        if (index !== chat.length - 1) {
            throw new CommitRefused('messages were added after the message the run wrote');
        }
        if (this.message.swipe_id !== this.swipe) {
            throw new CommitRefused('the message the run wrote was swiped away');
        }
        if (stateOf(this.message) !== this.written) {
            throw new CommitRefused('the message the run wrote was edited');
        }
        const base = this.generationType === 'continue' ? this.base : '';
        const text = commit.mode === 'append' ? String(this.message.mes ?? '') + commit.text : base + commit.text;
        this.stamp(this.message, text, now);
        return [index, 'swipe'];
    }

    /** `message`'s shown text is `text` now, written by this run. */
    stamp(message, text, now) {
        if (!message.extra || typeof message.extra !== 'object') message.extra = {};
        message.mes = text;
        message.send_date = messageTimestamp(now);
        message.gen_started = this.startedAt;
        message.gen_finished = now;
        message.extra.api = 'toolhost';
        message.extra.model = this.model;
        if (!Array.isArray(message.swipe_info)) message.swipe_info = [];
        if (!Array.isArray(message.swipes) || !Number.isInteger(message.swipe_id)) {
            message.swipe_id = 0;
            message.swipes = [];
        }
        message.swipes[message.swipe_id] = text;
        message.swipe_info[message.swipe_id] = infoOf(message);
    }

    /** How to take a first commit back out: its new message, or the target as it was. */
    undoFirst(chat) {
        if (this.generationType === 'normal') {
            return () => {
                const at = chat.indexOf(this.message);
                if (at >= 0) chat.splice(at, 1);
                this.message = null;
                this.swipe = null;
            };
        }
        return this.restorer(this.target, () => {
            this.message = null;
            this.swipe = null;
        });
    }

    undoLater() {
        const swipe = this.swipe;
        return this.restorer(this.message, () => {
            this.swipe = swipe;
        });
    }

    /** Put `message`'s written members back as they are now. */
    restorer(message, after) {
        if (!message) return () => after();
        const kept = structuredClone(Object.fromEntries(WRITTEN.filter((key) => key in message).map((key) => [key, message[key]])));
        return () => {
            for (const key of WRITTEN) delete message[key];
            Object.assign(message, kept);
            after();
        };
    }
}

function infoOf(message) {
    return {
        send_date: message.send_date,
        gen_started: message.gen_started,
        gen_finished: message.gen_finished,
        extra: structuredClone(message.extra ?? {}),
    };
}

/** Show the message and tell the app's other extensions, as a reply does. */
async function show(ctx, message, index, how) {
    const types = eventTypes(ctx);
    await ctx.eventSource.emit(types.MESSAGE_RECEIVED, index);
    if (how === 'normal') {
        ctx.addOneMessage(message);
    } else {
        ctx.addOneMessage(message, { type: 'swipe' });
    }
    await ctx.eventSource.emit(types.CHARACTER_MESSAGE_RENDERED, index);
}

/** The open chat: its id, and whose it is (what reading it back names). */
function chatOf(ctx) {
    const character = ctx.characters?.[ctx.characterId];
    return {
        id: String(currentChatId(ctx)),
        group: ctx.groupId ?? null,
        name: character?.name,
        avatar: character?.avatar,
        headers: typeof ctx.getRequestHeaders === 'function' ? ctx.getRequestHeaders() : { 'Content-Type': 'application/json' },
    };
}

/**
 * The chat as SillyTavern's server has it now holds `message` exactly as
 * the page does, where the page has it: else the save did not land.
 * (`saveChat` catches its own failures, and logs them only.) `where` is
 * the chat as it was when the write began.
 */
async function checkSaved(where, chat, message) {
    if (!where.group && !where.avatar) {
        throw new CommitRefused('the chat has no character to read it back from');
    }
    const [url, body] = where.group
        ? ['/api/chats/group/get', { id: where.id }]
        : ['/api/chats/get', { ch_name: where.name, file_name: where.id, avatar_url: where.avatar }];
    let saved;
    try {
        const response = await fetch(url, { method: 'POST', headers: where.headers, body: JSON.stringify(body) });
        if (!response.ok) throw new Error(`HTTP ${response.status}`);
        saved = await response.json();
    } catch (error) {
        throw new CommitRefused(`SillyTavern's saved chat could not be read back (${error.message}), so the save is not known to have landed; nothing was kept`);
    }
    const index = chat.indexOf(message);
    // A character chat's file starts with its header line; a group chat's
    // (in 1.12) may not.
    const header = Array.isArray(saved) && saved.length > 0 && isHeader(saved[0]) ? 1 : 0;
    const line = Array.isArray(saved) && index >= 0 ? saved[index + header] : undefined;
    if (!line || JSON.stringify(line) !== JSON.stringify(message)) {
        throw new CommitRefused('SillyTavern did not save the chat (the saved chat does not have the reply); nothing was kept');
    }
}

/** A chat file's first line that is its header, not a message. */
function isHeader(line) {
    return line && typeof line === 'object' && !('mes' in line) && ('chat_metadata' in line || 'user_name' in line);
}

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August',
    'September', 'October', 'November', 'December'];

/** A message's `send_date` as SillyTavern writes one: `October 11, 2024 2:05pm`. */
export function messageTimestamp(date) {
    let hours = date.getHours();
    const meridiem = hours >= 12 ? 'pm' : 'am';
    hours %= 12;
    if (hours === 0) hours = 12;
    const minutes = String(date.getMinutes()).padStart(2, '0');
    return `${MONTHS[date.getMonth()]} ${date.getDate()}, ${date.getFullYear()} ${hours}:${minutes}${meridiem}`;
}

/**
 * The user's message from the input box, written as SillyTavern sends
 * one (before the agent replies to it); its index.
 */
export async function sendAsUser(ctx, text) {
    const types = eventTypes(ctx);
    const message = {
        name: String(ctx.name1 ?? ''),
        is_user: true,
        is_system: false,
        send_date: messageTimestamp(new Date()),
        mes: typeof ctx.substituteParams === 'function' ? ctx.substituteParams(text) : text,
        extra: { isSmallSys: false },
    };
    ctx.chat.push(message);
    const index = ctx.chat.length - 1;
    await ctx.eventSource.emit(types.MESSAGE_SENT, index);
    ctx.addOneMessage(message);
    await ctx.eventSource.emit(types.USER_MESSAGE_RENDERED, index);
    await ctx.saveChat();
    return index;
}
