// The run's live panel above SillyTavern's input: its status, its rounds,
// each tool call with its status (a delegated child's calls under it),
// the calls waiting for approval as cards with Approve / Approve for this
// run / Deny, and what became of each commit. Drawn from the run's journal
// events; every text from the run is shown as text.

import { element } from './dom.js';

const ENDS = {
    run_completed: 'completed',
    run_partial_success: 'partial success',
    run_failed: 'failed',
    run_cancelled: 'cancelled',
};

export class RunPanel {
    /**
     * @param {HTMLElement} host where the panel goes (before SillyTavern's input)
     * @param {{onCancel: () => void, onDecide: (callId: string, decision: string, note: string) => Promise<void>}} actions
     */
    constructor(host, runId, actions) {
        this.actions = actions;
        this.calls = new Map();
        this.lanes = new Map();
        this.rounds = 0;
        this.root = null;
        this.statusText = element('span', { class: 'toolhost-status' }, 'starting');
        this.roundText = element('span', { class: 'toolhost-rounds' }, '');
        this.cancel = element('button', { type: 'button', class: 'menu_button toolhost-cancel' }, 'Cancel');
        this.cancel.addEventListener('click', () => actions.onCancel());
        this.close = element('button', { type: 'button', class: 'menu_button toolhost-close', hidden: true }, 'Close');
        this.close.addEventListener('click', () => this.node.remove());
        this.approvals = element('div', { class: 'toolhost-approvals' });
        this.list = element('ol', { class: 'toolhost-events' });
        this.node = element('section', { id: 'toolhost_panel', class: 'toolhost-panel', 'aria-live': 'polite', 'data-run': runId },
            element('header', {},
                element('b', {}, 'toolhost'), ' ',
                element('code', { class: 'toolhost-run-id' }, runId), ' · ',
                this.statusText, ' ', this.roundText, ' ',
                this.cancel, this.close),
            this.approvals,
            this.list);
        host.before(this.node);
    }

    status(text, kind = '') {
        this.statusText.textContent = text;
        this.statusText.dataset.kind = kind;
    }

    /** One journal event of the run. */
    render(event) {
        const p = event.payload && typeof event.payload === 'object' ? event.payload : {};
        const invocation = String(p.eventScope?.invocationId ?? p.invocationId ?? 'run');
        switch (event.type) {
            case 'run_started':
                this.status('running');
                break;
            case 'context_assembled':
                this.root ??= invocation;
                if (p.prompt && p.prompt.source !== 'none') {
                    this.line(invocation, 'info', `Prompt from the ${p.prompt.source}: ${p.prompt.messages} messages, ${p.prompt.historyKept} of ${p.prompt.historyTotal} chat messages`);
                }
                break;
            case 'model_request_created':
                if (invocation === this.root) {
                    this.rounds += 1;
                    this.roundText.textContent = `round ${this.rounds}`;
                }
                break;
            case 'tool_call_requested':
                this.call(invocation, p.callId, String(p.name ?? p.toolId ?? 'tool'), 'running', '…');
                break;
            case 'tool_call_approval_requested':
                this.call(invocation, p.callId, String(p.name ?? 'tool'), 'waiting', 'waits for approval');
                this.status('waiting for approval', 'waiting');
                break;
            case 'tool_call_approval_decided':
                this.call(invocation, p.callId, null, String(p.decision ?? '').startsWith('approved') ? 'running' : 'failed',
                    String(p.decision ?? 'decided').replaceAll('_', ' '));
                this.status('running');
                break;
            case 'tool_call_completed':
                this.call(invocation, p.callId, null, p.isError ? 'failed' : 'done', p.isError ? 'error' : 'done');
                break;
            case 'tool_call_failed':
                this.call(invocation, p.callId, null, 'failed', String(p.code ?? p.errorCode ?? 'failed'));
                break;
            case 'tool_call_unknown':
                this.line(invocation, 'failed', `${p.name}: not a tool of this request`);
                break;
            case 'agent_delegate_started':
                this.line(invocation, 'info', `→ delegated a task to ${p.targetProfileId}`);
                this.lane(String(p.childInvocationId), `delegated to ${p.targetProfileId}`);
                break;
            case 'agent_handoff_accepted':
                this.line(invocation, 'info', `→ handed off to ${p.targetProfileId ?? p.toInvocationId ?? 'another agent'}`);
                break;
            case 'chat_commit_requested':
                if (typeof p.text === 'string') {
                    this.line(invocation, 'waiting', `Saving the reply (${p.chars} characters)…`);
                    this.status('saving the reply', 'waiting');
                }
                break;
            case 'chat_commit_completed':
                this.line(invocation, 'done', `Saved as message ${p.messageIndex}`);
                this.status('running');
                break;
            case 'chat_commit_failed':
                this.line(invocation, 'failed', `Not saved: ${p.code ?? ''} ${p.message ?? ''}`.trim());
                this.status('running');
                break;
            default:
                if (ENDS[event.type] && invocation === (this.root ?? invocation)) {
                    this.ended(ENDS[event.type], p.code ? `${p.code} ${p.message ?? ''}`.trim() : '');
                }
        }
    }

