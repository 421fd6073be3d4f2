//! What the model is told: the system prompt names only the workspace roots
//! the profile shows (and which are read-only), a child where its notes go;
//! a profile's tool descriptions reach the model's tool list; the commit
//! text says what may come next; the drift reminder claims nothing was
//! saved unless it was; drift capture and auto-publish follow the
//! profile's message body.

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::recording::{RecordingSource, Seen};
use support::*;
use toolhost_core::{AgentModelRole, Profile};
use toolhost_journal::{DirectOutputCaptured, Event, ROOT_INVOCATION_ID};
use toolhost_runtime::{AgentDirectory, RunStatus};

/// The test writer (`support::profile`) with `extra` fields set.
fn writer(extra: Value) -> Profile {
    let mut value = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "writer",
        "tools": {
            "allow": ["chat.read_messages", "workspace.read_file", "workspace.write_file",
                      "workspace.commit", "workspace.finish"],
            "maxRounds": 10
        }
    });
    for (key, field) in extra.as_object().expect("object") {
        value[key] = field.clone();
    }
    Profile::from_json(&value.to_string()).expect("writer profile")
}

/// Run `profile` as the root agent (and `agents` as its directory) with
/// the writer's `root` replies and the others' by agent id.
async fn run(
    fixture: &Fixture,
    profile: &Profile,
    agents: Vec<Profile>,
    root: Value,
    others: Value,
) -> (toolhost_runtime::LoopSummary, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let models = Arc::new(RecordingSource {
        book: book(root, others),
        seen: Arc::clone(&seen),
    });
    let agents = AgentDirectory::new(agents).expect("agents");
    let summary = fixture.run_agents(profile, models, agents, config()).await;
    (summary, seen)
}

fn done() -> Value {
    json!({"toolCalls": [write("w", REPLY), commit("c"), finish("f")]})
}

/// The reminder sent after the first reply (it had no tool call).
fn reminder(seen: &Seen) -> String {
    let requests = seen.of("writer");
    let second = requests.get(1).expect("a second request");
    let last = second.messages.last().expect("messages");
    assert_eq!(last.role, AgentModelRole::User);
    last.text()
}

// --- item 5: the roots the system prompt names ---

#[tokio::test]
async fn the_system_prompt_names_only_the_roots_the_profile_shows_and_which_are_read_only() {
    let fixture = Fixture::new();
    let profile = writer(json!({
        "workspace": {"visibleRoots": ["output", "plan"], "writableRoots": ["output"]}
    }));
    let (summary, seen) = run(&fixture, &profile, vec![], json!([done()]), json!({})).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let system = seen.system_of("writer");
    assert!(
        system.contains(
            "Your workspace has output/ (writable; your reply goes in output/main.md) and plan/ (read-only)."
        ),
        "{system}"
    );
    for hidden in ["scratch/", "summaries/", "persist/"] {
        assert!(!system.contains(hidden), "{hidden} is hidden: {system}");
    }
    // Tools by their aliases in the snapshot.
    assert!(
        system.contains("write it to output/main.md with workspace_write_file"),
        "{system}"
    );
}

/// The default message body in a root the profile shows read-only: the
/// prompt points the model at no file it cannot write.
#[tokio::test]
async fn a_message_body_the_model_cannot_write_is_not_where_the_prompt_sends_the_reply() {
    let fixture = Fixture::new();
    let profile = writer(json!({
        "workspace": {"visibleRoots": ["output", "scratch"], "writableRoots": ["scratch"]}
    }));
    let (_, seen) = run(&fixture, &profile, vec![], json!([done()]), json!({})).await;
    let system = seen.system_of("writer");
    assert!(
        system.contains("Your workspace has output/ (read-only) and scratch/ (writable)."),
        "{system}"
    );
    assert!(!system.contains("output/main.md"), "{system}");
    assert!(
        system.contains("write it to a file with workspace_write_file"),
        "{system}"
    );
}

fn lead() -> Profile {
    let value = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "writer",
        "tools": {
            "allow": ["workspace.read_file", "workspace.write_file", "workspace.commit",
                      "workspace.finish", "agent.delegate", "agent.await"],
            "maxRounds": 10
        },
        "delegation": {"canDelegate": true}
    });
    Profile::from_json(&value.to_string()).expect("lead profile")
}

