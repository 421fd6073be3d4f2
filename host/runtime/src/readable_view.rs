//! The readable view of an externalized MCP result
//! (`tool-results/<call>.view.txt`): the projected text with every
//! over-long physical line hard-wrapped, so all of it is reachable with
//! `workspace.read_file` line windows. The exact result stays in the JSON
//! audit (`tool-results/<call>.json`); only this view is wrapped (seed §7).
//!
//! [`ResultViews`] is what the MCP executor is given of its invocation to
//! make one: the profile's inline limit, the snapshot's reading tools, and
//! where the run keeps views.

use std::sync::Arc;

use serde_json::json;
use toolhost_core::{AgentToolResult, InvocationToolSnapshot, ToolId};
use toolhost_journal::AuditError;

/// Characters of an externalized MCP result the model still reads inline
/// (fewer when the inline limit is lower).
pub const MCP_PREVIEW_CHARS: usize = 3_000;

/// Where a run keeps the readable views of its calls' results.
pub trait ViewStore: Send + Sync {
    /// Store `bytes` at the run-relative `path`, create-only.
    fn store_view(&self, path: &str, bytes: &[u8]) -> Result<(), AuditError>;
}

/// How an invocation's long MCP results become readable views.
pub struct ResultViews {
    /// `tools.mcpResultInlineCharLimit`: longer results are externalized.
    inline_limit: usize,
    /// The snapshot's aliases of `workspace.read_file` and
    /// `workspace.search_files`, which the model reads a view with.
    read_with: Option<String>,
    search_with: Option<String>,
    store: Arc<dyn ViewStore>,
}

impl std::fmt::Debug for ResultViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultViews")
            .field("inline_limit", &self.inline_limit)
            .field("read_with", &self.read_with)
            .field("search_with", &self.search_with)
            .finish_non_exhaustive()
    }
}

impl ResultViews {
    /// For an invocation of `snapshot` whose profile allows `inline_limit`
    /// characters inline (at least 1), stored in `store`.
    pub fn new(
        snapshot: &InvocationToolSnapshot,
        inline_limit: u32,
        store: Arc<dyn ViewStore>,
    ) -> Self {
        let alias = |native: &str| {
            ToolId::builtin(native)
                .ok()
                .and_then(|id| snapshot.binding(&id).map(|b| b.model_alias.clone()))
        };
        Self {
            inline_limit: inline_limit.max(1) as usize,
            read_with: alias("workspace.read_file"),
            search_with: alias("workspace.search_files"),
            store,
        }
    }

