//! The shared engine: configuration, allocator choice with fallback, the
//! linker every tool is instantiated against, and the epoch ticker.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, OptLevel, PoolingAllocationConfig};

use crate::cache::{CacheError, ComponentCache};
use crate::limits::HostPolicy;
use crate::state::{CallState, bindings};
use crate::ticker::EpochTicker;

/// How instance memory is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocatorChoice {
    /// The pooling allocator, or on-demand allocation if this machine cannot
    /// reserve the pool (for example under a tight `ulimit -v`).
    #[default]
    Auto,
    /// The pooling allocator or an error.
    Pooling,
    /// Plain mmap per instance: slower calls, no up-front reservation.
    OnDemand,
}

/// Which allocator the engine ended up with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allocator {
    Pooling { slots: u32 },
    OnDemand { fallback_reason: Option<String> },
}

/// Links the host capabilities beyond `log` and `random` into the linker
/// every tool is instantiated against (`toolhost_capabilities::link`).
pub type LinkCapabilities = fn(&mut Linker<CallState>) -> wasmtime::Result<()>;

#[derive(Debug, Clone)]
pub struct SandboxConfig {
    pub allocator: AllocatorChoice,
    /// Calls that may run at once; also the pool's instance slots. Further
    /// calls wait for a slot rather than fail.
    pub max_concurrent_calls: u32,
    /// How often the epoch advances while calls run. A busy guest is stopped
    /// within about one tick after its deadline.
    pub epoch_tick: Duration,
    /// Where compiled components are cached; `None` compiles every load.
    pub cache_dir: Option<PathBuf>,
    pub policy: HostPolicy,
    /// The capability layer; `None` links only `log` and `random` (a
    /// component importing anything else then fails to link).
    pub capabilities: Option<LinkCapabilities>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
        Self {
            allocator: AllocatorChoice::Auto,
            max_concurrent_calls: (16 * cores).clamp(16, 128),
            epoch_tick: Duration::from_millis(1),
            cache_dir: None,
            policy: HostPolicy::default(),
            capabilities: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot create the wasmtime engine: {0}")]
    Engine(String),
    #[error("cannot link the host capabilities: {0}")]
    Linker(String),
    #[error("cannot start a sandbox thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// One engine and everything shared by the tools loaded into it.
pub struct Sandbox {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) cache: Option<ComponentCache>,
    /// Digest of the engine's precompile compatibility hash (cache key part).
    pub(crate) engine_digest: String,
    pub(crate) policy: HostPolicy,
    pub(crate) call_slots: Arc<Semaphore>,
    allocator: Allocator,
    // Declared last: dropped after the engine handles above are released.
    pub(crate) ticker: EpochTicker,
}

impl Sandbox {
    pub fn new(config: SandboxConfig) -> Result<Self, SandboxError> {
        let slots = config.max_concurrent_calls.max(1);
        let (engine, allocator) = match config.allocator {
            AllocatorChoice::OnDemand => (
                Engine::new(&base_config()).map_err(engine_error)?,
                Allocator::OnDemand {
                    fallback_reason: None,
                },
            ),
            AllocatorChoice::Pooling => (
                pooled_engine(slots, &config.policy).map_err(engine_error)?,
                Allocator::Pooling { slots },
            ),
            AllocatorChoice::Auto => match pooled_engine(slots, &config.policy) {
                Ok(engine) => (engine, Allocator::Pooling { slots }),
                Err(error) => {
                    let reason = format!("{error:#}");
                    tracing::warn!(%reason, "pooling allocator unavailable; allocating on demand");
                    (
                        Engine::new(&base_config()).map_err(engine_error)?,
                        Allocator::OnDemand {
                            fallback_reason: Some(reason),
                        },
                    )
                }
            },
        };

        let mut linker = Linker::<CallState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|error| SandboxError::Linker(format!("{error:#}")))?;
        bindings::PureTool::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| {
            state
        })
        .map_err(|error| SandboxError::Linker(format!("{error:#}")))?;
        if let Some(link) = config.capabilities {
            link(&mut linker).map_err(|error| SandboxError::Linker(format!("{error:#}")))?;
        }

        let cache = config.cache_dir.map(ComponentCache::open).transpose()?;
        let ticker =
            EpochTicker::start(&engine, config.epoch_tick).map_err(SandboxError::Thread)?;
        Ok(Self {
            engine_digest: compatibility_digest(&engine),
            engine,
            linker,
            cache,
            policy: config.policy,
            call_slots: Arc::new(Semaphore::new(slots as usize)),
            allocator,
            ticker,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    pub fn policy(&self) -> &HostPolicy {
        &self.policy
    }

    pub fn cache(&self) -> Option<&ComponentCache> {
        self.cache.as_ref()
    }

    pub fn epoch_tick(&self) -> Duration {
        self.ticker.tick()
    }
}

fn engine_error(error: wasmtime::Error) -> SandboxError {
    SandboxError::Engine(format!("{error:#}"))
}

fn base_config() -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    // Names JIT-compiled guest functions for `perf report` (docs/benchmarks.md,
    // "Profiling guests"); off by default because the map grows per compile.
    if std::env::var_os("TOOLHOST_PERFMAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

/// Sized for `slots` concurrent calls of Rust components (3 core instances,
/// 1 memory, 2 tables each), with head room, and for the policy's largest
/// memory and table. Keeping slot memory resident and scanning dirty pages is
/// what makes a fresh store per call cheap (docs/benchmarks.md).
fn pooled_engine(slots: u32, policy: &HostPolicy) -> wasmtime::Result<Engine> {
    let caps = &policy.caps;
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        .total_core_instances(slots * 8)
        .total_memories(slots * 2)
        .total_tables(slots * 8)
        .total_stacks(slots)
        .max_core_instances_per_component(caps.instances)
        .max_memories_per_component(caps.memories)
        .max_tables_per_component(caps.tables)
        .max_tables_per_module(4)
        .max_memory_size(usize::try_from(caps.memory_bytes).unwrap_or(usize::MAX))
        .table_elements(usize::try_from(caps.table_elements).unwrap_or(usize::MAX))
        .linear_memory_keep_resident(2 << 20)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);
    let mut config = base_config();
    config.allocation_strategy(pool);
    Engine::new(&config)
}

/// A stable digest of the engine's compatibility hash: artifacts compiled by
/// an engine with another digest are never loaded.
fn compatibility_digest(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
        fn finish(&self) -> u64 {
            0 // unused: the digest is read from the sha256 state
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..8])
}
