//! The `ResourceLimiter` that enforces a call's memory and table limits with
//! typed errors. The limit values themselves (defaults, policy caps,
//! overrides) are plain data in `toolhost_core::limits`.

pub use toolhost_core::limits::{Clamped, HostPolicy, LimitError, LimitOverrides, Limits};

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

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    const MIB: u64 = 1024 * 1024;

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
