//! Model aliases: the names a provider sees. An alias belongs to a snapshot,
//! never to a ToolId; these are the allocation rules the snapshot compiler
//! applies.
//!
//! Every alias matches `[A-Za-z0-9_-]{1,64}`, the intersection of the
//! providers' function-name rules (OpenAI and Anthropic allow 64 bytes of
//! these characters; Gemini is laxer).
//!
//! - A builtin's alias is its native name with `.` → `_`
//!   (`workspace.read_file` → `workspace_read_file`).
//! - An MCP tool's alias is `mcp__<server>__<tool>` built from the server's
//!   display name and the tool's native name, each normalized to
//!   `[A-Za-z0-9-]` runs joined by single `_`; over 64 bytes the tool (action)
//!   part is kept in preference to the server part.
//! - An extension tool's alias is `ext__<extension-id>__<tool>`, the same way.
//! - A collision gets `__2`, `__3`, … in allocation order, so the same profile
//!   and catalog always give the same aliases.

use std::collections::HashSet;

/// Longest alias, in bytes.
pub const MAX_ALIAS_BYTES: usize = 64;

/// Longest server (or extension) part kept when the alias must be shortened,
/// before it regrows into what the tool part leaves unused.
const SOURCE_SHARE_BYTES: usize = 20;

/// A builtin's alias.
pub fn builtin_alias(native_name: &str) -> String {
    native_name.replace('.', "_")
}

