// A run's commit written into SillyTavern's own chat the way the app
// writes a reply (`saveReply`): a new message, a new swipe of the last
// reply, its shown swipe regenerated, or its text continued — with
// `swipes`, `swipe_id`, `swipe_info`, `send_date`, `gen_started`,
// `gen_finished` and `extra.api` / `extra.model` — then shown with
// `addOneMessage`, announced with the events the app emits for a reply,
// and saved with `saveChat`. Later commits of the same run rewrite what
// its first one wrote. Anything that no longer fits — another chat open,
// messages added or removed meanwhile — is refused, never written
// somewhere else.

export class CommitRefused extends Error {}

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
        // The reply a swipe, regeneration or continuation goes into.
        this.target = generationType === 'normal' ? null : chat[chat.length - 1] ?? null;
        this.base = this.target ? String(this.target.mes ?? '') : '';
        this.message = null;
        this.swipe = null;
        /** commitId → the index it was saved at (a re-offered commit is answered again). */
        this.saved = new Map();
    }

    /**
     * Write `commit` (a pending commit of `GET …/commits`) and save the
     * chat; the index of the message written.
     */
    async write(ctx, commit, speaker) {
        const known = this.saved.get(commit.commitId);
        if (known !== undefined) return known;
        if (String(currentChat(ctx)) !== String(this.chatId)) {
            throw new CommitRefused('another chat is open now; open the chat the run was started in, then commit again');
        }
        const chat = ctx.chat;
        const now = new Date();
        let index;
        let rendered;
        if (this.message === null) {
            [index, rendered] = this.first(chat, commit.text, speaker, now);
        } else {
            index = chat.indexOf(this.message);
            if (index < 0 || (this.swipe !== null && this.message.swipe_id !== this.swipe)) {
                throw new CommitRefused('the message the run wrote was deleted or swiped away');
            }
            const base = this.generationType === 'continue' ? this.base : '';
            const text = commit.mode === 'append' ? String(this.message.mes ?? '') + commit.text : base + commit.text;
            this.stamp(this.message, text, now);
            rendered = 'swipe';
        }
        await show(ctx, this.message, index, rendered);
        await ctx.saveChat();
        this.saved.set(commit.commitId, index);
        return index;
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
            if (speaker.avatar) {
                message.force_avatar = speaker.thumbnail;
                message.original_avatar = speaker.avatar;
                message.extra.gen_id = now.getTime();
            }
            chat.push(message);
            this.message = message;
            this.stamp(message, text, now);
            return [chat.length - 1, 'normal'];
        }
        const index = chat.length - 1;
        const target = this.target;
        if (!target || chat[index] !== target || chat.length !== this.length) {
            throw new CommitRefused('the message the run was started for is no longer the chat\'s last');
        }
        if (this.generationType === 'continue' && String(target.mes ?? '') !== this.base) {
            throw new CommitRefused('the message to continue was edited while the run went');
        }
        this.message = target;
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
            this.swipe = target.swipe_id;
        } else {
            this.swipe = target.swipe_id;
        }
        if (this.generationType !== 'continue' && target.extra && typeof target.extra === 'object') {
            // They belong to the text replaced, as in SillyTavern's swipe.
            delete target.extra.display_text;
            delete target.extra.memory;
        }
        this.stamp(target, this.generationType === 'continue' ? this.base + text : text, now);
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
    const types = ctx.eventTypes ?? ctx.event_types;
    await ctx.eventSource.emit(types.MESSAGE_RECEIVED, index);
    if (how === 'normal') {
        ctx.addOneMessage(message);
    } else {
        ctx.addOneMessage(message, { type: 'swipe' });
    }
    await ctx.eventSource.emit(types.CHARACTER_MESSAGE_RENDERED, index);
}

function currentChat(ctx) {
    return (typeof ctx.getCurrentChatId === 'function' ? ctx.getCurrentChatId() : ctx.chatId) ?? '';
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
    const types = ctx.eventTypes ?? ctx.event_types;
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
