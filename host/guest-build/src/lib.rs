//! Build guest crates of this workspace into WebAssembly components from a
//! build script, so a plain `cargo build` / `cargo test` at the root has them.
//!
//! A nested `cargo build --target wasm32-wasip2 --profile guest` runs in its
//! own target directory (`<target>/wasm-guests`), shared by debug and release
//! host builds. Each guest declares the capability world it is built for in
//! `[package.metadata.toolhost] world = "..."`; that is returned with the
//! component so the host can grant exactly that world.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use sha2::{Digest, Sha256};

mod table;
pub use table::{BuiltinTool, TOOL_FILE, builtin_tools, render_builtin_table};

pub const GUEST_TARGET: &str = "wasm32-wasip2";
pub const GUEST_PROFILE: &str = "guest";

/// One built component.
#[derive(Debug, Clone)]
pub struct BuiltGuest {
    /// Cargo package name, e.g. `dice-roll`.
    pub package: String,
    /// The world from `[package.metadata.toolhost]`.
    pub world: String,
    pub wasm: PathBuf,
    pub sha256_hex: String,
}

/// Build `packages` (members of the workspace at `workspace_root`) and report
/// what the including build script must watch. Panics with a readable message
/// on failure: this runs inside a build script.
pub fn build_guests(workspace_root: &Path, packages: &[&str]) -> Vec<BuiltGuest> {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let manifest = workspace_root.join("Cargo.toml");
    ensure_target_installed();

    let metadata = cargo_metadata(&cargo, &manifest);
    let mut worlds = Vec::new();
    for package in packages {
        let entry = metadata["packages"]
            .as_array()
            .and_then(|all| all.iter().find(|p| p["name"] == *package))
            .unwrap_or_else(|| panic!("guest package `{package}` is not a workspace member"));
        watch_package(entry);
        let world = entry["metadata"]["toolhost"]["world"]
            .as_str()
            .unwrap_or_else(|| {
                panic!("guest `{package}` must declare [package.metadata.toolhost] world = \"...\"")
            });
        worlds.push(world.to_owned());
    }
    println!(
        "cargo:rerun-if-changed={}",
        workspace_root.join("wit").display()
    );
    // Guests depend on shared crates beside them (the SDK, and the text rules
    // the SDK uses): watch the whole tree, not only each guest's direct deps.
    println!(
        "cargo:rerun-if-changed={}",
        workspace_root.join("guest-tools").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        workspace_root.join("Cargo.lock").display()
    );
    // The `guest` profile lives in the root manifest.
    println!("cargo:rerun-if-changed={}", manifest.display());

    let target_dir = guest_target_dir(workspace_root);
    let mut command = Command::new(&cargo);
    command
        .args([
            "build",
            "--locked",
            "--message-format=json-render-diagnostics",
        ])
        .args(["--target", GUEST_TARGET, "--profile", GUEST_PROFILE])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for package in packages {
        command.args(["-p", package]);
    }
    // Flags meant for the host build must not leak into the wasm build.
    for key in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        command.env_remove(key);
    }
    // Fixed-width SIMD (wasm's `simd128`, on in wasmtime by default and
    // deterministic, unlike relaxed SIMD) lets memchr's substring search run
    // vectorized inside the search and read tools instead of byte by byte.
    command.env(
        "CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS",
        "-Ctarget-feature=+simd128",
    );
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("could not run `{cargo} build` for the guests: {error}"));
    if !output.status.success() {
        panic!(
            "building guest components failed ({}); see the cargo output above",
            output.status
        );
    }

    let artifacts = wasm_artifacts(&output.stdout);
    packages
        .iter()
        .zip(worlds)
        .map(|(package, world)| {
            let crate_name = package.replace('-', "_");
            let wasm = artifacts
                .iter()
                .find(|path| {
                    path.file_stem()
                        .is_some_and(|stem| stem == crate_name.as_str())
                })
                .cloned()
                .unwrap_or_else(|| panic!("cargo built no component for `{package}`"));
            let bytes = std::fs::read(&wasm)
                .unwrap_or_else(|error| panic!("cannot read {}: {error}", wasm.display()));
            BuiltGuest {
                package: (*package).to_owned(),
                world,
                sha256_hex: hex::encode(Sha256::digest(&bytes)),
                wasm,
            }
        })
        .collect()
}

/// Rust source for `pub static <static_name>: &[BuiltinComponent] = &[...];`
/// with one entry per guest (`bytes` via `include_bytes!`), for the including
/// crate to `include!` where a `BuiltinComponent` type with the fields
/// `package`, `world`, `sha256_hex` and `bytes` is in scope.
pub fn render_table(guests: &[BuiltGuest], static_name: &str) -> String {
    let mut source = format!("pub static {static_name}: &[BuiltinComponent] = &[\n");
    for guest in guests {
        let _ = writeln!(
            source,
            "    BuiltinComponent {{ package: {:?}, world: {:?}, sha256_hex: {:?}, bytes: include_bytes!({:?}) }},",
            guest.package,
            guest.world,
            guest.sha256_hex,
            guest.wasm.display().to_string(),
        );
    }
    source.push_str("];\n");
    source
}

fn guest_target_dir(workspace_root: &Path) -> PathBuf {
    let base = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|dir| {
            if dir.is_absolute() {
                dir
            } else {
                workspace_root.join(dir)
            }
        })
        .unwrap_or_else(|| workspace_root.join("target"));
    base.join("wasm-guests")
}

fn cargo_metadata(cargo: &str, manifest: &Path) -> Value {
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("could not run `cargo metadata`: {error}"));
    assert!(output.status.success(), "`cargo metadata` failed");
    serde_json::from_slice(&output.stdout).expect("`cargo metadata` printed invalid JSON")
}

/// Rebuild when the guest or any of its path dependencies (the SDK) changes.
fn watch_package(package: &Value) {
    if let Some(dir) = package["manifest_path"]
        .as_str()
        .and_then(|p| Path::new(p).parent())
    {
        println!("cargo:rerun-if-changed={}", dir.display());
    }
    for dependency in package["dependencies"].as_array().into_iter().flatten() {
        if let Some(path) = dependency["path"].as_str() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

fn wasm_artifacts(stdout: &[u8]) -> Vec<PathBuf> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .flat_map(|message| message["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|name| name.as_str().map(PathBuf::from))
        .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
        .collect()
}

/// A fresh machine may lack the wasm target: install it when rustup is
/// there, otherwise stop with the command to run.
fn ensure_target_installed() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    let installed = sysroot
        .as_ref()
        .is_some_and(|root| root.join("lib/rustlib").join(GUEST_TARGET).is_dir());
    if installed {
        return;
    }
    println!(
        "cargo:warning=installing the {GUEST_TARGET} target with rustup (make setup does this too)"
    );
    let added = Command::new("rustup")
        .args(["target", "add", GUEST_TARGET])
        .status()
        .is_ok_and(|status| status.success());
    assert!(
        added,
        "the {GUEST_TARGET} Rust target is missing; run `rustup target add {GUEST_TARGET}` (or `make setup`)"
    );
}
