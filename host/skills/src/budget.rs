//! The skill read budget of one invocation: `skills.maxReadCharsPerCall`
//! and `skills.maxReadCharsPerRun` of the profile (the "run" budget is per
//! invocation, like every "per run" budget of the reference).
//!
//! Reading a skill file is free; what a tool shows the model is charged, in
//! Unicode characters: `skill.read` text and `skill.search` snippets alike.
//! In the reference's G2 a tool never asks for a size: it takes
//! [`SkillBudget::call_allowance`] — the smaller of what is left of this
//! call's budget and of the invocation's — and previews within it. A charge
//! over that allowance charges nothing and fails with the code of the limit
//! that binds:
//!
//! - `skill.read_budget_exhausted` when the invocation's remaining budget
//!   is the binding limit (in particular when nothing is left): the model
//!   must stop reading skills;
//! - `skill.read_budget_exceeded` when this call's budget binds and the
//!   invocation still has more: a smaller read (a later `start_line`) works.

use std::sync::{Mutex, MutexGuard};

use crate::error::{SkillError, codes};

#[derive(Debug, Default)]
struct Used {
    run: u64,
    call: u64,
}

/// One per invocation, shared by its calls (`Send + Sync`).
#[derive(Debug)]
pub struct SkillBudget {
    per_call: u64,
    per_run: u64,
    used: Mutex<Used>,
}

impl SkillBudget {
    pub fn new(per_call: u64, per_run: u64) -> Self {
        Self {
            per_call,
            per_run,
            used: Mutex::new(Used::default()),
        }
    }

    fn used(&self) -> MutexGuard<'_, Used> {
        // The counters are plain numbers, consistent after any panic.
        self.used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Characters one call may show (`maxReadCharsPerCall`).
    /// A budget of which `charged` characters were already spent, by the
    /// calls of an invocation before its run was reopened.
    pub fn resumed(per_call: u64, per_run: u64, charged: u64) -> Self {
        let budget = Self::new(per_call, per_run);
        budget.used().run = charged;
        budget
    }

    pub fn per_call(&self) -> u64 {
        self.per_call
    }

    /// Characters the whole invocation may show (`maxReadCharsPerRun`).
    pub fn per_run(&self) -> u64 {
        self.per_run
    }

    /// Characters charged so far in this invocation.
    pub fn charged(&self) -> u64 {
        self.used().run
    }

    /// Characters charged by the current call so far.
    pub fn charged_this_call(&self) -> u64 {
        self.used().call
    }

    /// Characters left for the rest of this invocation.
    pub fn remaining(&self) -> u64 {
        self.per_run.saturating_sub(self.used().run)
    }

    /// Characters the current call may still show: the smaller of what is
    /// left of its own budget and of the invocation's.
    pub fn call_allowance(&self) -> u64 {
        let used = self.used();
        self.per_call
            .saturating_sub(used.call)
            .min(self.per_run.saturating_sub(used.run))
    }

    /// A new tool call starts: its own counter goes back to zero (the
    /// invocation's does not).
    pub fn begin_call(&self) {
        self.used().call = 0;
    }

    /// Charge `chars` shown to the model, or nothing and an error when that
    /// is over [`Self::call_allowance`] (see the module for the codes).
    pub fn charge(&self, chars: u64) -> Result<(), SkillError> {
        let mut used = self.used();
        let call_left = self.per_call.saturating_sub(used.call);
        let run_left = self.per_run.saturating_sub(used.run);
        if chars <= call_left.min(run_left) {
            used.call += chars;
            used.run += chars;
            return Ok(());
        }
        Err(if run_left <= call_left {
            SkillError::recoverable(
                codes::READ_BUDGET_EXHAUSTED,
                format!(
                    "the skill read budget of this run is exhausted: {chars} characters asked, {run_left} of {} left. Work with what was already read.",
                    self.per_run
                ),
            )
        } else {
            SkillError::recoverable(
                codes::READ_BUDGET_EXCEEDED,
                format!(
                    "one skill read may show at most {} characters and this call has {call_left} left; {chars} were asked. Read a smaller part in another call.",
                    self.per_call
                ),
            )
        })
    }
}
