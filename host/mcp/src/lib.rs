//! MCP servers as a second executor (SPEC §10), no wasmtime:
//!
//! - [`registry`]: [`McpRegistry`], the registered servers (uuid, name,
//!   transport, Active/Paused/Off, per-tool Allow/Ask/Deny), stored
//!   atomically in `<mcp dir>/registrations.json`.
//! - [`cache`]: each server's tool list, refreshed explicitly
//!   (`toolhost mcp refresh`) and cached in `<mcp dir>/cache/<uuid>.json`;
//!   what a run is offered comes from the cache only, never the network,
//!   with a diagnostic for every tool left out.
//! - [`client`]: one exchange with a server over rmcp (a child process per
//!   refresh or call): list tools, call one, with the outcome kinds of the
//!   reference (completed / failed / unknown).
//! - [`projection`]: a `CallToolResult` as the model reads it.

pub mod cache;
pub mod client;
pub mod error;
pub mod projection;
pub mod registry;

pub use cache::{OfferedTool, Omitted, ToolCache, load_cache, offered_tools, refresh};
pub use client::{CallOutcome, McpErrorInfo, McpTool, call_tool, list_tools};
pub use error::McpError;
pub use projection::{Projected, project};
pub use registry::{McpRegistry, NewTools, Permission, Registration, State, Transport};
