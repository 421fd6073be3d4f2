//! `AgentToolCatalogItemDto`: what a profile UI or `toolhost tools list`
//! shows about a tool. It carries no alias and no execution permission:
//! those belong to a snapshot.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{ToolDescriptor, ToolId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolCatalogItemDto {
    pub id: ToolId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub annotations: Value,
    pub input_schema: Value,
    pub source: ToolSourceDto,
}

/// Where the tool's code comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSourceDto {
    /// `builtin`, `extension` or `mcp`.
    pub kind: String,
    /// The component's package or extension id, or the MCP server's name.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Host capabilities granted to it.
    #[serde(default)]
    pub capabilities: Vec<String>,
}

impl AgentToolCatalogItemDto {
    /// A builtin's `{tool:NAME}` references are shown as the aliases
    /// those builtins always get (no snapshot here to look them up in).
    pub fn new(descriptor: &ToolDescriptor, source: ToolSourceDto) -> Self {
        // No profile either: the default message body.
        let refs = crate::snapshot::tool_refs::Refs {
            alias: &|_: &str| None,
            message_body: crate::profile::DEFAULT_MESSAGE_BODY,
        };
        let mut input_schema = descriptor.input_schema.clone();
        let mut description = descriptor.description.clone();
        if descriptor.id.is_builtin() {
            crate::snapshot::tool_refs::render_schema(&mut input_schema, &refs);
            description = description.map(|text| crate::snapshot::tool_refs::render(&text, &refs));
        }
        Self {
            id: descriptor.id.clone(),
            title: descriptor.title.clone(),
            description,
            annotations: descriptor.annotations.clone(),
            input_schema,
            source,
        }
    }
}
