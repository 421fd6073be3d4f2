//! `clock`: `toolhost:clock/clock@0.1.0`, the time as the host reads it.
//! Every reading of a call is recorded in order and settled into the
//! call's journal event (`capabilities.clock.reads`); a replay hands them
//! back ([`CallScope::recorded`]) and the call reads the same values again.
//! Recording is bounded: past [`MAX_RECORDED_READS`] a call still reads the
//! clock, unrecorded, and the event counts what was left out.

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
    replay: VecDeque<u64>,
}

/// One call's readings: recorded as read, or replayed from the record.
#[derive(Debug)]
pub struct ClockCall {
    started: Instant,
    readings: Mutex<Readings>,
}

#[derive(Debug, Default)]
struct Readings {
    replay: VecDeque<u64>,
    recorded: Vec<u64>,
    unrecorded: u64,
}

impl ClockCall {
    fn new(replay: VecDeque<u64>) -> Self {
        Self {
            started: Instant::now(),
            readings: Mutex::new(Readings {
                replay,
                ..Readings::default()
            }),
        }
    }

    fn readings(&self) -> MutexGuard<'_, Readings> {
        // Plain numbers: consistent after any panic.
        self.readings
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The next reading: the recorded one in a replay, else `now()`.
    fn read(&self, now: impl FnOnce() -> u64) -> u64 {
        let mut readings = self.readings();
        let value = readings.replay.pop_front().unwrap_or_else(now);
        if readings.recorded.len() < MAX_RECORDED_READS {
            readings.recorded.push(value);
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
            return Ok(Some(Arc::new(ClockCall::new(VecDeque::new()))));
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
        let replay = call
            .recorded
            .get(Self::KEY)
            .and_then(|recorded| recorded.get("reads"))
            .and_then(Value::as_array)
            .map(|reads| reads.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        *bound.current() = Current { call: None, replay };
    }

    fn settle(bound: &Self::Bound, settlement: &mut Settlement) {
        let Some(call) = std::mem::take(&mut *bound.current()).call else {
            return;
        };
        let readings = call.readings();
        if readings.recorded.is_empty() {
            return;
        }
        let mut recorded = json!({"reads": readings.recorded});
        if readings.unrecorded > 0 {
            recorded["unrecorded"] = json!(readings.unrecorded);
        }
        settlement.recorded.insert(Self::KEY.to_owned(), recorded);
    }
}

impl wit::Host for View<'_, Arc<ClockCall>> {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.clock().read(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64)
        }))
    }

    fn elapsed_ns(&mut self) -> wasmtime::Result<u64> {
        let clock = self.clock();
        let started = clock.started;
        Ok(clock.read(|| u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl View<'_, Arc<ClockCall>> {
    /// The call's clock: always there, since a component can import the
    /// interface only when granted, and a granted call is prepared with it.
    fn clock(&mut self) -> Arc<ClockCall> {
        self.state
            .clone()
            .unwrap_or_else(|| Arc::new(ClockCall::new(VecDeque::new())))
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
        assert_eq!(call.read(|| 5), 5);
        assert_eq!(call.read(|| 9), 9);
        let mut settlement = Settlement::default();
        Clock::settle(&bound, &mut settlement);
        assert_eq!(settlement.recorded["clock"], json!({"reads": [5, 9]}));
        assert!(bound.current().call.is_none(), "settled");

        let replay = CallScope {
            recorded: settlement.recorded,
            ..CallScope::default()
        };
        Clock::begin(&bound, &replay);
        let call = prepared(&bound);
        assert_eq!(call.read(|| 100), 5);
        assert_eq!(call.read(|| 100), 9);
        // Past the record: the clock again.
        assert_eq!(call.read(|| 100), 100);
    }

    #[test]
    fn recording_is_bounded() {
        let bound = ClockBound::default();
        Clock::begin(&bound, &CallScope::default());
        let call = prepared(&bound);
        for reading in 0..MAX_RECORDED_READS as u64 + 3 {
            call.read(|| reading);
        }
        let mut settlement = Settlement::default();
        Clock::settle(&bound, &mut settlement);
        let recorded = &settlement.recorded["clock"];
        assert_eq!(
            recorded["reads"].as_array().map(Vec::len),
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
