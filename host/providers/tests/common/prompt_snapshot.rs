//! A chat app's prompt snapshot as a run sends it: the agent's own system
//! prompt, then the app's messages in order — preset and character card
//! (system), the chat so far, world info (system) in the middle — then the
//! task. Every format's `request_prompt_snapshot.json` is this request.

use serde_json::Value;
use toolhost_core::{AgentModelMessage, AgentModelRequest, ToolChoice};
use toolhost_providers::Provider;

use super::{dice_binding, encoded, fixture, fixture_text, settings, snapshot_of, turn_of};

pub const WRITER_SYSTEM: &str = "You are the writer. Act through tools.";
pub const PRESET: &str = "Preset: write in third person.";
pub const CARD: &str = "角色卡：米蕾尔，港口的领航员。";
pub const GREETING: &str = "「欢迎来到灯塔。」";
pub const HELLO: &str = "你好，米蕾尔。";
pub const WORLD_INFO: &str = "[世界书] 灯塔在北岸。";
pub const TASK: &str = "Task: write Mirelle's next reply.";

/// The app's messages, then the task.
pub fn prompt_snapshot_messages() -> Vec<AgentModelMessage> {
    vec![
        AgentModelMessage::system_text(PRESET),
        AgentModelMessage::system_text(CARD),
        super::assistant(vec![super::text(GREETING)], Value::Null),
        AgentModelMessage::user_text(HELLO),
        AgentModelMessage::system_text(WORLD_INFO),
        AgentModelMessage::user_text(TASK),
    ]
}

/// `messages` under the writer's system prompt, with one tool offered.
pub fn writer_request(model: &str, messages: Vec<AgentModelMessage>) -> AgentModelRequest {
    AgentModelRequest {
        settings: settings(model),
        system: Some(WRITER_SYSTEM.into()),
        messages,
        turn: turn_of(
            &snapshot_of(vec![dice_binding("dice_roll")]),
            ToolChoice::Auto,
        ),
    }
}

/// `request` as `provider` encodes it is the format's
/// `request_prompt_snapshot.json`, whose CJK text is written literally
/// (UTF-8, no `\u` escapes) and comes out byte for byte; the body, for what
/// a test checks next.
pub fn assert_prompt_snapshot_matches(
    provider: Provider,
    name: &str,
    request: &AgentModelRequest,
) -> Value {
    let body = encoded(provider, request);
    assert_eq!(body, fixture(name, "request_prompt_snapshot.json"));
    let (text, wire) = (
        fixture_text(name, "request_prompt_snapshot.json"),
        body.to_string(),
    );
    for cjk in [CARD, GREETING, HELLO, WORLD_INFO] {
        assert!(
            text.contains(cjk),
            "{name}: the fixture spells {cjk} literally"
        );
        assert!(wire.contains(cjk), "{name}: the body carries {cjk} as is");
    }
    body
}

/// The roles of `body[key]`'s entries: each one of `allowed`, and no two
/// in a row the same (formats without a system role in their messages,
/// whose turns must alternate).
pub fn assert_roles_alternate(body: &Value, key: &str, allowed: [&str; 2]) {
    let roles: Vec<&str> = body[key]
        .as_array()
        .unwrap_or_else(|| panic!("`{key}` is a list: {body}"))
        .iter()
        .map(|entry| entry["role"].as_str().expect("a role"))
        .collect();
    assert!(
        roles.iter().all(|role| allowed.contains(role)),
        "{roles:?} outside {allowed:?}"
    );
    assert!(
        roles.windows(2).all(|pair| pair[0] != pair[1]),
        "{roles:?} do not alternate"
    );
}
