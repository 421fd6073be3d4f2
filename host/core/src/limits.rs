//! Per-call sandbox limits and the host policy that caps them. Plain data, so
//! a profile or an extension manifest can carry overrides without wasmtime;
//! the sandbox enforces them (`toolhost-sandbox::limits`).
//!
//! Defaults (documented in docs/sandbox.md; every one configurable per tool):
//!
//! | limit | default | policy cap |
//! |---|---|---|
//! | fuel | 4,000,000,000 units (≈ 0.5 s of busy wasm here) | 50,000,000,000 |
//! | deadline | 5 s wall clock | 60 s |
//! | memory (all linear memories together) | 64 MiB | 512 MiB |
//! | table elements (each table) | 100,000 | 1,000,000 |
//! | core instances / tables / memories | 16 / 16 / 4 | 64 / 64 / 16 |
//! | arguments | 256 KiB | 1 MiB |
//! | output (content + structured + refs) | 1 MiB | 16 MiB |
//! | log (log capability, stdout, stderr; each) | 64 KiB | 1 MiB |

use std::time::Duration;

use serde::{Deserialize, Serialize};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// The limits one call of one tool runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Fuel (wasm operations) per call; `None` meters nothing and leaves only
    /// the deadline. Deterministic: the same call burns the same fuel.
    pub fuel: Option<u64>,
    /// Wall-clock budget of the call, including instantiation and host calls.
    #[serde(with = "millis")]
    pub deadline: Duration,
    /// Total bytes of all linear memories of the call's instance.
    pub memory_bytes: u64,
    /// Elements of any one table.
    pub table_elements: u64,
    pub instances: u32,
    pub tables: u32,
    pub memories: u32,
    /// Bytes of the argument JSON text.
    pub argument_bytes: u64,
    /// Bytes of content + structured JSON + resource refs (or of an error).
    pub output_bytes: u64,
    /// Bytes kept from each of the log capability, stdout and stderr.
    pub log_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: Some(4_000_000_000),
            deadline: Duration::from_secs(5),
            memory_bytes: 64 * MIB,
            table_elements: 100_000,
            instances: 16,
            tables: 16,
            memories: 4,
            argument_bytes: 256 * KIB,
            output_bytes: MIB,
            log_bytes: 64 * KIB,
        }
    }
}

/// A partial set of limits: what a tool, profile or extension manifest asks
/// for. Unset fields keep the base value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitOverrides {
    /// `Some(None)` (JSON `null`) switches fuel metering off. Unset fields
    /// are left out when serialized: for `fuel`, `null` would mean unmetered.
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub fuel: Option<Option<u64>>,
    #[serde(
        default,
        rename = "deadlineMs",
        with = "opt_millis",
        skip_serializing_if = "Option::is_none"
    )]
    pub deadline: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_elements: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memories: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes: Option<u64>,
}

impl LimitOverrides {
    /// The name of the first limit set to zero, which no call could run under.
    pub fn zero_limit(&self) -> Option<&'static str> {
        let checks = [
            ("fuel", self.fuel.flatten().map(|fuel| fuel == 0)),
            (
                "deadlineMs",
                self.deadline.map(|deadline| deadline.is_zero()),
            ),
            ("memoryBytes", self.memory_bytes.map(|value| value == 0)),
            ("tableElements", self.table_elements.map(|value| value == 0)),
            ("instances", self.instances.map(|value| value == 0)),
            ("tables", self.tables.map(|value| value == 0)),
            ("memories", self.memories.map(|value| value == 0)),
            ("argumentBytes", self.argument_bytes.map(|value| value == 0)),
            ("outputBytes", self.output_bytes.map(|value| value == 0)),
            ("logBytes", self.log_bytes.map(|value| value == 0)),
        ];
        checks
            .into_iter()
            .find(|(_, zero)| *zero == Some(true))
            .map(|(name, _)| name)
    }
}

/// The most any tool may be given, whatever it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPolicy {
    pub caps: Limits,
}

