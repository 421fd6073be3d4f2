//! Outbound HTTP for the host, in one place: every URL a user names is an
//! [`Endpoint`] (parsed, no userinfo, its host checked after parsing), and
//! every client comes from [`client`] (no redirect to another origin, the
//! system's TLS roots or only a named CA). The model clients and the MCP
//! client use it; no wasmtime.

mod client;
mod endpoint;

pub use client::{
    ClientError, ClientOptions, CrossOriginRedirect, MethodChangingRedirect, TrustRoots, client,
    error_chain, install_crypto_provider,
};
pub use endpoint::{Endpoint, EndpointError, LOOPBACK_V4};
