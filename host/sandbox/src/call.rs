//! One call: a fresh store from the cached `InstancePre`, every limit armed,
//! the export invoked, the outcome classified and checked.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tokio::runtime::RuntimeFlavor;
use tokio::sync::OwnedSemaphorePermit;
use toolhost_core::{ToolEffect, ToolFailure, ToolOutcome, ToolSuccess};
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::component::ToolComponent;
use crate::engine::Sandbox;
use crate::failure::SandboxFailure;
use crate::host_state::{CallCapabilities, DeadlineReached, HostFault, RequestedEffect};
use crate::limits::{Limits, MemoryLimitExceeded, TableLimitExceeded};
use crate::state::{CallEntropy, CallState, GuestLog, bindings};

use bindings::toolhost::tool::types as wit;

/// Everything known about one finished call.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallReport {
    /// The tool's own answer, or why the sandbox stopped it.
    #[serde(skip)]
    pub result: Result<ToolOutcome, SandboxFailure>,
    pub elapsed_us: u64,
    pub fuel_consumed: u64,
    pub peak_memory_bytes: u64,
    /// The recorded inputs: call again with these to replay the call.
    pub entropy: CallEntropy,
    pub random_draws: u64,
    pub logs: Vec<GuestLog>,
    pub logs_dropped: u64,
    pub stdout: String,
    pub stderr: String,
    /// A system failure a host capability hit (a symlink planted in the
    /// workspace, an I/O error): the call was stopped for it and the run
    /// must fail. `result` then holds the resulting trap, which is moot.
    pub host_fault: Option<HostFault>,
}

impl CallReport {
    /// The report of a call that never ran in a store: refused before the
    /// guest was entered, or answered by something other than the sandbox
    /// (an executor of another kind, a test double).
    pub fn not_run(entropy: CallEntropy, result: Result<ToolOutcome, SandboxFailure>) -> Self {
        Self {
            result,
            elapsed_us: 0,
            fuel_consumed: 0,
            peak_memory_bytes: 0,
            entropy,
            random_draws: 0,
            logs: Vec::new(),
            logs_dropped: 0,
            stdout: String::new(),
            stderr: String::new(),
            host_fault: None,
        }
    }

    /// The result as the model sees it: a sandbox failure becomes a
    /// recoverable error with its `sandbox.*` code.
    pub fn outcome(&self) -> ToolOutcome {
        match &self.result {
            Ok(outcome) => outcome.clone(),
            Err(failure) => ToolOutcome::Error(failure.to_tool_failure()),
        }
    }
}

pub(crate) enum Export<'a> {
    Describe,
    Call(&'a str),
}

pub(crate) enum ExportResult {
    Descriptor(wit::Descriptor),
    Call(Result<wit::ToolOutput, wit::ToolError>),
}

pub(crate) struct Invocation {
    pub(crate) result: Result<ExportResult, SandboxFailure>,
    elapsed: Duration,
    fuel_consumed: u64,
    entropy: CallEntropy,
    peak_memory_bytes: u64,
    random_draws: u64,
    logs: Vec<GuestLog>,
    logs_dropped: u64,
    stdout: String,
    stderr: String,
    host_fault: Option<HostFault>,
    /// What the tool asked the host to change, through `toolhost:control`.
    requested_effect: Option<ToolEffect>,
}

/// A linked component as one call needs it.
pub(crate) struct Guest<'a> {
    pub(crate) label: &'a Arc<str>,
    pub(crate) pre: &'a bindings::PureToolPre<CallState>,
    pub(crate) trust: crate::Trust,
}

impl Sandbox {
    /// Call `tool` once with `arguments` (a JSON object). Never panics and
    /// never takes the host down: every guest misbehaviour is a typed
    /// [`SandboxFailure`] in the report. Dropping the future cancels the call.
    pub async fn call(
        &self,
        tool: &ToolComponent,
        arguments: &Value,
        entropy: CallEntropy,
    ) -> CallReport {
        self.call_under(
            tool,
            &tool.limits,
            arguments,
            entropy,
            CallCapabilities::new(),
        )
        .await
    }