    /** The run ended: `outcome` as its status, the panel closable. */
    ended(outcome, detail = '') {
        this.status(detail ? `${outcome}: ${detail}` : outcome, outcome === 'completed' ? 'done' : 'failed');
        this.cancel.hidden = true;
        this.close.hidden = false;
        this.approvals.replaceChildren();
    }

    /** The list an invocation's lines go into: the run's, or a child's under its own heading. */
    lane(invocation, label) {
        if (this.root === null || invocation === this.root || invocation === 'run') return this.list;
        let lane = this.lanes.get(invocation);
        if (!lane) {
            lane = element('ol', { class: 'toolhost-child' });
            this.list.append(element('li', { class: 'toolhost-lane' }, label ?? 'delegated agent', lane));
            this.lanes.set(invocation, lane);
        }
        return lane;
    }

    line(invocation, kind, text) {
        const item = element('li', { class: 'toolhost-line', 'data-kind': kind }, text);
        this.lane(invocation).append(item);
        item.scrollIntoView?.({ block: 'nearest' });
        return item;
    }

    call(invocation, callId, name, kind, state) {
        const id = String(callId ?? '');
        let row = this.calls.get(id);
        if (!row) {
            row = {
                name: element('span', { class: 'toolhost-call-name' }, name ?? id),
                state: element('span', { class: 'toolhost-call-state' }),
            };
            row.item = element('li', { class: 'toolhost-line toolhost-call', 'data-call': id }, row.name, ' ', row.state);
            this.lane(invocation).append(row.item);
            this.calls.set(id, row);
        }
        row.item.dataset.kind = kind;
        row.state.textContent = state;
    }

    /** The calls waiting for a decision (`GET …/approvals`), as cards. */
    showApprovals(pending) {
        const cards = pending.filter((call) => !call.decided).map((call) => this.card(call));
        this.approvals.replaceChildren(...cards);
    }

    card(call) {
        const fields = (call.argumentsShown?.fields ?? []).map((field) =>
            element('li', { 'data-deciding': field.deciding ? 'true' : 'false' },
                element('b', {}, field.name), ': ',
                element('code', {}, field.value),
                field.size ? ` (${field.size})` : ''));
        const note = element('input', { type: 'text', class: 'text_pole toolhost-note', placeholder: 'A note for the model (on Deny)', maxlength: '2000' });
        const buttons = [
            ['approve', 'Approve'],
            ['approve_for_run', 'Approve for this run'],
            ['deny', 'Deny'],
        ].map(([decision, label]) => {
            const button = element('button', { type: 'button', class: 'menu_button', 'data-decision': decision }, label);
            button.addEventListener('click', async () => {
                for (const other of card.querySelectorAll('button')) other.disabled = true;
                try {
                    await this.actions.onDecide(call.callId, decision, note.value.trim());
                    card.remove();
                } catch {
                    for (const other of card.querySelectorAll('button')) other.disabled = false;
                }
            });
            return button;
        });
        const card = element('div', { class: 'toolhost-approval', 'data-call': call.callId, role: 'group', 'aria-label': 'Approve ' + (call.title ?? call.toolId) },
            element('div', {}, element('b', {}, call.title ?? call.toolId), ' ', element('small', {}, call.source ?? '')),
            element('div', { class: 'toolhost-reason' }, call.reason ?? ''),
            element('ul', {}, ...fields),
            note,
            element('div', { class: 'toolhost-row' }, ...buttons));
        return card;
    }
}
