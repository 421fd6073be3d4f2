//! What the CLI's test files share.

#![allow(dead_code)] // each test binary uses its own share

pub mod browser;
pub mod loopback;
pub mod serve;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

/// `path` in this repository.
pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// `toolhost` working in `dir`, with its cache there and its extensions in
/// `dir/extensions`; the machine's own configuration (MCP servers, a
/// policy, the log and runs settings) left out.
pub fn toolhost_in(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command
        .current_dir(dir)
        .arg("--cache-dir")
        .arg(dir)
        .env("TOOLHOST_EXT_DIR", dir.join("extensions"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env_remove("TOOLHOST_POLICY")
        .env_remove("TOOLHOST_MCP_DIR")
        .env_remove("TOOLHOST_LOG")
        .env_remove("TOOLHOST_RUNS_DIR");
    command
}

/// Profile `id` written to `dir/{id}.json`: `body`'s fields (its tools,
/// delegation, sandbox) after the header every profile starts with.
pub fn profile_file(dir: &Path, id: &str, body: Value) -> PathBuf {
    let mut profile = json!({"schemaVersion": 1, "kind": "toolhost.agentProfile", "id": id});
    for (field, value) in body.as_object().expect("profile fields") {
        profile[field] = value.clone();
    }
    let path = dir.join(format!("{id}.json"));
    std::fs::write(&path, profile.to_string()).expect("profile");
    path
}

/// Whether `program` runs here (`program --version` succeeds): a test
/// that needs it is skipped, loudly, where it does not.
pub fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The arguments that make the Rust template extension `acme-repeat`
/// (tool `text.repeat`) in the folder of the same name.
pub const NEW_ACME_REPEAT: [&str; 7] = [
    "ext",
    "new",
    "acme-repeat",
    "--tool",
    "text.repeat",
    "--dir",
    "acme-repeat",
];

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The venv's python, with `modules` importable (installed from
/// `tests/peers/python/requirements.txt` if they are not), or `None` —
/// the test is skipped, loudly — when this machine has no python3.
pub fn python(modules: &[&str]) -> Option<PathBuf> {
    let python = repo(".venv/bin/python");
    let importable = |module: &&str| {
        python.exists()
            && Command::new(&python)
                .args(["-c", &format!("import {module}")])
                .status()
                .is_ok_and(|status| status.success())
    };
    if modules.iter().all(importable) {
        return Some(python);
    }
    if !installed("python3") {
        eprintln!("SKIPPED: python3 is not installed, so the Python client test cannot run");
        return None;
    }
    if !python.exists() {
        let venv = Command::new("python3")
            .args(["-m", "venv"])
            .arg(repo(".venv"))
            .status()
            .expect("venv");
        assert!(venv.success());
    }
    let pip = Command::new(repo(".venv/bin/pip"))
        .args(["install", "--quiet", "-r"])
        .arg(repo("tests/peers/python/requirements.txt"))
        .status()
        .expect("pip");
    assert!(
        pip.success(),
        "installing the Python clients from PyPI failed"
    );
    Some(python)
}

/// Build the crate `toolhost ext new` made at `crate_dir` (its package
/// `package`) for wasm32-wasip2 and put the component where its manifest
/// says. The versions are this repository's (its lock file) and the target
/// directory is shared between tests and test runs, so the suite needs no
/// newer crate and compiles the SDK once.
/// One cargo target directory for every build of a template extension, so
/// the SDK and its dependencies compile once per test run.
pub fn template_target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("ext-template-target")
}

pub fn build_template_extension(crate_dir: &Path, package: &str) {
    std::fs::copy(repo("Cargo.lock"), crate_dir.join("Cargo.lock")).expect("lock");
    let target_dir = template_target_dir();
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .current_dir(crate_dir)
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", &target_dir);
    for key in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        build.env_remove(key);
    }
    let status = build.status().expect("run cargo");
    assert!(status.success(), "the template builds");
    let wasm = format!("{}.wasm", package.replace('-', "_"));
    let built = target_dir.join("wasm32-wasip2/release").join(&wasm);
    let expected = crate_dir.join("target/wasm32-wasip2/release");
    std::fs::create_dir_all(&expected).expect("target dir");
    std::fs::copy(&built, expected.join(&wasm)).expect("component where the manifest says");
}

/// Whether `make setup` installed the JavaScript toolchain (the fetch-js
/// example's npm packages). Missing in CI is a failure; elsewhere the test
/// says it skips.
pub fn js_toolchain() -> bool {
    let jco = repo("examples/extensions/fetch-js/node_modules/.bin/jco");
    if jco.is_file() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing although CI ran make setup",
        jco.display()
    );
    eprintln!("SKIPPED: {} is missing (run `make setup`)", jco.display());
    false
}