/// Whether `alias` may be sent to every provider.
pub fn is_valid_alias(alias: &str) -> bool {
    !alias.is_empty()
        && alias.len() <= MAX_ALIAS_BYTES
        && alias
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// One part of an external alias: ASCII letters, digits and `-` kept, every
/// other run of characters one `_`, no `_` at either end; `fallback` when
/// nothing is left (a name written only in CJK, say).
pub fn normalize_alias_segment(text: &str, fallback: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    if trimmed.is_empty() {
        fallback.to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// `mcp__<server>__<tool>` for a tool of the MCP server displayed as `server_name`.
pub fn mcp_alias_base(server_name: &str, native_name: &str) -> String {
    prefixed_alias_base("mcp", server_name, "server", native_name)
}

/// `ext__<extension>__<tool>` for a tool of an extension.
pub fn extension_alias_base(extension_id: &str, native_name: &str) -> String {
    prefixed_alias_base("ext", extension_id, "extension", native_name)
}

fn prefixed_alias_base(prefix: &str, source: &str, fallback: &str, native_name: &str) -> String {
    let source = normalize_alias_segment(source, fallback);
    let tool = normalize_alias_segment(native_name, "tool");
    // `<prefix>__` + `__` between the parts.
    let budget = MAX_ALIAS_BYTES - prefix.len() - 4;
    let (source, tool) = if source.len() + tool.len() <= budget {
        (source.as_str(), tool.as_str())
    } else {
        // The action part says what the call does: keep it first, give the
        // source a fixed share, then let the source regrow into any leftover.
        let source_share = source.len().min(SOURCE_SHARE_BYTES);
        let tool_len = tool.len().min(budget - source_share);
        let source_len = source.len().min(budget - tool_len);
        (cut(&source, source_len), cut(&tool, tool_len))
    };
    format!("{prefix}__{source}__{tool}")
}

/// The first `len` bytes of an already normalized (ASCII) segment, without a
/// dangling `_` that would blur the `__` separators.
fn cut(segment: &str, len: usize) -> &str {
    let end = segment
        .char_indices()
        .map(|(at, c)| at + c.len_utf8())
        .take_while(|end| *end <= len)
        .last()
        .unwrap_or(0);
    let cut = segment[..end].trim_end_matches('_');
    if cut.is_empty() { &segment[..end] } else { cut }
}

/// Hands out unique aliases for one snapshot.
#[derive(Debug, Default, Clone)]
pub struct AliasAllocator {
    used: HashSet<String>,
}

impl AliasAllocator {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserve an alias someone else already holds (the builtins of a
    /// profile, `task_return`), so external tools never take it. Returns
    /// false when it was taken already.
    pub fn reserve(&mut self, alias: &str) -> bool {
        self.used.insert(alias.to_owned())
    }

    /// A unique alias for `base`: characters outside `[A-Za-z0-9_-]` become
    /// `_`, the result is cut to 64 bytes, and on collision `__2`, `__3`, …
    /// replaces the end.
    pub fn allocate(&mut self, base: &str) -> String {
        let sanitized: String = base
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let first = truncate_bytes(&sanitized, MAX_ALIAS_BYTES).to_owned();
        if self.used.insert(first.clone()) {
            return first;
        }
        (2u64..)
            .map(|n| {
                let suffix = format!("__{n}");
                format!(
                    "{}{suffix}",
                    truncate_bytes(&sanitized, MAX_ALIAS_BYTES - suffix.len())
                )
            })
            .find(|candidate| self.used.insert(candidate.clone()))
            .unwrap_or_default() // unreachable: there are finitely many used aliases
    }
}

fn truncate_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Aliases as a model-facing list: `` `a`, `b` `` (empty for none).
pub fn code_list<'a>(aliases: impl IntoIterator<Item = &'a str>) -> String {
    aliases
        .into_iter()
        .map(|alias| format!("`{alias}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_dots_become_underscores() {
        assert_eq!(builtin_alias("workspace.read_file"), "workspace_read_file");
        assert_eq!(builtin_alias("dice.roll"), "dice_roll");
        assert!(is_valid_alias(&builtin_alias("worldinfo.read_activated")));
    }

    #[test]
    fn mcp_alias_follows_the_reference_example() {
        assert_eq!(
            mcp_alias_base("my server", "issue.create"),
            "mcp__my_server__issue_create"
        );
        assert_eq!(
            mcp_alias_base("  GitHub (work) ", "search::exact"),
            "mcp__GitHub_work__search_exact"
        );
        assert_eq!(normalize_alias_segment("a--b", "x"), "a--b");
        assert_eq!(normalize_alias_segment("___", "server"), "server");
    }

    #[test]
    fn names_without_ascii_fall_back() {
        assert_eq!(mcp_alias_base("知识库", "搜索"), "mcp__server__tool");
        assert_eq!(extension_alias_base("acme", "天气"), "ext__acme__tool");
    }

    #[test]
    fn long_aliases_keep_the_action_part() {
        let server = "a-very-long-server-display-name-that-goes-on-and-on";
        let tool = "create_issue_with_labels";
        let alias = mcp_alias_base(server, tool);
        assert!(alias.len() <= MAX_ALIAS_BYTES, "{alias} is {}", alias.len());
        assert!(is_valid_alias(&alias));
        assert!(alias.ends_with(&format!("__{tool}")), "{alias}");
        assert!(alias.starts_with("mcp__a-very-long-server"), "{alias}");

        // A short tool leaves room: the server part regrows into it.
        let alias = mcp_alias_base(&"s".repeat(70), "get");
        assert_eq!(alias, format!("mcp__{}__get", "s".repeat(54)));
        assert_eq!(alias.len(), MAX_ALIAS_BYTES);

        // A huge tool name still leaves the server its share.
        let alias = mcp_alias_base("issues", &"x".repeat(300));
        assert_eq!(alias.len(), MAX_ALIAS_BYTES);
        assert!(alias.starts_with("mcp__issues__x"));
    }

    #[test]
    fn a_cut_never_leaves_a_dangling_underscore() {
        let alias = mcp_alias_base("abcdefghijklmnopqrs_tuvwxyz", &"t".repeat(60));
        assert!(alias.starts_with("mcp__abcdefghijklmnopqrs__t"), "{alias}");
        assert!(!alias.contains("___"), "{alias}");
    }

    #[test]
    fn collisions_get_numbered_suffixes_in_order() {
        let mut aliases = AliasAllocator::new();
        assert!(aliases.reserve("dice_roll"));
        assert_eq!(aliases.allocate("dice_roll"), "dice_roll__2");
        assert_eq!(aliases.allocate("dice_roll"), "dice_roll__3");
        assert_eq!(aliases.allocate("other"), "other");
    }

    #[test]
    fn suffixes_fit_in_64_bytes() {
        let mut aliases = AliasAllocator::new();
        let base = "m".repeat(80);
        let first = aliases.allocate(&base);
        let second = aliases.allocate(&base);
        assert_eq!(first.len(), 64);
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("__2"));
        assert_ne!(first, second);
    }

    #[test]
    fn cjk_tool_names_on_one_server_stay_unique() {
        // The reference's test: 80 and 81 times 界 both normalize to the
        // fallback, so the second gets a suffix.
        let mut aliases = AliasAllocator::new();
        let first = aliases.allocate(&mcp_alias_base("srv", &"界".repeat(80)));
        let second = aliases.allocate(&mcp_alias_base("srv", &"界".repeat(81)));
        assert_eq!(first, "mcp__srv__tool");
        assert_eq!(second, "mcp__srv__tool__2");
        assert!(is_valid_alias(&first) && is_valid_alias(&second));
    }

    #[test]
    fn allocation_sanitizes_anything() {
        let mut aliases = AliasAllocator::new();
        let alias = aliases.allocate("we.ird name/界");
        assert_eq!(alias, "we_ird_name__");
        assert!(is_valid_alias(&alias));
    }
}