fn researcher(workspace: Value) -> Profile {
    let value = json!({
        "schemaVersion": 1,
        "kind": "toolhost.agentProfile",
        "id": "researcher",
        "tools": {"allow": ["workspace.read_file", "workspace.write_file"], "maxRounds": 5},
        "workspace": workspace,
        "delegation": {"callable": true, "allowAsSubagent": true},
        "run": {"presentation": "background", "directRunnable": false}
    });
    Profile::from_json(&value.to_string()).expect("researcher profile")
}

/// The system prompt of a child whose profile shows `workspace`.
async fn child_prompt(workspace: Value) -> String {
    let fixture = Fixture::new();
    let root = json!([
        {"toolCalls": [call("d", "agent_delegate",
            json!({"agentId": "researcher", "task": {"objective": "Note the lantern's origin"}}))]},
        {"toolCalls": [call("a", "agent_await", json!({}))]},
        done()
    ]);
    let child = json!({"researcher": [
        {"toolCalls": [call("r", "task_return", json!({"summary": "From the Drowned Library."}))]}
    ]});
    let (summary, seen) = run(&fixture, &lead(), vec![researcher(workspace)], root, child).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    seen.system_of("researcher")
}

#[tokio::test]
async fn a_childs_prompt_says_its_notes_go_in_summaries_only_when_it_sees_summaries() {
    let all = child_prompt(json!({})).await;
    assert!(
        all.contains("Keep your notes in scratch/ or summaries/;"),
        "{all}"
    );
    assert!(
        !all.contains("your reply goes in"),
        "a child writes no reply: {all}"
    );
    assert!(all.contains("task_return"), "{all}");

    let scratch_only =
        child_prompt(json!({"visibleRoots": ["scratch", "plan"], "writableRoots": ["scratch"]}))
            .await;
    assert!(
        scratch_only.contains("Your workspace has scratch/ (writable) and plan/ (read-only)."),
        "{scratch_only}"
    );
    assert!(
        scratch_only.contains("Keep your notes in scratch/;"),
        "{scratch_only}"
    );
    assert!(!scratch_only.contains("summaries/"), "{scratch_only}");
    assert!(!scratch_only.contains("output/"), "{scratch_only}");
}

// --- item 6: the profile's tool descriptions ---

#[tokio::test]
async fn a_profiles_tool_description_is_what_the_model_reads_and_what_the_snapshot_keeps() {
    let fixture = Fixture::new();
    let text = "Read a workspace file; start with {tool:workspace.read_file} on output/main.md.";
    let profile = writer(json!({"tools": {
        "allow": ["workspace.read_file", "workspace.write_file", "workspace.commit",
                  "workspace.finish"],
        "toolDescriptions": {"workspace.read_file": text}
    }}));
    let (summary, seen) = run(&fixture, &profile, vec![], json!([done()]), json!({})).await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let request = seen.of("writer").into_iter().next().expect("a request");
    let described = |alias: &str| {
        request
            .turn
            .tools()
            .iter()
            .find(|tool| tool.model_alias == alias)
            .map(|tool| tool.description.clone())
            .unwrap_or_else(|| panic!("{alias} offered"))
    };
    let rendered = "Read a workspace file; start with workspace_read_file on output/main.md.";
    assert_eq!(described("workspace_read_file"), rendered);
    assert_ne!(
        described("workspace_write_file"),
        rendered,
        "other tools keep their own text"
    );
    // Frozen in the stored snapshot, which a resumed run reads.
    let stored: Value = serde_json::from_slice(
        &std::fs::read(fixture.run_dir.join(format!(
            "input/invocations/{ROOT_INVOCATION_ID}/tool_snapshot.json"
        )))
        .expect("snapshot stored"),
    )
    .expect("json");
    let binding = stored["bindings"]
        .as_array()
        .expect("bindings")
        .iter()
        .find(|binding| binding["modelAlias"] == "workspace_read_file")
        .expect("bound");
    assert_eq!(binding["descriptor"]["description"], rendered);
}

// --- item 7: commit and drift texts, the message body ---

