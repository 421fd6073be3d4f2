//! `skill-read`: the installed skills the agent may see, under the
//! invocation's read budget. Policy hook: an extension is charged for every
//! character it reads, when it reads it (it is not trusted to charge what it
//! shows); a builtin charges what it shows the model.

use std::sync::Arc;

use toolhost_core::HostCallError;
use toolhost_sandbox::{CallState, Trust};
use toolhost_skills::{SkillBudget, SkillLibrary, SkillPolicy};
use wasmtime::component::Linker;

use crate::InvocationInputs;
use crate::bindings::toolhost::host::{capability_types as types, skill_read as skills};
use crate::view::{Projected, View, project};

/// What a call may read of the installed skills: the library, the profile's
/// visibility, and the invocation's budget (shared by all its calls).
#[derive(Debug, Clone)]
pub struct SkillAccess {
    pub library: Arc<SkillLibrary>,
    pub policy: SkillPolicy,
    pub budget: Arc<SkillBudget>,
}

/// One call's skills: the visible ones and the invocation's budget.
pub fn prepare(inputs: &InvocationInputs) -> Option<Arc<SkillAccess>> {
    inputs.skills.clone()
}

pub(crate) fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    skills::add_to_linker::<_, Projected<Arc<SkillAccess>>>(linker, project)
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
