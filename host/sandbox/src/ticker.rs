//! The epoch ticker: a plain OS thread that advances the engine's epoch every
//! tick while at least one call is running, and sleeps otherwise.
//!
//! Each call's store checks its own wall-clock deadline whenever the epoch
//! advances, so a busy loop is stopped within one tick of its deadline
//! (plus scheduling noise); an idle host costs no wake-ups.
//!
//! After the last call the ticker goes on for [`LINGER_TICKS`] before it
//! parks: a client making calls one after another (an MCP client over
//! stdio) would otherwise wake it, and hand a lock back and forth with it,
//! on every call — several futex calls each, more than the rest of a
//! call's path on a 2-core machine. A call wakes it only when it is parked.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Engine, EngineWeak};

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

struct State {
    running_calls: usize,
    /// Calls started so far: the ticker sees activity between two ticks.
    started: u64,
    /// The ticker waits on `wake` (and must be woken by the next call).
    parked: bool,
    /// How many times a call woke the ticker.
    wakeups: u64,
    stop: bool,
}

/// Idle ticks before the ticker parks (with a 1 ms tick, 100 ms).
const LINGER_TICKS: u32 = 100;

pub struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    tick: Duration,
}

/// Keeps the ticker running while a call is in flight.
pub struct RunningCall {
    shared: Arc<Shared>,
}

impl EpochTicker {
    pub fn start(engine: &Engine, tick: Duration) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                running_calls: 0,
                started: 0,
                parked: false,
                wakeups: 0,
                stop: false,
            }),
            wake: Condvar::new(),
        });
        let weak = engine.weak();
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("toolhost-epoch".into())
            .spawn(move || run(&thread_shared, &weak, tick))?;
        Ok(Self {
            shared,
            thread: Some(thread),
            tick,
        })
    }

    pub fn tick(&self) -> Duration {
        self.tick
    }

    /// How many times a call had to wake the parked ticker.
    #[cfg(test)]
    fn wakeups(&self) -> u64 {
        lock(&self.shared).wakeups
    }

    pub fn call_started(&self) -> RunningCall {
        let mut state = lock(&self.shared);
        state.running_calls += 1;
        state.started += 1;
        if state.parked {
            state.parked = false;
            state.wakeups += 1;
            self.shared.wake.notify_one();
        }
        RunningCall {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        lock(&self.shared).running_calls -= 1;
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        lock(&self.shared).stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, State> {
    // Counters and flags, each written whole: a panic elsewhere cannot
    // leave them torn.
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(shared: &Shared, weak: &EngineWeak, tick: Duration) {
    let mut seen_started = 0;
    let mut idle_ticks = 0;
    loop {
        {
            let mut state = lock(shared);
            if state.running_calls > 0 || state.started != seen_started {
                idle_ticks = 0;
            } else {
                idle_ticks += 1;
            }
            seen_started = state.started;
            if idle_ticks > LINGER_TICKS {
                state.parked = true;
                while state.parked && !state.stop {
                    state = shared
                        .wake
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                seen_started = state.started;
                idle_ticks = 0;
            }
            if state.stop {
                return;
            }
        }
        std::thread::sleep(tick);
        match weak.upgrade() {
            Some(engine) => engine.increment_epoch(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(ticker: &EpochTicker) -> bool {
        lock(&ticker.shared).parked
    }

    fn wait_until_parked(ticker: &EpochTicker) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !parked(ticker) {
            assert!(std::time::Instant::now() < deadline, "never parked");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn calls_one_after_another_wake_the_ticker_once_and_idle_parks_it() {
        let engine = Engine::default();
        let ticker = EpochTicker::start(&engine, Duration::from_millis(1)).expect("ticker");
        // Idle from the start: it parks after the linger, and ticks no more.
        wait_until_parked(&ticker);
        assert_eq!(ticker.wakeups(), 0);
        // A stream of short calls, as an MCP client makes them.
        for _ in 0..200 {
            let running = ticker.call_started();
            drop(running);
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!(ticker.wakeups(), 1, "only the first call woke it");
        // Idle again: it parks again, and the next call wakes it again.
        wait_until_parked(&ticker);
        let running = ticker.call_started();
        assert_eq!(ticker.wakeups(), 2);
        assert!(!parked(&ticker));
        drop(running);
    }

    #[test]
    fn a_running_call_keeps_the_ticker_from_parking() {
        let engine = Engine::default();
        let ticker = EpochTicker::start(&engine, Duration::from_millis(1)).expect("ticker");
        wait_until_parked(&ticker);
        let running = ticker.call_started();
        // Longer than the linger: the ticker must not park under a call.
        std::thread::sleep(Duration::from_millis(300));
        assert!(!parked(&ticker), "parked while a call ran");
        drop(running);
        wait_until_parked(&ticker);
    }
}
