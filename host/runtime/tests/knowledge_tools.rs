//! The chat, world-info and skill tools as sandboxed components, against a
//! run bound to the fixture chat, prompt snapshot and skills.

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolhost_capabilities::skills::{Scope, SkillSource};
use toolhost_core::{Classified, Profile};
use toolhost_journal::Durability;
use toolhost_runtime::{Run, RunBindings};
use toolhost_sandbox::CallEntropy;

#[path = "support/native_chat.rs"]
mod native_chat;

use native_chat::NativeChat;
use support::agent::Agent;
use support::{fixtures, host};

const TOOLS: [&str; 6] = [
    "chat.search",
    "chat.read_messages",
    "worldinfo.read_activated",
    "skill.list",
    "skill.search",
    "skill.read",
];

fn profile(skills: Value) -> Profile {
    Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "reader",
            "tools": {"allow": TOOLS, "maxCallsPerRun": 200},
            "skills": skills
        })
        .to_string(),
    )
    .expect("profile")
}

/// A copy of the fixture chat (tests append to it).
fn chat_copy(dir: &Path) -> PathBuf {
    let path = dir.join("chat.jsonl");
    std::fs::copy(fixtures().join("chats/long_character_chat.jsonl"), &path).expect("copy chat");
    path
}

fn bindings(chat: Option<PathBuf>) -> RunBindings {
    RunBindings {
        chat,
        prompt_snapshot: Some(fixtures().join("worldinfo/prompt_snapshot.json")),
        world_info: None,
        generation_type: Default::default(),
        skills: vec![
            SkillSource::new(Scope::Global, fixtures().join("skills/global")),
            SkillSource::new(Scope::Character, fixtures().join("skills/character")),
        ],
    }
}

/// Run `name` in `dir` under `profile`, bound to the fixtures (and `chat`).
fn bound_run(dir: &Path, name: &str, profile: &Profile, chat: Option<PathBuf>) -> Arc<Run> {
    Run::at(&dir.join(name))
        .durability(Durability::Batched)
        .bindings(&bindings(chat))
        .create(profile)
        .expect("run")
}

#[tokio::test]
async fn the_chat_is_frozen_at_its_input_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chat = chat_copy(dir.path());
    let profile = profile(json!({}));
    let run = bound_run(dir.path(), "run", &profile, Some(chat.clone()));
    let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
    let before = agent.ok("chat_search", json!({"query": "lantern"})).await;
    let total = before.result.structured["totalMessages"]
        .as_u64()
        .expect("total");
    assert_eq!(total, 65);

    // A message added after the run started is invisible to it.
    let ends_with_newline = std::fs::read(&chat).expect("chat").ends_with(b"\n");
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&chat)
        .expect("open chat");
    if !ends_with_newline {
        writeln!(file).expect("end the last line");
    }
    writeln!(
        file,
        r#"{{"name":"Ren","is_user":true,"is_system":false,"send_date":"2024-05-16T10:00:00.000Z","mes":"A brand new qxzjwv question."}}"#
    )
    .expect("append");
    // (A single word is searched by its bigrams too: pick one no bigram of
    // the story contains.)
    let after = agent.ok("chat_search", json!({"query": "qxzjwv"})).await;
    assert!(
        after
            .model_text()
            .starts_with("No message of the chat matched"),
        "{}",
        after.model_text()
    );
    assert_eq!(
        agent
            .tool_error("chat_read_messages", json!({"messages": [{"index": 65}]}))
            .await,
        "chat.message_not_found"
    );
    let read = agent
        .ok("chat_read_messages", json!({"messages": [{"index": 64}]}))
        .await;
    assert_eq!(read.result.structured["messages"][0]["index"], 64);
    drop(agent);
    drop(run);

    // Appending is fine on reopen; rewriting the frozen history is not.
    Run::open(&dir.path().join("run")).expect("reopen with new messages after the prefix");
    let text = std::fs::read_to_string(&chat).expect("chat");
    std::fs::write(&chat, text.replacen("lantern", "LANTERN", 1)).expect("rewrite history");
    let failure = Run::open(&dir.path().join("run")).expect_err("history changed");
    assert_eq!(failure.code(), "agent.input_history_conflict", "{failure}");
}

