//! [`AgentDirectory`]: the agent profiles a run may delegate to or hand off
//! to, by profile id (the CLI's `--agents DIR`, one `<id>.json` per agent).
//! Who may call whom is each target's `delegation` section; this module
//! only answers the policy questions the run loop asks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost_capabilities::CallableAgent;
use toolhost_core::Profile;

#[derive(Debug, thiserror::Error)]
pub enum AgentDirectoryError {
    #[error("agent.directory_unreadable: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("agent.profile_invalid: {}: {message}", path.display())]
    Profile { path: PathBuf, message: String },
    #[error("agent.profile_duplicate: two agent profiles have the id `{0}`")]
    Duplicate(String),
}

/// The callable agents of a run, by profile id.
#[derive(Debug, Clone, Default)]
pub struct AgentDirectory {
    profiles: BTreeMap<String, Arc<Profile>>,
}

impl AgentDirectory {
    pub fn new(profiles: impl IntoIterator<Item = Profile>) -> Result<Self, AgentDirectoryError> {
        let mut directory = Self::default();
        for profile in profiles {
            directory.insert(profile)?;
        }
        Ok(directory)
    }

    /// Every `*.json` file of `dir`, each an agent profile.
    pub fn load(dir: &Path) -> Result<Self, AgentDirectoryError> {
        let io = |source| AgentDirectoryError::Io {
            path: dir.to_owned(),
            source,
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        paths.sort();
        let mut directory = Self::default();
        for path in paths {
            let text =
                std::fs::read_to_string(&path).map_err(|source| AgentDirectoryError::Io {
                    path: path.clone(),
                    source,
                })?;
            let profile =
                Profile::from_json(&text).map_err(|error| AgentDirectoryError::Profile {
                    path: path.clone(),
                    message: error.to_string(),
                })?;
            directory.insert(profile)?;
        }
        Ok(directory)
    }

    fn insert(&mut self, profile: Profile) -> Result<(), AgentDirectoryError> {
        let id = profile.id.clone();
        if self
            .profiles
            .insert(id.clone(), Arc::new(profile))
            .is_some()
        {
            return Err(AgentDirectoryError::Duplicate(id));
        }
        Ok(())
    }

    /// Add the run's own profile unless an agent file has its id.
    pub fn with_own(mut self, profile: &Profile) -> Self {
        self.profiles
            .entry(profile.id.clone())
            .or_insert_with(|| Arc::new(profile.clone()));
        self
    }

    pub fn get(&self, id: &str) -> Option<&Arc<Profile>> {
        self.profiles.get(id)
    }

    /// Every agent, by id.
    pub fn profiles(&self) -> impl Iterator<Item = &Arc<Profile>> {
        self.profiles.values()
    }

    pub fn len(&self) -> usize {
        self.profiles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.profiles.is_empty()
    }

    /// The agents `caller` may delegate to or hand off to, and which of the
    /// two it may do with each (what `agent.list` shows).
    pub fn callable_by(&self, caller: &Profile) -> Vec<CallableAgent> {
        self.profiles
            .values()
            .filter(|target| target.id != caller.id)
            .filter_map(|target| {
                let delegate =
                    caller.delegation.can_delegate && refusal(caller, target, false).is_none();
                let handoff =
                    caller.delegation.can_handoff && refusal(caller, target, true).is_none();
                let limits = &target.delegation;
                (delegate || handoff).then(|| CallableAgent {
                    profile_id: target.id.clone(),
                    display_name: target.display_name.clone(),
                    description: limits
                        .description_for_agents
                        .clone()
                        .or_else(|| target.description.clone()),
                    delegate,
                    handoff,
                    result_budget_tokens: limits.result_budget_tokens,
                    max_invocations_per_run: limits.max_invocations_per_run,
                    max_concurrent_invocations: limits.max_concurrent_invocations,
                    max_handoff_depth: limits.max_handoff_depth,
                })
            })
            .collect()
    }
}

/// Why `caller` may not delegate to / hand off to `target`, if it may not.
pub(crate) fn refusal(caller: &Profile, target: &Profile, handoff: bool) -> Option<String> {
    let delegation = &target.delegation;
    if !delegation.callable {
        return Some(format!("{} is not callable by other agents", target.id));
    }
    if handoff && !delegation.allow_as_handoff_target {
        return Some(format!("{} does not take handoffs", target.id));
    }
    if !handoff && !delegation.allow_as_subagent {
        return Some(format!("{} does not take delegated tasks", target.id));
    }
    let allowed = delegation
        .allowed_callers
        .iter()
        .any(|allowed| allowed == "*" || *allowed == caller.id);
    if !allowed {
        return Some(format!(
            "{} does not accept calls from {}",
            target.id, caller.id
        ));
    }
    None
}
