//! A run bound to a copy of the fixture chat, driven by scripted models
//! through the real builtin components, and readers for what it leaves.

#![allow(dead_code)] // each test binary uses its own share

pub mod agent;
pub mod recording;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_capabilities::chat::ChatFile;
use toolhost_core::{Profile, SnapshotSources, ToolCatalog, ToolDescriptor, ToolId};
use toolhost_journal::{Durability, Event as _, JournalEvent, RunCompleted, read_events};
use toolhost_model::{AgentModel, ModelSource, SameModel, ScriptBook, ScriptedModel};
use toolhost_runtime::{
    AgentDirectory, GenerationType, LoopConfig, LoopParts, LoopSummary, RetryPolicy, Run,
    RunBindings, RunStatus, SillyTavernChatHost, ToolHost, ToolHostConfig, run_agent_loop,
};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

pub fn host() -> Arc<ToolHost> {
    static HOST: OnceLock<Arc<ToolHost>> = OnceLock::new();
    Arc::clone(HOST.get_or_init(|| {
        Arc::new(ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins listed"))
    }))
}

/// `catalog` and the MCP servers' display names as an invocation's
/// snapshot sources: nothing unavailable, restricted to some profiles,
/// asked for by its source or decided by a policy; no tenant.
pub fn plain_sources<'a>(
    catalog: &'a ToolCatalog,
    mcp_server_names: &'a BTreeMap<uuid::Uuid, String>,
) -> SnapshotSources<'a> {
    SnapshotSources::of(catalog, mcp_server_names)
}

/// A tool `id` taking any object, with only a description: for a
/// catalog entry a test's own executor answers.
pub fn described(id: ToolId, description: &str) -> ToolDescriptor {
    ToolDescriptor {
        id,
        title: None,
        description: Some(description.into()),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: json!({}),
    }
}

pub fn parts(run: &Arc<Run>, models: Arc<dyn ModelSource>, agents: AgentDirectory) -> LoopParts {
    parts_on(host(), run, models, agents)
}

/// The loop's parts on `host` (one with MCP tools, say), the run's chat
/// served as SillyTavern's, no policies, no tenant.
pub fn parts_on(
    host: Arc<ToolHost>,
    run: &Arc<Run>,
    models: Arc<dyn ModelSource>,
    agents: AgentDirectory,
) -> LoopParts {
    LoopParts {
        host,
        models,
        chat: Arc::new(SillyTavernChatHost::new(Arc::clone(
            run.chat().expect("bound chat"),
        ))),
        agents,
        policies: None,
        tenant: None,
    }
}

pub fn profile(max_rounds: u32, presentation: &str) -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "writer",
            "displayName": "Test writer",
            "tools": {
                "allow": [
                    "chat.read_messages",
                    "workspace.read_file",
                    "workspace.write_file",
                    "workspace.commit",
                    "workspace.finish"
                ],
                "maxRounds": max_rounds
            },
            "run": {"presentation": presentation}
        })
        .to_string(),
    )
    .expect("profile")
}

