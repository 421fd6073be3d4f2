// One agent reply, start to end: check what the open chat allows, send
// the user's typed message first, take the prompt SillyTavern would send
// (a dry run), start a host-commit run with the chat, the prompt and the
// generation type, follow its journal into the panel, show its approvals,
// write each commit into the chat and answer it — a failure answered as
// one, never swallowed (`follow`) — and report every refusal as a toast
// with its code (`app`).

import { context, ExtensionError, reportError, toast } from './app.js';
import { Toolhost } from './client.js';
import { Follower } from './follow.js';
import { RunPanel } from './panel.js';
import {
    capturePrompt, chatContent, chatName, currentChatId, GENERATION_TYPES, promptSnapshot, speakerName,
} from './prompt.js';
import { RunReply, sendAsUser } from './reply.js';
import { agentNames, settings } from './settings.js';

/** The run going now, if any: one at a time. */
let active = null;

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
    if (!ctx.groupId || !character) return { name: speakerName(ctx) };
    // As `saveReply` writes a group member's reply.
    const avatar = String(character.avatar ?? 'none');
    return {
        name: speakerName(ctx),
        avatar,
        thumbnail: avatar !== 'none' && typeof ctx.getThumbnailUrl === 'function'
            ? ctx.getThumbnailUrl('avatar', avatar) : 'img/ai4.png',
    };
}
