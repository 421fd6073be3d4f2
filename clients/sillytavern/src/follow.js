// One run followed to its end from the page: its journal into the panel,
// its approvals as cards, its commits written into the chat and answered,
// and a run the page can no longer reach given up.

import { context, reportError, toast } from './app.js';
import { CommitRefused } from './reply.js';

/** The statuses a run ends with (an interrupted one goes on only when resumed). */
const ENDED = new Set(['completed', 'partial_success', 'failed', 'cancelled', 'interrupted']);

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
export class Follower {
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
