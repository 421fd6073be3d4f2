//! Where each tool's binding sits in a snapshot, built once when the
//! snapshot is made (or read back), so that every call's lookup — the gate,
//! the executor's binding, the catalog capability — costs the same whether
//! the snapshot binds one tool or every builtin. It is derived from the
//! bindings: never stored, never compared on its own.

use std::collections::HashMap;

use crate::ToolId;

use super::ToolBinding;

#[derive(Clone, Default)]
pub(super) struct BindingIndex(HashMap<ToolId, usize>);

impl BindingIndex {
    /// The position of each binding's tool. Bindings are unique by tool
    /// (checked before this is built), so no position is lost.
    pub(super) fn of(bindings: &[ToolBinding]) -> Self {
        Self(
            bindings
                .iter()
                .enumerate()
                .map(|(position, binding)| (binding.tool_id().clone(), position))
                .collect(),
        )
    }

    pub(super) fn position(&self, tool: &ToolId) -> Option<usize> {
        self.0.get(tool).copied()
    }
}

/// Built from the bindings, so two snapshots with equal bindings have equal
/// indexes: equality is the bindings' alone.
impl PartialEq for BindingIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// A snapshot prints its bindings; the index would only repeat them.
impl std::fmt::Debug for BindingIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BindingIndex({} tools)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::InvocationToolSnapshot;
    use super::*;
    use crate::test_support::{descriptor, id};

    fn binding(tool: &str, alias: &str) -> ToolBinding {
        ToolBinding {
            descriptor: descriptor(&id(tool)),
            model_alias: alias.into(),
            max_calls: None,
            limits: None,
            approval: None,
        }
    }

    fn wide() -> InvocationToolSnapshot {
        let bindings = (0..40)
            .map(|n| binding(&format!("builtin:tool.n{n}"), &format!("tool_n{n}")))
            .collect();
        InvocationToolSnapshot::new("inv_1", bindings, 10).expect("snapshot")
    }

    #[test]
    fn every_binding_is_found_at_its_own_place() {
        let snapshot = wide();
        for binding in snapshot.bindings() {
            let found = snapshot.binding(binding.tool_id()).expect("bound");
            assert!(std::ptr::eq(found, binding), "{}", binding.tool_id());
        }
        assert!(snapshot.binding(&id("builtin:tool.n40")).is_none());
        assert!(!snapshot.contains(&id("builtin:dice.roll")));
    }

    /// A snapshot read back from `tool_snapshot.json` gets its index too:
    /// the stored file never holds it.
    #[test]
    fn a_snapshot_read_back_is_indexed_and_the_file_holds_no_index() {
        let snapshot = wide();
        let stored = snapshot.to_json_pretty();
        let fields: Vec<String> = serde_json::from_str::<Value>(&stored)
            .expect("json")
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            fields,
            ["bindings", "id", "maxCallsPerInvocation", "schemaVersion"]
        );
        let read: InvocationToolSnapshot = serde_json::from_str(&stored).expect("loads");
        assert_eq!(read, snapshot);
        let last = id("builtin:tool.n39");
        assert_eq!(
            read.binding(&last).map(|b| b.model_alias.as_str()),
            Some("tool_n39")
        );
    }
}
