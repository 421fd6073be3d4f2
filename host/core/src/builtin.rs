//! The builtin tools of this version of toolhost: one table, generated at
//! build time from the `tool.json` each builtin's guest crate holds
//! (`guest-tools/<package>/tool.json`; see `toolhost_guest_build::table`).
//!
//! Everything that asks "which builtins are there, and what kind is this
//! one" reads it: profiles are checked against it (a typo in `tools.allow`
//! is an error naming the entry), the snapshot compiler takes the
//! child-excluded flag from it, the gate the end-tool flag, the run loop
//! the terminal and write flags, a resume the write and control flags, and
//! the catalog can describe a builtin without instantiating its component.
//! Whether a builtin's component is shipped in this build is the catalog's
//! business; a test fails when a component's own `describe()` disagrees
//! with its entry here.

use serde::Deserialize;
use serde_json::Value;

use crate::{Annotations, ToolDescriptor, ToolId};

/// One builtin, as its `tool.json` declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Builtin {
    /// Its native name, e.g. `dice.roll`.
    pub name: &'static str,
    /// The guest crate its component is built from, e.g. `dice-roll`.
    pub package: &'static str,
    pub title: Option<&'static str>,
    /// Ends its invocation's loop; must be the last call of its round.
    pub terminal: bool,
    /// Changes the workspace (write, patch): a successful call may be
    /// auto-published, and one a crash cut off is settled from its intent.
    pub writes_workspace: bool,
    /// A return-mode child does not get it: it reports through
    /// `task.return` instead of committing, finishing, delegating or
    /// handing off.
    pub child_excluded: bool,
    /// One of the calls that end the invocation's work (commit, finish,
    /// task return): the gate keeps it callable after the invocation's
    /// total call budget is spent and never counts it against that total,
    /// so a spent budget cannot keep a run from ending well. Its own
    /// per-tool budget and rules still hold.
    pub end_tool: bool,
    /// Returns an effect only the run loop applies (commit, finish,
    /// delegate, await, handoff, task return): served only inside a loop.
    pub control: bool,
    tool_json: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/builtin_table.rs"));

/// Injected by the runtime into return-mode children; a profile may not allow it.
pub const TASK_RETURN: &str = "task.return";

/// The file as the build checked it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolFile {
    name: String,
    title: Option<String>,
    description: String,
    #[serde(default)]
    annotations: Value,
    input_schema: Value,
    output_schema: Option<Value>,
}

impl Builtin {
    /// Its descriptor, exactly what its component's `describe()` returns.
    ///
    /// # Panics
    /// Never for a table the build produced: the build script refuses a
    /// `tool.json` this does not read.
    pub fn descriptor(&self) -> ToolDescriptor {
        let file: ToolFile = serde_json::from_str(self.tool_json)
            .unwrap_or_else(|error| panic!("{}/tool.json: {error}", self.package));
        let id = ToolId::builtin(&file.name)
            .unwrap_or_else(|error| panic!("{}/tool.json: {error}", self.package));
        ToolDescriptor {
            id,
            title: file.title,
            description: Some(file.description),
            input_schema: file.input_schema,
            output_schema: file.output_schema,
            annotations: Annotations::from_json(&file.annotations).to_json(),
        }
    }
}

/// Every builtin, ordered by package.
pub fn all() -> &'static [Builtin] {
    BUILTINS
}

/// The builtin with this native name.
pub fn find(native_name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|builtin| builtin.name == native_name)
}

/// The builtin `id` names, if it names one.
pub fn of(id: &ToolId) -> Option<&'static Builtin> {
    if id.is_builtin() {
        find(id.native_name())
    } else {
        None
    }
}

pub fn is_builtin(native_name: &str) -> bool {
    find(native_name).is_some()
}

/// Every builtin's native name, ordered by package.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTINS.iter().map(|builtin| builtin.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_describes_itself_validly() {
        assert!(all().len() >= 19);
        for builtin in all() {
            let descriptor = builtin.descriptor();
            descriptor.validate().unwrap();
            assert_eq!(descriptor.id.native_name(), builtin.name);
            assert_eq!(descriptor.title.as_deref(), builtin.title);
            assert_eq!(descriptor.annotation_flag("control"), builtin.control);
        }
    }

    #[test]
    fn the_flags_are_those_the_run_loop_relies_on() {
        let flagged = |pick: fn(&Builtin) -> bool| -> Vec<&str> {
            let mut names: Vec<&str> = all()
                .iter()
                .filter(|builtin| pick(builtin))
                .map(|builtin| builtin.name)
                .collect();
            names.sort_unstable();
            names
        };
        assert_eq!(
            flagged(|b| b.terminal),
            ["agent.handoff", "task.return", "workspace.finish"]
        );
        assert_eq!(
            flagged(|b| b.writes_workspace),
            ["workspace.apply_patch", "workspace.write_file"]
        );
        assert_eq!(
            flagged(|b| b.child_excluded),
            [
                "agent.await",
                "agent.delegate",
                "agent.handoff",
                "workspace.commit",
                "workspace.finish"
            ]
        );
        assert_eq!(
            flagged(|b| b.end_tool),
            ["task.return", "workspace.commit", "workspace.finish"]
        );
        assert_eq!(
            flagged(|b| b.control),
            [
                "agent.await",
                "agent.delegate",
                "agent.handoff",
                "task.return",
                "workspace.commit",
                "workspace.finish"
            ]
        );
        // Terminal tools end a loop by their effect; a writer never does.
        for builtin in all() {
            assert!(!builtin.terminal || builtin.control, "{}", builtin.name);
            assert!(!builtin.end_tool || builtin.control, "{}", builtin.name);
            assert!(
                !(builtin.writes_workspace && builtin.control),
                "{}",
                builtin.name
            );
        }
        assert!(find(TASK_RETURN).is_some_and(|b| !b.child_excluded));
        assert!(of(&ToolId::builtin("dice.roll").unwrap()).is_some());
        assert!(find("dice.rol").is_none());
    }
}
