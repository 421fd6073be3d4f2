//! [`WorkMeter`]: host-side work done on behalf of one call, counted and
//! stopped at the call's deadline.
//!
//! Fuel and epochs stop wasm code, and the sandbox's outer timeout stops a
//! call that waits, but none of them interrupts a synchronous host import
//! that is busy: a host loop over data a model or a guest controls (a
//! directory listing, a patch's matches) has to stop itself. Such loops
//! charge a meter for what they examine; past the deadline the next charge
//! fails and the loop returns. The count also lets tests assert that the
//! work is linear in the input without reading a clock.

use std::cell::Cell;
use std::time::Instant;

/// How many units may be charged between two looks at the clock: reading it
/// costs tens of nanoseconds, a unit (a byte scanned, an entry visited)
/// about one.
const CLOCK_EVERY: u64 = 64 * 1024;

/// The deadline passed while the host worked for the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the call's deadline passed while the host was working for it ({spent} units of work)")]
pub struct DeadlinePassed {
    pub spent: u64,
}

/// Work charged for one host import (or one host operation) of one call.
/// Not `Sync`: one call's host imports run one at a time.
#[derive(Debug)]
pub struct WorkMeter {
    deadline: Option<Instant>,
    spent: Cell<u64>,
    /// `spent` at which the clock is read next.
    next_look: Cell<u64>,
}

impl WorkMeter {
    /// No deadline: for host code that works for no call (the run loop, a
    /// CLI command), and counts only.
    pub fn unbounded() -> Self {
        Self {
            deadline: None,
            spent: Cell::new(0),
            next_look: Cell::new(u64::MAX),
        }
    }

    /// Stops once `deadline` has passed.
    pub fn until(deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            spent: Cell::new(0),
            next_look: Cell::new(0),
        }
    }

    /// `units` more of work (bytes examined, entries visited). Fails once
    /// the deadline has passed; the clock is read at the first charge and
    /// then about every [`CLOCK_EVERY`] units.
    pub fn charge(&self, units: u64) -> Result<(), DeadlinePassed> {
        let spent = self.spent.get().saturating_add(units);
        self.spent.set(spent);
        if spent < self.next_look.get() {
            return Ok(());
        }
        self.next_look.set(spent.saturating_add(CLOCK_EVERY));
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(DeadlinePassed { spent }),
            _ => Ok(()),
        }
    }

    /// Everything charged so far.
    pub fn spent(&self) -> u64 {
        self.spent.get()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn counts_without_a_deadline() {
        let meter = WorkMeter::unbounded();
        for _ in 0..1_000 {
            meter.charge(CLOCK_EVERY).unwrap();
        }
        assert_eq!(meter.spent(), 1_000 * CLOCK_EVERY);
    }

    #[test]
    fn a_passed_deadline_stops_the_first_charge_and_every_later_look() {
        let meter = WorkMeter::until(Instant::now() - Duration::from_millis(1));
        assert_eq!(meter.charge(1), Err(DeadlinePassed { spent: 1 }));
        // Between looks the clock is not read…
        assert_eq!(meter.charge(10), Ok(()));
        // …and at the next look the deadline is still past.
        assert!(meter.charge(CLOCK_EVERY).is_err());
    }

    #[test]
    fn a_future_deadline_lets_work_go_on() {
        let meter = WorkMeter::until(Instant::now() + Duration::from_secs(3_600));
        for _ in 0..100 {
            meter.charge(CLOCK_EVERY).unwrap();
        }
    }
}
