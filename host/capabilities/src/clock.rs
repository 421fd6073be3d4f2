//! `clock`: `toolhost:clock/clock@0.1.0`, the time as the host reads it.
//! Every reading of a call is recorded in order, per function, and settled
//! into the call's journal event (`recorded.clock`: `nowMs`, `elapsedNs`);
//! a replay (`toolhost replay`) hands them back ([`CallScope::recorded`])
//! and the call reads the same values again — each function its own, so a
//! replay that reads in another order never gets a wall time as an
//! elapsed one. Past the record, a replay reads the clock itself, and
//! `elapsed-ns` still never decreases. Recording is bounded: past
//! [`MAX_RECORDED_READS`] a call still reads the clock, unrecorded, and
//! the event counts what was left out.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toolhost_core::Capability;
use toolhost_sandbox::{CallState, HostFault};
use wasmtime::component::Linker;

use crate::CallGrant;
use crate::lifecycle::{BindInputs, CallScope, HostCapability, Settlement};
use crate::view::{Projected, View, project};

mod bindings {
    wasmtime::component::bindgen!({
        world: "toolhost:clock/clock-tool",
        path: ["../../wit/clock"],
        imports: { default: trappable },
    });
}

use bindings::toolhost::clock::clock as wit;

/// Most readings one call records; later ones are read but not recorded.
pub const MAX_RECORDED_READS: usize = 4_096;

/// `clock`.
pub struct Clock;

/// The invocation's clock: the call in progress, between begin and settle
/// — made when a granted call is prepared, so a call that cannot read the
/// clock pays for none — and the readings a replay hands back for it.
#[derive(Debug, Default)]
pub struct ClockBound {
    current: Mutex<Current>,
}

#[derive(Debug, Default)]
struct Current {
    call: Option<Arc<ClockCall>>,
    replay: Readings,
}

/// One call's readings: recorded as read, or replayed from the record.
#[derive(Debug)]
pub struct ClockCall {
    started: Instant,
    readings: Mutex<Readings>,
}

/// Which function a reading is of.
#[derive(Debug, Clone, Copy)]
enum Kind {
    NowMs,
    ElapsedNs,
}

impl Kind {
    const ALL: [Kind; 2] = [Kind::NowMs, Kind::ElapsedNs];

    /// Its key in the recorded readings.
    fn key(self) -> &'static str {
        match self {
            Self::NowMs => "nowMs",
            Self::ElapsedNs => "elapsedNs",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One call's readings, per function.
#[derive(Debug, Default)]
pub struct Readings {
    replay: [VecDeque<u64>; 2],
    recorded: [Vec<u64>; 2],
    unrecorded: u64,
    /// The last `elapsed-ns` handed out, which none after goes below.
    last_elapsed: u64,
}

impl Readings {
    /// A replay's readings, from what a call recorded (`recorded.clock`).
    fn replaying(recorded: Option<&Value>) -> Self {
        let mut readings = Self::default();
        for kind in Kind::ALL {
            if let Some(values) = recorded
                .and_then(|recorded| recorded.get(kind.key()))
                .and_then(Value::as_array)
            {
                readings.replay[kind.index()] = values.iter().filter_map(Value::as_u64).collect();
            }
        }
        readings
    }

    fn count(&self) -> usize {
        self.recorded.iter().map(Vec::len).sum()
    }
}

impl ClockCall {
    fn new(readings: Readings) -> Self {
        Self {
            started: Instant::now(),
            readings: Mutex::new(readings),
        }
    }

    fn readings(&self) -> MutexGuard<'_, Readings> {
        // Plain numbers: consistent after any panic.
        self.readings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next reading of `kind`: the recorded one in a replay, else
    /// `now()`.
    fn read(&self, kind: Kind, now: impl FnOnce() -> u64) -> u64 {
        let mut readings = self.readings();
        let mut value = readings.replay[kind.index()]
            .pop_front()
            .unwrap_or_else(now);
        if let Kind::ElapsedNs = kind {
            value = value.max(readings.last_elapsed);
            readings.last_elapsed = value;
        }
        if readings.count() < MAX_RECORDED_READS {
            readings.recorded[kind.index()].push(value);
        } else {
            readings.unrecorded += 1;
        }
        value
    }
}

impl ClockBound {
    fn current(&self) -> MutexGuard<'_, Current> {
        self.current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl HostCapability for Clock {
    const KEY: &'static str = "clock";
    type Bound = ClockBound;
    type State = Arc<ClockCall>;

    fn bind(_inputs: &BindInputs) -> Option<Self::Bound> {
        Some(ClockBound::default())
    }

    /// The call begun in the invocation, or (outside one: nothing is
    /// journalled) a clock of its own.
    fn prepare(
        bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        if !grant.has(Capability::Clock) {
            return Ok(None);
        }
        let Some(bound) = bound else {
            return Ok(Some(Arc::new(ClockCall::new(Readings::default()))));
        };
        let mut current = bound.current();
        let replay = std::mem::take(&mut current.replay);
        let call = current
            .call
            .get_or_insert_with(|| Arc::new(ClockCall::new(replay)));
        Ok(Some(Arc::clone(call)))
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, Projected<Self>>(linker, project::<Self>)
    }

    /// A new call reads a clock of its own: the recorded readings first,
    /// when it is replayed.
    fn begin(bound: &Self::Bound, call: &CallScope) {
        let replay = Readings::replaying(call.recorded.get(Self::KEY));
        *bound.current() = Current { call: None, replay };
    }

    fn settle(bound: &Self::Bound, settlement: &mut Settlement) {
        let Some(call) = std::mem::take(&mut *bound.current()).call else {
            return;
        };
        let readings = call.readings();
        if readings.count() == 0 {
            return;
        }
        let mut recorded = json!({});
        for kind in Kind::ALL {
            let values = &readings.recorded[kind.index()];
            if !values.is_empty() {
                recorded[kind.key()] = json!(values);
            }
        }
        if readings.unrecorded > 0 {
            recorded["unrecorded"] = json!(readings.unrecorded);
        }
        settlement.recorded.insert(Self::KEY.to_owned(), recorded);
    }
}

impl wit::Host for View<'_, Arc<ClockCall>> {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.clock().read(Kind::NowMs, || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64)
        }))
    }

    fn elapsed_ns(&mut self) -> wasmtime::Result<u64> {
        let clock = self.clock();
        let started = clock.started;
        Ok(clock.read(Kind::ElapsedNs, || {
            u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)
        }))
    }
}

