//! A builtin listed from the generated table and loaded on first use.
//!
//! The catalog describes a builtin from its `tool.json` entry
//! (`toolhost_core::builtin`), so a host starts without compiling anything;
//! a component is compiled (or read from the cache) the first time a call
//! needs it, or when [`ToolHost::preload`](crate::ToolHost::preload) asks
//! for it. Loads awaited together compile on several cores (the sandbox
//! compiles on tokio's blocking pool). A load that fails is not remembered:
//! the next call tries again, so a passing cache fault does not stick in a
//! long-running server.

use std::time::Instant;

use tokio::sync::OnceCell;
use toolhost_core::{ToolDescriptor, ToolProvider};
use toolhost_sandbox::{
    CapabilitySet, ComponentSpec, LimitOverrides, Limits, LoadError, LoadEvent, Sandbox,
    ToolComponent, Trust,
};

use toolhost_builtins::BuiltinComponent;

pub(crate) struct LazyBuiltin {
    component: &'static BuiltinComponent,
    /// Its world's capabilities: what it may import.
    grant: CapabilitySet,
    /// The host configuration's overrides for this tool, checked against
    /// the host policy when the host was made.
    overrides: LimitOverrides,
    /// What the catalog says it is; its own `describe()` must agree.
    descriptor: ToolDescriptor,
    loaded: OnceCell<ToolComponent>,
}

impl LazyBuiltin {
    /// An unloaded builtin. Its limits are resolved now, so a bad override
    /// fails the host's construction, not its first call.
    pub(crate) fn new(
        sandbox: &Sandbox,
        component: &'static BuiltinComponent,
        grant: CapabilitySet,
        overrides: LimitOverrides,
        descriptor: ToolDescriptor,
    ) -> Result<Self, LoadError> {
        sandbox
            .policy()
            .resolve(Limits::default(), &overrides)
            .map_err(|source| LoadError::Limits {
                label: component.package.to_owned(),
                source,
            })?;
        Ok(Self {
            component,
            grant,
            overrides,
            descriptor,
            loaded: OnceCell::new(),
        })
    }

    pub(crate) fn package(&self) -> &'static str {
        self.component.package
    }

    pub(crate) fn sha256_hex(&self) -> &'static str {
        self.component.sha256_hex
    }

    pub(crate) fn grant(&self) -> &CapabilitySet {
        &self.grant
    }

    /// Loaded already (no load will happen on the next call).
    pub(crate) fn is_loaded(&self) -> bool {
        self.loaded.initialized()
    }

    /// The component, loading it if this is its first use. Callers that
    /// arrive while it loads wait for that load rather than start another.
    pub(crate) async fn get(
        &self,
        sandbox: &Sandbox,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<&ToolComponent, LoadError> {
        self.loaded
            .get_or_try_init(|| self.load(sandbox, observe))
            .await
    }

    async fn load(
        &self,
        sandbox: &Sandbox,
        observe: &(dyn Fn(LoadEvent<'_>) + Sync),
    ) -> Result<ToolComponent, LoadError> {
        let started = Instant::now();
        let component = sandbox
            .load(
                ComponentSpec {
                    label: self.component.package,
                    bytes: self.component.bytes,
                    expected_sha256: Some(self.component.sha256_hex),
                    provider: ToolProvider::Builtin,
                    grant: self.grant.clone(),
                    limits: self.overrides,
                    trust: Trust::Builtin,
                },
                observe,
            )
            .await?;
        if *component.descriptor() != self.descriptor {
            return Err(LoadError::Descriptor {
                label: self.component.package.to_owned(),
                message: format!(
                    "its describe() disagrees with its tool.json entry `{}` (rebuild it, or fix the entry)",
                    self.descriptor.id
                ),
            });
        }
        tracing::debug!(
            tool = %self.descriptor.id,
            from = ?component.loaded_from(),
            elapsed = ?started.elapsed(),
            "builtin loaded on first use"
        );
        Ok(component)
    }
}

#[cfg(test)]
mod tests {
    use toolhost_sandbox::SandboxConfig;

    use super::*;

    fn sandbox() -> Sandbox {
        Sandbox::new(SandboxConfig {
            capabilities: Some(toolhost_capabilities::link),
            ..SandboxConfig::default()
        })
        .expect("sandbox")
    }

    fn component(package: &str) -> &'static BuiltinComponent {
        toolhost_builtins::components()
            .iter()
            .find(|component| component.package == package)
            .expect("built")
    }

    fn entry(name: &str) -> ToolDescriptor {
        toolhost_core::builtin::all()
            .iter()
            .find(|builtin| builtin.name == name)
            .expect("in the table")
            .descriptor()
    }

    fn lazy(sandbox: &Sandbox, package: &str, name: &str) -> LazyBuiltin {
        let component = component(package);
        let grant = CapabilitySet::for_world(component.world).expect("world");
        LazyBuiltin::new(
            sandbox,
            component,
            grant,
            LimitOverrides::default(),
            entry(name),
        )
        .expect("limits")
    }

    /// The catalog shows the table's entry; a component that says
    /// otherwise about itself is refused at its load, every time, and
    /// nothing is remembered as loaded.
    #[tokio::test]
    async fn a_component_describing_itself_otherwise_than_its_entry_is_refused() {
        let sandbox = sandbox();
        let mismatched = lazy(&sandbox, "skill-read", "dice.roll");
        for _ in 0..2 {
            match mismatched.get(&sandbox, &|_| {}).await {
                Err(LoadError::Descriptor { label, message }) => {
                    assert_eq!(label, "skill-read");
                    assert!(message.contains("builtin:dice.roll"), "{message}");
                }
                Err(other) => panic!("another error: {other}"),
                Ok(_) => panic!("loaded a component under another tool's entry"),
            }
            assert!(!mismatched.is_loaded());
        }
        let matched = lazy(&sandbox, "dice-roll", "dice.roll");
        let loaded = matched.get(&sandbox, &|_| {}).await.expect("loads");
        assert_eq!(*loaded.descriptor(), entry("dice.roll"));
        assert!(matched.is_loaded());
    }

    /// A limit override the policy refuses fails when the host is made,
    /// not at the tool's first call.
    #[test]
    fn a_refused_limit_override_fails_before_any_load() {
        let sandbox = sandbox();
        let component = component("dice-roll");
        let refused = LazyBuiltin::new(
            &sandbox,
            component,
            CapabilitySet::for_world(component.world).expect("world"),
            LimitOverrides {
                memory_bytes: Some(0),
                ..LimitOverrides::default()
            },
            entry("dice.roll"),
        );
        assert!(
            matches!(refused, Err(LoadError::Limits { .. })),
            "{:?}",
            refused.err()
        );
    }
}
