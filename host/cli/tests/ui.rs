//! The web UI of `toolhost serve` in a real browser: a real server (no
//! tokens, loopback) and `tests/ui/timeline.py`, which drives Debian's
//! chromium through chromium-driver with Selenium (installed by `make
//! setup`; nothing is downloaded at run time). Skipped, loudly, only where
//! the browser or Selenium is not installed.

use std::path::Path;
use std::process::Stdio;

use serde_json::json;

mod common;

use common::browser::{Process, browser, run_browser_test};
use common::serve::{
    free_port, script_call as call, script_models, serve_command, tenant_with_chats,
};

#[test]
fn the_timeline_and_approvals_in_a_real_browser() {
    let Some(python) = browser() else {
        return;
    };
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = temp.path();
    let tenant = tenant_with_chats(dir, "local", ["chat-1", "chat-2", "chat-3"]);
    std::fs::write(
        tenant.join("profiles/writer.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": "writer",
               // The MCP tool is never registered: the timeline shows it
               // left out, with the reason.
               "tools": {"allow": ["workspace.write_file", "workspace.read_file",
                                   "workspace.commit", "workspace.finish",
                                   "mcp/6f1c2e4a-0b7d-4c1e-9a53-2d8e0f4b7a61:echo"],
                         "maxRounds": 6},
               // Small enough that the draft and its reading back trim the
               // chat and then the read's result: the timeline shows it.
               "context": {"maxInputChars": 40_000}})
        .to_string(),
    )
    .expect("profile");
    std::fs::write(
        tenant.join("policy.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.toolPolicy",
               "requireApproval": ["workspace.commit", "workspace.write_file"]})
        .to_string(),
    )
    .expect("policy");
    // Markup, a bidi override, and enough lines that the approval card
    // must cut the content and still show the path.
    let hostile = format!(
        "Before <script>window.pwned=1;document.title='pwned'</script>\
         <img src=x onerror=\"window.pwned=2\"> after. evil\u{202e}txt.exe\n{}",
        "a line of the draft\n".repeat(1000)
    );
    std::fs::write(
        dir.join("script.json"),
        json!({"schemaVersion": 1, "kind": "toolhost.modelScript", "replies": [
            {"toolCalls": [call("w", "workspace_write_file",
                                json!({"path": "output/main.md", "content": hostile}))]},
            {"toolCalls": [call("r", "workspace_read_file", json!({"path": "output/main.md"})),
                           call("c", "workspace_commit", json!({}))]},
            // A name the request did not offer: answered, charged, shown.
            {"toolCalls": [call("u", "web_search", json!({"query": "lantern"})),
                           call("f", "workspace_finish", json!({"reason": "done"}))]}
        ]})
        .to_string(),
    )
    .expect("script");
    script_models(dir);
    let port = free_port();
    let _server = Process(
        serve_command(
            &Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-cache"),
            port,
        )
        .current_dir(dir)
        .args(["--models", "models.json", "--data-dir", "data"])
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("TOOLHOST_POLICY")
        .stdin(Stdio::null())
        .spawn()
        .expect("toolhost serve"),
    );
    let base = format!("http://127.0.0.1:{port}");
    run_browser_test(
        &python,
        "tests/ui/timeline.py",
        &["--base", &base],
        "ui-screenshots",
        &["runs.png", "timeline.png"],
    );
}
