//! `skill-read`: the installed skills the agent may see, under the
//! invocation's read budget. Policy hook: an extension is charged for every
//! character it reads, when it reads it (it is not trusted to charge what it
//! shows); a builtin charges what it shows the model.

use std::sync::Arc;

use toolhost_core::{Capability, HostCallError, Profile};
use toolhost_sandbox::{CallState, HostFault, Trust};
pub use toolhost_skills::{Scope, SkillLibrary, SkillSource};
use toolhost_skills::{SkillBudget, SkillPolicy};
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::bindings::toolhost::host::{capability_types as types, skill_read as skills};
use crate::lifecycle::{BindInputs, CallScope, HostCapability, Settlement};
use crate::view::{Projected, View, project};

/// What a call may read of the installed skills: the library, the profile's
/// visibility, and the invocation's budget (shared by all its calls).
#[derive(Debug, Clone)]
pub struct SkillAccess {
    pub library: Arc<SkillLibrary>,
    pub policy: SkillPolicy,
    pub budget: Arc<SkillBudget>,
}

impl SkillAccess {
    /// What an invocation of `profile` may read of `library`: its
    /// visibility, and its read budget of which `charged` characters are
    /// already spent.
    pub fn of(library: &Arc<SkillLibrary>, profile: &Profile, charged: u64) -> Self {
        Self {
            library: Arc::clone(library),
            policy: SkillPolicy::new(
                profile.skills.visible.iter().cloned(),
                profile.skills.deny.iter().cloned(),
            ),
            budget: Arc::new(SkillBudget::resumed(
                u64::from(profile.skills.max_read_chars_per_call),
                u64::from(profile.skills.max_read_chars_per_run),
                charged,
            )),
        }
    }
}

/// `skill-read`.
pub struct SkillRead;

impl HostCapability for SkillRead {
    const KEY: &'static str = "skill-read";
    type Bound = Arc<SkillAccess>;
    type State = Arc<SkillAccess>;

    /// The run's skills under the invocation's profile, with its budget.
    fn bind(inputs: &BindInputs) -> Option<Self::Bound> {
        let run = inputs.run.as_ref()?;
        let profile = inputs.profile.as_ref()?;
        Some(Arc::new(SkillAccess::of(
            &run.skills,
            profile,
            inputs.skill_chars_charged,
        )))
    }

    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        Ok(bound.filter(|_| grant.has(Capability::SkillRead)).cloned())
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        skills::add_to_linker::<_, Projected<Self>>(linker, project::<Self>)
    }

    /// The per-call budget starts afresh with every call.
    fn begin(bound: &Self::Bound, _call: &CallScope) {
        bound.budget.begin_call();
    }

    fn settle(bound: &Self::Bound, settlement: &mut Settlement) {
        settlement.skill_read_chars = bound.budget.charged_this_call();
    }
}

type SkillsView<'a> = View<'a, Arc<SkillAccess>>;

impl SkillsView<'_> {
    fn access(&self, name: &str) -> Result<Arc<SkillAccess>, HostCallError> {
        self.state.clone().ok_or_else(|| {
            HostCallError::recoverable(
                "skill.not_visible",
                format!("no skill `{name}` is installed for this run"),
            )
        })
    }
}

impl skills::Host for SkillsView<'_> {
    fn list_skills(&mut self) -> wasmtime::Result<Vec<skills::Skill>> {
        Ok(match &self.state {
            None => Vec::new(),
            Some(access) => access
                .library
                .visible(&access.policy)
                .into_iter()
                .map(|skill| skills::Skill {
                    name: skill.name,
                    description: skill.description,
                    scope: skill.scope.as_str().to_owned(),
                })
                .collect(),
        })
    }

    fn files(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Result<Vec<skills::SkillFile>, types::CapabilityError>> {
        let result = self.access(&name).and_then(|access| {
            let files = access.library.files(&access.policy, &name)?;
            Ok(files
                .into_iter()
                .map(|file| skills::SkillFile {
                    path: file.path,
                    bytes: file.bytes,
                })
                .collect())
        });
        self.answer(result)
    }

    fn read_text(
        &mut self,
        name: String,
        path: String,
    ) -> wasmtime::Result<Result<skills::SkillText, types::CapabilityError>> {
        let extension = self.core.trust() == Trust::Extension;
        let result = self.access(&name).and_then(|access| {
            let text = access.library.read_text(&access.policy, &name, &path)?;
            if extension {
                access.budget.charge(text.text.chars().count() as u64)?;
            }
            Ok(skills::SkillText {
                path: text.path,
                text: text.text,
                sha256: text.sha256,
            })
        });
        self.answer(result)
    }

    fn read_budget(&mut self) -> wasmtime::Result<skills::Budget> {
        Ok(match &self.state {
            None => skills::Budget {
                per_call: 0,
                remaining: 0,
            },
            Some(access) => skills::Budget {
                per_call: access.budget.call_allowance(),
                remaining: access.budget.remaining(),
            },
        })
    }

    fn charge(&mut self, chars: u64) -> wasmtime::Result<Result<(), types::CapabilityError>> {
        let result = match &self.state {
            None if chars == 0 => Ok(()),
            None => Err(HostCallError::recoverable(
                "skill.read_budget_exhausted",
                "this run has no skill read budget",
            )),
            // Already charged when it read (see `read_text`).
            Some(_) if self.core.trust() == Trust::Extension => Ok(()),
            Some(access) => access.budget.charge(chars).map_err(HostCallError::from),
        };
        self.answer(result)
    }
}
