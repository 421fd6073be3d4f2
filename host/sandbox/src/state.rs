//! What one call's store holds, and the host side of each capability.
//!
//! Everything here lives exactly as long as one call: a fresh `CallState` per
//! store, dropped with it, so no guest-visible state survives a call.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::ChaCha8Rng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::clocks::HostWallClock;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::host_state::{CallCapabilities, CallCore};
use crate::limits::{CallLimiter, Limits};

/// The tool contract and the two capabilities every host has (`log`,
/// `random`). The other capabilities are bound by the embedder's capability
/// layer, against these bindings' shared types (bindgen `with:`).
#[doc(hidden)]
pub mod bindings {
    wasmtime::component::bindgen!({
        world: "toolhost:host/pure-tool@0.1.4",
        path: ["../../wit/tool", "../../wit/host-0.1.4"],
        // Trappable: a host capability that hits a system failure (a symlink
        // planted in the workspace, an I/O error) stops the call instead of
        // handing the tool something it could paper over.
        imports: { default: trappable },
        exports: { default: async },
    });
}

use bindings::toolhost::host::log::Level;

/// The nondeterministic inputs of one call, chosen by the caller and recorded
/// with the call so that it can be replayed exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallEntropy {
    /// Seeds the `random` capability and WASI's random interfaces.
    pub seed: u64,
    /// What WASI's wall clock reads during the call, as ms since the Unix epoch.
    pub clock_ms: u64,
}

impl CallEntropy {
    /// Fresh entropy: an OS-random seed and the current time.
    pub fn fresh() -> Self {
        let clock_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_millis() as u64)
            .unwrap_or(0);
        Self {
            seed: rand::rng().next_u64(),
            clock_ms,
        }
    }

    pub fn seeded(seed: u64) -> Self {
        Self { seed, clock_ms: 0 }
    }
}

// Distinct streams from one seed, so a tool's draws do not depend on whether
// its standard library also asked WASI for random bytes.
const WASI_SECURE_STREAM: u64 = 0x5741_5349_5345_4355;
const WASI_INSECURE_STREAM: u64 = 0x5741_5349_494e_5345;

/// One message from the `log` capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuestLog {
    pub level: &'static str,
    pub message: String,
}

/// One call's store: WASI with an empty context, the limits, `log` and
/// `random`, and what each linked capability holds of the call.
pub struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    /// The deadline, the trust and the fault slot every capability shares.
    pub(crate) core: CallCore,
    pub(crate) capabilities: CallCapabilities,
    random: ChaCha8Rng,
    pub(crate) random_draws: u64,
    pub(crate) logs: Vec<GuestLog>,
    log_budget: u64,
    pub(crate) logs_dropped: u64,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
    tool: Arc<str>,
}

impl CallState {
    pub(crate) fn new(
        tool: Arc<str>,
        limits: &Limits,
        trust: crate::Trust,
        entropy: CallEntropy,
        started: Instant,
        capabilities: CallCapabilities,
    ) -> Self {
        let capture = usize::try_from(limits.log_bytes).unwrap_or(usize::MAX);
        let stdout = MemoryOutputPipe::new(capture);
        let stderr = MemoryOutputPipe::new(capture);
        // No preopened directory, no environment, no arguments, stdin closed,
        // no network: the guest reaches nothing except through capabilities.
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .secure_random(ChaCha8Rng::seed_from_u64(entropy.seed ^ WASI_SECURE_STREAM))
            .insecure_random(ChaCha8Rng::seed_from_u64(
                entropy.seed ^ WASI_INSECURE_STREAM,
            ))
            .insecure_random_seed(u128::from(entropy.seed) << 64 | u128::from(!entropy.seed))
            .wall_clock(RecordedClock(Duration::from_millis(entropy.clock_ms)))
            .build();
        Self {
            wasi,
            table: ResourceTable::new(),
            limiter: CallLimiter::new(*limits),
            core: CallCore {
                deadline_at: started + limits.deadline,
                trust,
                host_fault: None,
            },
            capabilities,
            random: ChaCha8Rng::seed_from_u64(entropy.seed),
            random_draws: 0,
            logs: Vec::new(),
            log_budget: limits.log_bytes,
            logs_dropped: 0,
            stdout,
            stderr,
            tool,
        }
    }

    /// The view of capability `key`: the shared core and the state it was
    /// prepared with for this call (none: the call was not given it).
    pub fn project<S: std::any::Any>(
        &mut self,
        key: &'static str,
    ) -> (&mut CallCore, Option<&mut S>) {
        (&mut self.core, self.capabilities.get_mut::<S>(key))
    }

    /// The view of capability `key` whose resources live in WASI's resource
    /// table (`wasi:http` bodies are `wasi:io` streams): the shared core,
    /// that table, and its state — `refused` makes one when the call was not
    /// prepared with the capability, so such a call is answered by a state
    /// that refuses everything rather than by a missing one.
    pub fn project_with_table<S: std::any::Any + Send>(
        &mut self,
        key: &'static str,
        refused: impl FnOnce() -> S,
    ) -> (&mut CallCore, &mut ResourceTable, &mut S) {
        (
            &mut self.core,
            &mut self.table,
            self.capabilities.get_or_insert_with(key, refused),
        )
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// WASI's wall clock stands still at the call's recorded time.
struct RecordedClock(Duration);

impl HostWallClock for RecordedClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }

    fn now(&self) -> Duration {
        self.0
    }
}

impl bindings::toolhost::tool::types::Host for CallState {}

impl bindings::toolhost::host::random::Host for CallState {
    fn next_u64(&mut self) -> wasmtime::Result<u64> {
        self.random_draws += 1;
        Ok(self.random.next_u64())
    }
}

impl bindings::toolhost::host::log::Host for CallState {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let cost = message.len() as u64;
        if cost > self.log_budget {
            self.logs_dropped += 1;
            return Ok(());
        }
        self.log_budget -= cost;
        let tool = &*self.tool;
        let level = match level {
            Level::Trace => {
                tracing::trace!(target: "toolhost::guest", tool, "{message}");
                "trace"
            }
            Level::Debug => {
                tracing::debug!(target: "toolhost::guest", tool, "{message}");
                "debug"
            }
            Level::Info => {
                tracing::info!(target: "toolhost::guest", tool, "{message}");
                "info"
            }
            Level::Warn => {
                tracing::warn!(target: "toolhost::guest", tool, "{message}");
                "warn"
            }
            Level::Error => {
                tracing::error!(target: "toolhost::guest", tool, "{message}");
                "error"
            }
        };
        self.logs.push(GuestLog { level, message });
        Ok(())
    }
}
