//! `GET /v1/tools`: the catalog as a profile UI shows it — no alias, no
//! permission (those belong to a run's snapshot) — and what was left out.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use toolhost_core::AgentToolCatalogItemDto;

use crate::ServeState;

/// The tools this server offers, and the ones it could not.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ToolsResponse {
    /// In catalog order: `id`, `title`, `description`, `annotations`,
    /// `inputSchema`, `source` (`kind`, `name`, `sha256`, `capabilities`).
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<AgentToolCatalogItemDto>,
    pub omitted: Vec<OmittedTool>,
}

/// A tool or a whole source left out of the catalog.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OmittedTool {
    /// `mcp` or `extension`.
    pub kind: &'static str,
    /// The MCP server's name or the extension's id.
    pub source: String,
    /// The tool; none when the whole source was left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub code: &'static str,
    pub reason: String,
}

/// The catalog.
#[utoipa::path(
    get,
    path = "/v1/tools",
    responses(
        (status = 200, description = "The catalog and its omissions", body = ToolsResponse),
        (status = 401, description = "No or an unknown token", body = crate::error::ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list(State(state): State<Arc<ServeState>>) -> Json<ToolsResponse> {
    let host = state.host();
    let omitted = host
        .mcp_omitted()
        .iter()
        .map(|omitted| OmittedTool {
            kind: "mcp",
            source: omitted.server.clone(),
            tool: omitted.tool.clone(),
            code: omitted.code,
            reason: omitted.reason.clone(),
        })
        .chain(host.extension_omitted().iter().map(|omitted| OmittedTool {
            kind: "extension",
            source: omitted.id.clone(),
            tool: None,
            code: omitted.code,
            reason: omitted.reason.clone(),
        }))
        .collect();
    Json(ToolsResponse {
        tools: host.catalog_items(),
        omitted,
    })
}
