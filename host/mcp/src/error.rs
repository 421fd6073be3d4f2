//! [`McpError`]: what can go wrong with registrations, caches and servers.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("mcp.registry_invalid: {}: {message}", path.display())]
    RegistryInvalid { path: PathBuf, message: String },
    #[error("mcp.cache_invalid: {}: {message}", path.display())]
    CacheInvalid { path: PathBuf, message: String },
    #[error("mcp.io_error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("mcp.not_registered: no MCP server is registered as {0}")]
    NotRegistered(String),
    #[error("mcp.ambiguous: more than one MCP server is called {0}; use its id")]
    Ambiguous(String),
    #[error("mcp.invalid_registration: {0}")]
    Invalid(String),
    /// The server could not be started or reached; nothing was sent.
    #[error("mcp.connect_failed: {server}: {message}")]
    Connect { server: String, message: String },
    /// The server answered a request with an error, or broke the protocol.
    #[error("mcp.request_failed: {server}: {message}")]
    Request { server: String, message: String },
    #[error("mcp.timeout: {server} did not answer within {seconds} s")]
    Timeout { server: String, seconds: u64 },
    #[error("mcp.transport_unsupported: {0}")]
    Unsupported(String),
}

impl McpError {
    pub fn code(&self) -> &'static str {
        match self {
            McpError::RegistryInvalid { .. } => "mcp.registry_invalid",
            McpError::CacheInvalid { .. } => "mcp.cache_invalid",
            McpError::Io { .. } => "mcp.io_error",
            McpError::NotRegistered(_) => "mcp.not_registered",
            McpError::Ambiguous(_) => "mcp.ambiguous",
            McpError::Invalid(_) => "mcp.invalid_registration",
            McpError::Connect { .. } => "mcp.connect_failed",
            McpError::Request { .. } => "mcp.request_failed",
            McpError::Timeout { .. } => "mcp.timeout",
            McpError::Unsupported(_) => "mcp.transport_unsupported",
        }
    }
}

impl From<toolhost_core::document::DocumentError> for McpError {
    fn from(error: toolhost_core::document::DocumentError) -> Self {
        use toolhost_core::document::DocumentError;
        match error {
            DocumentError::Io { path, source } => McpError::Io { path, source },
            DocumentError::Invalid { path, message } => McpError::RegistryInvalid { path, message },
        }
    }
}
