//! Generate the table of builtins from each builtin's `tool.json`
//! (`guest-tools/<package>/tool.json`): names, flags and descriptors, no
//! wasm build needed.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let tools = toolhost_guest_build::builtin_tools(&manifest_dir.join("../.."));
    let source = toolhost_guest_build::render_builtin_table(&tools, "BUILTINS");
    let out =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("builtin_table.rs");
    std::fs::write(&out, source).expect("write the builtin table");
}
