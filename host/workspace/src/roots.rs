//! Which top-level entries of the run directory the model may see and write.
//!
//! Only the roots are ever visible; every other entry of the run directory
//! (`run.json`, `events.jsonl`, `input/`, `tool-args/`, `model-responses/`,
//! `agent-results/`, `.tmp/`, and anything else someone put there) is
//! hidden, because visibility is decided by this list and not by a deny
//! list.

use toolhost_journal::layout::{HIDDEN, TOOL_RESULTS_DIR};
use toolhost_journal::manifest::RootSpec;

use crate::error::{WorkspaceError, codes};
use crate::path::{WorkspacePath, segment_ok};

/// One root as the workspace enforces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub name: String,
    pub visible: bool,
    /// Never true for an invisible root or for a runtime root
    /// (`tool-results`).
    pub writable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoots {
    roots: Vec<Root>,
}

impl WorkspaceRoots {
    /// From the manifest's `roots`, in their order. A runtime root (and
    /// `tool-results` whatever the manifest says) is never writable; an
    /// invisible root is not writable either. Refuses (System
    /// `workspace.invalid_roots`) a root that is not one plain segment, is a
    /// hidden entry, or is listed twice.
    pub fn from_specs(specs: &[RootSpec]) -> Result<Self, WorkspaceError> {
        let mut roots: Vec<Root> = Vec::with_capacity(specs.len());
        for spec in specs {
            let problem = if !segment_ok(&spec.path) || spec.path.starts_with('.') {
                Some("it is not one plain path segment")
            } else if HIDDEN.contains(&spec.path.as_str()) {
                Some("it is a hidden run entry")
            } else if roots.iter().any(|root| root.name == spec.path) {
                Some("it is listed twice")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(WorkspaceError::system(
                    codes::INVALID_ROOTS,
                    format!("workspace root `{}` is unusable: {problem}", spec.path),
                ));
            }
            let runtime = spec.runtime || spec.path == TOOL_RESULTS_DIR;
            roots.push(Root {
                name: spec.path.clone(),
                visible: spec.visible,
                writable: spec.visible && spec.writable && !runtime,
            });
        }
        Ok(Self { roots })
    }

    /// The default universe (output, scratch, plan, summaries, persist:
    /// visible and writable) plus `tool-results` (visible, read-only).
    pub fn default_run() -> Self {
        let mut specs = RootSpec::default_universe();
        specs.push(RootSpec::tool_results());
        // The journal's own constructors: always valid.
        Self::from_specs(&specs).unwrap_or(Self { roots: Vec::new() })
    }

    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// These roots seen by a profile that shows only `visible` and writes
    /// only `writable`: never more than here. The runtime root
    /// (`tool-results`) stays visible to every invocation.
    pub fn narrowed(&self, visible: &[String], writable: &[String]) -> Self {
        let roots = self
            .roots
            .iter()
            .map(|root| {
                let runtime = root.name == TOOL_RESULTS_DIR;
                let seen = root.visible && (runtime || visible.contains(&root.name));
                Root {
                    name: root.name.clone(),
                    visible: seen,
                    writable: seen && root.writable && writable.contains(&root.name),
                }
            })
            .collect();
        Self { roots }
    }

    /// These roots with the runtime's `tool-results/` hidden: what an
    /// extension sees unless it was granted other calls' results.
    pub fn without_tool_results(&self) -> Self {
        let roots = self
            .roots
            .iter()
            .map(|root| {
                let hidden = root.name == TOOL_RESULTS_DIR;
                Root {
                    name: root.name.clone(),
                    visible: root.visible && !hidden,
                    writable: root.writable && !hidden,
                }
            })
            .collect();
        Self { roots }
    }

    /// Names of the visible roots, in manifest order.
    pub fn visible(&self) -> impl Iterator<Item = &str> {
        self.roots
            .iter()
            .filter(|root| root.visible)
            .map(|root| root.name.as_str())
    }

    /// Names of the writable roots, in manifest order.
    pub fn writable(&self) -> impl Iterator<Item = &str> {
        self.roots
            .iter()
            .filter(|root| root.writable)
            .map(|root| root.name.as_str())
    }

    fn root_of(&self, path: &WorkspacePath) -> Option<&Root> {
        let top = path.top()?;
        self.roots.iter().find(|root| root.name == top)
    }

    /// The workspace root itself, a visible root, or a path under one.
    pub fn is_visible(&self, path: &WorkspacePath) -> bool {
        path.is_root() || self.root_of(path).is_some_and(|root| root.visible)
    }

    /// Strictly under a writable root (a root itself is not a file path).
    pub fn is_writable(&self, path: &WorkspacePath) -> bool {
        path.segments().nth(1).is_some() && self.root_of(path).is_some_and(|root| root.writable)
    }