    /// [`Sandbox::call`] under other limits than the tool's own: a profile's
    /// overrides, already resolved against the host policy
    /// ([`HostPolicy::resolve`](crate::HostPolicy::resolve)).
    /// `capabilities` holds what the call's capabilities act on, as the
    /// capability layer prepared them for this call (the invocation's
    /// workspace session, its chat, ...).
    pub async fn call_under(
        &self,
        tool: &ToolComponent,
        limits: &Limits,
        arguments: &Value,
        entropy: CallEntropy,
        capabilities: CallCapabilities,
    ) -> CallReport {
        if !arguments.is_object() {
            return CallReport::not_run(
                entropy,
                Ok(ToolOutcome::Error(ToolFailure::new(
                    "tool.invalid_arguments",
                    "arguments must be an object",
                ))),
            );
        }
        // serde_json's writer, not `Display`: this is on every call's path.
        let text = serde_json::to_string(arguments).unwrap_or_default();
        if text.len() as u64 > limits.argument_bytes {
            return CallReport::not_run(
                entropy,
                Err(SandboxFailure::ArgumentsTooLarge {
                    limit: limits.argument_bytes,
                    size: text.len() as u64,
                }),
            );
        }

        let invocation = self
            .invoke(
                Guest {
                    label: &tool.label,
                    pre: &tool.pre,
                    trust: tool.trust,
                },
                limits,
                entropy,
                capabilities,
                Export::Call(&text),
            )
            .await;
        let result = invocation.result.and_then(|result| match result {
            ExportResult::Call(Ok(output)) => {
                accept_output(tool, limits, output, invocation.requested_effect)
                    .map(ToolOutcome::Success)
            }
            ExportResult::Call(Err(error)) => accept_error(limits, error).map(ToolOutcome::Error),
            ExportResult::Descriptor(_) => unreachable!("call() returns a call result"),
        });
        CallReport {
            result,
            elapsed_us: invocation.elapsed.as_micros() as u64,
            fuel_consumed: invocation.fuel_consumed,
            peak_memory_bytes: invocation.peak_memory_bytes,
            entropy: invocation.entropy,
            random_draws: invocation.random_draws,
            logs: invocation.logs,
            logs_dropped: invocation.logs_dropped,
            stdout: invocation.stdout,
            stderr: invocation.stderr,
            host_fault: invocation.host_fault,
        }
    }

    /// Run one export of `guest` in a fresh store under `limits`.
    pub(crate) async fn invoke(
        &self,
        guest: Guest<'_>,
        limits: &Limits,
        entropy: CallEntropy,
        capabilities: CallCapabilities,
        export: Export<'_>,
    ) -> Invocation {
        // Wait for a slot instead of failing when the pool is busy. The
        // semaphore is never closed, so acquiring cannot fail.
        let slot = Arc::clone(&self.call_slots).acquire_owned().await.ok();
        let ticking = self.ticker.call_started();
        let started = Instant::now();

        let fuel = limits.fuel.unwrap_or(u64::MAX);
        let mut store = Store::new(
            &self.engine,
            CallState::new(
                Arc::clone(guest.label),
                limits,
                guest.trust,
                entropy,
                started,
                capabilities,
            ),
        );
        store.limiter(|state| &mut state.limiter);
        // Fresh stores start with no fuel and a deadline of 0; arm both.
        let armed = store.set_fuel(fuel);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|context| {
            if Instant::now() >= context.data().core.deadline_at {
                Err(wasmtime::Error::new(DeadlineReached))
            } else {
                // Let the executor run timers and cancellation, then go on.
                Ok(UpdateDeadline::Yield(1))
            }
        });

        // Epochs stop wasm code; this outer timeout also stops time spent in
        // host calls, which epochs cannot interrupt.
        let grace = (self.ticker.tick() * 4).max(Duration::from_millis(25));
        let run = async {
            armed?;
            let instance = guest.pre.instantiate_async(&mut store).await?;
            let tool = instance.toolhost_tool_tool();
            Ok(match export {
                Export::Describe => ExportResult::Descriptor(tool.call_describe(&mut store).await?),
                Export::Call(arguments) => {
                    ExportResult::Call(tool.call_call(&mut store, arguments).await?)
                }
            })
        };
        let outcome: Result<wasmtime::Result<ExportResult>, _> =
            tokio::time::timeout(limits.deadline + grace, run).await;
        let elapsed = started.elapsed();

