//! Tries every ambient authority WASI could hand a guest: files (`secret_path`
//! to read, `write_path` to create, the root directory), environment
//! variables, arguments and the working directory. Reports what it got.
use serde_json::json;
use toolhost_guest::{Arguments, Descriptor, Output, Tool, ToolError};

struct WasiProbe;

fn outcome<T: std::fmt::Debug>(result: std::io::Result<T>) -> serde_json::Value {
    match result {
        Ok(value) => json!({ "ok": format!("{value:?}") }),
        Err(error) => json!({ "error": error.to_string() }),
    }
}

impl Tool for WasiProbe {
    fn describe() -> Descriptor {
        Descriptor::new("hostile.wasi_probe", "Probes WASI for ambient authority.")
    }

    fn call(args: Arguments) -> Result<Output, ToolError> {
        let secret = args.optional_str("secret_path")?.unwrap_or("/etc/passwd");
        let target = args
            .optional_str("write_path")?
            .unwrap_or("/tmp/toolhost-wasi-probe");
        let report = json!({
            "read_secret": outcome(std::fs::read_to_string(secret)),
            "write_file": outcome(std::fs::write(target, b"escaped")),
            "list_root": outcome(std::fs::read_dir("/").map(|dir| dir.count())),
            "list_cwd": outcome(std::fs::read_dir(".").map(|dir| dir.count())),
            "current_dir": outcome(std::env::current_dir()),
            "env_vars": std::env::vars().collect::<Vec<_>>(),
            "args": std::env::args().collect::<Vec<_>>(),
        });
        Ok(Output::text(report.to_string()).structured(report))
    }
}

toolhost_guest::export_tool!(WasiProbe);
