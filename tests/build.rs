//! Build the hostile guests of tests/guests/ into components for the suite.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let workspace_root = manifest_dir.join("..");
    let mut packages: Vec<String> = std::fs::read_dir(manifest_dir.join("guests"))
        .expect("tests/guests exists")
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("Cargo.toml").is_file())
        .map(|entry| format!("hostile-{}", entry.file_name().to_string_lossy()))
        .collect();
    packages.sort();
    let names: Vec<&str> = packages.iter().map(String::as_str).collect();
    let guests = toolhost_guest_build::build_guests(&workspace_root, &names);
    let source = toolhost_guest_build::render_table(&guests, "GUESTS");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets it")).join("guests.rs");
    std::fs::write(out, source).expect("write the guest table");
    println!(
        "cargo:rerun-if-changed={}",
        manifest_dir.join("guests").display()
    );
}