/// One test's run: a temp dir with a copy of the fixture chat.
pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub chat: PathBuf,
    pub run_dir: PathBuf,
    pub original: Vec<u8>,
    /// The chat app's prompt the run is given, if any.
    pub prompt_snapshot: Option<PathBuf>,
    /// How the run's reply lands in the chat.
    pub generation_type: GenerationType,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let chat = dir.path().join("chat.jsonl");
        std::fs::copy(fixtures().join("chats/long_character_chat.jsonl"), &chat).expect("copy");
        let original = std::fs::read(&chat).expect("read");
        let run_dir = dir.path().join("run");
        Self {
            _dir: dir,
            chat,
            run_dir,
            original,
            prompt_snapshot: None,
            generation_type: GenerationType::Normal,
        }
    }

    pub async fn run_with(
        &self,
        profile: &Profile,
        model: Arc<dyn AgentModel>,
        config: LoopConfig,
    ) -> LoopSummary {
        self.run_agents(
            profile,
            Arc::new(SameModel(model)),
            AgentDirectory::default(),
            config,
        )
        .await
    }

    pub async fn run_agents(
        &self,
        profile: &Profile,
        models: Arc<dyn ModelSource>,
        agents: AgentDirectory,
        config: LoopConfig,
    ) -> LoopSummary {
        let run = self.create_run(profile);
        run_agent_loop(&run, parts(&run, models, agents), &config).await
    }

    /// This fixture's runs land their reply as `generation_type` says, in
    /// a chat that ends with the character's reply (the fixture's last
    /// line, the user's, left out).
    pub fn answering_the_last_reply(mut self, generation_type: GenerationType) -> Self {
        let text = String::from_utf8(self.original.clone()).expect("utf-8");
        let mut lines: Vec<&str> = text.lines().collect();
        lines.pop();
        self.original = (lines.join("\n") + "\n").into_bytes();
        std::fs::write(&self.chat, &self.original).expect("cut");
        self.generation_type = generation_type;
        self
    }

    /// This fixture's runs given `snapshot` as the app's prompt.
    pub fn with_prompt_snapshot(mut self, snapshot: &Value) -> Self {
        let path = self._dir.path().join("prompt_snapshot.json");
        std::fs::write(&path, snapshot.to_string()).expect("snapshot");
        self.prompt_snapshot = Some(path);
        self
    }

    /// The run in `run_dir` under `profile`, bound to this fixture's chat
    /// (and its prompt snapshot).
    pub fn create_run(&self, profile: &Profile) -> Arc<Run> {
        let bindings = RunBindings {
            chat: Some(self.chat.clone()),
            prompt_snapshot: self.prompt_snapshot.clone(),
            generation_type: self.generation_type,
            ..RunBindings::default()
        };
        Run::at(&self.run_dir)
            .durability(Durability::Batched)
            .bindings(&bindings)
            .create(profile)
            .expect("run")
    }

    pub async fn run(&self, max_rounds: u32, replies: Value) -> LoopSummary {
        self.run_with(
            &profile(max_rounds, "foreground"),
            Arc::new(script(replies)),
            config(),
        )
        .await
    }

    /// [`run`](Self::run), which must complete.
    pub async fn run_to_completion(&self, max_rounds: u32, replies: Value) -> LoopSummary {
        let summary = self.run(max_rounds, replies).await;
        assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
        summary
    }

    /// The run in `run_dir` resumed and driven to its end by `models`,
    /// with the agents and the loop config its record holds.
    pub async fn resume_with(&self, models: Arc<dyn ModelSource>) -> LoopSummary {
        let (run, record) = Run::resume(&self.run_dir).expect("resume");
        let agents = record.agents().expect("the recorded agents");
        run_agent_loop(&run, parts(&run, models, agents), &record.config()).await
    }

    pub fn events(&self) -> Vec<JournalEvent> {
        read_events(self.run_dir.join("events.jsonl")).expect("journal")
    }

    pub fn types(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .map(|event| event.r#type)
            .collect()
    }

    /// The payloads of every event of type `kind`, in journal order.
    pub fn payloads(&self, kind: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|event| event.r#type == kind)
            .map(|event| event.payload)
            .collect()
    }

    pub fn event(&self, kind: &str) -> Value {
        self.events()
            .into_iter()
            .find(|event| event.r#type == kind)
            .unwrap_or_else(|| panic!("no {kind} event"))
            .payload
    }

    /// How many events of each type the journal holds.
    pub fn type_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for kind in self.types() {
            *counts.entry(kind).or_insert(0) += 1;
        }
        counts
    }

    /// The journal without its last event, which must be `run_completed`:
    /// a run cut off just before its end, for a resume to finish.
    pub fn cut_the_end(&self) {
        let journal = self.run_dir.join("events.jsonl");
        let text = std::fs::read_to_string(&journal).expect("journal");
        let lines: Vec<&str> = text.lines().collect();
        let completed = format!("\"{}\"", RunCompleted::TYPE);
        assert!(lines.last().expect("events").contains(&completed));
        std::fs::write(&journal, lines[..lines.len() - 1].join("\n") + "\n").expect("cut");
    }

    pub fn chat(&self) -> ChatFile {
        ChatFile::load(&self.chat).expect("the chat stays valid SillyTavern JSONL")
    }

    /// The text of the chat's last message: where a run's commit lands.
    pub fn last_message(&self) -> String {
        let chat = self.chat();
        let last = chat.messages().last().expect("the chat has a message");
        last.text().to_owned()
    }

    /// The chat's lines before the run's message are byte for byte the
    /// original file.
    pub fn assert_prefix_untouched(&self) {
        let now = std::fs::read(&self.chat).expect("read");
        assert!(
            now.starts_with(&self.original),
            "the original lines must stay byte for byte"
        );
    }

    pub fn tool_result(&self, call_id: &str) -> Value {
        let path = self
            .run_dir
            .join("tool-results")
            .join(format!("{}.json", toolhost_journal::audit_stem(call_id)));
        let text = std::fs::read_to_string(&path).expect("stored result");
        let record: Value = serde_json::from_str(&text).expect("json");
        record["result"].clone()
    }

    /// Each call's stored result: `Some(code)`, refused with that error
    /// code; `None`, not an error.
    pub fn assert_results(&self, expected: &[(&str, Option<&str>)]) {
        for (call_id, code) in expected {
            let result = self.tool_result(call_id);
            match code {
                Some(code) => assert_eq!(result["errorCode"], *code, "call {call_id}"),
                None => assert_eq!(result["isError"], false, "call {call_id}"),
            }
        }
    }
}

