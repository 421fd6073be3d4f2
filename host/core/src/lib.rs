//! toolhost's domain model, free of wasmtime so it builds and tests fast.
//!
//! One model per fact (SPEC §2): [`ToolId`] owns identity, [`ToolDescriptor`]
//! the neutral description, [`ToolCatalog`] the set of descriptors the current
//! sources contribute, [`ToolInvocation`] / [`AgentToolResult`] one call.

pub mod alias;
pub mod catalog;
pub mod descriptor;
pub mod dto;
pub mod id;
pub mod result;

pub use catalog::{CatalogError, LookupError, ToolCatalog};
pub use descriptor::{DescriptorError, ToolDescriptor};
pub use dto::{AgentToolCatalogItemDto, ToolSourceDto};
pub use id::{IdError, ToolId, ToolProvider};
pub use result::{
    AgentToolResult, AwaitMode, CommitMode, IdentityMismatch, TOOL_ERROR_HEADING, ToolEffect,
    ToolFailure, ToolInvocation, ToolOutcome, ToolSuccess,
};
