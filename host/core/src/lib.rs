//! toolhost's domain model, free of wasmtime so it builds and tests fast.
//!
//! One model per fact (SPEC §2): [`ToolId`] owns identity, [`ToolDescriptor`]
//! the neutral description, [`ToolCatalog`] the set of descriptors the current
//! sources contribute, [`Profile`] what one kind of agent may do,
//! [`InvocationToolSnapshot`] the tools one invocation was given (frozen),
//! [`ToolTurnContract`] / [`ModelTurn`] what one model request may call,
//! [`ToolRequestGate`] the budgets, [`ToolCall`] / [`AgentToolResult`]
//! one call. Errors carry a dotted code and an [`ErrorClass`].

pub mod alias;
pub mod allowed_hosts;
pub mod beneath;
pub mod builtin;
pub mod capability;
pub mod catalog;
pub mod crash_point;
pub mod descriptor;
pub mod document;
pub mod dto;
pub mod error;
pub mod file;
pub mod gate;
pub mod host_call;
pub mod id;
pub mod limits;
pub mod model;
pub mod model_path;
pub mod policy;
pub mod profile;
pub mod prompt_snapshot;
pub mod result;
pub mod snapshot;
pub mod turn;
pub mod work;

#[cfg(test)]
pub(crate) mod test_support;

pub use capability::{Capability, CapabilitySet, HostVersion};
pub use catalog::{CatalogError, LookupError, ToolCatalog};
pub use descriptor::{Annotations, DescriptorError, ToolDescriptor};
pub use dto::{AgentToolCatalogItemDto, ToolSourceDto};
pub use error::{Classified, ErrorClass};
pub use gate::{BudgetScope, GateRejection, Reservation, ToolRequestGate};
pub use host_call::HostCallError;
pub use id::{IdError, ToolId, ToolProvider};
pub use model::{
    AgentModelContentPart, AgentModelMessage, AgentModelRequest, AgentModelResponse,
    AgentModelRole, AgentModelSettings, FinishReason, ModelCall, TokenUsage, UnknownToolCall,
    UnknownToolResult,
};
pub use profile::{Profile, ProfileError, ProfileVersion};
pub use result::{
    AgentToolResult, AwaitMode, CommitMode, IdentityMismatch, TOOL_ERROR_HEADING, ToolCall,
    ToolEffect, ToolFailure, ToolOutcome, ToolSuccess,
};
pub use snapshot::{
    CompiledSnapshot, ExitPolicy, InvocationToolSnapshot, SnapshotError, SnapshotSources,
    ToolBinding,
};
pub use turn::{
    AgentModelTool, ModelCallError, ModelTurn, ProviderToolCall, ToolChoice, ToolTurnContract,
    TurnError,
};
pub use work::{DeadlinePassed, WorkMeter};
