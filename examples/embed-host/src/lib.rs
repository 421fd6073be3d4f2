//! A host application embedding toolhost (docs/embedding.md): it keeps its
//! chat in its own store — here, memory — and runs an agent whose commits
//! land there, through the same sandbox, gate, journal and audit files as
//! `toolhost run`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use serde_json::json;
use toolhost_core::{CommitMode, Profile};
use toolhost_journal::Durability;
use toolhost_model::ScriptBook;
use toolhost_runtime::{
    AgentDirectory, ChatHost, ChatHostError, CommitFuture, CommitOutcome, CommitRequest,
    LoopConfig, LoopParts, LoopSummary, Run, ToolHost, ToolHostConfig, run_agent_loop,
};

/// The application's chat: messages in memory, each with the commit id
/// that wrote it, so a resumed run can ask whether its commit landed.
#[derive(Debug, Default)]
pub struct MemoryChat {
    messages: Mutex<Vec<(String, String)>>,
}

impl MemoryChat {
    pub fn messages(&self) -> Vec<String> {
        self.lock().iter().map(|(text, _)| text.clone()).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
        self.messages
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl MemoryChat {
    fn write(&self, request: CommitRequest<'_>) -> Result<u32, ChatHostError> {
        let mut messages = self.lock();
        let Some(index) = request.run_message else {
            // The run's first commit: its message is a new one.
            messages.push((request.text.to_owned(), request.commit_id.to_owned()));
            return Ok((messages.len() - 1) as u32);
        };
        let message = messages
            .get_mut(index as usize)
            .ok_or_else(|| ChatHostError {
                code: "chat.message_missing".to_owned(),
                message: format!("no message {index}"),
            })?;
        match request.mode {
            CommitMode::Replace => message.0 = request.text.to_owned(),
            CommitMode::Append => message.0.push_str(request.text),
        }
        message.1 = request.commit_id.to_owned();
        Ok(index)
    }
}

impl ChatHost for MemoryChat {
    fn commit<'a>(&'a self, request: CommitRequest<'a>) -> CommitFuture<'a> {
        // Memory answers at once; an application that asks its user or a
        // server would await that here.
        let written = self.write(request).map(CommitOutcome::Committed);
        Box::pin(std::future::ready(written))
    }

    fn find_commit(&self, commit_id: &str) -> Result<Option<CommitOutcome>, ChatHostError> {
        Ok(self
            .lock()
            .iter()
            .position(|(_, id)| id == commit_id)
            .map(|index| CommitOutcome::Committed(index as u32)))
    }

    fn describe(&self) -> String {
        "the application's memory".to_owned()
    }
}

/// The profile: what the agent may call, and its budgets.
fn profile() -> Result<Profile> {
    Ok(Profile::from_json(
        &json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "embedded-writer",
                "tools": {"allow": ["dice.roll", "workspace.write_file", "workspace.commit",
                                    "workspace.finish"],
                          "maxRounds": 8}})
        .to_string(),
    )?)
}

/// The model. An application brings its own (an `AgentModel` over its LLM
/// client, or `ModelSpec::open` for the four wire formats); a script keeps
/// the example deterministic.
fn model() -> Result<ScriptBook> {
    let call = |id: &str, name: &str, arguments: serde_json::Value| json!({"id": id, "name": name, "arguments": arguments});
    let script = json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
        {"text": "Rolling for initiative.", "toolCalls": [call("roll", "dice_roll", json!({"formula": "1d20"}))]},
        {"toolCalls": [
            call("write", "workspace_write_file", json!({"path": "output/main.md", "content": "The goblin acts first."})),
            call("commit", "workspace_commit", json!({}))]},
        {"toolCalls": [call("finish", "workspace_finish", json!({"reason": "done"}))]}
    ]});
    Ok(ScriptBook::parse(&script.to_string(), "embedded")?)
}

/// Load the builtins, run one agent in `run_dir`, and return its summary;
/// the reply is in `chat`.
pub async fn run_agent(run_dir: &Path, chat: Arc<MemoryChat>) -> Result<LoopSummary> {
    // One ToolHost for the whole application: it holds the engine, the
    // component pool and the compiled builtins. Share it across runs.
    let host = Arc::new(ToolHost::with_builtins(ToolHostConfig::default())?);
    let profile = profile()?;
    let run = Run::create(run_dir, &profile, Durability::Batched)?;
    let parts = LoopParts {
        host,
        models: Arc::new(model()?),
        chat,
        agents: AgentDirectory::default(),
        policies: None,
        // One user, no tenants.
        tenant: None,
    };
    let config = LoopConfig {
        task: "Who acts first, the goblin or the party?".to_owned(),
        ..LoopConfig::default()
    };
    Ok(run_agent_loop(&run, parts, &config).await)
}
