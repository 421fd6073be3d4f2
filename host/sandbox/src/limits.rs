//! Per-call limits, the host policy that caps them, and the `ResourceLimiter`
//! that enforces memory and table limits with typed errors.
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
    /// `Some(None)` (JSON `null`) switches fuel metering off.
    #[serde(default, with = "double_option")]
    pub fuel: Option<Option<u64>>,
    #[serde(default, rename = "deadlineMs", with = "opt_millis")]
    pub deadline: Option<Duration>,
    pub memory_bytes: Option<u64>,
    pub table_elements: Option<u64>,
    pub instances: Option<u32>,
    pub tables: Option<u32>,
    pub memories: Option<u32>,
    pub argument_bytes: Option<u64>,
    pub output_bytes: Option<u64>,
    pub log_bytes: Option<u64>,
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

/// A linear memory would grow past the call's memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory limit of {limit} bytes reached: the tool asked for {requested} bytes in total")]
pub struct MemoryLimitExceeded {
    pub limit: u64,
    pub requested: u64,
}

/// A table would grow past the call's table-element limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("table limit of {limit} elements reached: the tool asked for {requested}")]
pub struct TableLimitExceeded {
    pub limit: u64,
    pub requested: u64,
}

/// Enforces the memory limit over the sum of all memories of a store, which
/// `StoreLimits` cannot (it caps each memory separately), and turns every
/// refusal into a typed trap so the host can name the limit.
#[derive(Debug)]
pub struct CallLimiter {
    limits: Limits,
    memory_in_use: u64,
    /// Growth granted but not yet confirmed, undone if the grow then fails.
    pending_growth: u64,
    pub(crate) peak_memory: u64,
}

impl CallLimiter {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            memory_in_use: 0,
            pending_growth: 0,
            peak_memory: 0,
        }
    }
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|maximum| desired > maximum) {
            return Ok(false); // the module's own maximum: plain wasm semantics
        }
        let growth = (desired - current) as u64;
        let requested = self.memory_in_use + growth;
        if requested > self.limits.memory_bytes {
            return Err(wasmtime::Error::new(MemoryLimitExceeded {
                limit: self.limits.memory_bytes,
                requested,
            }));
        }
        self.memory_in_use = requested;
        self.pending_growth = growth;
        self.peak_memory = self.peak_memory.max(requested);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_in_use -= std::mem::take(&mut self.pending_growth);
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|maximum| desired > maximum) {
            return Ok(false);
        }
        if desired as u64 > self.limits.table_elements {
            return Err(wasmtime::Error::new(TableLimitExceeded {
                limit: self.limits.table_elements,
                requested: desired as u64,
            }));
        }
        Ok(true)
    }

    fn instances(&self) -> usize {
        self.limits.instances as usize
    }

    fn tables(&self) -> usize {
        self.limits.tables as usize
    }

    fn memories(&self) -> usize {
        self.limits.memories as usize
    }
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
    use wasmtime::ResourceLimiter;

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
    fn zero_limits_are_refused() {
        let overrides: LimitOverrides = serde_json::from_str(r#"{"deadlineMs": 0}"#).expect("json");
        assert_eq!(
            HostPolicy::default().resolve(Limits::default(), &overrides),
            Err(LimitError::Zero("deadlineMs"))
        );
        assert!(serde_json::from_str::<LimitOverrides>(r#"{"fuell": 1}"#).is_err());
    }

    #[test]
    fn memory_limit_covers_all_memories_together() {
        let mut limiter = CallLimiter::new(Limits {
            memory_bytes: 10 * MIB,
            ..Limits::default()
        });
        let mib = MIB as usize;
        assert!(
            limiter
                .memory_growing(0, 6 * mib, None)
                .expect("first memory")
        );
        // A second memory of 6 MiB would fit a per-memory cap, not the total.
        let error = limiter.memory_growing(0, 6 * mib, None).expect_err("over");
        let typed = error.downcast_ref::<MemoryLimitExceeded>().expect("typed");
        assert_eq!(typed.requested, 12 * MIB);
        assert!(limiter.memory_growing(0, 4 * mib, None).expect("fits"));
    }

    #[test]
    fn failed_growth_is_given_back() {
        let mut limiter = CallLimiter::new(Limits {
            memory_bytes: 10 * MIB,
            ..Limits::default()
        });
        let mib = MIB as usize;
        assert!(limiter.memory_growing(0, 8 * mib, None).expect("grant"));
        limiter
            .memory_grow_failed(wasmtime::Error::msg("os refused"))
            .expect("recorded");
        assert!(
            limiter
                .memory_growing(0, 8 * mib, None)
                .expect("granted again")
        );
        assert!(
            !limiter
                .memory_growing(0, 2 * mib, Some(mib))
                .expect("module max")
        );
    }
}
