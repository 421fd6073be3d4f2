//! `ToolDescriptor`: the neutral facts about a tool — what it is called, what it
//! says to the model, what arguments it takes. It owns no alias, budget,
//! permission or executor.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ToolId;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDescriptor {
    pub id: ToolId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments; its root is always an explicit object.
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Raw behaviour hints (`readOnly`, `mutating`, `control`, `idempotent`,
    /// `openWorld`, `sourceKind`); never trusted for a security decision.
    #[serde(default)]
    pub annotations: Value,
}

/// A tool's behaviour hints in the one form every descriptor carries them:
/// each flag listed (`false` when the source left it out), `sourceKind`
/// only when given. A component's `describe()` and a builtin's `tool.json`
/// both go through it, so the two agree byte for byte.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub mutating: bool,
    pub control: bool,
    pub idempotent: bool,
    pub open_world: bool,
    pub source_kind: Option<String>,
}

impl Annotations {
    /// From JSON hints (`readOnly`, ...); anything else is ignored.
    pub fn from_json(hints: &Value) -> Self {
        let flag = |key: &str| hints.get(key).and_then(Value::as_bool).unwrap_or(false);
        Self {
            read_only: flag("readOnly"),
            mutating: flag("mutating"),
            control: flag("control"),
            idempotent: flag("idempotent"),
            open_world: flag("openWorld"),
            source_kind: hints
                .get("sourceKind")
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    pub fn to_json(&self) -> Value {
        let mut json = serde_json::json!({
            "readOnly": self.read_only,
            "mutating": self.mutating,
            "control": self.control,
            "idempotent": self.idempotent,
            "openWorld": self.open_world,
        });
        if let Some(kind) = &self.source_kind {
            json["sourceKind"] = Value::from(kind.as_str());
        }
        json
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorError {
    #[error("tool `{id}`: the input schema root must be an object with \"type\": \"object\"")]
    InputSchemaNotObject { id: ToolId },
    #[error("tool `{id}`: the output schema must be a JSON object")]
    OutputSchemaNotObject { id: ToolId },
    #[error("tool `{id}`: annotations must be a JSON object")]
    AnnotationsNotObject { id: ToolId },
}

impl ToolDescriptor {
    /// Check the invariants every source must meet before a descriptor
    /// enters the catalog.
    pub fn validate(&self) -> Result<(), DescriptorError> {
        let id = || self.id.clone();
        let is_object_schema = self
            .input_schema
            .as_object()
            .and_then(|schema| schema.get("type"))
            .is_some_and(|kind| kind == "object");
        if !is_object_schema {
            return Err(DescriptorError::InputSchemaNotObject { id: id() });
        }
        if self
            .output_schema
            .as_ref()
            .is_some_and(|schema| !schema.is_object())
        {
            return Err(DescriptorError::OutputSchemaNotObject { id: id() });
        }
        if !(self.annotations.is_object() || self.annotations.is_null()) {
            return Err(DescriptorError::AnnotationsNotObject { id: id() });
        }
        Ok(())
    }

    /// A boolean annotation, `false` when absent.
    pub fn annotation_flag(&self, key: &str) -> bool {
        self.annotations
            .get(key)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn descriptor(input_schema: Value) -> ToolDescriptor {
        ToolDescriptor {
            id: ToolId::builtin("dice.roll").expect("id"),
            title: None,
            description: Some("Roll dice.".into()),
            input_schema,
            output_schema: None,
            annotations: json!({"readOnly": true}),
        }
    }

    #[test]
    fn input_schema_root_must_be_an_explicit_object() {
        assert!(descriptor(json!({"type": "object"})).validate().is_ok());
        for bad in [
            json!({}),
            json!({"type": "string"}),
            json!(["object"]),
            json!("object"),
        ] {
            assert!(matches!(
                descriptor(bad).validate(),
                Err(DescriptorError::InputSchemaNotObject { .. })
            ));
        }
    }

    #[test]
    fn serializes_camel_case_and_reads_flags() {
        let d = descriptor(json!({"type": "object"}));
        let json = serde_json::to_value(&d).expect("serialize");
        assert_eq!(json["id"], "builtin:dice.roll");
        assert!(json.get("inputSchema").is_some());
        assert!(d.annotation_flag("readOnly"));
        assert!(!d.annotation_flag("mutating"));
    }
}
