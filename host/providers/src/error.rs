//! The two ways an adapter fails: it cannot say a request in a provider's
//! format ([`EncodeError`], `provider.*` codes), or a provider's reply breaks
//! its wire contract or the request's turn contract ([`DecodeError`],
//! `model.*` codes). Both fail the run fast; neither is ever turned into a
//! guess.

use toolhost_core::{Classified, ErrorClass, ModelCallError, ToolId};

/// A request this adapter refuses to put on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error(
        "provider.tool_name_invalid: {provider} cannot declare `{tool_id}` under the alias `{alias}`: {rule}"
    )]
    ToolNameInvalid {
        provider: &'static str,
        tool_id: ToolId,
        alias: String,
        rule: &'static str,
    },
    /// Boxed: it is rare and names the tool, the place and the reason.
    #[error("provider.schema_unsupported: {0}")]
    SchemaUnsupported(Box<SchemaIssue>),
    #[error(
        "provider.historical_tool_missing: the history holds call `{call_id}` of `{tool_id}`, which is not a tool of this request"
    )]
    HistoricalToolMissing { call_id: String, tool_id: ToolId },
    #[error("provider.lost_metadata: {provider} needs its own metadata on {holder}: {reason}")]
    LostProviderMetadata {
        provider: &'static str,
        /// What carries the metadata: `tool call \`call_1\``, `message 3`.
        holder: String,
        reason: String,
    },
    #[error("provider.invalid_history: {0}")]
    InvalidHistory(String),
    #[error(
        "provider.arguments_not_object: {provider} sends tool arguments as a JSON object, but call `{call_id}` has {found}"
    )]
    ArgumentsNotObject {
        provider: &'static str,
        call_id: String,
        found: &'static str,
    },
    #[error("provider.setting_missing: {provider} requires {setting}")]
    SettingMissing {
        provider: &'static str,
        setting: &'static str,
    },
}

/// A tool input schema a provider's dialect cannot express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{provider} cannot express the input schema of `{alias}` ({tool_id}) at `{path}`: {reason}"
)]
pub struct SchemaIssue {
    pub provider: &'static str,
    pub tool_id: ToolId,
    pub alias: String,
    /// A JSON pointer into the tool's input schema (`#/properties/tags`).
    pub path: String,
    pub reason: String,
}

impl Classified for EncodeError {
    fn code(&self) -> &'static str {
        match self {
            Self::ToolNameInvalid { .. } => "provider.tool_name_invalid",
            Self::SchemaUnsupported(_) => "provider.schema_unsupported",
            Self::HistoricalToolMissing { .. } => "provider.historical_tool_missing",
            Self::LostProviderMetadata { .. } => "provider.lost_metadata",
            Self::InvalidHistory(_) => "provider.invalid_history",
            Self::ArgumentsNotObject { .. } => "provider.arguments_not_object",
            Self::SettingMissing { .. } => "provider.setting_missing",
        }
    }

    /// The runtime assembled the request (history, tools, settings): a
    /// request it cannot send is its own failure, never the model's.
    fn class(&self) -> ErrorClass {
        ErrorClass::SystemFailure
    }
}

/// A provider reply this adapter refuses to interpret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Missing call id or empty name (`model.invalid_tool_call`), as
    /// [`toolhost_core::ModelTurn::decode_part`] decided. (A name that is
    /// not one of this request's aliases is not an error here: it decodes
    /// to an `UnknownToolCall` part the run loop answers.)
    #[error(transparent)]
    ToolCall(#[from] ModelCallError),
    /// A call whose shape breaks the provider's own contract (arguments that
    /// must be an object and are not, an unknown call kind).
    #[error("model.invalid_tool_call: {0}")]
    InvalidToolCall(String),
    #[error("model.duplicate_tool_call_id: call id `{0}` appears twice in one response")]
    DuplicateCallId(String),
    /// The body is not the provider's response format.
    #[error("model.invalid_response: {0}")]
    InvalidResponse(String),
    /// The provider answered with an error instead of a reply.
    #[error("model.provider_error: {0}")]
    ProviderError(String),
    /// A stream ended before its terminal event.
    #[error("model.stream_incomplete: {0}")]
    StreamIncomplete(String),
}

impl Classified for DecodeError {
    fn code(&self) -> &'static str {
        match self {
            Self::ToolCall(inner) => inner.code(),
            Self::InvalidToolCall(_) => "model.invalid_tool_call",
            Self::DuplicateCallId(_) => "model.duplicate_tool_call_id",
            Self::InvalidResponse(_) => "model.invalid_response",
            Self::ProviderError(_) => "model.provider_error",
            Self::StreamIncomplete(_) => "model.stream_incomplete",
        }
    }

    /// A broken reply leaves nothing to hold the model to; a call to a tool
    /// the request did not offer is a contract violation decided by policy.
    fn class(&self) -> ErrorClass {
        match self {
            Self::ToolCall(inner) => inner.class(),
            _ => ErrorClass::SystemFailure,
        }
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> DecodeError {
    DecodeError::InvalidResponse(message.into())
}
