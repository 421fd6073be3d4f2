// toolhost agent — a SillyTavern extension that writes the next reply with
// an agent run of toolhost serve: an Agent reply button beside Send, agent
// variants of Regenerate / Continue / Swipe in the options menu, the
// `/agent` slash command, and the settings drawer. See
// docs/sillytavern.md in the toolhost repository.

import { agentReply } from './src/agent.js';
import { context, reportError } from './src/app.js';
import { Toolhost } from './src/client.js';
import { element } from './src/dom.js';
import { GENERATION_TYPES } from './src/prompt.js';
import { renderSettings, settings } from './src/settings.js';

const MENU = [
    ['regenerate', 'fa-repeat', 'Agent regenerate'],
    ['continue', 'fa-arrow-right', 'Agent continue'],
    ['swipe', 'fa-right-long', 'Agent swipe'],
];

function addButton() {
    const send = document.getElementById('send_but');
    const button = element('div', {
        id: 'toolhost_agent_button',
        class: 'fa-solid fa-robot interactable',
        title: 'Agent reply (toolhost)',
        'aria-label': 'Agent reply',
        role: 'button',
        tabindex: '0',
    });
    const start = () => agentReply('normal');
    button.addEventListener('click', start);
    button.addEventListener('keydown', (event) => {
        if (event.key === 'Enter' || event.key === ' ') {
            event.preventDefault();
            start();
        }
    });
    if (send) {
        send.before(button);
    } else {
        (document.getElementById('rightSendForm') ?? document.body).append(button);
    }
}

function addMenuEntries() {
    const menu = document.querySelector('#options .options-content');
    if (!menu) return;
    for (const [type, icon, label] of MENU) {
        const entry = element('a', { id: `toolhost_option_${type}`, class: 'interactable', tabindex: '0' },
            element('i', { class: `fa-lg fa-solid ${icon}` }),
            element('span', {}, label));
        entry.addEventListener('click', () => {
            const options = document.getElementById('options');
            if (options) options.style.display = 'none';
            agentReply(type);
        });
        menu.append(entry);
    }
}

function addCommand(ctx) {
    const help = 'Writes the next reply with a toolhost agent run. '
        + '<code>/agent [type=normal|swipe|regenerate|continue] [task]</code>: the task is what the agent is asked to do.';
    const callback = (named, task) => {
        const type = String(named?.type ?? 'normal');
        if (!Object.hasOwn(GENERATION_TYPES, type)) {
            reportError(Object.assign(new Error(`no generation type "${type}": normal, swipe, regenerate or continue`), { code: 'extension.generation_type' }));
            return '';
        }
        // The run goes on in its panel; the command returns at once.
        agentReply(type, typeof task === 'string' ? task.trim() : '');
        return '';
    };
    if (typeof ctx.SlashCommandParser?.addCommand === 'function') {
        ctx.SlashCommandParser.addCommand('agent', callback, [], help);
    } else if (typeof ctx.registerSlashCommand === 'function') {
        ctx.registerSlashCommand('agent', callback, [], help, true, true);
    }
}

/** What the connection check found, in a sentence. */
async function check() {
    let client;
    try {
        client = new Toolhost(settings(context()));
        const health = await client.health();
        const tools = await client.tools();
        const count = Array.isArray(tools?.tools) ? tools.tools.length : 0;
        return `Connected: toolhost ${health?.status ?? 'answers'}, ${count} tools for this token.`;
    } catch (error) {
        reportError(error);
        return `Not connected: ${error.code ?? 'error'}`;
    }
}

function init() {
    const ctx = context();
    settings(ctx);
    const container = document.getElementById('extensions_settings2') ?? document.getElementById('extensions_settings');
    if (container) renderSettings(ctx, container, check);
    addButton();
    addMenuEntries();
    addCommand(ctx);
}

if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init, { once: true });
} else {
    init();
}