impl Default for HostPolicy {
    fn default() -> Self {
        Self {
            caps: Limits {
                fuel: Some(50_000_000_000),
                deadline: Duration::from_secs(60),
                memory_bytes: 512 * MIB,
                table_elements: 1_000_000,
                instances: 64,
                tables: 64,
                memories: 16,
                argument_bytes: MIB,
                output_bytes: 16 * MIB,
                log_bytes: MIB,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("limit `{0}` must be greater than zero")]
    Zero(&'static str),
}

/// A limit that was asked above the policy cap and lowered to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clamped {
    pub limit: &'static str,
    pub requested: u64,
    pub cap: u64,
}

impl HostPolicy {
    /// `base` with `overrides` applied, each value lowered to the policy cap.
    /// Returns the effective limits and the list of values that were lowered.
    pub fn resolve(
        &self,
        base: Limits,
        overrides: &LimitOverrides,
    ) -> Result<(Limits, Vec<Clamped>), LimitError> {
        let caps = &self.caps;
        let mut clamped = Vec::new();
        let mut clamp = |limit: &'static str, value: u64, cap: u64| -> Result<u64, LimitError> {
            if value == 0 {
                return Err(LimitError::Zero(limit));
            }
            if value > cap {
                clamped.push(Clamped {
                    limit,
                    requested: value,
                    cap,
                });
                return Ok(cap);
            }
            Ok(value)
        };
        let fuel = match (overrides.fuel.unwrap_or(base.fuel), caps.fuel) {
            (None, None) => None,
            // Unmetered is more than any cap: a capped policy meters every call.
            (None, Some(cap)) => Some(clamp("fuel", u64::MAX, cap)?),
            (Some(fuel), cap) => Some(clamp("fuel", fuel, cap.unwrap_or(u64::MAX))?),
        };
        let deadline_ms = clamp(
            "deadlineMs",
            duration_ms(overrides.deadline.unwrap_or(base.deadline)),
            duration_ms(caps.deadline),
        )?;
        let small = |value: u32| u64::from(value);
        let limits = Limits {
            fuel,
            deadline: Duration::from_millis(deadline_ms),
            memory_bytes: clamp(
                "memoryBytes",
                overrides.memory_bytes.unwrap_or(base.memory_bytes),
                caps.memory_bytes,
            )?,
            table_elements: clamp(
                "tableElements",
                overrides.table_elements.unwrap_or(base.table_elements),
                caps.table_elements,
            )?,
            instances: clamp(
                "instances",
                small(overrides.instances.unwrap_or(base.instances)),
                small(caps.instances),
            )? as u32,
            tables: clamp(
                "tables",
                small(overrides.tables.unwrap_or(base.tables)),
                small(caps.tables),
            )? as u32,
            memories: clamp(
                "memories",
                small(overrides.memories.unwrap_or(base.memories)),
                small(caps.memories),
            )? as u32,
            argument_bytes: clamp(
                "argumentBytes",
                overrides.argument_bytes.unwrap_or(base.argument_bytes),
                caps.argument_bytes,
            )?,
            output_bytes: clamp(
                "outputBytes",
                overrides.output_bytes.unwrap_or(base.output_bytes),
                caps.output_bytes,
            )?,
            log_bytes: clamp(
                "logBytes",
                overrides.log_bytes.unwrap_or(base.log_bytes),
                caps.log_bytes,
            )?,
        };
        Ok((limits, clamped))
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(super::duration_ms(*value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

mod opt_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => serializer.serialize_some(&super::duration_ms(*duration)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_millis))
    }
}

/// Tell "absent" (keep the base) from `null` (switch off) for `fuel`.
mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(
        value: &Option<Option<u64>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            None => serializer.serialize_none(),
            Some(inner) => inner.serialize(serializer),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<u64>>, D::Error> {
        Ok(Some(Option::<u64>::deserialize(deserializer)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_capped_by_policy() {
        let policy = HostPolicy::default();
        let overrides = LimitOverrides {
            memory_bytes: Some(4096 * MIB),
            deadline: Some(Duration::from_secs(3)),
            ..LimitOverrides::default()
        };
        let (limits, clamped) = policy
            .resolve(Limits::default(), &overrides)
            .expect("valid");
        assert_eq!(limits.memory_bytes, 512 * MIB);
        assert_eq!(limits.deadline, Duration::from_secs(3));
        assert_eq!(limits.fuel, Limits::default().fuel);
        assert_eq!(
            clamped,
            vec![Clamped {
                limit: "memoryBytes",
                requested: 4096 * MIB,
                cap: 512 * MIB
            }]
        );
    }

    #[test]
    fn unmetered_fuel_is_capped_when_the_policy_meters() {
        let overrides: LimitOverrides = serde_json::from_str(r#"{"fuel": null}"#).expect("json");
        assert_eq!(overrides.fuel, Some(None));
        let (limits, clamped) = HostPolicy::default()
            .resolve(Limits::default(), &overrides)
            .expect("valid");
        assert_eq!(limits.fuel, Some(50_000_000_000));
        assert_eq!(clamped.len(), 1);

        let open = HostPolicy {
            caps: Limits {
                fuel: None,
                ..HostPolicy::default().caps
            },
        };
        let (limits, _) = open.resolve(Limits::default(), &overrides).expect("valid");
        assert_eq!(limits.fuel, None);
    }

    #[test]
    fn unset_overrides_survive_a_round_trip() {
        // A frozen profile or snapshot is read back: an unset fuel must stay
        // unset (keep the base), never turn into `null` (unmetered).
        let overrides: LimitOverrides =
            serde_json::from_str(r#"{"deadlineMs": 300}"#).expect("json");
        let text = serde_json::to_string(&overrides).expect("serialize");
        assert_eq!(text, r#"{"deadlineMs":300}"#);
        let back: LimitOverrides = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, overrides);
        assert_eq!(back.fuel, None);

        let unmetered: LimitOverrides = serde_json::from_str(r#"{"fuel": null}"#).expect("json");
        let back: LimitOverrides =
            serde_json::from_str(&serde_json::to_string(&unmetered).expect("serialize"))
                .expect("read back");
        assert_eq!(back.fuel, Some(None));
    }

    #[test]
    fn zero_limits_are_refused() {
        let overrides: LimitOverrides = serde_json::from_str(r#"{"deadlineMs": 0}"#).expect("json");
        assert_eq!(
            HostPolicy::default().resolve(Limits::default(), &overrides),
            Err(LimitError::Zero("deadlineMs"))
        );
        assert!(serde_json::from_str::<LimitOverrides>(r#"{"fuell": 1}"#).is_err());
    }
}
