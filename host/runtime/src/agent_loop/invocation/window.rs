//! Fitting a request's history into the model's window (issue 39, seed §9):
//! the profile's `context.maxInputChars`, counted in Unicode scalars
//! (`str::chars`, the text metrics' measure; no tokenizer).
//!
//! The history is a preamble — the prompt snapshot's messages, some of them
//! chat history that may go, then the task — followed by rounds: an
//! assistant message and everything up to the next one (its calls' results,
//! a reminder, children's results). When a request is over budget, in this
//! order and only as far as needed:
//!
//! 1. results of rounds before the last [`PROTECTED_ROUNDS`] become a
//!    one-line stub naming their stored file (call id and tool id stay),
//!    oldest first;
//! 2. the oldest chat-history messages of the preamble go;
//! 3. the oldest whole rounds go — a call never without its result, never
//!    the preamble's other messages nor the last rounds;
//! 4. the last rounds' results become stubs too;
//! 5. still over: [`OverBudget`], which fails the run.
//!
//! Trimming only ever removes: a stubbed result stays stubbed, a dropped
//! message stays dropped, so a later request never shows the model again
//! what an earlier one left out.

use std::collections::HashSet;
use std::io;

use serde_json::Value;
use toolhost_core::{
    AgentModelContentPart, AgentModelMessage, AgentModelRole, AgentToolResult, ModelTurn,
};
use toolhost_journal::{ContextTrimmed, RunLayout};

/// Rounds at the end of the history that keep their results as long as
/// anything else can go: the model is working with them.
pub(crate) const PROTECTED_ROUNDS: usize = 2;

/// The longest call id a stub repeats; provider ids are short, a hostile
/// one does not make the stub long.
const STUB_CALL_ID_CHARS: usize = 80;

/// What trimming knows of one invocation's history, kept across its rounds.
#[derive(Debug, Clone)]
pub(crate) struct Window {
    budget: usize,
    /// One flag per preamble message still in the history: whether it is
    /// chat history, which may be dropped.
    preamble: Vec<bool>,
    protected_rounds: usize,
    /// Results already dealt with: stubbed, or so short a stub would not be
    /// shorter. Call ids are unique in a run (the audit refuses a second).
    settled: HashSet<String>,
}

/// What one [`Window::fit`] left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Trimmed {
    /// Calls whose results now read as a stub, oldest first.
    pub stubbed_calls: Vec<String>,
    pub dropped_history: usize,
    pub dropped_rounds: usize,
    /// The request's characters, the fixed part included.
    pub chars_before: usize,
    pub chars_after: usize,
    pub budget: usize,
}

impl Trimmed {
    /// The journal's record of this trimming.
    pub(crate) fn event(&self, invocation_id: &str, round: u32) -> ContextTrimmed {
        ContextTrimmed {
            invocation_id: invocation_id.to_owned(),
            round,
            stubbed_calls: self.stubbed_calls.clone(),
            dropped_history: self.dropped_history,
            dropped_rounds: self.dropped_rounds,
            chars_before: self.chars_before,
            chars_after: self.chars_after,
            budget: self.budget,
        }
    }
}

/// Everything that may go is gone and the request is still too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "model.context_over_budget: the request needs {needed} characters after trimming, the model's window holds {budget}"
)]
pub(crate) struct OverBudget {
    pub needed: usize,
    pub budget: usize,
}

impl OverBudget {
    pub(crate) const CODE: &'static str = "model.context_over_budget";
}

impl Window {
    /// `preamble` has one flag per message before the first round, in
    /// order: `true` for chat history that may be dropped.
    pub(crate) fn new(budget: usize, preamble: Vec<bool>) -> Self {
        Self {
            budget,
            preamble,
            protected_rounds: PROTECTED_ROUNDS,
            settled: HashSet::new(),
        }
    }

