//! Which installed skills a profile lets an agent see: `skills.visible` and
//! `skills.deny` of the profile, `*` meaning every skill in both, deny
//! winning.

use serde::{Deserialize, Serialize};

use crate::error::{SkillError, codes};
use crate::path::quoted;

/// The profile's `skills.visible` / `skills.deny` (the runtime copies them
/// from `toolhost_core::profile::SkillPolicy`, which validated them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillPolicy {
    /// Skill names or `*` for every installed skill.
    pub visible: Vec<String>,
    /// Hidden even when visible; `*` hides every skill.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl Default for SkillPolicy {
    /// Every skill visible, none denied: the profile's defaults.
    fn default() -> Self {
        Self::all()
    }
}

impl SkillPolicy {
    pub fn new<V, D>(visible: V, deny: D) -> Self
    where
        V: IntoIterator,
        V::Item: Into<String>,
        D: IntoIterator,
        D::Item: Into<String>,
    {
        Self {
            visible: visible.into_iter().map(Into::into).collect(),
            deny: deny.into_iter().map(Into::into).collect(),
        }
    }

    /// `visible: ["*"]`, nothing denied.
    pub fn all() -> Self {
        Self::new(["*"], Vec::<String>::new())
    }

    fn denied(&self, name: &str) -> bool {
        self.deny.iter().any(|entry| entry == "*" || entry == name)
    }

    fn listed(&self, name: &str) -> bool {
        self.visible
            .iter()
            .any(|entry| entry == "*" || entry == name)
    }

    /// Whether the profile lets the agent see `name` (installed or not).
    pub fn allows(&self, name: &str) -> bool {
        self.listed(name) && !self.denied(name)
    }

    /// `skill.policy_denied` unless [`Self::allows`].
    pub fn check(&self, name: &str) -> Result<(), SkillError> {
        if self.allows(name) {
            return Ok(());
        }
        let why = if self.denied(name) {
            "the agent profile denies it"
        } else {
            "the agent profile does not list it as visible"
        };
        Err(SkillError::recoverable(
            codes::POLICY_DENIED,
            format!(
                "skill {} is not available to this agent: {why}. List the skills to see which ones are.",
                quoted(name)
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_names() {
        let all = SkillPolicy::all();
        assert!(all.allows("anything"));
        let some = SkillPolicy::new(["a", "b"], ["b"]);
        assert!(some.allows("a"));
        assert!(!some.allows("b"), "deny wins");
        assert!(!some.allows("c"), "not listed");
        let none = SkillPolicy::new(["*"], ["*"]);
        assert!(!none.allows("a"), "deny * hides everything");
        let named_over_star = SkillPolicy::new(["*"], ["a"]);
        assert!(!named_over_star.allows("a"));
        assert!(named_over_star.allows("b"));
    }

    #[test]
    fn check_says_why() {
        let policy = SkillPolicy::new(["a", "b"], ["b"]);
        let denied = policy.check("b").unwrap_err();
        assert_eq!(denied.code(), codes::POLICY_DENIED);
        assert!(denied.message().contains("denies"));
        let unlisted = policy.check("c").unwrap_err();
        assert_eq!(unlisted.code(), codes::POLICY_DENIED);
        assert!(unlisted.message().contains("does not list"));
    }
}