/// A result that points the model at another tool names it as this
/// invocation offers it (`toolhost:catalog`), and leaves the pointer out
/// when the invocation does not offer that tool.
#[tokio::test]
async fn a_result_points_only_at_tools_the_invocation_offers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chat = chat_copy(dir.path());
    let search = |tools: &[&str], run_dir: &str| {
        let profile = Profile::from_json(
            &json!({
                "schemaVersion": 1,
                "kind": "toolhost.agentProfile",
                "id": "reader",
                "tools": {"allow": tools},
            })
            .to_string(),
        )
        .expect("profile");
        let run = bound_run(dir.path(), run_dir, &profile, Some(chat.clone()));
        async move {
            let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
            agent
                .ok("chat_search", json!({"query": "lantern"}))
                .await
                .model_text()
        }
    };
    let both = search(&["chat.search", "chat.read_messages"], "both").await;
    assert!(
        both.contains(". Read a whole message with chat_read_messages and its index."),
        "{both}"
    );
    let alone = search(&["chat.search"], "alone").await;
    assert!(alone.starts_with("Search `lantern` matched"), "{alone}");
    assert!(!alone.contains("chat_read_messages"), "{alone}");
}

#[tokio::test]
async fn world_info_and_chat_are_unavailable_when_not_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = profile(json!({}));
    let run = Run::create(&dir.path().join("run"), &profile, Durability::Batched).expect("run");
    let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
    assert_eq!(
        agent.tool_error("chat_search", json!({"query": "x"})).await,
        "chat.not_found"
    );
    assert_eq!(
        agent
            .tool_error("worldinfo_read_activated", json!({}))
            .await,
        "worldinfo.activation_unavailable"
    );
    let none = agent.ok("skill_list", json!({})).await;
    assert_eq!(none.model_text(), "No skills are available to you.");
}

#[tokio::test]
async fn world_info_is_listed_and_read_by_ref() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = profile(json!({}));
    let run = bound_run(dir.path(), "run", &profile, None);
    assert!(
        run.root().join("input/prompt_snapshot.json").is_file(),
        "stored in the run"
    );
    let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
    let index = agent.ok("worldinfo_read_activated", json!({})).await;
    assert_eq!(index.result.structured["totalEntries"], 6);
    let long = agent
        .ok(
            "worldinfo_read_activated",
            json!({"entries": [{"ref": "worldinfo:Eldoria#37"}]}),
        )
        .await;
    let entry = &long.result.structured["entries"][0];
    assert!(
        entry["chars"].as_u64().expect("chars") <= 8_000,
        "previewed"
    );
    assert!(entry["nextStartLine"].as_u64().is_some());
    assert_eq!(
        agent
            .tool_error(
                "worldinfo_read_activated",
                json!({"entries": [{"ref": "worldinfo:Eldoria#999"}]})
            )
            .await,
        "worldinfo.entry_not_found"
    );
}

#[tokio::test]
async fn skills_follow_scope_visibility_and_budgets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = profile(json!({
        "visible": ["*"],
        "deny": ["lore-keeper"],
        "maxReadCharsPerCall": 300,
        "maxReadCharsPerRun": 500
    }));
    let run = bound_run(dir.path(), "run", &profile, None);
    let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
    let listed = agent.ok("skill_list", json!({})).await;
    let names: Vec<&str> = listed.result.structured["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| skill["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        ["prose-style"],
        "deny wins; the broken skill is skipped"
    );
    assert!(
        listed.model_text().contains("Mara's voice"),
        "the character scope overrides global"
    );
    assert_eq!(
        agent
            .tool_error("skill_read", json!({"name": "lore-keeper"}))
            .await,
        "skill.policy_denied"
    );

    // 300 per call, 500 per run: previews until the run budget is spent,
    // never more than 500 in all, then a refusal.
    let mut shown = 0;
    let code = loop {
        let outcome = agent
            .call("skill_read", json!({"name": "prose-style"}))
            .await
            .expect("the run goes on");
        if let Some(code) = outcome.result.error_code.clone() {
            break code;
        }
        let chars = outcome.result.structured["chars"].as_u64().expect("chars");
        assert!(chars <= 300, "per call: {chars}");
        shown += chars;
        assert!(shown <= 500, "per run: {shown}");
    };
    assert_eq!(code, "skill.read_budget_exhausted");
    assert_eq!(shown, 500, "the whole run budget was usable");
}

