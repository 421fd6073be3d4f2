//! The epoch ticker: a plain OS thread that advances the engine's epoch every
//! tick while at least one call is running, and sleeps otherwise.
//!
//! Each call's store checks its own wall-clock deadline whenever the epoch
//! advances, so a busy loop is stopped within one tick of its deadline
//! (plus scheduling noise); an idle host costs no wake-ups.

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
    stop: bool,
}

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

    pub fn call_started(&self) -> RunningCall {
        let mut state = lock(&self.shared);
        state.running_calls += 1;
        if state.running_calls == 1 {
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
    // The state is two counters; a panic elsewhere cannot leave it torn.
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(shared: &Shared, weak: &EngineWeak, tick: Duration) {
    loop {
        {
            let mut state = lock(shared);
            while state.running_calls == 0 && !state.stop {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
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
