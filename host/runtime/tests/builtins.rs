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
