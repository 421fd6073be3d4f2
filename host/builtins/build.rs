//! Build every builtin guest crate for wasm32-wasip2 and embed the components.
//! A builtin is a guest crate with a `tool.json` (see
//! `toolhost_guest_build::builtin_tools`): nothing here lists them.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let workspace_root = manifest_dir.join("../..");
    let tools = toolhost_guest_build::builtin_tools(&workspace_root);
    let packages: Vec<&str> = tools.iter().map(|tool| tool.package.as_str()).collect();
    let guests = toolhost_guest_build::build_guests(&workspace_root, &packages);
    let source = toolhost_guest_build::render_table(&guests, "COMPONENTS");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("builtins.rs");
    std::fs::write(&out, source).expect("write the builtin table");
}
