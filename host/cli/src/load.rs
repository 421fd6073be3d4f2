//! Loading the tool host for a command: cache location, progress on a terminal.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use toolhost_core::policy::{Policies, ToolPolicy};
use toolhost_core::{Profile, ToolProvider};
use toolhost_runtime::{AgentDirectory, ToolHost, ToolHostConfig};
use toolhost_sandbox::{LoadEvent, SandboxConfig};

/// The component cache directory: the flag, else `$TOOLHOST_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/toolhost`, else `~/.cache/toolhost`; none with `--no-cache`.
pub fn cache_dir(flag: Option<&Path>, no_cache: bool) -> Option<PathBuf> {
    if no_cache {
        return None;
    }
    user_dir(
        flag,
        "TOOLHOST_CACHE_DIR",
        ("XDG_CACHE_HOME", ".cache"),
        "toolhost",
    )
}

/// A directory of the user's: the flag, else `$<own_var>`, else
/// `$<xdg_var>/<within>`, else `~/<home_fallback>/<within>` (the XDG base
/// directory rules; empty variables count as unset).
pub fn user_dir(
    flag: Option<&Path>,
    own_var: &str,
    (xdg_var, home_fallback): (&str, &str),
    within: &str,
) -> Option<PathBuf> {
    let from_env = |key: &str| std::env::var_os(key).filter(|value| !value.is_empty());
    flag.map(Path::to_path_buf)
        .or_else(|| from_env(own_var).map(PathBuf::from))
        .or_else(|| from_env(xdg_var).map(|dir| PathBuf::from(dir).join(within)))
        .or_else(|| {
            from_env("HOME").map(|home| PathBuf::from(home).join(home_fallback).join(within))
        })
}

/// Compile progress on a terminal (indicatif draws nothing when stderr is
/// not one): compiling a component takes a noticeable moment the first time.
pub struct Progress(ProgressBar);

impl Progress {
    pub fn new() -> Self {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        Self(bar)
    }

    pub fn observe(&self, event: LoadEvent<'_>) {
        match event {
            LoadEvent::Compiling { label, bytes } => {
                self.0.enable_steady_tick(Duration::from_millis(80));
                self.0
                    .set_message(format!("compiling {label} ({} KiB)", bytes / 1024));
            }
            LoadEvent::Compiled { label, elapsed } => {
                self.0
                    .println(format!("compiled {label} in {} ms", elapsed.as_millis()));
            }
            LoadEvent::CacheRejected { label, reason } => {
                self.0
                    .println(format!("cache entry for {label} rejected: {reason}"));
            }
            LoadEvent::FromCache { .. } => {}
        }
    }

    pub fn finish(self) {
        self.0.finish_and_clear();
    }
}

pub fn sandbox_config(cache_dir: Option<PathBuf>) -> SandboxConfig {
    SandboxConfig {
        cache_dir,
        ..toolhost_capabilities::sandbox_config()
    }
}

/// The builtins (their components loaded at first use), plus the tools the MCP registrations in `mcp_dir` offer
/// from their caches (a broken registrations file leaves every MCP tool out,
/// with a note), plus the extensions granted in `ext_dir`.
pub async fn host(
    cache_dir: Option<PathBuf>,
    mcp_dir: Option<PathBuf>,
    ext_dir: Option<PathBuf>,
    policy: &PolicyFiles,
) -> Result<ToolHost> {
    // A policy that does not read is an error, never "no policy": what it
    // denies must not become allowed.
    let policies = policy.load()?;
    let config = ToolHostConfig {
        sandbox: sandbox_config(cache_dir),
        ..ToolHostConfig::default()
    };
    let progress = Progress::new();
    let observe = |event: LoadEvent<'_>| progress.observe(event);
    // Builtins are listed from the generated table; each compiles (or
    // comes from the cache) at its first call.
    let mut host = ToolHost::with_builtins(config)
        .context("listing the builtin tools")?
        .with_policies(policies);
    if let Some(dir) = mcp_dir {
        match toolhost_mcp::McpRegistry::load(&dir) {
            Ok(registry) => host = host.with_mcp(&registry)?,
            Err(error) => eprintln!("note: every MCP tool is left out: {error}"),
        }
    }
    if let Some(dir) = ext_dir {
        match toolhost_extensions::ExtensionRegistry::load(&dir) {
            Ok(registry) => host = host.with_extensions(&registry, &observe).await,
            Err(error) => eprintln!("note: every extension is left out: {error}"),
        }
    }
    progress.finish();
    Ok(host)
}

