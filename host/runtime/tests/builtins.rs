//! The builtin components through the whole runtime path.

use serde_json::json;
use toolhost_core::{ToolId, ToolInvocation};
use toolhost_runtime::{ToolHost, ToolHostConfig};
use toolhost_sandbox::CallEntropy;

async fn host() -> ToolHost {
    ToolHost::with_builtins(ToolHostConfig::default(), &|_| {})
        .await
        .expect("builtins load")
}

fn invocation(formula: serde_json::Value) -> ToolInvocation {
    ToolInvocation {
        call_id: "call_1".into(),
        tool_id: ToolId::builtin("dice.roll").expect("id"),
        arguments: formula,
        provider_metadata: serde_json::Value::Null,
    }
}

#[tokio::test]
async fn dice_rolls_within_range() {
    let host = host().await;
    let execution = host
        .execute(
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
/// components agree: the same tools, each describing itself exactly as its
/// entry says, from the package its entry names. A component whose
/// `describe()` no longer reads its `tool.json`, or a table that lists a
/// tool no component provides, fails here.
#[tokio::test]
async fn the_builtin_table_and_the_built_components_agree() {
    let host = host().await;
    let mut from_components: Vec<ToolId> = host
        .catalog()
        .iter()
        .filter(|descriptor| descriptor.id.is_builtin())
        .map(|descriptor| descriptor.id.clone())
        .collect();
    from_components.sort();
    let mut from_table: Vec<ToolId> = toolhost_core::builtin::all()
        .iter()
        .map(|builtin| ToolId::builtin(builtin.name).expect("id"))
        .collect();
    from_table.sort();
    assert_eq!(from_components, from_table);
    assert_eq!(toolhost_builtins::components().len(), from_table.len());
    for builtin in toolhost_core::builtin::all() {
        let id = ToolId::builtin(builtin.name).expect("id");
        let described = host.catalog().get(&id).expect("in the catalog");
        assert_eq!(*described, builtin.descriptor(), "{}", builtin.name);
        match host.source(&id) {
            Some(toolhost_runtime::ToolSource::Builtin { package }) => {
                assert_eq!(package, builtin.package, "{}", builtin.name)
            }
            other => panic!("{}: source {other:?}", builtin.name),
        }
    }
}
