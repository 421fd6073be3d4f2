//! The builtin components through the whole runtime path.

use serde_json::json;
use toolhost_core::{ToolCall, ToolId};
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_sandbox::CallEntropy;

fn host() -> ToolHost {
    ToolHost::with_builtins(ToolHostConfig::default()).expect("builtins listed")
}

fn invocation(formula: serde_json::Value) -> ToolCall {
    ToolCall {
        call_id: "call_1".into(),
        tool_id: ToolId::builtin("dice.roll").expect("id"),
        arguments: formula,
        provider_metadata: serde_json::Value::Null,
    }
}

#[tokio::test]
async fn dice_rolls_within_range() {
    let host = host();
    let execution = host
        .call(
            &invocation(json!({"formula": "3d6+4"})),
            CallEntropy::fresh(),
        )
        .await
        .expect("executes");
    assert!(!execution.result.is_error, "{}", execution.result.content);
    let total = execution.result.structured["total"]
        .as_i64()
        .expect("total");
    assert!((7..=22).contains(&total));
    println!("{} {:?}", execution.result.content, execution.report);
}

/// The generated table (from each builtin's `tool.json`) and the built
/// components agree: the same tools, each component describing itself
/// exactly as its entry says, from the package its entry names. A
/// component whose `describe()` no longer reads its `tool.json` fails to
/// load (checked at every load), and a table that lists a tool no
/// component provides fails here.
#[tokio::test]
async fn the_builtin_table_and_the_built_components_agree() {
    let host = host();
    let mut from_catalog: Vec<ToolId> = host
        .catalog()
        .iter()
        .filter(|descriptor| descriptor.id.is_builtin())
        .map(|descriptor| descriptor.id.clone())
        .collect();
    from_catalog.sort();
    let mut from_table: Vec<ToolId> = toolhost_core::builtin::all()
        .iter()
        .map(|builtin| ToolId::builtin(builtin.name).expect("id"))
        .collect();
    from_table.sort();
    assert_eq!(from_catalog, from_table);
    assert_eq!(toolhost_builtins::components().len(), from_table.len());
    let loaded = host.preload(&from_table, &|_| {}).await;
    assert_eq!(loaded.len(), from_table.len());
    for (id, outcome) in loaded {
        let component = outcome.unwrap_or_else(|error| panic!("{id}: {error}"));
        let builtin = toolhost_core::builtin::all()
            .iter()
            .find(|builtin| builtin.name == id.native_name())
            .expect("in the table");
        assert_eq!(*component.descriptor(), builtin.descriptor(), "{id}");
        assert_eq!(host.catalog().get(id), Some(component.descriptor()));
        match host.source(id) {
            Some(toolhost_runtime::ToolSource::Builtin { package }) => {
                assert_eq!(package, builtin.package, "{id}")
            }
            other => panic!("{id}: source {other:?}"),
        }
    }
}

/// Nothing compiles until a tool is used, and then only that tool: a cold
/// host listing every builtin, one call, one component loaded (and one
/// entry in the cache); callers arriving together share one load.
#[tokio::test]
async fn a_builtin_loads_at_its_first_use_and_only_it() {
    let cache = tempfile::tempdir().expect("tempdir");
    let host = ToolHost::with_builtins(ToolHostConfig {
        sandbox: toolhost_sandbox::SandboxConfig {
            cache_dir: Some(cache.path().to_owned()),
            ..toolhost_sandbox::SandboxConfig::default()
        },
        ..ToolHostConfig::default()
    })
    .expect("builtins listed");
    let cached = || {
        std::fs::read_dir(cache.path())
            .map(|entries| entries.filter_map(Result::ok).count())
            .unwrap_or(0)
    };
    let ids: Vec<ToolId> = host.catalog().iter().map(|d| d.id.clone()).collect();
    assert!(ids.len() > 10);
    assert!(ids.iter().all(|id| !host.is_loaded(id)));
    assert_eq!(cached(), 0, "a new host compiles nothing");

    let execution = host
        .call(&invocation(json!({"formula": "2d6"})), CallEntropy::fresh())
        .await
        .expect("executes");
    assert!(!execution.result.is_error, "{}", execution.result.content);
    let dice = ToolId::builtin("dice.roll").expect("id");
    let loaded: Vec<&ToolId> = ids.iter().filter(|id| host.is_loaded(id)).collect();
    assert_eq!(loaded, [&dice]);
    assert_eq!(cached(), 1, "only dice-roll compiled and cached");

    let read = ToolId::builtin("workspace.read_file").expect("id");
    let both = host.preload([&read, &read], &|_| {}).await;
    let [(_, first), (_, second)] = &both[..] else {
        panic!("two outcomes: {}", both.len());
    };
    let (first, second) = (
        first.as_ref().expect("loads"),
        second.as_ref().expect("loads"),
    );
    assert!(std::ptr::eq(*first, *second), "one load for both callers");
    assert_eq!(cached(), 2);
}
