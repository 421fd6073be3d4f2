//! [`client`]: the one way the host builds an HTTP client to a place a user
//! named (a model provider, a remote MCP server).
//!
//! - **Redirects stay on the named origin.** reqwest follows redirects
//!   anywhere by default and strips only the standard credential headers
//!   (`Authorization`, `Cookie`) when the host changes, so a provider's
//!   `x-api-key` or `x-goog-api-key` went on to wherever a 307 pointed. Here
//!   a redirect to another scheme, host or port is an error, before any
//!   request is sent there. Within the origin only 307 and 308 are
//!   followed: they repeat the request as it was, while 301, 302 and 303
//!   turn a POST (every model and MCP request) into a GET without its body,
//!   which no API means (an MCP endpoint would answer it with an event
//!   stream and the call would hang).
//! - **TLS trust is the system's, or only the CA a user names.**

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::redirect::{Attempt, Policy};

/// Largest CA file read (a system bundle is about 200 KiB).
const MAX_CA_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Most redirects followed within the origin.
const MAX_REDIRECTS: usize = 10;

/// Where the certificates that authenticate servers come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TrustRoots {
    /// The operating system's roots.
    #[default]
    System,
    /// Only the CA certificates (PEM) in this file: for a private server.
    CaFile(PathBuf),
}

/// How to build a client.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// The whole request, connection to last byte.
    pub timeout: Option<Duration>,
    pub roots: TrustRoots,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("CA file {}: {reason}", path.display())]
    CaFile { path: PathBuf, reason: String },
    #[error("HTTP client: {0}")]
    Build(String),
}

/// A redirect that would leave the origin the user named.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to follow a redirect from {from} to {to}: requests, and their keys, go only to the origin you named"
)]
pub struct CrossOriginRedirect {
    pub from: String,
    pub to: String,
}

/// A redirect that would not repeat the request as it was.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to follow a {status} redirect to {to}: it would resend the request as a GET without its body; only 307 and 308 are followed"
)]
pub struct MethodChangingRedirect {
    pub status: u16,
    pub to: String,
}

/// reqwest is built without a default crypto provider; install ring once
/// per process (a second install is refused and harmless).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client that never follows a redirect to another origin and trusts
/// the roots `options` names.
pub fn client(options: &ClientOptions) -> Result<reqwest::Client, ClientError> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
        .redirect(Policy::custom(same_origin));
    if let Some(timeout) = options.timeout {
        builder = builder.timeout(timeout);
    }
    if let TrustRoots::CaFile(path) = &options.roots {
        builder = builder.tls_certs_only(read_ca_file(path)?);
    }
    builder
        .build()
        .map_err(|error| ClientError::Build(error_chain(&error)))
}

fn same_origin(attempt: Attempt<'_>) -> reqwest::redirect::Action {
    let first = attempt.previous().first().map(|url| url.origin());
    let next = attempt.url().origin();
    let status = attempt.status().as_u16();
    match first {
        Some(first) if first != next => {
            let from = first.ascii_serialization();
            let to = next.ascii_serialization();
            attempt.error(CrossOriginRedirect { from, to })
        }
        _ if !matches!(status, 307 | 308) => {
            let to = attempt.url().to_string();
            attempt.error(MethodChangingRedirect { status, to })
        }
        _ if attempt.previous().len() > MAX_REDIRECTS => {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        }
        _ => attempt.follow(),
    }
}

fn read_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, ClientError> {
    let failed = |reason: String| ClientError::CaFile {
        path: path.to_owned(),
        reason,
    };
    // A fifo or device here would block the connecting task for good.
    let pem = toolhost_core::file::read_regular(path, MAX_CA_FILE_BYTES)
        .map_err(|error| failed(error.to_string()))?
        .ok_or_else(|| failed(format!("is larger than {MAX_CA_FILE_BYTES} bytes")))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|error| failed(format!("not PEM certificates: {error}")))?;
    if certificates.is_empty() {
        return Err(failed("holds no PEM certificate".into()));
    }
    Ok(certificates)
}

/// An error with its causes (`connect: refused`), for messages.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