    fn listed(names: impl Iterator<Item = impl AsRef<str>>) -> String {
        let names: Vec<String> = names.map(|name| format!("{}/", name.as_ref())).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    pub fn check_visible(&self, path: &WorkspacePath) -> Result<(), WorkspaceError> {
        if self.is_visible(path) {
            return Ok(());
        }
        Err(WorkspaceError::recoverable(
            codes::PATH_NOT_VISIBLE,
            format!(
                "workspace path `{path}` is not visible; the visible roots are {}. Call {workspace_list_files} to see what they hold.",
                Self::listed(self.visible()),
                workspace_list_files = crate::error::alias("workspace.list_files")
            ),
        ))
    }

    /// Visible first (a hidden path is reported as not visible, never as
    /// read-only), then writable.
    pub fn check_writable(&self, path: &WorkspacePath) -> Result<(), WorkspaceError> {
        self.check_visible(path)?;
        if self.is_writable(path) {
            return Ok(());
        }
        let writable = Self::listed(self.writable());
        let message = if path.segments().nth(1).is_none() {
            format!(
                "workspace path `{path}` is a root directory, not a file; write a file under it, like `{path}/notes.md` (writable roots: {writable})."
            )
        } else {
            format!(
                "workspace path `{path}` is read-only; write under one of the writable roots: {writable}."
            )
        };
        Err(WorkspaceError::recoverable(
            codes::PATH_NOT_WRITABLE,
            message,
        ))
    }
}

impl Default for WorkspaceRoots {
    fn default() -> Self {
        Self::default_run()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathUse;

    fn path(raw: &str) -> WorkspacePath {
        WorkspacePath::parse(raw, PathUse::Directory).unwrap()
    }

    #[test]
    fn narrowing_only_ever_takes_away() {
        let run = WorkspaceRoots::default_run();
        let strings = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let child = run.narrowed(
            &strings(&["scratch", "summaries", "plan"]),
            &strings(&["scratch", "output"]),
        );
        assert_eq!(
            child.visible().collect::<Vec<_>>(),
            ["scratch", "plan", "summaries", "tool-results"]
        );
        // output is writable for the run but not visible to the child: not writable.
        assert_eq!(child.writable().collect::<Vec<_>>(), ["scratch"]);
        let hidden =
            WorkspacePath::parse("output/main.md", crate::path::PathUse::File).expect("path");
        assert_eq!(
            child.check_visible(&hidden).expect_err("hidden").code(),
            codes::PATH_NOT_VISIBLE
        );
        // A narrowed view of a narrowed view never widens.
        let again = child.narrowed(
            &strings(&["output", "scratch"]),
            &strings(&["output", "scratch"]),
        );
        assert_eq!(
            again.visible().collect::<Vec<_>>(),
            ["scratch", "tool-results"]
        );
    }

    #[test]
    fn default_roots() {
        let roots = WorkspaceRoots::default_run();
        assert_eq!(
            roots.visible().collect::<Vec<_>>(),
            [
                "output",
                "scratch",
                "plan",
                "summaries",
                "persist",
                "tool-results"
            ]
        );
        assert_eq!(
            roots.writable().collect::<Vec<_>>(),
            ["output", "scratch", "plan", "summaries", "persist"]
        );
        for visible in [
            "",
            "output",
            "output/a.md",
            "tool-results/call_x.json",
            "persist/a/b",
        ] {
            roots.check_visible(&path(visible)).expect(visible);
        }
        for hidden in [
            "run.json",
            "events.jsonl",
            "input",
            "input/resolved_profile.json",
            "tool-args/x",
            "model-responses",
            "agent-results/a",
            ".tmp/x",
            "output_extra/x",
            "outputs",
            "anything",
        ] {
            let error = roots.check_visible(&path(hidden)).expect_err(hidden);
            assert_eq!(error.code(), codes::PATH_NOT_VISIBLE);
            let error = roots.check_writable(&path(hidden)).expect_err(hidden);
            assert_eq!(error.code(), codes::PATH_NOT_VISIBLE, "{hidden}");
        }
        roots.check_writable(&path("output/a.md")).unwrap();
        roots.check_writable(&path("persist/x/y.md")).unwrap();
        for read_only in ["output", "tool-results/x.json", "tool-results", ""] {
            let error = roots.check_writable(&path(read_only)).expect_err(read_only);
            assert_eq!(error.code(), codes::PATH_NOT_WRITABLE, "{read_only}");
        }
    }

    #[test]
    fn profile_flags_are_respected_and_bad_roots_refused() {
        let mut specs = RootSpec::default_universe();
        specs[2].visible = false; // plan
        specs[3].writable = false; // summaries
        let mut results = RootSpec::tool_results();
        results.writable = true; // never honoured
        specs.push(results);
        let roots = WorkspaceRoots::from_specs(&specs).unwrap();
        assert!(!roots.is_visible(&path("plan/a")));
        assert!(roots.is_visible(&path("summaries/a")));
        assert!(!roots.is_writable(&path("summaries/a")));
        assert!(!roots.is_writable(&path("tool-results/a")));

        for bad in ["input", ".tmp", "a/b", "..", "run.json", "output"] {
            let mut specs = RootSpec::default_universe();
            let mut extra = RootSpec::tool_results();
            extra.path = bad.to_owned();
            specs.push(extra);
            let error = WorkspaceRoots::from_specs(&specs).expect_err(bad);
            assert_eq!(error.code(), codes::INVALID_ROOTS, "{bad}");
            assert!(error.is_system());
        }
    }
}
