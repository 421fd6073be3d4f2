//! Fixtures shared by the unit tests of several modules.

use serde_json::json;
use uuid::Uuid;

use crate::builtin;
use crate::{ToolCatalog, ToolDescriptor, ToolId};

pub const SERVER: &str = "3f2b8c1e-9a4d-4e2f-8b6a-1c2d3e4f5a6b";

pub fn descriptor(id: &ToolId) -> ToolDescriptor {
    ToolDescriptor {
        id: id.clone(),
        title: None,
        description: Some(format!("The {} tool.", id.native_name())),
        input_schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
        output_schema: None,
        annotations: json!({}),
    }
}

pub fn id(text: &str) -> ToolId {
    ToolId::parse(text).expect("valid tool id")
}

pub fn mcp(native: &str) -> ToolId {
    id(&format!("mcp/{SERVER}:{native}"))
}

pub fn server() -> Uuid {
    Uuid::parse_str(SERVER).expect("uuid")
}

/// A catalog with every builtin of this version plus `extra` tools.
pub fn catalog_with(extra: &[ToolId]) -> ToolCatalog {
    let builtins = builtin::names().map(|name| ToolId::builtin(name).expect("builtin"));
    ToolCatalog::from_descriptors(
        builtins
            .chain(extra.iter().cloned())
            .map(|tool| descriptor(&tool)),
    )
    .expect("catalog")
}
