//! The builtin tool set of this version of toolhost, by native name.
//!
//! Profiles are checked against this list when they are read (a typo in
//! `tools.allow` is an error naming the entry, not a silently missing tool),
//! and the snapshot compiler uses it for the return-mode exit policy. Whether
//! a builtin's component is actually shipped in this build is the catalog's
//! business: an allowed builtin without a component is omitted from a
//! snapshot with a diagnostic.

/// Every builtin, in registry order (the order a UI lists them).
pub const BUILTIN_TOOLS: [&str; 19] = [
    "agent.list",
    "agent.delegate",
    "agent.handoff",
    "agent.await",
    "task.return",
    "chat.search",
    "chat.read_messages",
    "worldinfo.read_activated",
    "dice.roll",
    "skill.list",
    "skill.search",
    "skill.read",
    "workspace.list_files",
    "workspace.search_files",
    "workspace.read_file",
    "workspace.write_file",
    "workspace.apply_patch",
    "workspace.commit",
    "workspace.finish",
];

/// Injected by the runtime into return-mode children; a profile may not allow it.
pub const TASK_RETURN: &str = "task.return";

/// Builtins a return-mode child loses: it reports through `task.return`
/// instead of committing, finishing, delegating or handing off.
pub const CHILD_EXCLUDED: [&str; 5] = [
    "workspace.commit",
    "workspace.finish",
    "agent.delegate",
    "agent.handoff",
    "agent.await",
];

pub fn is_builtin(native_name: &str) -> bool {
    BUILTIN_TOOLS.contains(&native_name)
}