        let result = match outcome {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(classify(&error, store.data(), limits, elapsed)),
            Err(_) => Err(SandboxFailure::DeadlineExceeded {
                limit: limits.deadline,
                elapsed,
            }),
        };
        let fuel_consumed = store.get_fuel().map_or(0, |left| fuel - left);
        drop(ticking);
        let state = store.data_mut();
        let invocation = Invocation {
            result,
            elapsed,
            fuel_consumed,
            entropy,
            peak_memory_bytes: state.limiter.peak_memory,
            random_draws: state.random_draws,
            logs: std::mem::take(&mut state.logs),
            logs_dropped: state.logs_dropped,
            stdout: captured(&state.stdout),
            stderr: captured(&state.stderr),
            host_fault: state.core.host_fault.take(),
            requested_effect: state
                .capabilities
                .get_mut::<RequestedEffect>(RequestedEffect::KEY)
                .and_then(|requested| requested.0.take()),
        };
        tear_down(store, slot);
        invocation
    }
}

/// Drop a finished call's store, whose pooling slot reset is most of a
/// small call's teardown. On a current-thread runtime (`mcp serve` over
/// stdio) that waits until the runtime next polls for I/O, so the answer is
/// written first; the call's slot permit goes with the store, so the pool
/// never holds more stores than it has slots. On a multi-threaded runtime
/// the store is dropped here: handing it to another worker means a
/// cross-thread wake-up, which measured dearer than the reset it would hide.
fn tear_down(store: Store<CallState>, slot: Option<OwnedSemaphorePermit>) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if runtime.runtime_flavor() == RuntimeFlavor::CurrentThread => {
            runtime.spawn(async move {
                // Deferred until the I/O driver has been polled.
                tokio::task::yield_now().await;
                drop(store);
                drop(slot);
            });
        }
        _ => {
            drop(store);
            drop(slot);
        }
    }
}

fn captured(pipe: &wasmtime_wasi::p2::pipe::MemoryOutputPipe) -> String {
    let bytes = pipe.contents();
    if bytes.is_empty() {
        String::new()
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

const MAX_MESSAGE_CHARS: usize = 800;

/// Name the limit a trap came from; anything else is the guest's own crash.
fn classify(
    error: &wasmtime::Error,
    state: &CallState,
    limits: &Limits,
    elapsed: Duration,
) -> SandboxFailure {
    if error.downcast_ref::<DeadlineReached>().is_some() {
        return SandboxFailure::DeadlineExceeded {
            limit: limits.deadline,
            elapsed,
        };
    }
    if let Some(hit) = error.downcast_ref::<MemoryLimitExceeded>() {
        return SandboxFailure::MemoryLimit {
            limit: hit.limit,
            requested: hit.requested,
        };
    }
    if let Some(hit) = error.downcast_ref::<TableLimitExceeded>() {
        return SandboxFailure::ResourceLimit {
            message: hit.to_string(),
        };
    }
    if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        return SandboxFailure::GuestTrap {
            message: format!("the tool exited with status {}", exit.0),
        };
    }
    let stderr = stderr_summary(&state.stderr.contents());
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => SandboxFailure::OutOfFuel {
            limit: limits.fuel.unwrap_or(u64::MAX),
        },
        Some(Trap::Interrupt) => SandboxFailure::DeadlineExceeded {
            limit: limits.deadline,
            elapsed,
        },
        Some(Trap::StackOverflow) => SandboxFailure::GuestTrap {
            message: "wasm stack overflow (call stack exhausted), e.g. by unbounded recursion"
                .to_owned(),
        },
        // Rust and C guests keep a shadow stack in linear memory, below the
        // data; overflowing it faults out of bounds.
        Some(Trap::MemoryOutOfBounds) => SandboxFailure::GuestTrap {
            message: with_report(
                format!(
                    "{} (in a Rust or C tool this is often a stack overflow from deep recursion)",
                    Trap::MemoryOutOfBounds
                ),
                stderr,
            ),
        },
        Some(trap) => SandboxFailure::GuestTrap {
            message: with_report(trap.to_string(), stderr),
        },
        None => {
            let text = format!("{error:#}");
            // Instance, table or memory counts refused by the limiter surface
            // as untyped instantiation errors.
            if text.contains("resource limit exceeded") {
                SandboxFailure::ResourceLimit {
                    message: truncate(&text),
                }
            } else {
                SandboxFailure::GuestTrap {
                    message: truncate(&text),
                }
            }
        }
    }
}