#[tokio::test]
async fn the_skill_read_budget_holds_across_a_reopened_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = profile(json!({
        "visible": ["*"],
        "maxReadCharsPerCall": 300,
        "maxReadCharsPerRun": 500
    }));
    let root = dir.path().join("run");
    let run = bound_run(dir.path(), "run", &profile, None);
    let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
    let first = agent.ok("skill_read", json!({"name": "prose-style"})).await;
    let mut shown = first.result.structured["chars"].as_u64().expect("chars");
    assert!((1..=300).contains(&shown), "a per-call preview: {shown}");
    let next = agent.calls_made();
    drop((agent, run));

    // Another session of the same run and invocation: what is left of 500,
    // not a fresh 500.
    let (run, _) = Run::open(&root).expect("reopen");
    let session = run
        .resume_invocation("inv_root", None)
        .expect("resume")
        .expect("stored invocation");
    let mut agent = Agent::resumed(session, next).with_call_prefix("call");
    let code = loop {
        let outcome = agent
            .call("skill_read", json!({"name": "prose-style"}))
            .await
            .expect("the run goes on");
        if let Some(code) = outcome.result.error_code.clone() {
            break code;
        }
        shown += outcome.result.structured["chars"].as_u64().expect("chars");
        assert!(shown <= 500, "per run, across sessions: {shown}");
    };
    assert_eq!(code, "skill.read_budget_exhausted");
    assert_eq!(shown, 500);
}

#[tokio::test]
async fn a_link_planted_in_a_skill_never_reads_outside() {
    let dir = tempfile::tempdir().expect("tempdir");
    let skills = dir.path().join("skills");
    let skill = skills.join("notes");
    std::fs::create_dir_all(&skill).expect("skill dir");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: Notes.\n---\n# Notes\n",
    )
    .expect("skill");
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "host secret").expect("secret");
    let profile = profile(json!({}));
    let run = Run::at(&dir.path().join("run"))
        .durability(Durability::Batched)
        .bindings(&RunBindings {
            skills: vec![SkillSource::new(Scope::Global, skills.clone())],
            ..RunBindings::default()
        })
        .create(&profile)
        .expect("run");
    // Planted after the library was loaded.
    std::os::unix::fs::symlink(&secret, skill.join("leak.md")).expect("symlink");
    let mut agent = Agent::start(&run, &profile, "inv_root").with_call_prefix("call");
    let code = agent
        .tool_error("skill_read", json!({"name": "notes", "path": "leak.md"}))
        .await;
    assert_eq!(code, "skill.invalid_request");
    let outcome = agent
        .call("skill_search", json!({"name": "notes", "query": "secret"}))
        .await
        .expect("run goes on");
    assert!(
        !outcome.model_text().contains("host secret"),
        "{}",
        outcome.model_text()
    );
}

