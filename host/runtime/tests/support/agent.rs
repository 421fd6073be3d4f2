//! One agent's invocation driven call by call, as a provider would send the
//! calls: for tests of the sandboxed tools against a real run, without a
//! model loop in between.

use std::sync::Arc;

use serde_json::Value;
use toolhost_core::{ExitPolicy, Profile, ProviderToolCall, ToolChoice};
use toolhost_runtime::{CallOutcome, Invocation, Run, RunFailure};
use toolhost_sandbox::CallEntropy;

use super::host;

pub struct Agent {
    session: Invocation,
    /// Call ids are `{call_prefix}_{n}`, counted from 1.
    call_prefix: String,
    next: u32,
}

impl Agent {
    /// Invocation `invocation` of `run` under `profile`; its calls are
    /// named after the invocation (`inv_root_1`, …).
    pub fn start(run: &Arc<Run>, profile: &Profile, invocation: &str) -> Self {
        let session = run
            .start_invocation(
                profile,
                host().snapshot_sources(),
                invocation,
                ExitPolicy::RunFinishAllowed,
            )
            .expect("invocation");
        Self {
            session,
            call_prefix: invocation.to_owned(),
            next: 0,
        }
    }

    /// An invocation already started (a resumed one), its calls counted on
    /// from `next`.
    pub fn resumed(session: Invocation, next: u32) -> Self {
        Self {
            call_prefix: session.invocation_id().to_owned(),
            session,
            next,
        }
    }

    /// The same agent with its calls named `{prefix}_{n}` instead.
    pub fn with_call_prefix(mut self, prefix: &str) -> Self {
        self.call_prefix = prefix.to_owned();
        self
    }

    /// How many calls this agent has numbered so far.
    pub fn calls_made(&self) -> u32 {
        self.next
    }

    /// One model call of `alias` with `arguments`, as a provider would send it.
    pub async fn call(&mut self, alias: &str, arguments: Value) -> Result<CallOutcome, RunFailure> {
        self.next += 1;
        let turn = self.session.begin_turn(ToolChoice::Auto, "test")?;
        let invocation = turn.decode_call(ProviderToolCall {
            call_id: Some(format!("{}_{}", self.call_prefix, self.next)),
            name: Some(alias.into()),
            arguments: Some(arguments),
            provider_metadata: Value::Null,
        })?;
        self.session
            .call(&*host(), &turn, invocation, CallEntropy::seeded(1))
            .await
    }

    /// A call that succeeds.
    pub async fn ok(&mut self, alias: &str, arguments: Value) -> CallOutcome {
        let outcome = self
            .call(alias, arguments.clone())
            .await
            .unwrap_or_else(|failure| panic!("{alias} {arguments} failed the run: {failure}"));
        assert!(
            !outcome.result.is_error,
            "{alias} {arguments}: {}",
            outcome.model_text()
        );
        outcome
    }

    /// A call the tool refuses (the run goes on): its error code.
    pub async fn tool_error(&mut self, alias: &str, arguments: Value) -> String {
        let outcome = self.call(alias, arguments).await.expect("the run goes on");
        assert!(
            outcome.result.is_error,
            "expected an error: {}",
            outcome.model_text()
        );
        outcome.result.error_code.expect("code")
    }
}
