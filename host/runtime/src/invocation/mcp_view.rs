//! An MCP result too long to read inline becomes a readable view: the
//! whole text in `tool-results/<call>.view.txt`, a preview for the model.

use serde_json::json;
use toolhost_core::{AgentToolResult, ToolId};

use super::{Invocation, MCP_PREVIEW_CHARS};
use crate::failure::RunFailure;

impl Invocation {
    /// An MCP result longer than the inline limit: the whole text goes to
    /// `tool-results/<call>.view.txt` (create-only, readable by every
    /// invocation), its over-long lines hard-wrapped so that line windows
    /// reach all of it ([`readable_view`](crate::readable_view)), and the
    /// model reads a preview, the size and how to read the rest with this
    /// snapshot's tools. The structured result stays the full, exact audit
    /// fact.
    pub(super) fn externalize_mcp_result(
        &self,
        mut result: AgentToolResult,
    ) -> Result<AgentToolResult, RunFailure> {
        let is_mcp = matches!(
            result.tool_id.provider(),
            toolhost_core::ToolProvider::Mcp(_)
        );
        let chars = result.content.chars().count();
        if !is_mcp || chars <= self.mcp_inline_limit {
            return Ok(result);
        }
        let stem = toolhost_journal::audit_stem(&result.call_id);
        let path = format!("tool-results/{stem}.view.txt");
        let view =
            crate::readable_view::hard_wrap(&result.content, crate::readable_view::VIEW_LINE_CHARS);
        self.run.dir().write_create_only(&path, view.as_bytes())?;
        let alias = |native: &str| {
            ToolId::builtin(native)
                .ok()
                .and_then(|id| self.snapshot.binding(&id).map(|b| b.model_alias.clone()))
        };
        let how = match (
            alias("workspace.read_file"),
            alias("workspace.search_files"),
        ) {
            (Some(read), Some(search)) => {
                format!("Read it in parts with {read} (path `{path}`), or search it with {search}.")
            }
            (Some(read), None) => format!("Read it in parts with {read} (path `{path}`)."),
            (None, Some(search)) => format!("Search it with {search} (path `{path}`)."),
            (None, None) => {
                "No workspace reading tool is offered to you, so only this preview is readable."
                    .to_owned()
            }
        };
        let shown = MCP_PREVIEW_CHARS.min(self.mcp_inline_limit);
        let preview: String = result.content.chars().take(shown).collect();
        result.content = format!(
            "The result has {chars} characters, more than the {} shown inline, so it was saved to `{path}`. {how}\n\n## Prefix preview\n{preview}",
            self.mcp_inline_limit
        );
        let audit_path = format!("tool-results/{stem}.json");
        let full = std::mem::take(&mut result.structured);
        result.structured = json!({
            "externalized": true,
            "path": path,
            "auditPath": audit_path,
            "charCount": chars,
            "charLimit": self.mcp_inline_limit,
            "result": full,
        });
        result.resource_refs.push(format!("workspace:{path}"));
        result.resource_refs.push(format!("workspace:{audit_path}"));
        Ok(result)
    }
}
