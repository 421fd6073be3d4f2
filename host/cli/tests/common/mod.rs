//! What the CLI's test files share.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
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
    let have_python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !have_python {
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