#[tokio::test]
async fn the_commit_text_says_the_reply_may_be_revised_and_how_the_run_ends() {
    let fixture = Fixture::new();
    let (summary, _) = run(
        &fixture,
        &writer(json!({})),
        vec![],
        json!([done()]),
        json!({}),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let content = fixture.tool_result("c")["content"]
        .as_str()
        .expect("content")
        .to_owned();
    assert!(
        content.contains(
            "You may revise it and commit again; end the run with workspace_finish as the last call of a reply."
        ),
        "{content}"
    );
}

#[tokio::test]
async fn a_blank_drift_is_not_said_to_be_saved() {
    let fixture = Fixture::new();
    let (summary, seen) = run(
        &fixture,
        &writer(json!({})),
        vec![],
        json!([{"text": "  \n"}, done()]),
        json!({}),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let reminder = reminder(&seen);
    assert!(reminder.contains("had no tool call"), "{reminder}");
    assert!(!reminder.contains("saved"), "{reminder}");
    assert!(
        !fixture
            .types()
            .iter()
            .any(|kind| kind == DirectOutputCaptured::TYPE)
    );
}

#[tokio::test]
async fn drift_is_not_kept_in_a_root_the_profile_hides_nor_said_to_be() {
    let fixture = Fixture::new();
    let profile = writer(json!({
        "workspace": {"visibleRoots": ["scratch"], "writableRoots": ["scratch"]}
    }));
    let finish_with_notes = json!({"toolCalls": [
        call("w", "workspace_write_file", json!({"path": "scratch/reply.md", "content": REPLY})),
        call("c", "workspace_commit", json!({"path": "scratch/reply.md"})),
        finish("f")
    ]});
    let (summary, seen) = run(
        &fixture,
        &profile,
        vec![],
        json!([{"text": "Straight to the chat, I hope."}, finish_with_notes]),
        json!({}),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let reminder = reminder(&seen);
    assert!(!reminder.contains("saved"), "{reminder}");
    assert!(!reminder.contains("output/"), "{reminder}");
    assert!(
        !fixture.run_dir.join("output/direct_output.md").exists(),
        "output/ is hidden from this profile"
    );
    assert!(
        !fixture
            .types()
            .iter()
            .any(|kind| kind == DirectOutputCaptured::TYPE)
    );
    // Nor does its prompt name output/ for the reply.
    let system = seen.system_of("writer");
    assert!(!system.contains("output/"), "{system}");
}

#[tokio::test]
async fn drift_capture_and_auto_publish_follow_the_profiles_message_body() {
    let fixture = Fixture::new();
    let profile = writer(json!({"output": {"messageBody": "scratch/reply.md"}}));
    let (summary, seen) = run(
        &fixture,
        &profile,
        vec![],
        json!([
            {"text": "Here it is, outside any tool."},
            // output/main.md is just a file for this profile: no auto-publish.
            {"toolCalls": [write("w0", "Not the reply.")]},
            {"toolCalls": [call("w1", "workspace_write_file",
                json!({"path": "scratch/reply.md", "content": "First draft."}))]},
            {"toolCalls": [call("w2", "workspace_write_file",
                json!({"path": "scratch/reply.md", "content": REPLY})),
                commit("c"), finish("f")]}
        ]),
        json!({}),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    // The commit tool's own text names the file a commit with no path
    // publishes: this profile's body.
    let first = seen.of("writer").into_iter().next().expect("a request");
    let commit_tool = first
        .turn
        .tools()
        .iter()
        .find(|tool| tool.model_alias == "workspace_commit")
        .expect("commit offered");
    assert!(
        commit_tool.description.contains("scratch/reply.md")
            && !commit_tool.description.contains("output/main.md"),
        "{}",
        commit_tool.description
    );
    // Drift went to the message body's root and the reminder says so.
    let captured = std::fs::read_to_string(fixture.run_dir.join("scratch/direct_output.md"))
        .expect("kept in scratch/");
    assert_eq!(captured, "Here it is, outside any tool.");
    assert!(!fixture.run_dir.join("output/direct_output.md").exists());
    assert_eq!(
        fixture.event(DirectOutputCaptured::TYPE)["path"],
        "scratch/direct_output.md"
    );
    let reminder = reminder(&seen);
    assert!(
        reminder.contains("Its text was saved to scratch/direct_output.md."),
        "{reminder}"
    );
    assert!(
        reminder.contains("write your reply to scratch/reply.md with workspace_write_file"),
        "{reminder}"
    );
    // The draft of the message body was auto-published (round 3), not
    // output/main.md (round 2); the commit without a path took the body.
    assert_eq!(summary.commits.len(), 2, "{:?}", summary.commits);
    assert!(!summary.commits[0].explicit);
    assert_eq!(summary.commits[0].round, 3);
    assert_eq!(summary.commits[0].path, "scratch/reply.md");
    assert!(summary.commits[1].explicit);
    assert_eq!(summary.commits[1].path, "scratch/reply.md");
    assert_eq!(fixture.last_message(), REPLY);
    let system = seen.system_of("writer");
    assert!(
        system.contains("scratch/ (writable; your reply goes in scratch/reply.md)"),
        "{system}"
    );
}

// --- issue 39: what the model reads first ---

/// A chat app's prompt: two system messages, six chat-history messages
/// (CJK among them), an untagged example and a post-history instruction.
fn app_prompt() -> Value {
    json!({
        "schemaVersion": 1,
        "characterName": "Mirelle",
        "userName": "Ren",
        "messages": [
            {"role": "system", "content": "Preset: write in third person."},
            {"role": "system", "content": "角色卡：米蕾尔，港口的领航员。", "source": "worldInfo"},
            {"role": "user", "content": "Hello there.", "name": "example_user"},
            {"role": "assistant", "content": "「欢迎来到灯塔。」", "source": "chatHistory"},
            {"role": "user", "content": "一", "source": "chatHistory"},
            {"role": "assistant", "content": "二", "source": "chatHistory"},
            {"role": "user", "content": "三", "source": "chatHistory"},
            {"role": "assistant", "content": "四 🌊", "source": "chatHistory"},
            {"role": "user", "content": "你好，米蕾尔。", "source": "chatHistory"},
            {"role": "system", "content": "[Stay in character.]"}
        ]
    })
}

/// The first request's messages as (role, text).
fn first_messages(seen: &Seen, agent: &str) -> Vec<(AgentModelRole, String)> {
    seen.of(agent)
        .first()
        .unwrap_or_else(|| panic!("{agent} was asked"))
        .messages
        .iter()
        .map(|message| (message.role, message.text()))
        .collect()
}

#[tokio::test]
async fn the_first_request_is_the_system_prompt_then_the_apps_prompt_then_the_task() {
    use AgentModelRole::{Assistant, System, User};
    let head = |texts: &mut Vec<(AgentModelRole, String)>| {
        texts.extend([
            (System, "Preset: write in third person.".to_owned()),
            (System, "角色卡：米蕾尔，港口的领航员。".to_owned()),
            (User, "Ren: Hello there.".to_owned()),
        ]);
    };
    let history = [
        (Assistant, "「欢迎来到灯塔。」"),
        (User, "一"),
        (Assistant, "二"),
        (User, "三"),
        (Assistant, "四 🌊"),
        (User, "你好，米蕾尔。"),
    ];
    for (count, kept) in [(json!(0), 0), (json!(3), 3), (json!(-1), 6)] {
        let fixture = Fixture::new().with_prompt_snapshot(&app_prompt());
        let profile = writer(json!({"context": {"initialChatHistoryMessages": count}}));
        let (summary, seen) = run(&fixture, &profile, vec![], json!([done()]), json!({})).await;
        assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
        let mut expected = Vec::new();
        head(&mut expected);
        expected.extend(
            history[6 - kept..]
                .iter()
                .map(|(role, text)| (*role, (*text).to_owned())),
        );
        expected.push((System, "[Stay in character.]".to_owned()));
        expected.push((User, config().task));
        assert_eq!(first_messages(&seen, "writer"), expected, "{count}");
        // toolhost's own system prompt still says how to act.
        assert!(seen.system_of("writer").contains("workspace_finish"));
        let assembled = fixture.event(toolhost_journal::ContextAssembled::TYPE);
        assert_eq!(assembled["prompt"]["source"], "snapshot", "{assembled}");
        assert_eq!(assembled["prompt"]["historyKept"], kept, "{assembled}");
        assert_eq!(assembled["prompt"]["historyTotal"], 6, "{assembled}");
    }
}

#[tokio::test]
async fn a_profiles_own_system_prompt_replaces_toolhosts_and_world_info_may_stay_out() {
    let fixture = Fixture::new().with_prompt_snapshot(&app_prompt());
    let profile = writer(json!({
        "instructions": {"agentSystemPrompt": "你是米蕾尔的写手。Act through tools."},
        "context": {"includeActivatedWorldInfo": false}
    }));
    let (_, seen) = run(&fixture, &profile, vec![], json!([done()]), json!({})).await;
    assert_eq!(
        seen.system_of("writer"),
        "你是米蕾尔的写手。Act through tools."
    );
    let texts = first_messages(&seen, "writer");
    assert!(
        !texts.iter().any(|(_, text)| text.contains("角色卡")),
        "{texts:?}"
    );
    assert_eq!(texts.len(), 10, "{texts:?}");
}

/// No snapshot: the prompt is built from the bound chat, so the model is
/// not blind — it reads who talks with whom and the chat's messages.
#[tokio::test]
async fn without_a_snapshot_the_model_reads_the_bound_chat() {
    let fixture = Fixture::new();
    let (summary, seen) = run(
        &fixture,
        &writer(json!({})),
        vec![],
        json!([done()]),
        json!({}),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let texts = first_messages(&seen, "writer");
    let (role, header) = &texts[0];
    assert_eq!(*role, AgentModelRole::System);
    assert!(header.contains("between Ren and Mirelle"), "{header}");
    assert!(header.contains("the next reply is Mirelle's"), "{header}");
    // The chat's last message before the run (the reply is after it now).
    assert_eq!(
        texts[texts.len() - 2],
        (
            AgentModelRole::User,
            "*I take her hand and we wade back toward the stairs, jumping the third one together.*"
                .to_owned()
        )
    );
    assert_eq!(
        texts.last().map(|(_, text)| text.clone()),
        Some(config().task)
    );
    let assembled = fixture.event(toolhost_journal::ContextAssembled::TYPE);
    assert_eq!(assembled["prompt"]["source"], "chat", "{assembled}");
    let manifest = fixture.run_dir.join("run.json");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).expect("run.json")).expect("json");
    assert_eq!(manifest["inputs"]["prompt"], "chat", "{manifest}");
}

/// A delegated child works from its brief alone unless its profile asks for
/// the chat's history.
#[tokio::test]
async fn a_child_reads_only_its_brief_unless_its_profile_asks_for_history() {
    for (context, history) in [
        (json!({}), 0),
        (json!({"initialChatHistoryMessages": 2}), 2),
    ] {
        let fixture = Fixture::new().with_prompt_snapshot(&app_prompt());
        let root = json!([
            {"toolCalls": [call("d", "agent_delegate",
                json!({"agentId": "researcher", "task": {"objective": "Note the lantern's origin"}}))]},
            {"toolCalls": [call("a", "agent_await", json!({}))]},
            done()
        ]);
        let child = json!({"researcher": [
            {"toolCalls": [call("r", "task_return", json!({"summary": "From the Drowned Library."}))]}
        ]});
        let mut researcher = researcher(json!({}));
        researcher.context = serde_json::from_value(context).expect("context");
        let (summary, seen) = run(&fixture, &lead(), vec![researcher], root, child).await;
        assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
        let texts = first_messages(&seen, "researcher");
        let brief = texts.last().expect("brief");
        assert!(brief.1.contains("Note the lantern's origin"), "{brief:?}");
        let chat_lines = texts
            .iter()
            .filter(|(_, text)| {
                ["一", "二", "三", "四 🌊", "你好，米蕾尔。"].contains(&text.as_str())
            })
            .count();
        assert_eq!(chat_lines, history, "{texts:?}");
        if history == 0 {
            assert_eq!(texts.len(), 1, "{texts:?}");
        }
    }
}

/// A handoff target takes the run over: it reads the app's prompt like the
/// root, then its brief.
#[tokio::test]
async fn a_handoff_target_reads_the_apps_prompt_then_its_brief() {
    let fixture = Fixture::new().with_prompt_snapshot(&app_prompt());
    let writer = writer(json!({
        "tools": {"allow": ["workspace.read_file", "workspace.write_file", "workspace.commit",
                            "workspace.finish", "agent.handoff"]},
        "delegation": {"canHandoff": true, "maxHandoffDepth": 1}
    }));
    let editor = Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "editor",
            "tools": {"allow": ["workspace.read_file", "workspace.write_file",
                                "workspace.commit", "workspace.finish"], "maxRounds": 3},
            "delegation": {"callable": true, "allowAsHandoffTarget": true}
        })
        .to_string(),
    )
    .expect("editor");
    let root = json!([{"toolCalls": [call("h", "agent_handoff",
        json!({"agentId": "editor", "handoff": {"objective": "Polish the reply"}}))]}]);
    let (summary, seen) = run(
        &fixture,
        &writer,
        vec![editor],
        root,
        json!({"editor": [done()]}),
    )
    .await;
    assert_eq!(summary.status, RunStatus::Completed, "{summary:?}");
    let texts = first_messages(&seen, "editor");
    let root_texts = first_messages(&seen, "writer");
    // The same prompt, then the brief instead of the task.
    assert_eq!(texts[..texts.len() - 1], root_texts[..root_texts.len() - 1]);
    let brief = &texts.last().expect("brief").1;
    assert!(brief.contains("Polish the reply"), "{brief}");
    assert!(
        texts.iter().any(|(_, text)| text == "你好，米蕾尔。"),
        "{texts:?}"
    );
}
