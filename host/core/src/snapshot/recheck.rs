//! A stored snapshot checked again when its run resumes. The snapshot is a
//! file of the run directory — on a cluster node, one rebuilt from what
//! NATS held — so it is read as untrusted: it may not grant what the
//! profile, the catalog and the policies would not grant now. It is
//! compared with the snapshot compiled afresh for the same invocation:
//! every tool it binds must still be bound, with an approval wherever one
//! is required now, no larger budget and the same sandbox limits; its
//! total budget no larger. Narrower is fine. A tool the policy or profile
//! has since denied is refused (the run can be started again under today's
//! rules); one that is only unavailable now (an MCP server away, an
//! extension not loaded) is not a loosening: its calls fail or are
//! rechecked when they are made.

use super::{CompiledSnapshot, InvocationToolSnapshot, OmitReason, SnapshotError};

impl InvocationToolSnapshot {
    /// `Ok` when this (stored) snapshot grants nothing `compiled` (the
    /// same invocation compiled now) does not.
    pub fn recheck_against(&self, compiled: &CompiledSnapshot) -> Result<(), SnapshotError> {
        let fresh = &compiled.snapshot;
        let unavailable = |id: &crate::ToolId| {
            compiled
                .diagnostics
                .iter()
                .any(|left| &left.tool_id == id && left.reason == OmitReason::Unavailable)
        };
        let loosened = |tool: &str, what: String| SnapshotError::Loosened {
            tool: tool.to_owned(),
            what,
        };
        if self.max_calls_per_invocation() > fresh.max_calls_per_invocation() {
            return Err(loosened(
                "*",
                format!(
                    "a total budget of {} calls where {} are allowed now",
                    self.max_calls_per_invocation(),
                    fresh.max_calls_per_invocation()
                ),
            ));
        }
        for stored in self.bindings() {
            let id = stored.tool_id();
            let Some(now) = fresh.binding(id) else {
                if unavailable(id) {
                    continue;
                }
                return Err(loosened(
                    id.as_str(),
                    "it is not offered to this invocation now".to_owned(),
                ));
            };
            if stored.approval.is_none()
                && let Some(reason) = &now.approval
            {
                return Err(loosened(
                    id.as_str(),
                    format!("no approval where one is required ({reason})"),
                ));
            }
            let more_calls = match (stored.max_calls, now.max_calls) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(stored), Some(now)) => stored > now,
            };
            if more_calls {
                return Err(loosened(
                    id.as_str(),
                    format!(
                        "a budget of {:?} calls where {:?} are allowed now",
                        stored.max_calls, now.max_calls
                    ),
                ));
            }
            if stored.limits != now.limits {
                return Err(loosened(
                    id.as_str(),
                    "sandbox limits other than its profile's".to_owned(),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::ToolBinding;
    use super::*;
    use crate::test_support::{descriptor, id};

    fn binding(tool: &str, max_calls: Option<u32>, approval: Option<&str>) -> ToolBinding {
        let tool = id(tool);
        ToolBinding {
            model_alias: tool.native_name().replace('.', "_"),
            descriptor: descriptor(&tool),
            max_calls,
            limits: None,
            approval: approval.map(str::to_owned),
        }
    }

    fn snapshot(bindings: Vec<ToolBinding>, total: u32) -> InvocationToolSnapshot {
        InvocationToolSnapshot::new("inv_1", bindings, total).expect("a valid snapshot")
    }

    fn compiled(snapshot: InvocationToolSnapshot, unavailable: &[&str]) -> CompiledSnapshot {
        CompiledSnapshot {
            snapshot,
            diagnostics: unavailable
                .iter()
                .map(|tool| super::super::SnapshotDiagnostic {
                    tool_id: id(tool),
                    reason: OmitReason::Unavailable,
                    message: "no source provides it now".to_owned(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_stored_snapshot_may_not_grant_more_than_a_fresh_one() {
        let fresh = compiled(
            snapshot(
                vec![
                    binding("builtin:workspace.write_file", Some(3), Some("mutating")),
                    binding("builtin:dice.roll", None, None),
                ],
                20,
            ),
            &["mcp/3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b:search"],
        );
        // The same, or narrower: resumed.
        fresh.snapshot.recheck_against(&fresh).expect("the same");
        // A tool only unavailable now (its MCP server away) is no loosening.
        let with_mcp = snapshot(
            vec![
                binding("builtin:dice.roll", None, None),
                binding(
                    "mcp/3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b:search",
                    None,
                    None,
                ),
            ],
            20,
        );
        with_mcp
            .recheck_against(&fresh)
            .expect("unavailable, not denied");
        let narrower = snapshot(
            vec![binding(
                "builtin:workspace.write_file",
                Some(1),
                Some("mutating"),
            )],
            10,
        );
        narrower.recheck_against(&fresh).expect("narrower");

        let tampered = [
            // The approval dropped: the edit the issue names.
            snapshot(
                vec![binding("builtin:workspace.write_file", Some(3), None)],
                20,
            ),
            // A tool the profile or policy does not offer now.
            snapshot(
                vec![binding("builtin:workspace.apply_patch", None, None)],
                20,
            ),
            // More calls of one tool, or unlimited ones.
            snapshot(
                vec![binding(
                    "builtin:workspace.write_file",
                    Some(9),
                    Some("mutating"),
                )],
                20,
            ),
            snapshot(
                vec![binding(
                    "builtin:workspace.write_file",
                    None,
                    Some("mutating"),
                )],
                20,
            ),
            // A larger total.
            snapshot(vec![binding("builtin:dice.roll", None, None)], 500),
        ];
        for (index, stored) in tampered.iter().enumerate() {
            let error = stored
                .recheck_against(&fresh)
                .expect_err(&format!("case {index}"));
            assert!(matches!(error, SnapshotError::Loosened { .. }), "{error}");
        }
        let mut limited = binding("builtin:dice.roll", None, None);
        limited.limits = Some(crate::limits::LimitOverrides {
            deadline: Some(std::time::Duration::from_secs(600)),
            ..Default::default()
        });
        assert!(snapshot(vec![limited], 20).recheck_against(&fresh).is_err());
    }
}
