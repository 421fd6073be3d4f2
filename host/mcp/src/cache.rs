//! Each server's tool list, cached on disk by an explicit refresh. Preparing
//! a run reads only the cache: it never starts a server, and a server with
//! no cache, paused or off, or a tool it cannot offer, is left out with a
//! diagnostic saying why.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_core::{ToolDescriptor, ToolId, ToolProvider};
use uuid::Uuid;

use crate::client::{McpTool, list_tools};
use crate::error::McpError;
use crate::registry::{McpRegistry, Permission, Registration, State, write_atomically};

pub const CACHE_KIND: &str = "toolhost.mcpToolCache";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolCache {
    pub schema_version: u32,
    pub kind: String,
    pub registration_id: Uuid,
    /// RFC 3339.
    pub refreshed_at: String,
    /// The server's `serverInfo` at refresh.
    pub server: Value,
    pub tools: Vec<McpTool>,
}

fn cache_path(dir: &Path, id: Uuid) -> PathBuf {
    dir.join("cache").join(format!("{id}.json"))
}

/// Ask the server for its tools and cache them (replacing the old cache).
pub async fn refresh(
    registry: &McpRegistry,
    registration: &Registration,
    timeout: Duration,
) -> Result<ToolCache, McpError> {
    let (tools, server) = list_tools(registration, timeout).await?;
    let cache = ToolCache {
        schema_version: 1,
        kind: CACHE_KIND.to_owned(),
        registration_id: registration.id,
        refreshed_at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        server,
        tools,
    };
    let path = cache_path(registry.dir(), registration.id);
    let parent = path.parent().unwrap_or(registry.dir());
    std::fs::create_dir_all(parent).map_err(|source| McpError::Io {
        path: parent.to_owned(),
        source,
    })?;
    let mut bytes = serde_json::to_vec_pretty(&cache).map_err(|error| McpError::Io {
        path: path.clone(),
        source: std::io::Error::other(error),
    })?;
    bytes.push(b'\n');
    write_atomically(&path, &bytes)?;
    Ok(cache)
}

/// The cached tools of a registration, if it was refreshed.
pub fn load_cache(dir: &Path, id: Uuid) -> Result<Option<ToolCache>, McpError> {
    let path = cache_path(dir, id);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(McpError::Io { path, source }),
    };
    let cache: ToolCache =
        serde_json::from_slice(&bytes).map_err(|error| McpError::CacheInvalid {
            path: path.clone(),
            message: error.to_string(),
        })?;
    if cache.registration_id != id || cache.kind != CACHE_KIND {
        return Err(McpError::CacheInvalid {
            path,
            message: "it belongs to another registration or is not a tool cache".into(),
        });
    }
    Ok(Some(cache))
}

/// A tool a run may be offered.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    pub registration: Registration,
    pub tool: McpTool,
    pub descriptor: ToolDescriptor,
}

/// A registration or tool left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Omitted {
    pub registration_id: Uuid,
    pub server: String,
    /// `None`: the whole server.
    pub tool: Option<String>,
    pub code: &'static str,
    pub reason: String,
}

/// Every tool the registry offers from its caches, and what was left out.
pub fn offered_tools(registry: &McpRegistry) -> (Vec<OfferedTool>, Vec<Omitted>) {
    let mut offered = Vec::new();
    let mut omitted = Vec::new();
    for registration in registry.registrations() {
        let skip = |code: &'static str, reason: String| Omitted {
            registration_id: registration.id,
            server: registration.display_name.clone(),
            tool: None,
            code,
            reason,
        };
        match registration.state {
            State::Active => {}
            State::Paused => {
                omitted.push(skip("mcp.server_paused", "the server is paused".into()));
                continue;
            }
            State::Off => {
                omitted.push(skip("mcp.server_off", "the server is switched off".into()));
                continue;
            }
        }
        let cache = match load_cache(registry.dir(), registration.id) {
            Ok(Some(cache)) => cache,
            Ok(None) => {
                omitted.push(skip(
                    "mcp.no_tool_cache",
                    "its tools were never listed; run `toolhost mcp refresh`".into(),
                ));
                continue;
            }
            Err(error) => {
                omitted.push(skip(error.code(), error.to_string()));
                continue;
            }
        };
        for tool in cache.tools {
            let leave = |code: &'static str, reason: String| Omitted {
                registration_id: registration.id,
                server: registration.display_name.clone(),
                tool: Some(tool.name.clone()),
                code,
                reason,
            };
            if registration.is_off_until_allowed(&tool.name) {
                omitted.push(leave(
                    "mcp.tool_not_allowed",
                    format!(
                        "a newly listed tool is off until allowed: `toolhost mcp grant {} {} allow`",
                        registration.display_name, tool.name
                    ),
                ));
                continue;
            }
            if registration.permission(&tool.name) == Permission::Deny {
                omitted.push(leave(
                    "mcp.tool_denied",
                    "denied in the registration".into(),
                ));
                continue;
            }
            if tool.input_schema.get("type").and_then(Value::as_str) != Some("object") {
                omitted.push(leave(
                    "mcp.schema_not_object",
                    "its input schema's root is not an object".into(),
                ));
                continue;
            }
            let id = match ToolId::new(&ToolProvider::Mcp(registration.id), &tool.name) {
                Ok(id) => id,
                Err(error) => {
                    omitted.push(leave("mcp.invalid_tool_name", error.to_string()));
                    continue;
                }
            };
            let descriptor = ToolDescriptor {
                id,
                title: tool.title.clone(),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
                output_schema: tool.output_schema.clone(),
                annotations: tool.annotations.clone(),
            };
            offered.push(OfferedTool {
                registration: registration.clone(),
                tool,
                descriptor,
            });
        }
    }
    (offered, omitted)
}