/// Whether a command that uses only `profile` (a file, or the built-in
/// default) and the agent profiles in `agents` may reach an MCP tool. When
/// none of them allows an `mcp/…` tool the MCP directory is not read at
/// all: such a run goes on whatever state that storage is in, and costs
/// nothing for it. A profile or directory that does not load answers
/// `true`: the command itself then says why.
pub fn selects_mcp(profile: Option<&Path>, agents: Option<&Path>) -> bool {
    let allows_mcp = |profile: &Profile| {
        profile
            .tools
            .allow
            .iter()
            .any(|id| matches!(id.provider(), ToolProvider::Mcp(_)))
    };
    let Ok(profile) = self::profile(profile) else {
        return true;
    };
    if allows_mcp(&profile) {
        return true;
    }
    match agents {
        None => false,
        Some(dir) => AgentDirectory::load(dir).map_or(true, |agents| {
            agents.profiles().any(|agent| allows_mcp(agent))
        }),
    }
}

/// A profile file, or the built-in default profile when no path is given.
pub fn profile(path: Option<&Path>) -> Result<Profile> {
    match path {
        None => Ok(Profile::default_writer()?),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading profile {}", path.display()))?;
            Profile::from_json(&text).with_context(|| format!("profile {}", path.display()))
        }
    }
}

/// Where the user's and the platform's tool policies are read from.
#[derive(Debug, Clone, Default)]
pub struct PolicyFiles {
    /// The user's policy file, and whether it must exist (named by the flag
    /// or `$TOOLHOST_POLICY`) or is read only when it does (the default in
    /// the config directory).
    pub user: Option<(PathBuf, bool)>,
    pub platform: Option<PathBuf>,
}

impl PolicyFiles {
    /// The flag, else `$TOOLHOST_POLICY` (both must exist), else
    /// `policy.json` in the user's config directory when it exists.
    pub fn locate(flag: Option<&Path>, platform: Option<PathBuf>) -> Self {
        let named = flag.map(Path::to_path_buf).or_else(|| {
            std::env::var_os("TOOLHOST_POLICY")
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        });
        let user = match named {
            Some(path) => Some((path, true)),
            // TOOLHOST_POLICY is unset here: the config directory's file.
            None => user_dir(
                None,
                "TOOLHOST_POLICY",
                ("XDG_CONFIG_HOME", ".config"),
                "toolhost/policy.json",
            )
            .map(|path| (path, false)),
        };
        Self { user, platform }
    }

    /// The files to watch for changes.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.user
            .iter()
            .map(|(path, _)| path.as_path())
            .chain(self.platform.as_deref())
    }

    pub fn load(&self) -> Result<Policies> {
        let parse = |path: &Path, text: String| -> Result<ToolPolicy> {
            Ok(ToolPolicy::from_json(&text, &path.display().to_string())?)
        };
        let read = |path: &Path| -> Result<ToolPolicy> {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the policy {}", path.display()))?;
            parse(path, text)
        };
        let user = match &self.user {
            // Only a default file that is not there is "no policy"; one
            // that cannot be read is an error, never an allow.
            Some((path, false)) => match std::fs::read_to_string(path) {
                Ok(text) => Some(parse(path, text)?),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("reading the policy {}", path.display()));
                }
            },
            Some((path, true)) => Some(read(path)?),
            None => None,
        };
        let platform = self.platform.as_deref().map(read).transpose()?;
        Ok(Policies { user, platform })
    }
}
