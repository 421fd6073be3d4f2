//! `toolhost ext install DIR` for a development extension (a manifest with
//! a `[build]` table): build its component with the language's own tools,
//! then seal the manifest with the result. The tools' output goes to
//! standard error, so an author sees the build as it runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use toolhost_extensions::{BuildLanguage, BuildRecipe};

/// Build the component `recipe` says how to build, into the manifest's
/// `component` path.
pub(super) fn build(dir: &Path, recipe: &BuildRecipe, component: &Path) -> Result<()> {
    // The tools run inside `dir`: every path they are given is absolute.
    let component = &std::path::absolute(component)
        .with_context(|| format!("resolving {}", component.display()))?;
    eprintln!(
        "building {} ({}) ...",
        dir.display(),
        language_name(recipe.language)
    );
    // A build that writes nothing must not leave the last build's component
    // to be sealed and installed as if it were new.
    match std::fs::remove_file(component) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("removing the old {}", component.display()));
        }
    }
    match recipe.language {
        BuildLanguage::Rust => rust(dir, component),
        BuildLanguage::Js | BuildLanguage::Ts => js(dir),
        BuildLanguage::Python => python(dir, recipe, component),
    }?;
    if !component.is_file() {
        bail!(
            "the build finished but left no component at {} (the manifest's `component`)",
            component.display()
        );
    }
    Ok(())
}

fn language_name(language: BuildLanguage) -> &'static str {
    match language {
        BuildLanguage::Rust => "rust: cargo",
        BuildLanguage::Js => "js: npm, jco",
        BuildLanguage::Ts => "ts: npm, jco",
        BuildLanguage::Python => "python: componentize-py",
    }
}

/// Run `command` in `dir`, its output on our standard error.
fn run(mut command: Command, dir: &Path, what: &str) -> Result<()> {
    command
        .current_dir(dir)
        .stdout(std::io::stderr())
        .stderr(Stdio::inherit());
    let status = command
        .status()
        .with_context(|| format!("starting {what} (is it installed and on PATH?)"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// `cargo build --release --target wasm32-wasip2`; the cdylib cargo reports
/// is copied to the manifest's path when a `CARGO_TARGET_DIR` put it
/// elsewhere.
fn rust(dir: &Path, component: &Path) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(dir)
        .stderr(Stdio::inherit())
        .stdout(Stdio::piped());
    let output = command
        .spawn()
        .context("starting cargo (is Rust installed, with `rustup target add wasm32-wasip2`?)")?
        .wait_with_output()
        .context("waiting for cargo")?;
    if !output.status.success() {
        bail!("cargo build failed ({})", output.status);
    }
    let built = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| {
            message["reason"] == "compiler-artifact"
                && message["target"]["kind"]
                    .as_array()
                    .is_some_and(|kinds| kinds.iter().any(|kind| kind == "cdylib"))
        })
        .flat_map(|message| message["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|name| name.as_str().map(PathBuf::from))
        .rfind(|name| name.extension().is_some_and(|ext| ext == "wasm"))
        .context("cargo built no cdylib .wasm: is the crate's [lib] crate-type [\"cdylib\"]?")?;
    let same = built.canonicalize().ok() == component.canonicalize().ok();
    if !same {
        if let Some(parent) = component.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::copy(&built, component)
            .with_context(|| format!("copying {} to {}", built.display(), component.display()))?;
    }
    Ok(())
}

/// `npm ci` (a lock file) or `npm install` when `node_modules` is missing,
/// then `npm run build`.
fn js(dir: &Path) -> Result<()> {
    let npm = std::env::var_os("NPM").unwrap_or_else(|| "npm".into());
    if !dir.join("node_modules").is_dir() {
        let mut install = Command::new(&npm);
        let verb = if dir.join("package-lock.json").is_file() {
            "ci"
        } else {
            "install"
        };
        install.args([verb, "--no-audit", "--no-fund", "--prefer-offline"]);
        run(install, dir, &format!("npm {verb}"))?;
    }
    let mut build = Command::new(&npm);
    build.args(["run", "build"]);
    run(build, dir, "npm run build")
}

/// componentize-py against the extension's `wit/`, with WASI stubbed (an
/// interpreter would otherwise import `wasi:sockets`, which is refused).
fn python(dir: &Path, recipe: &BuildRecipe, component: &Path) -> Result<()> {
    let componentize =
        std::env::var_os("COMPONENTIZE_PY").unwrap_or_else(|| "componentize-py".into());
    let mut command = Command::new(componentize);
    command
        .args(["-d", "wit", "-w"])
        .arg(recipe.world.as_deref().unwrap_or("extension"))
        .arg("componentize")
        .arg(recipe.module.as_deref().unwrap_or("app"))
        .args(["--stub-wasi", "-p", ".", "-o"])
        .arg(component);
    if let Some(parent) = component.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    run(
        command,
        dir,
        "componentize-py (set $COMPONENTIZE_PY to it, e.g. a checkout's .venv/bin/componentize-py after `make setup`)",
    )
}
