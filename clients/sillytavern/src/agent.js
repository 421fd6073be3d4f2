// One agent reply, start to end: check what the open chat allows, send
// the user's typed message first, take the prompt SillyTavern would send
// (a dry run), start a host-commit run with the chat, the prompt and the
// generation type, follow its journal into the panel, show its approvals,
// write each commit into the chat and answer it — a failure answered as
// one, never swallowed — and report every refusal as a toast with its code.

import { Toolhost, ToolhostError } from './client.js';
import { RunPanel } from './panel.js';
import { capturePrompt, chatContent, chatName, currentChatId, GENERATION_TYPES, promptSnapshot } from './prompt.js';
import { CommitRefused, RunReply, sendAsUser } from './reply.js';
import { agentNames, settings } from './settings.js';

const ENDED = new Set(['completed', 'partial_success', 'failed', 'cancelled', 'interrupted']);

/** The run going now, if any: one at a time. */
let active = null;

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

class ExtensionError extends Error {
    constructor(code, message) {
        super(message);
        this.code = code;
    }
}

/**
 * Start an agent reply of `type` (`normal`, `swipe`, `regenerate`,
 * `continue`) with an optional task, and follow it to its end.
 */
export async function agentReply(type = 'normal', task = '') {
    if (!Object.hasOwn(GENERATION_TYPES, type)) {
        reportError(new ExtensionError('extension.generation_type', `no generation type "${type}": normal, swipe, regenerate or continue`));
        return;
    }
    if (active) {
        toast('warning', 'An agent run is going in this chat: wait for it, or cancel it in its panel.', 'extension.busy');
        return;
    }
    active = { type };
    try {
        await run(type, task);
    } catch (error) {
        reportError(error);
    } finally {
        active = null;
    }
}

async function run(type, task) {
    let ctx = context();
    const options = settings(ctx);
    if (!currentChatId(ctx)) throw new ExtensionError('extension.no_chat', 'Open a chat first.');
    if (!options.model) {
        throw new ExtensionError('extension.settings', 'Name the model in the extension\'s settings (one of the server\'s models.json).');
    }
    const client = new Toolhost(options);
    if (type !== 'normal') {
        const last = ctx.chat[ctx.chat.length - 1];
        if (!last || last.is_user || last.is_system) {
            throw new ExtensionError('chat.generation_type_unfit', `There is no reply to ${type}: the chat's last message is not the character's.`);
        }
    }
    // Reachable, this page let in, the token taken — before the typed
    // message becomes part of the chat.
    await client.tools();
    const input = document.getElementById('send_textarea');
    if (type === 'normal' && input && input.value.trim()) {
        await sendAsUser(ctx, input.value);
        input.value = '';
        input.dispatchEvent(new Event('input', { bubbles: true }));
    }
    const startedAt = new Date();
    const prompt = await capturePrompt(ctx, type);
    // A fresh context: in a group the dry run set the speaker (its first
    // enabled member).
    ctx = context();
    if (!prompt) {
        toast('info', 'Not a Chat Completion API: toolhost builds the prompt from the chat itself.');
    }
    const body = {
        model: options.model,
        chat: chatName(ctx),
        chatContent: chatContent(ctx),
        commit: 'host',
        generationType: type,
    };
    if (options.profile) body.profile = options.profile;
    const agents = agentNames(options.agents);
    if (agents.length) body.agents = agents;
    if (prompt) body.promptSnapshot = promptSnapshot(ctx, prompt);
    if (task) body.task = task;
    const reply = new RunReply(ctx, { chatId: currentChatId(ctx), generationType: type, model: options.model, startedAt });
    const speaker = speakerOf(ctx);
    const started = await client.startRun(body);
    const id = String(started.id);
    document.getElementById('toolhost_panel')?.remove();
    const anchor = document.getElementById('send_form') ?? document.body.lastElementChild;
    const panel = new RunPanel(anchor, id, {
        onCancel: () => client.cancel(id).catch(reportError),
        onDecide: async (callId, decision, note) => {
            try {
                await client.decide(id, callId, decision, note);
            } catch (error) {
                reportError(error);
                throw error;
            }
        },
    });
    panel.status('running');
    await new Follower(client, id, panel, reply, speaker).follow();
}

/** The group member (or character) the reply is written as. */
function speakerOf(ctx) {
    const character = ctx.characters?.[ctx.characterId];
    if (!ctx.groupId || !character) return { name: String(ctx.name2 || character?.name || '') };
    // As `saveReply` writes a group member's reply.
    const avatar = String(character.avatar ?? 'none');
    return {
        name: String(character.name ?? ''),
        avatar,
        thumbnail: avatar !== 'none' && typeof ctx.getThumbnailUrl === 'function'
            ? ctx.getThumbnailUrl('avatar', avatar) : 'img/ai4.png',
    };
}

/** How often the run is looked at while its stream is open. */
const POLL_MS = 3000;
/** Failed looks in a row after which the run is given up as lost. */
const MAX_FAILURES = 5;

/**
 * One run followed to its end: its journal into the panel (reconnecting
 * after the last event read when the stream drops), and — from its events
 * and from a look at the run every few seconds, so one failed request
 * stalls nothing — its approvals and its commits, each one at a time.
 */
