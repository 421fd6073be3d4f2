//! Diagnostics to the host's log (never shown to the model). The host bounds
//! how much a call may log and drops the rest.

use crate::bindings::toolhost::host::log::{self as host, Level};

pub fn debug(message: &str) {
    host::log(Level::Debug, message);
}

pub fn info(message: &str) {
    host::log(Level::Info, message);
}

pub fn warn(message: &str) {
    host::log(Level::Warn, message);
}

pub fn error(message: &str) {
    host::log(Level::Error, message);
}