    /// A result longer than the inline limit: the whole text goes to
    /// `tool-results/<call>.view.txt` (create-only, readable by every
    /// invocation), its over-long lines hard-wrapped so that line windows
    /// reach all of it, and the model reads a preview, the size and how to
    /// read the rest with this snapshot's tools. The structured result
    /// stays the full, exact audit fact.
    pub fn externalize(&self, mut result: AgentToolResult) -> Result<AgentToolResult, AuditError> {
        let chars = result.content.chars().count();
        if chars <= self.inline_limit {
            return Ok(result);
        }
        let stem = toolhost_journal::audit_stem(&result.call_id);
        let path = format!("tool-results/{stem}.view.txt");
        let view = hard_wrap(&result.content, VIEW_LINE_CHARS);
        self.store.store_view(&path, view.as_bytes())?;
        let how = match (&self.read_with, &self.search_with) {
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
        let shown = MCP_PREVIEW_CHARS.min(self.inline_limit);
        let preview: String = result.content.chars().take(shown).collect();
        result.content = format!(
            "The result has {chars} characters, more than the {} shown inline, so it was saved to `{path}`. {how}\n\n## Prefix preview\n{preview}",
            self.inline_limit
        );
        let audit_path = format!("tool-results/{stem}.json");
        let full = std::mem::take(&mut result.structured);
        result.structured = json!({
            "externalized": true,
            "path": path,
            "auditPath": audit_path,
            "charCount": chars,
            "charLimit": self.inline_limit,
            "result": full,
        });
        result.resource_refs.push(format!("workspace:{path}"));
        result.resource_refs.push(format!("workspace:{audit_path}"));
        Ok(result)
    }
}

/// Widest line of a readable view, in characters. `workspace.read_file`
/// shows at most 80,000 characters per call (`MAX_READ_CHARS`,
/// `guest-tools/text/src/lines.rs`) and clips a longer single line, which a
/// one-line 2 MB JSON result would be; at 3,000 (the reference's width) one
/// read still shows about 26 wrapped lines, and a window never cuts a line.
pub const VIEW_LINE_CHARS: usize = 3_000;

/// `text` with each line longer than `width` characters (at least 1) split
/// into lines of `width` characters, the last one shorter; a split never
/// falls inside a UTF-8 character. Removing the inserted newlines gives back
/// `text`; lines within `width` are kept as they are. Linear in `text`.
pub fn hard_wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    let mut out = String::with_capacity(text.len() + text.len() / width + 1);
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let mut chars = 0;
        for (offset, ch) in line.char_indices() {
            if chars == width {
                // `offset` is a character boundary: `line` is split there.
                debug_assert!(line.is_char_boundary(offset));
                out.push('\n');
                chars = 0;
            }
            out.push(ch);
            chars += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use toolhost_core::ToolId;

    use super::*;

    /// Keeps what it is asked to store.
    #[derive(Default)]
    struct Kept(Mutex<Vec<(String, Vec<u8>)>>);

    impl ViewStore for Kept {
        fn store_view(&self, path: &str, bytes: &[u8]) -> Result<(), AuditError> {
            self.0
                .lock()
                .expect("kept")
                .push((path.to_owned(), bytes.to_vec()));
            Ok(())
        }
    }

    fn result(content: &str) -> AgentToolResult {
        AgentToolResult {
            call_id: "call_1".into(),
            tool_id: ToolId::parse("mcp/00000000-0000-0000-0000-000000000001:echo").expect("id"),
            content: content.into(),
            structured: json!({"echo": content}),
            is_error: false,
            error_code: None,
            resource_refs: Vec::new(),
        }
    }

    fn views(store: Arc<Kept>, read_with: Option<&str>) -> ResultViews {
        ResultViews {
            inline_limit: 10,
            read_with: read_with.map(str::to_owned),
            search_with: None,
            store,
        }
    }

    #[test]
    fn a_result_within_the_limit_is_left_inline() {
        let store = Arc::new(Kept::default());
        let kept = views(Arc::clone(&store), None)
            .externalize(result("short"))
            .expect("kept");
        assert_eq!(kept, result("short"));
        assert!(store.0.lock().expect("kept").is_empty());
    }

    #[test]
    fn a_long_result_goes_to_its_view_and_the_model_reads_a_preview() {
        let store = Arc::new(Kept::default());
        let long = "0123456789abcdef";
        let shown = views(Arc::clone(&store), Some("workspace_read_file"))
            .externalize(result(long))
            .expect("externalized");
        let stem = toolhost_journal::audit_stem("call_1");
        let path = format!("tool-results/{stem}.view.txt");
        assert_eq!(
            store.0.lock().expect("kept").as_slice(),
            [(path.clone(), long.as_bytes().to_vec())]
        );
        assert!(
            shown.content.starts_with(&format!(
                "The result has 16 characters, more than the 10 shown inline, so it was saved to `{path}`. Read it in parts with workspace_read_file (path `{path}`)."
            )),
            "{}",
            shown.content
        );
        assert!(shown.content.ends_with("## Prefix preview\n0123456789"));
        assert_eq!(shown.structured["externalized"], true);
        assert_eq!(shown.structured["result"], json!({"echo": long}));
        assert_eq!(shown.resource_refs.len(), 2);
    }

    #[test]
    fn long_lines_are_cut_at_the_width_and_short_ones_kept() {
        assert_eq!(hard_wrap("abcdefg\nhi\n", 3), "abc\ndef\ng\nhi\n");
        assert_eq!(hard_wrap("abcdef", 3), "abc\ndef");
        assert_eq!(hard_wrap("", 3), "");
        assert_eq!(hard_wrap("\n\n", 3), "\n\n");
        assert_eq!(hard_wrap("ab", 0), "a\nb", "a width of 0 counts as 1");
    }

    #[test]
    fn a_split_never_falls_inside_a_character() {
        // Two-, three- and four-byte characters: widths count characters.
        let text = "ÄéΩ語文字😀🙂x".repeat(5);
        let wrapped = hard_wrap(&text, 4);
        for line in wrapped.lines() {
            assert!(line.chars().count() <= 4, "{line}");
        }
        assert_eq!(wrapped.replace('\n', ""), text);
    }

    #[test]
    fn a_two_megabyte_line_becomes_lines_of_the_view_width() {
        let text = format!("{{\"rows\":[{}]}}", "{\"k\":\"värde\"},".repeat(140_000));
        assert!(text.len() > 2_000_000 && !text.contains('\n'));
        let wrapped = hard_wrap(&text, VIEW_LINE_CHARS);
        let lines: Vec<&str> = wrapped.split('\n').collect();
        assert_eq!(lines.len(), text.chars().count().div_ceil(VIEW_LINE_CHARS));
        assert!(
            lines
                .iter()
                .all(|line| line.chars().count() <= VIEW_LINE_CHARS)
        );
        assert_eq!(lines.concat(), text);
    }
}
