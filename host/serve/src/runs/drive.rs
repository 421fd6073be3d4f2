//! Driving one run's agent loop on the server: started or resumed, it runs
//! in its own task, journals to its directory, tells its event-stream
//! readers where it is (without ever waiting for them), and when it ends
//! keeps its summary and frees its place.
//!
//! When the server stops, a loop still going is dropped without a terminal
//! event: the run is interrupted (docs/runs.md), and resumed when the
//! server starts again.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;
use toolhost_core::policy::Policies;
use toolhost_journal::Observer;
use toolhost_model::ModelSource;
use toolhost_runtime::approval::DecisionFiles;
use toolhost_runtime::host_commit::HostCommits;
use toolhost_runtime::{
    AgentDirectory, ChatHost, LoopConfig, LoopParts, LoopSummary, Run, RunCancel,
    SillyTavernChatHost, run_agent_loop,
};

use super::registry::{LiveRun, Progress, Registry, Slot};
use crate::ServeState;
use crate::error::ApiError;
use crate::fence::FencedChatHost;

/// What a loop needs besides its run.
pub struct Launch {
    pub tenant: String,
    pub slot: Slot,
    pub models: Arc<dyn ModelSource>,
    pub agents: AgentDirectory,
    pub config: LoopConfig,
    /// The tenant's policies (`TenantDirs::policies`).
    pub policies: Arc<Policies>,
}

/// Start `run`'s loop in a task of its own.
pub fn launch(state: &Arc<ServeState>, run: Arc<Run>, launch: Launch) -> Result<(), ApiError> {
    let Launch {
        tenant,
        mut slot,
        models,
        agents,
        mut config,
        policies,
    } = launch;
    let chat = run
        .chat()
        .ok_or_else(|| ApiError::bad_request("serve.invalid_request", "the run has no chat"))?;
    let file_host: Arc<dyn ChatHost> = Arc::new(
        SillyTavernChatHost::new(Arc::clone(chat)).with_model(
            // The provider's model name, else the operator's name for it.
            config
                .model_name
                .clone()
                .or_else(|| config.model["served"].as_str().map(str::to_owned))
                .unwrap_or_default(),
        ),
    );
    // A cluster run's commits are fenced by its lease at the write itself;
    // on a node, a run without a fence never starts (it would write the
    // shared chat unfenced).
    let chat_host = match &state.node {
        // The app saves the reply and answers; toolhost writes no chat.
        _ if config.host_commit => Arc::new(HostCommits::new(
            run.root(),
            state.runs.limits.host_commit_timeout,
        )),
        None => file_host,
        Some(node) => match node.chat_fence(state, &tenant, run.run_id()) {
            Some(fence) => Arc::new(FencedChatHost::new(file_host, chat.path(), fence)),
            None => {
                return Err(ApiError::conflict(
                    "cluster.fence_unavailable",
                    "this node holds no lease of the run, so it cannot commit to its chat",
                ));
            }
        },
    };
    let live = Arc::new(LiveRun {
        tenant: tenant.clone(),
        id: run.run_id().to_owned(),
        cancel: RunCancel::new(),
        progress: watch::Sender::new(Progress::default()),
        host_commit: config.host_commit,
        interrupted: watch::Sender::new(false),
    });
    config.cancel = live.cancel.clone();
    // A person decides through the API (or `toolhost approvals`): the call
    // waits for the decision file, up to `--approval-timeout`.
    run.set_approver(Arc::new(DecisionFiles {
        timeout: state.runs.limits.approval_timeout,
        ..DecisionFiles::default()
    }));
    state.runs.enter(&mut slot, Arc::clone(&live));
    let parts = LoopParts {
        host: state.host(),
        models,
        chat: chat_host,
        agents,
        policies: Some(policies),
        tenant: Some(tenant.clone()),
    };
    let summaries = state.tenant_dirs(&tenant).summaries();
    let served = Arc::clone(state);
    let mut stopping = state.stopping();
    let mut interrupted = live.interrupted.subscribe();
    tokio::spawn(async move {
        // What the journal holds before the loop writes anything (nothing
        // else writes this run meanwhile), then every event as it is
        // written: a status read needs no pass over the journal.
        let journal_path = run.root().join(toolhost_journal::layout::JOURNAL_FILE);
        let before = tokio::task::spawn_blocking(move || super::journal::state(&journal_path))
            .await
            .ok()
            .and_then(Result::ok);
        let watcher = Arc::clone(&live);
        let observer: Observer = Arc::new(move |seq, _, event_type, _, _| {
            watcher.progress.send_modify(|progress| {
                if let Some(counts) = &mut progress.counts {
                    counts.record(seq, event_type);
                }
            });
        });
        // Unreadable now: no live counts, and a status read reads the file.
        live.progress
            .send_modify(|progress| progress.counts = before);
        run.observe(Some(observer));
        let ended = tokio::select! {
            summary = run_agent_loop(&run, parts, &config) => Some(summary),
            // The server stops: the loop is dropped where it waits, with no
            // terminal event; the run is interrupted and resumes later.
            _ = stopping.wait_for(|stop| *stop) => None,
            // A cluster node lost the run: another node goes on with it.
            _ = interrupted.wait_for(|interrupted| *interrupted) => None,
        };
        run.observe(None);
        let root = run.root().to_owned();
        if ended.is_some() {
            remember_the_end(&served.runs, &live, &root);
        }
        drop(run);
        if let Some(summary) = ended {
            keep_summary(&summaries, &live.id, &summary, &root);
        }
        live.progress.send_modify(|progress| progress.ended = true);
        drop(slot);
    });
    Ok(())
}

/// Remember a run's final counts, as its journal ended, for the status
/// reads after its end. Called while the run still holds its journal's
/// lock, so the length read is the length those counts describe.
fn remember_the_end(registry: &Registry, live: &LiveRun, root: &Path) {
    let Some(counts) = live.progress.borrow().counts else {
        return;
    };
    if counts.ended_by.is_none() {
        return; // Not terminal: it can go on, and its counts change.
    }
    if let Ok(meta) = std::fs::metadata(root.join(toolhost_journal::layout::JOURNAL_FILE)) {
        registry
            .ended_runs
            .keep(&live.tenant, &live.id, counts, meta.len());
    }
}

/// The summary as a client reads it: without the server's paths.
pub fn summary_json(summary: &LoopSummary) -> Value {
    let mut value = serde_json::to_value(summary).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("runDir");
    }
    value
}

/// `summaries/<id>.json`, replaced whole (a resumed run ends again).
fn keep_summary(dir: &Path, id: &str, summary: &LoopSummary, root: &Path) {
    let text = summary_json(summary).to_string();
    let path: PathBuf = dir.join(format!("{id}.json"));
    let written = tempfile::NamedTempFile::new_in(dir).and_then(|mut file| {
        use std::io::Write as _;
        file.write_all(text.as_bytes())?;
        file.persist(&path).map_err(|error| error.error)?;
        Ok(())
    });
    if let Err(error) = written {
        tracing::warn!(run = %root.display(), "the run's summary was not kept: {error}");
    }
}
