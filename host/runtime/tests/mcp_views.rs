//! An MCP result too long for inline, on one physical line (a 2 MB JSON
//! document, as the official SDKs send it): its readable view is
//! hard-wrapped so `workspace.read_file` windows reach all of it, while the
//! JSON audit keeps the exact result. The MCP server is a stand-in executor
//! (no node needed); the read goes through the real sandboxed builtin.

mod support;

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toolhost_core::{
    ExitPolicy, Profile, ProviderToolCall, ToolBinding, ToolCall, ToolCatalog, ToolChoice, ToolId,
    ToolOutcome, ToolProvider, ToolSuccess,
};
use toolhost_journal::Durability;
use toolhost_runtime::{
    CallContext, CallOutcome, ExecuteError, Execution, Invocation, Run, ToolExecutor, ToolHost,
    ToolHostConfig,
};
use toolhost_sandbox::CallEntropy;

use support::plain_sources;

/// The server's answer: the document as text and as structuredContent.
fn answer(document: &Value) -> Value {
    json!({
        "content": [{"type": "text", "text": document.to_string()}],
        "structuredContent": document
    })
}

/// Builtins through the real host; the MCP tool answers `document`,
/// projected as the host projects a server's answer.
struct WithServer<'a> {
    host: &'a ToolHost,
    document: Value,
}

impl ToolExecutor for WithServer<'_> {
    async fn execute(
        &self,
        invocation: &ToolCall,
        binding: &ToolBinding,
        entropy: CallEntropy,
        context: CallContext,
    ) -> Result<Execution, ExecuteError> {
        if !matches!(invocation.tool_id.provider(), ToolProvider::Mcp(_)) {
            // The trait's execute (the snapshot's limits and the context).
            return ToolExecutor::execute(self.host, invocation, binding, entropy, context).await;
        }
        let projected = toolhost_mcp::project(&answer(&self.document));
        let (result, _) = toolhost_core::AgentToolResult::from_outcome(
            invocation,
            ToolOutcome::Success(ToolSuccess {
                content: projected.content,
                structured: projected.structured,
                ..ToolSuccess::default()
            }),
        );
        // As the MCP executor does: a long result becomes a readable view.
        let views = context.views.expect("an invocation keeps views");
        Ok(Execution {
            result: views.externalize(result)?,
            effect: None,
            report: None,
        })
    }
}

async fn call(
    session: &mut Invocation,
    executor: &WithServer<'_>,
    call_id: &str,
    alias: &str,
    arguments: Value,
) -> CallOutcome {
    let turn = session.begin_turn(ToolChoice::Auto, "test").expect("turn");
    let invocation = turn
        .decode_call(ProviderToolCall {
            call_id: Some(call_id.into()),
            name: Some(alias.into()),
            arguments: Some(arguments),
            provider_metadata: Value::Null,
        })
        .expect("decodes");
    session
        .call(executor, &turn, invocation, CallEntropy::seeded(1))
        .await
        .expect("the run goes on")
}

#[tokio::test]
async fn a_two_megabyte_line_is_read_in_windows_from_its_view() {
    let host = ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins");
    let server = uuid::Uuid::from_u128(7);
    let dump = ToolId::parse(&format!("mcp/{server}:dump")).expect("id");
    let mut catalog: ToolCatalog = host.catalog().clone();
    catalog
        .insert(support::described(dump.clone(), "Dump the rows."))
        .expect("insert");
    let names = BTreeMap::from([(server, "rows".to_owned())]);
    let sources = plain_sources(&catalog, &names);
    let profile = Profile::from_json(
        &json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "reader",
            "tools": {"allow": [dump.as_str(), "workspace.read_file"]}
        })
        .to_string(),
    )
    .expect("profile");
    let dir = tempfile::tempdir().expect("tempdir");
    let run = Run::create(&dir.path().join("run"), &profile, Durability::Batched).expect("run");
    let mut session = run
        .start_invocation(&profile, sources, "inv_root", ExitPolicy::RunFinishAllowed)
        .expect("session");
    let alias = |id: &ToolId| {
        session
            .snapshot()
            .binding(id)
            .expect("bound")
            .model_alias
            .clone()
    };
    let (dump_alias, read_alias) = (
        alias(&dump),
        alias(&ToolId::builtin("workspace.read_file").expect("id")),
    );

    let rows: Vec<Value> = (0..80_000)
        .map(|n| json!({"n": n, "name": format!("räd {n}")}))
        .collect();
    let document = json!({ "rows": rows });
    let text = document.to_string();
    assert!(text.len() > 2_000_000 && !text.contains('\n'));
    let executor = WithServer {
        host: &host,
        document: document.clone(),
    };

    let outcome = call(&mut session, &executor, "big", &dump_alias, json!({})).await;
    let structured = &outcome.result.structured;
    assert_eq!(structured["externalized"], true);
    let view_path = structured["path"].as_str().expect("path").to_owned();

    // The audit keeps the server's answer exactly.
    let stem = toolhost_journal::audit_stem("big");
    let audit: Value = serde_json::from_slice(
        &std::fs::read(run.root().join(format!("tool-results/{stem}.json"))).expect("audit"),
    )
    .expect("audit JSON");
    assert_eq!(audit["result"]["structured"]["result"], answer(&document));
    assert_eq!(
        audit["result"]["structured"]["result"]["content"][0]["text"].as_str(),
        Some(text.as_str())
    );

    // The view: many lines, none wider than a read shows, the text again
    // when joined.
    let view = std::fs::read_to_string(run.root().join(&view_path)).expect("view");
    let lines: Vec<&str> = view.split('\n').collect();
    assert!(lines.len() > 600, "{} lines", lines.len());
    assert!(lines.iter().all(|line| line.chars().count() <= 3_000));
    assert_eq!(lines.concat(), text);

    // A window in the middle of the document is read whole, line by line.
    let read = call(
        &mut session,
        &executor,
        "read",
        &read_alias,
        json!({"path": view_path, "start_line": 300, "line_count": 3}),
    )
    .await;
    assert!(!read.result.is_error, "{}", read.model_text());
    let shown = read.model_text();
    assert!(
        shown.contains(&format!("300 | {}", lines[299])),
        "{shown:.300}"
    );
    assert!(
        shown.contains(&format!("302 | {}", lines[301])),
        "{shown:.300}"
    );
    assert!(!shown.contains("was cut"), "{shown:.300}");
    assert_eq!(read.result.structured["lineTruncated"], false);
    run.complete().expect("complete");
}