/// In wasm the component scans with vector code of its own (`toolhost-text`'s
/// `lanes`), natively with memchr: both must find exactly the same hits, on
/// all-ASCII batches (a generated chat) and on folded non-ASCII ones.
#[tokio::test]
async fn the_sandboxed_search_finds_what_the_tool_finds_natively() {
    let dir = tempfile::tempdir().expect("tempdir");
    let generated = dir.path().join("generated.jsonl");
    std::fs::write(
        &generated,
        toolhost_capabilities::chat::generate_chat(2500, 3),
    )
    .expect("write");
    let chats = [
        (
            generated,
            &[
                json!({"query": "silver river"}),
                json!({"query": "lantern", "limit": 50}),
                json!({"query": "The Old MAP", "limit": 50}),
                json!({"query": "a", "limit": 50}), // one byte: no pair to scan
                json!({"query": "er"}),
                json!({"query": "?*"}), // a literal
                json!({"query": "qxzjwv"}),
                json!({"query": "storm", "start_message": 700, "scan_limit": 1200}),
                json!({"query": "ember", "role": "assistant"}),
            ][..],
        ),
        (
            fixtures().join("chats/cjk_chat.jsonl"),
            &[
                json!({"query": "图书馆"}),
                json!({"query": "抹茶 ラテ"}),
                json!({"query": "樱花瓣小雪把伞收起来"}),
                json!({"query": "😤"}),
            ][..],
        ),
        (
            fixtures().join("chats/long_character_chat.jsonl"),
            &[json!({"query": "Mirelle rain"}), json!({"query": "the"})][..],
        ),
    ];
    let host = host();
    let search = host
        .component(&toolhost_core::ToolId::builtin("chat.search").expect("id"))
        .await
        .expect("chat.search loads")
        .expect("component");
    for (path, queries) in chats {
        let bound =
            Arc::new(toolhost_capabilities::chat::BoundChat::bind(&path, None).expect("bind"));
        let native_chat = NativeChat(Arc::clone(&bound));
        for arguments in queries {
            let report = host
                .sandbox()
                .call_under(
                    search,
                    search.limits(),
                    arguments,
                    CallEntropy::seeded(1),
                    toolhost_capabilities::InvocationBound::bind(
                        &toolhost_capabilities::BindInputs {
                            run: Some(Arc::new(
                                toolhost_capabilities::RunContext::none()
                                    .with_chat(Arc::clone(&bound)),
                            )),
                            ..Default::default()
                        },
                    )
                    .prepare(&toolhost_capabilities::CallGrant::of(search, true))
                    .expect("prepared"),
                )
                .await;
            let toolhost_core::ToolOutcome::Success(sandboxed) = report.outcome() else {
                panic!("{arguments}: {:?}", report.outcome());
            };
            let native = chat_search::search_chat(
                &toolhost_guest::Arguments::from_value(arguments.clone()).expect("object"),
                &native_chat,
            )
            .expect("native search");
            let hits = sandboxed.structured["hits"].as_array().map_or(0, Vec::len);
            assert_eq!(
                hits == 0,
                arguments["query"] == "qxzjwv",
                "{arguments}: {hits} hits"
            );
            assert_eq!(
                native.structured_value().as_ref(),
                Some(&sandboxed.structured),
                "{arguments} on {}",
                path.display()
            );
        }
    }
}

/// A prompt snapshot whose messages do not check is refused with the field
/// and why before the run exists; a good one is read in order.
#[test]
fn a_bad_prompt_snapshot_is_refused_before_the_run_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = profile(json!({}));
    let create = |snapshot: &Value, name: &str| {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, snapshot.to_string()).expect("snapshot");
        let root = dir.path().join(name);
        let created = Run::at(&root)
            .durability(Durability::Batched)
            .bindings(&RunBindings {
                prompt_snapshot: Some(file),
                ..RunBindings::default()
            })
            .create(&profile);
        (root, created)
    };
    for (name, snapshot, field) in [
        (
            "role",
            json!({"messages": [{"role": "tool", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            "content",
            json!({"messages": [{"role": "user", "content": [{"type": "text"}]}]}),
            "messages[0].content",
        ),
        (
            "missing",
            json!({"schemaVersion": 1, "messages": [{"content": "x"}]}),
            "messages[0]",
        ),
        (
            "huge",
            json!({"messages": [{"role": "user", "content": "x".repeat(10 * 1024 * 1024)}]}),
            "messages",
        ),
    ] {
        let (root, created) = create(&snapshot, name);
        let failure = created.expect_err(name);
        assert_eq!(
            failure.code(),
            "agent.invalid_prompt_snapshot_file",
            "{name}"
        );
        assert!(
            failure.to_string().contains(&format!("{field}:")),
            "{name}: {failure}"
        );
        assert!(!root.exists(), "{name}: nothing is written");
    }
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("worldinfo/prompt_snapshot.json"))
            .expect("fixture"),
    )
    .expect("json");
    let (_, created) = create(&fixture, "good");
    assert!(created.is_ok(), "{:?}", created.err());
}
