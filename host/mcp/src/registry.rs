//! [`McpRegistry`]: the MCP servers a user registered, stored in
//! `<mcp dir>/registrations.json` (written atomically and durably, every
//! change a read-modify-write under the directory's lock, so two commands
//! at once never lose one's change). Each registration has a uuid (its
//! tools' ids are `mcp/<uuid>:<native-name>`), a display name, how to reach
//! the server, a state, and per-tool permissions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolhost_net::Endpoint;
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
    /// Streamable HTTP: `https://` to any server, or `http://` to one on
    /// this machine (a loopback host, checked on the parsed URL); anything
    /// else is refused when registered and again when called.
    #[serde(rename_all = "camelCase")]
    Http {
        url: String,
        /// The environment variable holding the secret sent as
        /// `Authorization: Bearer <secret>`; only the name is stored, the
        /// secret is read from the environment at each connection.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        auth_env: Option<String>,
        /// Trust only the CA certificates (PEM) in this file instead of the
        /// system's roots (a private server's own CA).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<PathBuf>,
    },
}

impl Transport {
    /// A loopback or TLS HTTP transport without credentials in its URL, a
    /// stdio one with a command.
    pub fn check(&self) -> Result<(), McpError> {
        match self {
            Transport::Stdio { command, .. } => {
                if command.trim().is_empty() {
                    return Err(McpError::Invalid("a stdio server needs a command".into()));
                }
            }
            Transport::Http {
                url,
                auth_env,
                ca_file,
            } => {
                let endpoint =
                    Endpoint::parse(url).map_err(|error| McpError::Invalid(error.to_string()))?;
                if !endpoint.is_https() && !endpoint.is_loopback() {
                    return Err(McpError::Unsupported(format!(
                        "{url} is plain http:// to another machine; use https:// (plain http:// reaches only servers on this machine)"
                    )));
                }
                if ca_file.is_some() && !endpoint.is_https() {
                    return Err(McpError::Invalid(format!(
                        "a CA file only applies to an https:// URL, not {url}"
                    )));
                }
                if let Some(name) = auth_env
                    && !is_env_name(name)
                {
                    return Err(McpError::Invalid(format!(
                        "`{name}` is not an environment variable name (letters, digits and _, not starting with a digit)"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
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

/// What a tool the server lists that has no permission of its own gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NewTools {
    /// Off until allowed one by one (`mcp grant`): a server that starts
    /// listing a new tool never hands it to a run unasked. `mcp add`'s
    /// default, as the reference's.
    Off,
    /// Allowed like a listed `Allow` (`mcp add --allow-all`).
    Allow,
}

impl NewTools {
    /// A registration written before `newTools` existed was made with
    /// every tool allowed; it keeps that.
    fn recorded_before() -> Self {
        NewTools::Allow
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Registration {
    pub id: Uuid,
    pub display_name: String,
    pub transport: Transport,
    pub state: State,
    /// Per native tool name; a tool not listed gets `new_tools`.
    #[serde(default)]
    pub permissions: BTreeMap<String, Permission>,
    #[serde(default = "NewTools::recorded_before")]
    pub new_tools: NewTools,
}

impl Registration {
    /// What runs may do with `native_name`: its own permission, else
    /// `Deny` while the registration's new tools are off.
    pub fn permission(&self, native_name: &str) -> Permission {
        match (self.permissions.get(native_name), self.new_tools) {
            (Some(permission), _) => *permission,
            (None, NewTools::Allow) => Permission::Allow,
            (None, NewTools::Off) => Permission::Deny,
        }
    }

    /// Whether `native_name` is off only because nobody allowed it yet
    /// (not denied by name).
    pub fn is_off_until_allowed(&self, native_name: &str) -> bool {
        self.new_tools == NewTools::Off && !self.permissions.contains_key(native_name)
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

    /// Change the registrations under the directory's lock: read the file
    /// as it is now, apply `change`, save. `self` becomes what was saved, so
    /// a change made meanwhile by another command is kept, not overwritten.
    fn change<T>(
        &mut self,
        change: impl FnOnce(&mut McpRegistry) -> Result<T, McpError>,
    ) -> Result<T, McpError> {
        let dir = self.dir.clone();
        let (value, fresh) = toolhost_core::document::with_dir_lock(&dir, || {
            let mut fresh = Self::load(&dir)?;
            let value = change(&mut fresh)?;
            fresh.save()?;
            Ok::<_, McpError>((value, fresh))
        })?;
        *self = fresh;
        Ok(value)
    }

    /// Register a server (active; each tool it lists off until allowed
    /// with [`grant`](Self::grant)) and save.
    pub fn add(&mut self, display_name: &str, transport: Transport) -> Result<Uuid, McpError> {
        self.add_with(display_name, transport, NewTools::Off)
    }

    /// Register a server (active) whose every tool is allowed unless
    /// denied by name, and save.
    pub fn add_allowing_all(
        &mut self,
        display_name: &str,
        transport: Transport,
    ) -> Result<Uuid, McpError> {
        self.add_with(display_name, transport, NewTools::Allow)
    }

    fn add_with(
        &mut self,
        display_name: &str,
        transport: Transport,
        new_tools: NewTools,
    ) -> Result<Uuid, McpError> {
        let display_name = display_name.trim().to_owned();
        if display_name.is_empty() {
            return Err(McpError::Invalid("a registration needs a name".into()));
        }
        transport.check()?;
        self.change(|registry| {
            if registry
                .registrations
                .iter()
                .any(|r| r.display_name == display_name)
            {
                return Err(McpError::Invalid(format!(
                    "a server is already registered as {display_name}"
                )));
            }
            let id = Uuid::new_v4();
            registry.registrations.push(Registration {
                id,
                display_name,
                transport,
                state: State::Active,
                permissions: BTreeMap::new(),
                new_tools,
            });
            Ok(id)
        })
    }

    pub fn remove(&mut self, key: &str) -> Result<Registration, McpError> {
        let removed = self.change(|registry| {
            let id = registry.find(key)?.id;
            let index = registry
                .registrations
                .iter()
                .position(|r| r.id == id)
                .ok_or_else(|| McpError::NotRegistered(key.to_owned()))?;
            Ok(registry.registrations.remove(index))
        })?;
        // Its cached tool list goes with it (a missing cache is fine).
        let _ = std::fs::remove_file(self.dir.join("cache").join(format!("{}.json", removed.id)));
        Ok(removed)
    }

    pub fn set_state(&mut self, key: &str, state: State) -> Result<(), McpError> {
        self.change(|registry| {
            registry.find_mut(key)?.state = state;
            Ok(())
        })
    }

    pub fn grant(&mut self, key: &str, tool: &str, permission: Permission) -> Result<(), McpError> {
        self.change(|registry| {
            registry
                .find_mut(key)?
                .permissions
                .insert(tool.to_owned(), permission);
            Ok(())
        })
    }

    /// Write the file atomically: a crash leaves the old one or the new one.
    fn save(&self) -> Result<(), McpError> {
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