class Follower {
    constructor(client, id, panel, reply, speaker) {
        Object.assign(this, { client, id, panel, reply, speaker });
        this.after = 0;
        this.queue = Promise.resolve();
        this.approvalReads = 0;
        /** Failures in a row, by what failed: each kind's success ends its own streak. */
        this.failures = new Map();
        this.looking = null;
        this.done = false;
        this.abort = new AbortController();
    }

    /** Write and answer the commits the run waits for, after any write under way. */
    commits() {
        this.queue = this.queue
            .then(() => this.saveCommits())
            .then(() => this.succeeded('commits'), (error) => this.failed('commits', error));
        return this.queue;
    }

    /**
     * Write each commit the run waits for into the chat, and answer it: a
     * commit that cannot be written is answered as failed, with why; one
     * the run stopped waiting for meanwhile is taken back out.
     */
    async saveCommits() {
        const { commits = [] } = await this.client.commits(this.id);
        for (const commit of commits) {
            if (commit.answered || this.done) continue;
            let outcome;
            try {
                const index = await this.reply.write(context(), commit, this.speaker);
                outcome = { outcome: 'committed', messageIndex: index };
            } catch (error) {
                const message = error instanceof CommitRefused ? error.message : `SillyTavern could not save the reply: ${error?.message ?? error}`;
                toast('error', message, 'chat.host_commit_failed');
                outcome = { outcome: 'failed', message };
            }
            try {
                await this.client.answerCommit(this.id, commit.commitId, outcome);
            } catch (error) {
                // Answered already (a second look at the same commit): fine.
                if (error.code === 'chat.commit_already_answered') continue;
                // The run no longer waits for it (timed out, ended): it must
                // not stay in the chat.
                if (error.code === 'chat.commit_timed_out' || error.status === 404) {
                    if (outcome.outcome === 'committed') await this.reply.takeBackLast(commit.commitId);
                    toast('warning', 'The run no longer waited for this reply, so it was taken back out: ' + error.message, error.code);
                    continue;
                }
                throw error;
            }
        }
    }

    /** The cards of the calls waiting now; an older read never wins over a newer one. */
    async approvals() {
        const read = ++this.approvalReads;
        try {
            const { approvals = [] } = await this.client.approvals(this.id);
            if (read === this.approvalReads && !this.done) this.panel.showApprovals(approvals);
            this.succeeded('approvals');
        } catch (error) {
            this.failed('approvals', error);
        }
    }

    succeeded(kind) {
        this.failures.set(kind, 0);
    }

    /**
     * A failed request: said once per streak; the run lost after too many
     * of one kind, or at once when the server no longer knows it.
     */
    failed(kind, error) {
        const streak = (this.failures.get(kind) ?? 0) + 1;
        this.failures.set(kind, streak);
        if (streak === 1) reportError(error);
        const gone = (kind === 'look' || kind === 'stream') && (error?.status === 401 || error?.status === 404);
        if (gone || streak >= MAX_FAILURES) this.lose(error);
    }

    lose(error) {
        if (this.done) return;
        this.done = true;
        this.abort.abort();
        this.panel.ended('lost', `${error?.code ?? 'error'}: the run can no longer be followed from here`);
        toast('error', 'Stopped following the agent run: ' + (error?.message ?? error), error?.code ?? 'extension.error');
    }

    /** A look at the run (one at a time): it ended, or waits for a commit or an approval. */
    look() {
        this.looking ??= this.lookOnce().finally(() => {
            this.looking = null;
        });
        return this.looking;
    }

    async lookOnce() {
        let view;
        try {
            view = await this.client.run(this.id);
            this.succeeded('look');
        } catch (error) {
            this.failed('look', error);
            return;
        }
        if (this.done) return;
        if (ENDED.has(view.status)) {
            this.done = true;
            // The stream ends by itself once the run did; its last events
            // still reach the panel, within a moment.
            setTimeout(() => this.abort.abort(), 2000);
            if (!this.panel.cancel.hidden) this.panel.ended(view.status.replace('_', ' '));
            const kind = view.status === 'completed' ? 'success' : 'warning';
            toast(kind, `The agent run ${view.status.replace('_', ' ')}.`, view.status === 'completed' ? undefined : 'run.' + view.status);
            return;
        }
        if (view.status === 'awaiting_host_commit') await this.commits();
        if (view.pendingApprovals > 0 || this.panel.approvals.childElementCount > 0) await this.approvals();
    }

    async follow() {
        const ticker = setInterval(() => {
            if (!this.done) this.look();
        }, POLL_MS);
        try {
            for (let pause = 0; ;) {
                try {
                    for await (const event of this.client.events(this.id, { after: this.after, signal: this.abort.signal })) {
                        if (Number.isInteger(event.seq)) this.after = Math.max(this.after, event.seq);
                        this.panel.render(event);
                        if (this.done) continue;
                        if (event.type === 'tool_call_approval_requested' || event.type === 'tool_call_approval_decided') {
                            this.approvals();
                        }
                        if (event.type === 'chat_commit_requested') this.commits();
                    }
                    this.succeeded('stream');
                } catch (error) {
                    this.failed('stream', error);
                }
                await this.queue;
                if (this.done) break;
                await this.look();
                if (this.done) break;
                // The stream ended while the run goes on: read again after a pause.
                pause = Math.min(pause + 1, 5);
                await new Promise((resolve) => setTimeout(resolve, 400 * pause));
            }
        } finally {
            clearInterval(ticker);
            this.abort.abort();
        }
    }
}
