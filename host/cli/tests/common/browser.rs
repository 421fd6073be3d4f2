//! The browser tests' shared parts: Debian's chromium and chromium-driver
//! with Selenium in `.venv` (installed by `make setup`; nothing is
//! downloaded at run time), and a child process stopped when dropped.

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
