//! [`McpRegistry`]: the MCP servers a user registered, stored in
//! `<mcp dir>/registrations.json` (written atomically: a temp file beside
//! it, then a rename). Each registration has a uuid (its tools' ids are
//! `mcp/<uuid>:<native-name>`), a display name, how to reach the server, a
//! state, and per-tool permissions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::McpError;

/// `kind` of the registrations file.
pub const REGISTRY_KIND: &str = "toolhost.mcpRegistrations";
pub const REGISTRY_FILE: &str = "registrations.json";

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum Transport {
    /// A child process speaking MCP on its stdin/stdout.
    #[serde(rename_all = "camelCase")]
    Stdio {
        command: String,
        #[serde(default)]
        args: Vec<String>,
        /// Extra environment variables for the process (nothing else of the
        /// host's environment is added beyond what the process inherits).
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP, to a server on this machine (a loopback `http://`
    /// URL; anything else is refused when called).
    #[serde(rename_all = "camelCase")]
    Http { url: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    /// Its tools are offered to runs.
    Active,
    /// Kept, tools omitted until resumed.
    Paused,
    /// Switched off.
    Off,
}

/// What a profile's allow list may do with a tool of this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Permission {
    Allow,
    /// Behaves like `Allow`: there is no one to ask during a run.
    Ask,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registration {
    pub id: Uuid,
    pub display_name: String,
    pub transport: Transport,
    pub state: State,
    /// Per native tool name; a tool not listed is allowed.
    #[serde(default)]
    pub permissions: BTreeMap<String, Permission>,
}

impl Registration {
    pub fn permission(&self, native_name: &str) -> Permission {
        self.permissions
            .get(native_name)
            .copied()
            .unwrap_or(Permission::Allow)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RegistryFile {
    schema_version: u32,
    kind: String,
    registrations: Vec<Registration>,
}

/// The registrations of one MCP directory.
#[derive(Debug, Clone)]
pub struct McpRegistry {
    dir: PathBuf,
    registrations: Vec<Registration>,
}

impl McpRegistry {
    /// Read `<dir>/registrations.json`; a missing file is an empty registry,
    /// a file that does not parse is `mcp.registry_invalid`.
    pub fn load(dir: &Path) -> Result<Self, McpError> {
        let path = dir.join(REGISTRY_FILE);
        let registrations = toolhost_core::document::read::<RegistryFile>(&path, REGISTRY_KIND, 1)
            .map_err(McpError::from)?
            .map(|file| file.registrations)
            .unwrap_or_default();
        Ok(Self {
            dir: dir.to_owned(),
            registrations,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn registrations(&self) -> &[Registration] {
        &self.registrations
    }

    /// A registration by uuid, or by display name when that is unique.
    pub fn find(&self, key: &str) -> Result<&Registration, McpError> {
        if let Ok(id) = Uuid::parse_str(key)
            && let Some(found) = self.registrations.iter().find(|r| r.id == id)
        {
            return Ok(found);
        }
        let named: Vec<&Registration> = self
            .registrations
            .iter()
            .filter(|r| r.display_name == key)
            .collect();
        match named.as_slice() {
            [one] => Ok(one),
            [] => Err(McpError::NotRegistered(key.to_owned())),
            _ => Err(McpError::Ambiguous(key.to_owned())),
        }
    }

    fn find_mut(&mut self, key: &str) -> Result<&mut Registration, McpError> {
        let id = self.find(key)?.id;
        self.registrations
            .iter_mut()
            .find(|r| r.id == id)
            .ok_or_else(|| McpError::NotRegistered(key.to_owned()))
    }

    /// Register a server (active, every tool allowed) and save.
    pub fn add(&mut self, display_name: &str, transport: Transport) -> Result<Uuid, McpError> {
        let display_name = display_name.trim();
        if display_name.is_empty() {
            return Err(McpError::Invalid("a registration needs a name".into()));
        }
        if self
            .registrations
            .iter()
            .any(|r| r.display_name == display_name)
        {
            return Err(McpError::Invalid(format!(
                "a server is already registered as {display_name}"
            )));
        }
        if let Transport::Stdio { command, .. } = &transport
            && command.trim().is_empty()
        {
            return Err(McpError::Invalid("a stdio server needs a command".into()));
        }
        let id = Uuid::new_v4();
        self.registrations.push(Registration {
            id,
            display_name: display_name.to_owned(),
            transport,
            state: State::Active,
            permissions: BTreeMap::new(),
        });
        self.save()?;
        Ok(id)
    }

    pub fn remove(&mut self, key: &str) -> Result<Registration, McpError> {
        let id = self.find(key)?.id;
        let index = self
            .registrations
            .iter()
            .position(|r| r.id == id)
            .ok_or_else(|| McpError::NotRegistered(key.to_owned()))?;
        let removed = self.registrations.remove(index);
        self.save()?;
        // Its cached tool list goes with it (a missing cache is fine).
        let _ = std::fs::remove_file(self.dir.join("cache").join(format!("{id}.json")));
        Ok(removed)
    }

    pub fn set_state(&mut self, key: &str, state: State) -> Result<(), McpError> {
        self.find_mut(key)?.state = state;
        self.save()
    }

    pub fn grant(&mut self, key: &str, tool: &str, permission: Permission) -> Result<(), McpError> {
        self.find_mut(key)?
            .permissions
            .insert(tool.to_owned(), permission);
        self.save()
    }

    /// Write the file atomically: a crash leaves the old one or the new one.
    fn save(&self) -> Result<(), McpError> {
        let io = |source| McpError::Io {
            path: self.dir.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let file = RegistryFile {
            schema_version: 1,
            kind: REGISTRY_KIND.to_owned(),
            registrations: self.registrations.clone(),
        };
        toolhost_core::document::write(&self.dir.join(REGISTRY_FILE), &file).map_err(McpError::from)
    }
}

/// A temp file beside `path`, fsynced, renamed over it.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), McpError> {
    toolhost_core::document::write_atomically(path, bytes).map_err(|source| McpError::Io {
        path: path.to_owned(),
        source,
    })
}
