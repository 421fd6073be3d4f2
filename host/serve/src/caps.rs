//! The operator's caps on one tenant, from its entry in the tokens file:
//!
//! ```json
//! {"tenant": "acme", "sha256": "…",
//!  "caps": {"maxRounds": 40, "fuel": 2000000000, "deadlineMs": 10000, "memoryBytes": 67108864}}
//! ```
//!
//! A tenant's profile may raise a tool's sandbox limits up to the host's
//! caps and ask for any number of rounds; these caps bound what that tenant
//! may ask for. A run asking beyond them is refused before anything is made
//! (`400 serve.cap_exceeded`, naming the field), never quietly lowered: the
//! tenant learns what it may have. Tools a profile sets no limit for run
//! under their own defaults, which the operator chose already.

use serde::{Deserialize, Serialize};
use toolhost_core::Profile;

use crate::error::ApiError;

/// What one tenant may ask for; an unset cap leaves that value to the host.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantCaps {
    /// Rounds of any invocation of a run: the request's `maxRounds`, the
    /// profile's `tools.maxRounds`, each agent's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Fuel a profile may give one call (`sandbox.limits.<tool>.fuel`);
    /// with this cap, unmetered fuel (`null`) is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// Milliseconds a profile may give one call (`…deadlineMs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Memory bytes a profile may give one call (`…memoryBytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

/// A value a run asks for beyond its tenant's cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("serve.cap_exceeded: `{field}` asks for {asked}; this tenant may ask for at most {cap}")]
pub struct CapExceeded {
    /// Where the value is: `maxRounds`, `profile.tools.maxRounds`,
    /// `agents[0].sandbox.limits.<tool>.fuel`, …
    pub field: String,
    pub asked: String,
    pub cap: String,
}

impl From<CapExceeded> for ApiError {
    fn from(exceeded: CapExceeded) -> Self {
        ApiError::bad_request("serve.cap_exceeded", exceeded.to_string())
    }
}

impl TenantCaps {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The rounds a run gets (`asked`), found at `field`.
    pub fn check_rounds(&self, field: &str, asked: u32) -> Result<(), CapExceeded> {
        match self.max_rounds {
            Some(cap) if asked > cap => Err(CapExceeded {
                field: field.to_owned(),
                asked: asked.to_string(),
                cap: cap.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Every per-call limit `profile` sets, its fields named under
    /// `prefix` (`profile`, `agents[0]`). Its rounds are checked apart:
    /// a request's `maxRounds` replaces the root profile's.
    pub fn check_limits(&self, prefix: &str, profile: &Profile) -> Result<(), CapExceeded> {
        for (tool, limits) in &profile.sandbox.limits {
            let field = |name: &str| format!("{prefix}.sandbox.limits.{tool}.{name}");
            if let (Some(cap), Some(fuel)) = (self.fuel, limits.fuel) {
                match fuel {
                    Some(asked) if asked <= cap => {}
                    asked => {
                        return Err(CapExceeded {
                            field: field("fuel"),
                            asked: asked.map_or("unmetered fuel (null)".into(), |v| v.to_string()),
                            cap: cap.to_string(),
                        });
                    }
                }
            }
            if let (Some(cap), Some(deadline)) = (self.deadline_ms, limits.deadline) {
                let asked = u64::try_from(deadline.as_millis()).unwrap_or(u64::MAX);
                if asked > cap {
                    return Err(CapExceeded {
                        field: field("deadlineMs"),
                        asked: asked.to_string(),
                        cap: cap.to_string(),
                    });
                }
            }
            if let (Some(cap), Some(asked)) = (self.memory_bytes, limits.memory_bytes)
                && asked > cap
            {
                return Err(CapExceeded {
                    field: field("memoryBytes"),
                    asked: asked.to_string(),
                    cap: cap.to_string(),
                });
            }
        }
        Ok(())
    }

    /// A whole start request: the root's rounds (the request's
    /// `maxRounds`, else its profile's), its limits, and each agent's.
    pub fn check_run<'a>(
        &self,
        profile: &Profile,
        max_rounds: Option<u32>,
        agents: impl IntoIterator<Item = &'a Profile>,
    ) -> Result<(), CapExceeded> {
        match max_rounds {
            Some(rounds) => self.check_rounds("maxRounds", rounds)?,
            None => self.check_rounds("profile.tools.maxRounds", profile.tools.max_rounds)?,
        }
        self.check_limits("profile", profile)?;
        for (at, agent) in agents.into_iter().enumerate() {
            let prefix = format!("agents[{at}]");
            self.check_rounds(&format!("{prefix}.tools.maxRounds"), agent.tools.max_rounds)?;
            self.check_limits(&prefix, agent)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn profile(patch: serde_json::Value) -> Profile {
        let mut document = json!({
            "schemaVersion": 1,
            "kind": "toolhost.agentProfile",
            "id": "writer",
            "tools": {"allow": ["dice.roll"]}
        });
        for (key, value) in patch.as_object().expect("object") {
            document[key] = value.clone();
        }
        Profile::from_json(&document.to_string()).expect("profile")
    }

    const CAPS: TenantCaps = TenantCaps {
        max_rounds: Some(10),
        fuel: Some(1_000),
        deadline_ms: Some(2_000),
        memory_bytes: Some(4_096),
    };

    fn field_of(result: Result<(), CapExceeded>) -> String {
        result.expect_err("over a cap").field
    }

    #[test]
    fn a_run_within_the_caps_passes_and_one_beyond_is_named_by_its_field() {
        let within = profile(json!({
            "tools": {"allow": ["dice.roll"], "maxRounds": 10},
            "sandbox": {"limits": {"dice.roll": {"fuel": 1000, "deadlineMs": 2000, "memoryBytes": 4096}}}
        }));
        CAPS.check_run(&within, None, &[]).expect("within");
        CAPS.check_run(&within, Some(3), std::slice::from_ref(&within))
            .expect("within");

        // The default profile asks for 80 rounds.
        let plain = profile(json!({}));
        assert_eq!(
            field_of(CAPS.check_run(&plain, None, &[])),
            "profile.tools.maxRounds"
        );
        // A request's maxRounds replaces the profile's, and is checked.
        CAPS.check_run(&plain, Some(10), &[])
            .expect("the request's rounds");
        assert_eq!(
            field_of(CAPS.check_run(&within, Some(11), &[])),
            "maxRounds"
        );
        assert_eq!(
            field_of(CAPS.check_run(&within, None, &[within.clone(), plain])),
            "agents[1].tools.maxRounds"
        );
        for (limits, name) in [
            (json!({"fuel": 1001}), "fuel"),
            (json!({"fuel": null}), "fuel"),
            (json!({"deadlineMs": 2001}), "deadlineMs"),
            (json!({"memoryBytes": 8192}), "memoryBytes"),
        ] {
            let asking = profile(json!({
                "tools": {"allow": ["dice.roll"], "maxRounds": 5},
                "sandbox": {"limits": {"dice.roll": limits}}
            }));
            let error = CAPS.check_run(&asking, None, &[]).expect_err(name);
            assert_eq!(
                error.field,
                format!("profile.sandbox.limits.builtin:dice.roll.{name}")
            );
            let api: ApiError = error.into();
            assert_eq!((api.status, api.code.as_str()), (400, "serve.cap_exceeded"));
        }
        // No caps: anything the profile format admits.
        TenantCaps::default()
            .check_run(
                &profile(json!({"sandbox": {"limits": {"dice.roll": {"fuel": null}}}})),
                None,
                &[],
            )
            .expect("uncapped");
    }
}
