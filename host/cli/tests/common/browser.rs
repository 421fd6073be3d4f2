//! The browser tests' shared parts: Debian's chromium and chromium-driver
//! with Selenium in `.venv` (installed by `make setup`; nothing is
//! downloaded at run time), and a child process stopped when dropped.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::repo;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const DRIVER: &str = "/usr/bin/chromedriver";

/// The Python that drives the browser, or — loudly — why the test is
/// skipped: only where the browser or Selenium is not installed.
pub fn browser() -> Option<PathBuf> {
    let python = repo(".venv/bin/python");
    let selenium = python.exists()
        && Command::new(&python)
            .args(["-c", "import selenium"])
            .status()
            .is_ok_and(|status| status.success());
    for (present, what) in [
        (Path::new(CHROMIUM).exists(), CHROMIUM),
        (Path::new(DRIVER).exists(), DRIVER),
        (selenium, "selenium in .venv"),
    ] {
        if !present {
            eprintln!(
                "SKIPPED: {what} is not installed (`make setup` installs it where apt is available)"
            );
            return None;
        }
    }
    Some(python)
}

/// A server process, killed when the test ends however it ends.
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run the browser test `script` (a path in this repository) with `args`
/// and the browser's flags; it must pass, and leave each of `shots` in its
/// screenshots folder (`target/tmp/<folder>`), which is returned.
pub fn run_browser_test<S: AsRef<OsStr>>(
    python: &Path,
    script: &str,
    args: &[S],
    folder: &str,
    shots: &[&str],
) -> PathBuf {
    let screenshots = Path::new(env!("CARGO_TARGET_TMPDIR")).join(folder);
    let output = Command::new(python)
        .arg(repo(script))
        .args(args)
        .args(["--chromium", CHROMIUM, "--driver", DRIVER])
        .arg("--screenshots")
        .arg(&screenshots)
        .output()
        .expect("run the browser test");
    assert!(
        output.status.success(),
        "the browser test failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for shot in shots {
        assert!(screenshots.join(shot).is_file(), "{shot}");
    }
    screenshots
}
