//! Build every builtin guest crate for wasm32-wasip2 and embed the components.

use std::path::PathBuf;

/// The builtin tools, one guest crate (and one component) each.
const BUILTIN_PACKAGES: &[&str] = &[
    "dice-roll",
    "workspace-list-files",
    "workspace-search-files",
    "workspace-read-file",
    "workspace-write-file",
    "workspace-apply-patch",
    "workspace-commit",
    "workspace-finish",
    "agent-list",
    "agent-delegate",
    "agent-await",
    "agent-handoff",
    "task-return",
    "chat-search",
    "chat-read-messages",
    "worldinfo-read-activated",
    "skill-list",
    "skill-search",
    "skill-read",
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let workspace_root = manifest_dir.join("../..");
    let guests = toolhost_guest_build::build_guests(&workspace_root, BUILTIN_PACKAGES);
    let source = toolhost_guest_build::render_table(&guests, "COMPONENTS");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("builtins.rs");
    std::fs::write(&out, source).expect("write the builtin table");
}
