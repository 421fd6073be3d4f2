//! Why a call did not produce the tool's own answer, as a typed value with a
//! stable code and a sentence the model can act on. None of these takes the
//! host down: the store is dropped and the next call starts fresh.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_core::ToolFailure;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxFailure {
    /// `sandbox.out_of_fuel`
    #[error(
        "the tool used up its fuel budget of {limit} units and was stopped; its work was discarded. Retry with a smaller request."
    )]
    OutOfFuel { limit: u64 },

    /// `sandbox.deadline_exceeded`
    #[error(
        "the tool ran past its {} ms time limit and was stopped after {} ms; its work was discarded. Retry with a smaller request.",
        limit.as_millis(), elapsed.as_millis()
    )]
    DeadlineExceeded { limit: Duration, elapsed: Duration },

    /// `sandbox.memory_limit`
    #[error(
        "the tool asked for {requested} bytes of memory, over its limit of {limit} bytes, and was stopped. Retry with a smaller request."
    )]
    MemoryLimit { limit: u64, requested: u64 },

    /// `sandbox.resource_limit`: tables, instances or memories.
    #[error("the tool exceeded a sandbox resource limit and was stopped: {message}")]
    ResourceLimit { message: String },

    /// `sandbox.output_too_large`
    #[error(
        "the tool's result is {size} bytes, over the limit of {limit} bytes, and was discarded. Ask for less at once (a narrower range or a lower limit)."
    )]
    OutputTooLarge { limit: u64, size: u64 },

    /// `sandbox.arguments_too_large`
    #[error(
        "the arguments are {size} bytes, over the limit of {limit} bytes. Send smaller arguments, splitting the work across calls."
    )]
    ArgumentsTooLarge { limit: u64, size: u64 },

    /// `sandbox.invalid_output`: the tool broke the WIT contract's rules.
    #[error("the tool returned a malformed result: {message}")]
    InvalidOutput { message: String },

    /// `sandbox.guest_trap`: a panic, a wasm trap or an explicit exit.
    #[error("the tool crashed: {message}")]
    GuestTrap { message: String },
}

impl SandboxFailure {
    pub fn code(&self) -> &'static str {
        match self {
            Self::OutOfFuel { .. } => "sandbox.out_of_fuel",
            Self::DeadlineExceeded { .. } => "sandbox.deadline_exceeded",
            Self::MemoryLimit { .. } => "sandbox.memory_limit",
            Self::ResourceLimit { .. } => "sandbox.resource_limit",
            Self::OutputTooLarge { .. } => "sandbox.output_too_large",
            Self::ArgumentsTooLarge { .. } => "sandbox.arguments_too_large",
            Self::InvalidOutput { .. } => "sandbox.invalid_output",
            Self::GuestTrap { .. } => "sandbox.guest_trap",
        }
    }

    /// Details for audit and UIs.
    pub fn details(&self) -> Value {
        match self {
            Self::OutOfFuel { limit } => json!({ "limit": limit }),
            Self::DeadlineExceeded { limit, elapsed } => json!({
                "limitMs": limit.as_millis() as u64,
                "elapsedMs": elapsed.as_millis() as u64,
            }),
            Self::MemoryLimit { limit, requested } => {
                json!({ "limit": limit, "requested": requested })
            }
            Self::OutputTooLarge { limit, size } | Self::ArgumentsTooLarge { limit, size } => {
                json!({ "limit": limit, "size": size })
            }
            Self::ResourceLimit { message }
            | Self::InvalidOutput { message }
            | Self::GuestTrap { message } => json!({ "message": message }),
        }
    }

    /// As a recoverable tool result for the model.
    pub fn to_tool_failure(&self) -> ToolFailure {
        ToolFailure {
            code: self.code().to_owned(),
            message: self.to_string(),
            structured: json!({ "error": { "code": self.code(), "details": self.details() } }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages_name_the_limit() {
        let failure = SandboxFailure::DeadlineExceeded {
            limit: Duration::from_millis(200),
            elapsed: Duration::from_millis(203),
        };
        assert_eq!(failure.code(), "sandbox.deadline_exceeded");
        assert!(failure.to_string().contains("200 ms time limit"));
        let tool = failure.to_tool_failure();
        assert_eq!(tool.code, "sandbox.deadline_exceeded");
        assert_eq!(tool.structured["error"]["details"]["elapsedMs"], 203);
    }
}
