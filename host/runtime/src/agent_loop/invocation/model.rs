//! The model's side of a round: a stored reply taken instead of asking
//! again, the request with its retries, the reply stored and journalled, text
//! outside tool calls captured, and the reminder when a reply has no call.

use serde_json::{Value, json};
use toolhost_core::{AgentModelRequest, Classified};
use toolhost_journal::{
    DirectOutputCaptured, Event as _, ModelCallAttemptFailed, ModelCompleted, ROOT_INVOCATION_ID,
    sha256_hex,
};
use toolhost_model::ModelReply;
use toolhost_workspace::WriteGuard;

use crate::failure::RunFailure;

use super::prompt::message_body;
use super::*;

impl InvocationLoop<'_> {
    /// The stored reply of `round`, when a resumed run has one: the model
    /// is not asked again (a model answering from a sequence moves past it).
    pub(super) fn stored_reply(&self, round: u32) -> Result<Option<ModelReply>, RunFailure> {
        if self.shared.run.resume_log().is_none() {
            return Ok(None);
        }
        let Some(bytes) = self.shared.run.read_file(&self.reply_path(round))? else {
            return Ok(None);
        };
        #[derive(serde::Deserialize)]
        struct Stored {
            response: toolhost_core::AgentModelResponse,
            raw: Value,
        }
        let stored: Stored = serde_json::from_slice(&bytes).map_err(|error| {
            RunFailure::State(format!("{} does not load: {error}", self.reply_path(round)))
        })?;
        self.model.skip_reply();
        Ok(Some(ModelReply {
            response: stored.response,
            raw: stored.raw,
        }))
    }

    pub(super) fn reply_path(&self, round: u32) -> String {
        if self.id() == ROOT_INVOCATION_ID {
            format!("model-responses/round-{round:03}.json")
        } else {
            format!("model-responses/{}/round-{round:03}.json", self.id())
        }
    }

    /// One model call, retried while its failure is retryable.
    pub(super) async fn ask(
        &self,
        request: &AgentModelRequest,
        round: u32,
    ) -> Result<ModelReply, RunFailure> {
        if let Some(stored) = self.stored_reply(round)? {
            // Attempts that failed before it were journalled then.
            if let Some(log) = self.shared.run.resume_log() {
                log.skip_while(self.id(), ModelCallAttemptFailed::TYPE);
            }
            return Ok(stored);
        }
        let retry = self.shared.config.retry;
        let mut attempt = 1;
        loop {
            match self.model.complete(request).await {
                Ok(reply) => return Ok(reply),
                Err(error) => {
                    let will_retry = error.retryable() && attempt <= retry.max_retries;
                    self.shared.run.record(&ModelCallAttemptFailed {
                        round,
                        invocation_id: self.id().to_owned(),
                        attempt,
                        code: error.code().to_owned(),
                        message: error.to_string(),
                        retryable: error.retryable(),
                        will_retry,
                    })?;
                    if !will_retry {
                        return Err(error.into());
                    }
                    let delay = retry
                        .initial_delay
                        .saturating_mul(1 << (attempt - 1).min(16));
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
            }
        }
    }

    /// `model-responses/round-NNN.json` (the root) or
    /// `model-responses/<invocation>/round-NNN.json`, create-only, and
    /// `model_completed`.
    pub(super) fn store_reply(&self, reply: &ModelReply, round: u32) -> Result<String, RunFailure> {
        let path = self.reply_path(round);
        let record = json!({
            "schemaVersion": 1,
            "round": round,
            "invocationId": self.id(),
            "model": self.model.describe(),
            "response": reply.response,
            "raw": reply.raw,
        });
        let mut bytes = serde_json::to_vec_pretty(&record)
            .map_err(|error| RunFailure::State(format!("model reply: {error}")))?;
        bytes.push(b'\n');
        if self.shared.run.resume_log().is_some() && self.shared.run.read_file(&path)?.is_some() {
            // A stored reply taken up again: the file is the record.
        } else {
            self.shared.run.dir().write_create_only(&path, &bytes)?;
        }
        let response = &reply.response;
        let text = response.message.text();
        self.shared.run.record(&ModelCompleted {
            round,
            invocation_id: self.id().to_owned(),
            model_response_path: path.clone(),
            response_id: response.response_id.clone(),
            finish_reason: serde_json::to_value(&response.finish_reason).unwrap_or(Value::Null),
            tool_call_count: response.message.calls().count(),
            has_assistant_text: !text.trim().is_empty(),
            assistant_text_chars: text.chars().count(),
            input_tokens: response.usage.map(|usage| usage.input_tokens),
            output_tokens: response.usage.map(|usage| usage.output_tokens),
        })?;
        Ok(path)
    }

    /// Keep a reply's text that no tool call carried, so nothing the model
    /// wrote is lost: in `direct_output.md` of the message body's root
    /// (foreground agents whose profile shows that root; a child's drift
    /// text stays in its stored reply). The path written, if any.
    pub(super) fn capture_direct_output(
        &self,
        text: &str,
        round: u32,
        response_path: &str,
    ) -> Result<Option<String>, RunFailure> {
        let profile = &self.spec.profile;
        if text.trim().is_empty()
            || !self.foreground()
            || message_body(profile, &self.session).is_none()
        {
            return Ok(None);
        }
        let path = profile.output.direct_output_path();
        self.shared
            .run
            .workspace()
            .write_text(&path, text, WriteGuard::Unchecked)?;
        self.shared.run.record(&DirectOutputCaptured {
            round,
            invocation_id: self.id().to_owned(),
            path: path.clone(),
            chars: text.chars().count(),
            sha256: sha256_hex(text.as_bytes()),
            model_response_path: response_path.to_owned(),
        })?;
        Ok(Some(path))
    }

    /// What the model is told after a reply without a tool call; `saved`
    /// is where its text was kept, if it was (never claimed otherwise).
    pub(super) fn reminder(&self, attempt: u32, saved: Option<&str>) -> String {
        let mut head = format!(
            "[system reminder, direct output recovery attempt {attempt}] Your last reply had no tool call, so nobody saw it."
        );
        if let Some(path) = saved {
            head.push_str(&format!(" Its text was saved to {path}."));
        }
        if !self.foreground() {
            return format!(
                "{head} Work only through tool calls, and report your result with {}.",
                self.alias("task.return")
            );
        }
        if self.shared.ledger().explicit_commits() > 0 {
            format!(
                "{head} Your reply is already committed to the chat: call {} to end the run, or write and commit again first.",
                self.alias("workspace.finish")
            )
        } else {
            let write_it = format!(
                "write your reply to {}",
                message_body(&self.spec.profile, &self.session).unwrap_or("a file")
            );
            format!(
                "{head} Work only through tool calls: {write_it} with {}, publish it with {}, then call {}.",
                self.alias("workspace.write_file"),
                self.alias("workspace.commit"),
                self.alias("workspace.finish")
            )
        }
    }
}
