//! The host side of the `skill-read` capability: installed skills, what a
//! profile lets an agent see of them, and the read budget of an invocation.
//! Linux only (`openat2`), no wasmtime.
//!
//! A skill is a directory holding `SKILL.md` — front matter with `name` and
//! `description`, then Markdown — and any other text files (references,
//! examples, scripts, nested directories). Skills are installed per
//! [`Scope`] (global, preset, profile, character); a later scope overrides
//! an earlier skill of the same name.
//!
//! - [`library`]: [`SkillLibrary`], loading [`SkillSource`]s into the
//!   effective set (skipped skills become [`SkillDiagnostic`]s), lookups
//!   under a [`SkillPolicy`], file lists and text reads that never follow a
//!   symbolic link.
//! - [`policy`]: [`SkillPolicy`], the profile's `skills.visible` /
//!   `skills.deny` (`*` in both, deny wins).
//! - [`budget`]: [`SkillBudget`], the per-call and per-invocation character
//!   budgets (`maxReadCharsPerCall`, `maxReadCharsPerRun`).
//! - [`path`]: skill names and paths inside a skill.
//! - [`error`]: [`SkillError`], recoverable (the model reads it) or System
//!   (the run fails), with the reference's `skill.*` codes.

#[cfg(not(target_os = "linux"))]
compile_error!("toolhost-skills relies on Linux openat2");

pub mod budget;
pub mod error;
mod front_matter;
mod fs;
pub mod library;
pub mod path;
pub mod policy;

pub use budget::SkillBudget;
pub use error::{SkillError, codes};
pub use front_matter::MAX_DESCRIPTION_CHARS;
pub use library::{
    MAX_FILE_BYTES, MAX_FILES, Scope, SkillDiagnostic, SkillFile, SkillInfo, SkillLibrary,
    SkillProblem, SkillSource, SkillText,
};
pub use path::{MAX_DEPTH, SKILL_FILE, is_skill_name, normalize_path};
pub use policy::SkillPolicy;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn shared_types_are_send_and_sync() {
        assert_send_sync::<crate::SkillLibrary>();
        assert_send_sync::<crate::SkillBudget>();
    }
}
