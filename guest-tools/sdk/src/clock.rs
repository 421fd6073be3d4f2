//! `clock` (`toolhost:clock/clock@0.1.0`): the time now and since the call
//! started. The host records every reading with the call, so a replay of
//! the run reads the same values; a tool needs the `clock` capability in
//! its grant (WASI's own wall clock stands still at the call's start).
//! Natively (unit tests) both read the machine's clocks.

/// Bindings of `toolhost:clock/clock@0.1.0`.
#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({
        world: "toolhost:clock/clock-tool",
        path: ["../../wit/clock"],
        generate_all,
    });
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    imp::now_ms()
}

/// Nanoseconds since the call started; never decreases within a call.
pub fn elapsed_ns() -> u64 {
    imp::elapsed_ns()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::bindings::toolhost::clock::clock;

    pub(super) fn now_ms() -> u64 {
        clock::now_ms()
    }

    pub(super) fn elapsed_ns() -> u64 {
        clock::elapsed_ns()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use std::sync::OnceLock;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    pub(super) fn now_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64)
    }

    pub(super) fn elapsed_ns() -> u64 {
        static STARTED: OnceLock<Instant> = OnceLock::new();
        let started = STARTED.get_or_init(Instant::now);
        u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_native_clock_moves_forward() {
        let before = super::elapsed_ns();
        assert!(super::now_ms() > 1_700_000_000_000, "after 2023");
        assert!(super::elapsed_ns() >= before);
    }
}
