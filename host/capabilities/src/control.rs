//! `control`: `toolhost:control/effects@0.1.0`, through which a builtin
//! control tool requests one change to the run. A package of its own and a
//! world of its own (`control-tool`), so the export every extension
//! implements carries no power: an extension cannot import this (it is
//! refused to extensions at install, at grant and at load), and an effect
//! left in a tool's output applies nothing.
//!
//! The request is checked here (JSON objects where the run expects them,
//! one per call) and recorded in the call's [`RequestedEffect`]; the sandbox
//! hands it on with the call's successful outcome.

use serde_json::Value;
use toolhost_core::{AwaitMode, Capability, CommitMode, ToolEffect};
use toolhost_sandbox::{CallState, HostFault, RequestedEffect};
use wasmtime::component::{HasData, Linker};

use crate::CallGrant;
use crate::lifecycle::{BindInputs, HostCapability};

use bindings::toolhost::control::effects;
use bindings::toolhost::tool::types as wit;

mod bindings {
    wasmtime::component::bindgen!({
        world: "toolhost:control/control-tool@0.1.0",
        path: ["../../wit/tool", "../../wit/host-0.1.4", "../../wit/control"],
        imports: { default: trappable },
        exports: { default: async },
        with: {
            "toolhost:tool/types": toolhost_sandbox::bindings::toolhost::tool::types,
            "toolhost:host/log": toolhost_sandbox::bindings::toolhost::host::log,
        },
    });
}

/// `toolhost:control/effects`.
pub struct Control;

impl HostCapability for Control {
    /// The sandbox hands on what a call requested from under this key.
    const KEY: &'static str = RequestedEffect::KEY;
    /// Nothing to bind: the request is the call's own.
    type Bound = ();
    type State = RequestedEffect;

    fn bind(_inputs: &BindInputs) -> Option<Self::Bound> {
        Some(())
    }

    /// One call's slot for its request: empty until the tool asks.
    fn prepare(
        _bound: Option<&Self::Bound>,
        grant: &CallGrant<'_>,
    ) -> Result<Option<Self::State>, HostFault> {
        Ok(grant
            .has(Capability::Control)
            .then(RequestedEffect::default))
    }

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        effects::add_to_linker::<_, Slot>(linker, |state: &mut CallState| {
            state.project::<RequestedEffect>(Self::KEY).1
        })
    }
}

/// [`HasData`] for the call's request slot (none: the call was not
/// prepared with `control`, which its grant then lacks).
struct Slot;

impl HasData for Slot {
    type Data<'a> = Option<&'a mut RequestedEffect>;
}

impl effects::Host for Option<&mut RequestedEffect> {
    fn request(&mut self, effect: wit::Effect) -> wasmtime::Result<Result<(), String>> {
        let Some(slot) = self.as_deref_mut() else {
            return Ok(Err("this call may not change the run".into()));
        };
        if slot.0.is_some() {
            return Ok(Err("a call requests at most one effect".into()));
        }
        Ok(convert(effect).map(|effect| slot.0 = Some(effect)))
    }
}

fn convert(effect: wit::Effect) -> Result<ToolEffect, String> {
    let object = |what: &str, text: &str| -> Result<Value, String> {
        match serde_json::from_str::<Value>(text) {
            Ok(value) if value.is_object() => Ok(value),
            Ok(_) => Err(format!("{what} must be a JSON object")),
            Err(error) => Err(format!("{what} is not valid JSON ({error})")),
        }
    };
    Ok(match effect {
        wit::Effect::Commit(request) => ToolEffect::Commit {
            path: request.path,
            mode: match request.mode {
                wit::CommitMode::Replace => CommitMode::Replace,
                wit::CommitMode::Append => CommitMode::Append,
            },
            reason: request.reason,
        },
        wit::Effect::Finish(request) => ToolEffect::Finish {
            reason: request.reason,
        },
        wit::Effect::Delegate(request) => ToolEffect::Delegate {
            task: object("the delegated task", &request.task)?,
            agent_id: request.agent_id,
        },
        wit::Effect::Handoff(request) => ToolEffect::Handoff {
            brief: object("the handoff brief", &request.brief)?,
            agent_id: request.agent_id,
        },
        wit::Effect::AwaitTasks(request) => ToolEffect::AwaitTasks {
            task_ids: request.task_ids,
            mode: match request.mode {
                wit::AwaitMode::NextCompleted => AwaitMode::NextCompleted,
                wit::AwaitMode::AllCompleted => AwaitMode::AllCompleted,
                wit::AwaitMode::StatusOnly => AwaitMode::StatusOnly,
            },
            timeout_ms: request.timeout_ms,
        },
        wit::Effect::TaskReturn(request) => ToolEffect::TaskReturn {
            report: object("the task report", &request.report)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use effects::Host;

    #[test]
    fn one_well_formed_request_per_call() {
        let mut slot = RequestedEffect::default();
        let mut view = Some(&mut slot);
        let finish = || {
            wit::Effect::Finish(wit::FinishRequest {
                reason: Some("done".into()),
            })
        };
        assert_eq!(view.request(finish()).expect("no trap"), Ok(()));
        assert_eq!(
            view.request(finish()).expect("no trap"),
            Err("a call requests at most one effect".into())
        );
        assert!(matches!(slot.0, Some(ToolEffect::Finish { .. })));

        let mut slot = RequestedEffect::default();
        let mut view = Some(&mut slot);
        let malformed = wit::Effect::TaskReturn(wit::TaskReturnRequest {
            report: "[1, 2]".into(),
        });
        assert!(view.request(malformed).expect("no trap").is_err());
        assert!(slot.0.is_none(), "a refused request records nothing");

        let mut unprepared: Option<&mut RequestedEffect> = None;
        assert!(unprepared.request(finish()).expect("no trap").is_err());
    }
}