    /// Make `fixed_chars` (system prompt and tools, [`fixed_chars`]) plus
    /// `history` fit the budget. Under budget: `Ok(None)`, nothing touched.
    /// `stub` writes a left-out result's line ([`stubber`]). On `Err` the
    /// history is left trimmed as far as it could be; the run fails anyway.
    pub(crate) fn fit(
        &mut self,
        fixed_chars: usize,
        history: &mut Vec<AgentModelMessage>,
        stub: impl Fn(&AgentToolResult) -> String,
    ) -> Result<Option<Trimmed>, OverBudget> {
        self.preamble.truncate(history.len());
        let mut sizes: Vec<usize> = history.iter().map(message_chars).collect();
        let before = fixed_chars.saturating_add(sizes.iter().sum());
        if before <= self.budget {
            return Ok(None);
        }
        let mut pass = Pass {
            total: before,
            stubbed: Vec::new(),
        };
        let starts = self.round_starts(history);
        if let Some(first) = starts.first() {
            let old = starts.len().saturating_sub(self.protected_rounds);
            let end = starts.get(old).copied().unwrap_or(history.len());
            self.stub(history, &mut sizes, *first..end, &stub, &mut pass);
        }
        let mut dropped_history = 0;
        if pass.total > self.budget {
            dropped_history = self.drop_history(history, &mut sizes, &mut pass.total);
        }
        let mut dropped_rounds = 0;
        if pass.total > self.budget {
            dropped_rounds = self.drop_rounds(history, &mut sizes, &mut pass.total);
        }
        if pass.total > self.budget {
            let rounds = self.preamble.len()..history.len();
            self.stub(history, &mut sizes, rounds, &stub, &mut pass);
        }
        if pass.total > self.budget {
            return Err(OverBudget {
                needed: pass.total,
                budget: self.budget,
            });
        }
        Ok(Some(Trimmed {
            stubbed_calls: pass.stubbed,
            dropped_history,
            dropped_rounds,
            chars_before: before,
            chars_after: pass.total,
            budget: self.budget,
        }))
    }

    /// Where each round starts: every assistant message after the preamble.
    /// (Anything between the preamble and the first reply stays with the
    /// preamble.)
    fn round_starts(&self, history: &[AgentModelMessage]) -> Vec<usize> {
        (self.preamble.len()..history.len())
            .filter(|&index| history[index].role == AgentModelRole::Assistant)
            .collect()
    }

    /// Stub the results in `range`, oldest first, until the request fits.
    fn stub(
        &mut self,
        history: &mut [AgentModelMessage],
        sizes: &mut [usize],
        range: std::ops::Range<usize>,
        stub: &impl Fn(&AgentToolResult) -> String,
        pass: &mut Pass,
    ) {
        for index in range {
            for part in &mut history[index].parts {
                if pass.total <= self.budget {
                    return;
                }
                let AgentModelContentPart::ToolResult { result } = part else {
                    continue;
                };
                if !self.settled.insert(result.call_id.clone()) {
                    continue;
                }
                let stubbed = AgentToolResult {
                    call_id: result.call_id.clone(),
                    tool_id: result.tool_id.clone(),
                    content: stub(result),
                    structured: Value::Null,
                    is_error: result.is_error,
                    error_code: result.error_code.clone(),
                    resource_refs: Vec::new(),
                };
                let (was, now) = (result_chars(result), result_chars(&stubbed));
                if now >= was {
                    continue;
                }
                *result = stubbed;
                sizes[index] -= was - now;
                pass.total -= was - now;
                pass.stubbed.push(result.call_id.clone());
            }
        }
    }

    /// Drop the oldest chat-history messages of the preamble until the
    /// request fits or none is left; how many went.
    fn drop_history(
        &mut self,
        history: &mut Vec<AgentModelMessage>,
        sizes: &mut Vec<usize>,
        total: &mut usize,
    ) -> usize {
        let mut going = vec![false; self.preamble.len()];
        let mut count = 0;
        for (index, &droppable) in self.preamble.iter().enumerate() {
            if *total <= self.budget {
                break;
            }
            if droppable {
                going[index] = true;
                *total -= sizes[index];
                count += 1;
            }
        }
        if count > 0 {
            remove_marked(history, &going);
            remove_marked(sizes, &going);
            remove_marked(&mut self.preamble, &going);
        }
        count
    }

    /// Drop the oldest whole rounds, never the protected last ones, until
    /// the request fits; how many went.
    fn drop_rounds(
        &mut self,
        history: &mut Vec<AgentModelMessage>,
        sizes: &mut Vec<usize>,
        total: &mut usize,
    ) -> usize {
        let starts = self.round_starts(history);
        let droppable = starts.len().saturating_sub(self.protected_rounds);
        let mut count = 0;
        // Round `k` runs to the start of the next, the last to the end.
        let end = |k: usize| starts.get(k + 1).copied().unwrap_or(history.len());
        while count < droppable && *total > self.budget {
            *total -= sizes[starts[count]..end(count)].iter().sum::<usize>();
            count += 1;
        }
        if count > 0 {
            let span = starts[0]..end(count - 1);
            sizes.drain(span.clone());
            for message in history.drain(span) {
                for part in &message.parts {
                    if let AgentModelContentPart::ToolResult { result } = part {
                        self.settled.remove(&result.call_id);
                    }
                }
            }
        }
        count
    }
}

