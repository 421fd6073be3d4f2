//! `ToolCatalog`: the base descriptors contributed by the current sources.
//! It holds no invocation state; snapshots copy from it.

use std::collections::BTreeMap;

use crate::{DescriptorError, ToolDescriptor, ToolId};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// Two sources contributed the same id (`tool.catalog_duplicate_id`).
    #[error("tool.catalog_duplicate_id: tool `{0}` is contributed twice")]
    DuplicateId(ToolId),
    #[error(transparent)]
    InvalidDescriptor(#[from] DescriptorError),
}

/// Why a name given by a person (CLI, UI) did not pick exactly one tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    #[error("no tool `{0}` in the catalog")]
    NotFound(String),
    #[error("`{name}` names several tools; use a canonical id: {}", candidates.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Ambiguous {
        name: String,
        candidates: Vec<ToolId>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct ToolCatalog {
    descriptors: BTreeMap<ToolId, ToolDescriptor>,
}

impl ToolCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Build from descriptors, failing fast on the first invalid or duplicate one.
    pub fn from_descriptors(
        descriptors: impl IntoIterator<Item = ToolDescriptor>,
    ) -> Result<Self, CatalogError> {
        let mut catalog = Self::new();
        for descriptor in descriptors {
            catalog.insert(descriptor)?;
        }
        Ok(catalog)
    }

    pub fn insert(&mut self, descriptor: ToolDescriptor) -> Result<(), CatalogError> {
        descriptor.validate()?;
        if self.descriptors.contains_key(&descriptor.id) {
            return Err(CatalogError::DuplicateId(descriptor.id));
        }
        self.descriptors.insert(descriptor.id.clone(), descriptor);
        Ok(())
    }

    pub fn get(&self, id: &ToolId) -> Option<&ToolDescriptor> {
        self.descriptors.get(id)
    }

    /// Descriptors in canonical id order.
    pub fn iter(&self) -> impl Iterator<Item = &ToolDescriptor> {
        self.descriptors.values()
    }

    pub fn len(&self) -> usize {
        self.descriptors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.descriptors.is_empty()
    }

    /// Find a tool by canonical id, or by native name when exactly one source
    /// has it. For people (CLI, UI) only: a model's call resolves through its
    /// turn's aliases, never through this.
    pub fn lookup(&self, name: &str) -> Result<&ToolDescriptor, LookupError> {
        if let Ok(id) = ToolId::parse(name)
            && let Some(descriptor) = self.descriptors.get(&id)
        {
            return Ok(descriptor);
        }
        let mut matches = self
            .descriptors
            .values()
            .filter(|descriptor| descriptor.id.native_name() == name);
        match (matches.next(), matches.next()) {
            (Some(only), None) => Ok(only),
            (None, _) => Err(LookupError::NotFound(name.to_owned())),
            (Some(first), Some(second)) => {
                let mut candidates = vec![first.id.clone(), second.id.clone()];
                candidates.extend(matches.map(|descriptor| descriptor.id.clone()));
                Err(LookupError::Ambiguous {
                    name: name.to_owned(),
                    candidates,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn descriptor(id: &str) -> ToolDescriptor {
        ToolDescriptor {
            id: ToolId::parse(id).expect("id"),
            title: None,
            description: None,
            input_schema: json!({"type": "object"}),
            output_schema: None,
            annotations: json!({}),
        }
    }

    #[test]
    fn duplicate_ids_fail_fast() {
        let error = ToolCatalog::from_descriptors([
            descriptor("builtin:dice.roll"),
            descriptor("builtin:dice.roll"),
        ])
        .expect_err("duplicate");
        assert!(
            matches!(error, CatalogError::DuplicateId(ref id) if id.as_str() == "builtin:dice.roll")
        );
        assert!(error.to_string().starts_with("tool.catalog_duplicate_id"));
    }

    #[test]
    fn invalid_descriptors_are_refused() {
        let mut bad = descriptor("builtin:dice.roll");
        bad.input_schema = json!({"type": "array"});
        assert!(matches!(
            ToolCatalog::from_descriptors([bad]),
            Err(CatalogError::InvalidDescriptor(_))
        ));
    }

    #[test]
    fn lookup_by_id_or_unique_native_name() {
        let catalog = ToolCatalog::from_descriptors([
            descriptor("builtin:dice.roll"),
            descriptor("builtin:search"),
            descriptor("ext/acme:search"),
        ])
        .expect("catalog");
        assert_eq!(
            catalog.lookup("dice.roll").map(|d| d.id.as_str()),
            Ok("builtin:dice.roll")
        );
        assert_eq!(
            catalog.lookup("ext/acme:search").map(|d| d.id.as_str()),
            Ok("ext/acme:search")
        );
        assert!(
            matches!(catalog.lookup("search"), Err(LookupError::Ambiguous { ref candidates, .. }) if candidates.len() == 2)
        );
        assert!(matches!(
            catalog.lookup("dice_roll"),
            Err(LookupError::NotFound(_))
        ));
    }
}