impl View<'_, Arc<ClockCall>> {
    /// The call's clock: always there, since a component can import the
    /// interface only when granted, and a granted call is prepared with it.
    fn clock(&mut self) -> Arc<ClockCall> {
        self.state
            .clone()
            .unwrap_or_else(|| Arc::new(ClockCall::new(Readings::default())))
    }
}

#[cfg(test)]
mod tests {
    use toolhost_core::CapabilitySet;

    use super::*;

    #[test]
    fn a_call_records_its_readings_and_a_replay_reads_them_again() {
        let bound = ClockBound::default();
        Clock::begin(&bound, &CallScope::default());
        let call = prepared(&bound);
        assert_eq!(call.read(Kind::NowMs, || 5), 5);
        assert_eq!(call.read(Kind::ElapsedNs, || 9), 9);
        assert_eq!(call.read(Kind::NowMs, || 6), 6);
        let mut settlement = Settlement::default();
        Clock::settle(&bound, &mut settlement);
        assert_eq!(
            settlement.recorded["clock"],
            json!({"nowMs": [5, 6], "elapsedNs": [9]})
        );
        assert!(bound.current().call.is_none(), "settled");

        let replay = CallScope {
            recorded: settlement.recorded,
            ..CallScope::default()
        };
        Clock::begin(&bound, &replay);
        let call = prepared(&bound);
        // Another order: each function reads its own record.
        assert_eq!(call.read(Kind::ElapsedNs, || 100), 9);
        assert_eq!(call.read(Kind::NowMs, || 100), 5);
        assert_eq!(call.read(Kind::NowMs, || 100), 6);
        // Past the record: the clock again, and elapsed never goes back.
        assert_eq!(call.read(Kind::NowMs, || 100), 100);
        assert_eq!(call.read(Kind::ElapsedNs, || 3), 9);
    }

    #[test]
    fn recording_is_bounded() {
        let bound = ClockBound::default();
        Clock::begin(&bound, &CallScope::default());
        let call = prepared(&bound);
        for reading in 0..MAX_RECORDED_READS as u64 + 3 {
            call.read(Kind::NowMs, || reading);
        }
        let mut settlement = Settlement::default();
        Clock::settle(&bound, &mut settlement);
        let recorded = &settlement.recorded["clock"];
        assert_eq!(
            recorded["nowMs"].as_array().map(Vec::len),
            Some(MAX_RECORDED_READS)
        );
        assert_eq!(recorded["unrecorded"], 3);
    }

    #[test]
    fn a_call_that_never_read_records_nothing() {
        let bound = ClockBound::default();
        Clock::begin(&bound, &CallScope::default());
        let mut settlement = Settlement::default();
        Clock::settle(&bound, &mut settlement);
        assert!(settlement.recorded.is_empty());
        // Prepared, never read: nothing either.
        Clock::begin(&bound, &CallScope::default());
        prepared(&bound);
        Clock::settle(&bound, &mut settlement);
        assert!(settlement.recorded.is_empty());
    }

    #[test]
    fn an_ungranted_call_gets_no_clock() {
        let bound = ClockBound::default();
        let grant = CapabilitySet::new([Capability::Log]);
        let no_hosts = toolhost_core::allowed_hosts::AllowedHosts::none();
        let prepared =
            Clock::prepare(Some(&bound), &grant_of(&grant, &no_hosts)).expect("no fault");
        assert!(prepared.is_none());
        assert!(bound.current().call.is_none());
    }

    fn grant_of<'a>(
        capabilities: &'a CapabilitySet,
        hosts: &'a toolhost_core::allowed_hosts::AllowedHosts,
    ) -> CallGrant<'a> {
        CallGrant {
            capabilities,
            trust: toolhost_sandbox::Trust::Extension,
            tool_results: false,
            allowed_hosts: hosts,
            catalog: false,
            secrets: &[],
        }
    }

    /// The call's clock, as a granted call is prepared with it.
    fn prepared(bound: &ClockBound) -> Arc<ClockCall> {
        let grant = CapabilitySet::new([Capability::Clock]);
        let no_hosts = toolhost_core::allowed_hosts::AllowedHosts::none();
        Clock::prepare(Some(bound), &grant_of(&grant, &no_hosts))
            .expect("no fault")
            .expect("granted")
    }
}