/// Remove the items whose index is marked in `going` (items past its end
/// stay).
fn remove_marked<T>(items: &mut Vec<T>, going: &[bool]) {
    let mut index = 0;
    items.retain(|_| {
        let keep = !going.get(index).copied().unwrap_or(false);
        index += 1;
        keep
    });
}

/// The running count of one [`Window::fit`].
struct Pass {
    total: usize,
    stubbed: Vec<String>,
}

/// The characters of a request's fixed part: the system prompt and the
/// tools it offers.
pub(crate) fn fixed_chars(system: Option<&str>, turn: &ModelTurn) -> usize {
    system.map_or(0, chars) + turn_chars(turn)
}

/// The characters a request's tool declarations take: each tool's alias,
/// description and input schema (as JSON).
pub(crate) fn turn_chars(turn: &ModelTurn) -> usize {
    turn.tools()
        .iter()
        .map(|tool| {
            chars(&tool.model_alias) + chars(&tool.description) + json_chars(&tool.input_schema)
        })
        .sum()
}

/// The characters of one message as the model reads it: texts, each call's
/// name and arguments (JSON), each result's text. A call is counted under
/// its canonical id, the alias it is sent under being the request's: the
/// two are of a size (an alias is at most 64 bytes). Provider metadata is
/// not counted.
pub(crate) fn message_chars(message: &AgentModelMessage) -> usize {
    message
        .parts
        .iter()
        .map(|part| match part {
            AgentModelContentPart::Text { text } => chars(text),
            AgentModelContentPart::ToolCall { call } => {
                chars(call.tool_id.as_str()) + json_chars(&call.arguments)
            }
            AgentModelContentPart::UnknownToolCall { call } => {
                chars(&call.name) + json_chars(&call.arguments)
            }
            AgentModelContentPart::ToolResult { result } => result_chars(result),
            AgentModelContentPart::UnknownToolResult { result } => chars(&result.model_text()),
        })
        .sum()
}

/// Exactly the characters of [`AgentToolResult::model_text`], copying only
/// an error's (short) text.
fn result_chars(result: &AgentToolResult) -> usize {
    if result.is_error {
        chars(&result.model_text())
    } else {
        chars(&result.content)
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// The characters of `value` serialized, counted as it is written, without
/// building the string.
fn json_chars(value: &Value) -> usize {
    struct Count(usize);
    impl io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            // serde_json writes UTF-8: one scalar per non-continuation byte.
            self.0 += bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a writer that never fails cannot fail.
    serde_json::to_writer(&mut count, value).map_or(0, |()| count.0)
}

/// The line a left-out result reads as: which call, how long it was, where
/// it is stored and, when the invocation has one, the tool to read it with.
pub(crate) fn stub_text(
    result: &AgentToolResult,
    chars: usize,
    path: &str,
    read_alias: Option<&str>,
) -> String {
    let call: String = result
        .call_id
        .chars()
        .take(STUB_CALL_ID_CHARS)
        .map(|c| if c.is_control() || c == '`' { '?' } else { c })
        .collect();
    let kept = match read_alias {
        Some(alias) => format!("read it with `{alias}` at `{path}`"),
        None => format!("it is stored at `{path}`"),
    };
    format!(
        "[Result of call `{call}` ({chars} characters) left out to fit the context window; {kept}.]"
    )
}

/// The stub writer of a run: each result's stored file (`tool-results/
/// call_<hex>.json`, as the audit names it) and the invocation's alias of
/// the read tool, if it has one.
pub(crate) fn stubber<'a>(
    layout: &'a RunLayout,
    read_alias: Option<&'a str>,
) -> impl Fn(&AgentToolResult) -> String + 'a {
    move |result| {
        let path = layout.tool_result(&result.call_id).relative;
        stub_text(result, chars(&result.content), &path, read_alias)
    }
}

#[cfg(test)]
mod tests;
