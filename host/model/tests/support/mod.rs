//! The providers' golden fixtures and tool snapshot, and the fake provider.

#![allow(dead_code)]

use std::path::PathBuf;

#[allow(unused_imports)]
pub use toolhost_model::testing::{Canned, serve};

/// The snapshot, turn and request builders of the providers' golden tests.
#[path = "../../../providers/tests/common/mod.rs"]
pub mod golden;

pub fn provider_fixture(provider: &str, name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../providers/tests/fixtures")
        .join(provider)
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
