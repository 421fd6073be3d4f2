//! `GET /v1/tools`: the catalog as a profile UI shows it — no alias, no
//! permission (those belong to a run's snapshot) — and what was left out,
//! as the asking tenant may have it: a tool its policies hide (its own
//! `policy.json`, the platform's) or an extension granted only to other
//! tenants' profiles is not listed, as no snapshot of its would offer it.

use std::sync::Arc;

use axum::extract::State;
use axum::{Extension, Json};
use serde::Serialize;
use toolhost_core::policy::{self, Policies, ToolFacts};
use toolhost_core::{AgentToolCatalogItemDto, ToolId};
use toolhost_runtime::ToolHost;

use crate::ServeState;
use crate::error::ApiError;
use crate::tokens::Tenant;

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

/// The catalog, as the tenant may have it.
#[utoipa::path(
    get,
    path = "/v1/tools",
    responses(
        (status = 200, description = "The catalog and its omissions, less what the tenant's policies hide", body = ToolsResponse),
        (status = 401, description = "No or an unknown token", body = crate::error::ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
) -> Result<Json<ToolsResponse>, ApiError> {
    let host = state.host();
    let (policies, _) = state.tenant_dirs(&tenant).policies(&host)?;
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
    let tools = host
        .catalog_items()
        .into_iter()
        .filter(|item| offered_to(&host, &policies, &tenant, &item.id))
        .collect();
    Ok(Json(ToolsResponse { tools, omitted }))
}

/// Whether some profile of `tenant` could be offered `tool`: no policy above
/// every profile hides it (asked of [`policy::decide`], the one place those
/// rules live, as for a profile that allows it), and an extension granted
/// to some profiles only is granted to one of this tenant's.
fn offered_to(host: &ToolHost, policies: &Policies, tenant: &str, tool: &ToolId) -> bool {
    let (decision, _) = policy::decide(
        policies,
        &ToolFacts {
            tool,
            allowed_by_profile: true,
            denied_by_profile: false,
            excluded_for_child: false,
            unavailable: None,
            source_approval: None,
            destructive: false,
            budget: None,
        },
    );
    if !decision.visible {
        return false;
    }
    let sources = host.snapshot_sources();
    match sources
        .restricted_to_profiles
        .get(&tool.provider().to_string())
    {
        Some(granted) => granted
            .iter()
            .any(|profile| profile.tenant.as_deref() == Some(tenant)),
        None => true,
    }
}