fn with_report(message: String, stderr: Option<String>) -> String {
    match stderr {
        Some(said) => format!("{message}; it reported: {said}"),
        None => message,
    }
}

/// What the guest wrote to stderr before dying (a Rust panic message), on
/// one line, without the backtrace hint.
fn stderr_summary(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    (!lines.is_empty()).then(|| truncate(&lines.join(" ")))
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn check_size(limits: &Limits, size: usize) -> Result<(), SandboxFailure> {
    if size as u64 > limits.output_bytes {
        return Err(SandboxFailure::OutputTooLarge {
            limit: limits.output_bytes,
            size: size as u64,
        });
    }
    Ok(())
}

fn invalid(message: impl Into<String>) -> SandboxFailure {
    SandboxFailure::InvalidOutput {
        message: message.into(),
    }
}

fn parse_json(what: &str, text: Option<&str>) -> Result<Value, SandboxFailure> {
    match text {
        None => Ok(Value::Null),
        Some(text) => serde_json::from_str(text)
            .map_err(|error| invalid(format!("{what} is not valid JSON ({error})"))),
    }
}

fn accept_output(
    tool: &ToolComponent,
    limits: &Limits,
    output: wit::ToolOutput,
    requested: Option<ToolEffect>,
) -> Result<ToolSuccess, SandboxFailure> {
    let size = output.content.len()
        + output.structured.as_ref().map_or(0, String::len)
        + output.resource_refs.iter().map(String::len).sum::<usize>();
    check_size(limits, size)?;
    let structured = parse_json("structured output", output.structured.as_deref())?;
    // An effect is requested through `toolhost:control/effects`, which only
    // builtin control tools import; the output's own `effect` field (kept
    // in the published `toolhost:tool`) applies nothing, from anyone.
    if output.effect.is_some() {
        return Err(invalid(
            "it returned an effect in its output; only a builtin control tool changes the run, by requesting it through toolhost:control",
        ));
    }
    // The grant already keeps `toolhost:control` from anything else; the
    // descriptor is checked again so a mislabelled builtin cannot slip one by.
    if requested.is_some()
        && !(tool.trust == crate::Trust::Builtin && tool.descriptor.annotation_flag("control"))
    {
        return Err(invalid(
            "it requested an effect, which only builtin control tools may do",
        ));
    }
    Ok(ToolSuccess {
        content: output.content,
        structured,
        resource_refs: output.resource_refs,
        effect: requested,
    })
}

/// Error codes are dotted lowercase words; `sandbox.*` belongs to the host,
/// so a tool cannot dress its own errors up as a sandbox verdict.
fn is_valid_error_code(code: &str) -> bool {
    code.len() <= 96
        && code.contains('.')
        && !code.starts_with("sandbox.")
        && code.split('.').all(|part| {
            part.starts_with(|c: char| c.is_ascii_lowercase())
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
}

fn accept_error(limits: &Limits, error: wit::ToolError) -> Result<ToolFailure, SandboxFailure> {
    let size =
        error.code.len() + error.message.len() + error.structured.as_ref().map_or(0, String::len);
    check_size(limits, size)?;
    if !is_valid_error_code(&error.code) {
        return Err(invalid(format!(
            "its error code {:?} is not a dotted lowercase code outside `sandbox.`",
            truncate(&error.code)
        )));
    }
    Ok(ToolFailure {
        code: error.code,
        message: error.message,
        structured: parse_json("error details", error.structured.as_deref())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_dotted_lowercase_and_not_sandbox() {
        for good in [
            "dice.invalid_formula",
            "tool.invalid_arguments",
            "workspace.path_is_directory",
        ] {
            assert!(is_valid_error_code(good), "{good}");
        }
        for bad in [
            "",
            "nodot",
            "Dice.roll",
            "dice.",
            ".x",
            "a..b",
            "sandbox.out_of_fuel",
            "a.b c",
        ] {
            assert!(!is_valid_error_code(bad), "{bad}");
        }
    }

    #[test]
    fn stderr_summary_keeps_the_panic_message() {
        let text = b"thread '<unnamed>' panicked at src/lib.rs:3:9:\nboom\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";
        assert_eq!(
            stderr_summary(text).as_deref(),
            Some("thread '<unnamed>' panicked at src/lib.rs:3:9: boom")
        );
        assert_eq!(stderr_summary(b"\n \n"), None);
    }
}