pub fn config() -> LoopConfig {
    LoopConfig {
        task: "Write the next reply of this chat.".into(),
        retry: RetryPolicy {
            max_retries: 2,
            initial_delay: Duration::from_millis(1),
        },
        ..LoopConfig::default()
    }
}

pub fn script(replies: Value) -> ScriptedModel {
    ScriptedModel::parse(
        &json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": replies})
            .to_string(),
        "test",
    )
    .expect("script")
}

/// One script per agent: `root` for the root agent, `agents` by id.
pub fn book(root: Value, agents: Value) -> Arc<ScriptBook> {
    Arc::new(
        ScriptBook::parse(
            &json!({"schemaVersion": 1, "kind": "toolhost.modelScript",
                    "replies": root, "agents": agents})
            .to_string(),
            "test",
        )
        .expect("script"),
    )
}

pub fn call(id: &str, name: &str, arguments: Value) -> Value {
    json!({"id": id, "name": name, "arguments": arguments})
}

pub fn write(id: &str, text: &str) -> Value {
    call(
        id,
        "workspace_write_file",
        json!({"path": "output/main.md", "content": text}),
    )
}

pub fn commit(id: &str) -> Value {
    call(id, "workspace_commit", json!({}))
}

pub fn finish(id: &str) -> Value {
    call(id, "workspace_finish", json!({"reason": "done"}))
}

pub const REPLY: &str = "*Mirelle folds the map.* Then we leave at dawn.";

/// Fails its first `failures` requests with a retryable 503, then answers
/// from `inner`.
pub struct Flaky {
    pub failures: u32,
    pub seen: std::sync::atomic::AtomicU32,
    pub inner: ScriptedModel,
}

impl Flaky {
    /// `failures` retryable 503s, then `inner`'s replies; shared by the
    /// run and the test that counts what it was asked.
    pub fn new(failures: u32, inner: ScriptedModel) -> Arc<Self> {
        Arc::new(Self {
            failures,
            seen: std::sync::atomic::AtomicU32::new(0),
            inner,
        })
    }
}

impl AgentModel for Flaky {
    fn describe(&self) -> String {
        "flaky".into()
    }

    fn complete<'a>(
        &'a self,
        request: &'a toolhost_core::AgentModelRequest,
    ) -> toolhost_model::ModelFuture<'a> {
        Box::pin(async move {
            let seen = self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if seen < self.failures {
                return Err(toolhost_model::ModelError::Status {
                    provider: "test".into(),
                    status: 503,
                    body: "overloaded".into(),
                });
            }
            self.inner.complete(request).await
        })
    }

    fn skip_reply(&self) {
        self.inner.skip_reply();
    }
}
