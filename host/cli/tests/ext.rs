//! An extension author's path through the `toolhost` binary, as
//! docs/extensions.md tells it: a Rust extension from `toolhost ext new`, and
//! the Python example built with componentize-py; each is built, sealed,
//! installed, granted and called.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `toolhost` with its cache, extensions and runs inside `home`.
fn toolhost(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .current_dir(home)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(args)
        .env("TOOLHOST_EXT_DIR", home.join("extensions"))
        .env("TOOLHOST_MCP_DIR", home.join("mcp"))
        .env_remove("TOOLHOST_LOG")
        .env_remove("TOOLHOST_RUNS_DIR")
        .output()
        .expect("run toolhost")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Run `toolhost`, expecting `code`; returns stdout and stderr.
fn expect_output(home: &Path, args: &[&str], code: i32) -> (String, String) {
    let output = toolhost(home, args);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(code),
        "toolhost {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    (stdout, stderr)
}

/// Run `toolhost`, expecting `code`; returns stdout.
fn expect(home: &Path, args: &[&str], code: i32) -> String {
    expect_output(home, args, code).0
}

/// Run `toolhost`, expecting `code` and `needle` on stderr.
fn expect_stderr(home: &Path, args: &[&str], code: i32, needle: &str) {
    let (_, stderr) = expect_output(home, args, code);
    assert!(stderr.contains(needle), "toolhost {args:?}: {stderr}");
}

/// The repository's componentize-py, or `None` (the test skips) outside CI
/// when `make setup` has not installed it.
fn componentize_py() -> Option<PathBuf> {
    let componentize = repository().join(".venv/bin/componentize-py");
    if componentize.is_file() {
        return Some(componentize);
    }
    // CI runs `make setup`, which installs it: missing there is a failure.
    assert!(
        std::env::var_os("CI").is_none(),
        "{} is missing although CI ran make setup",
        componentize.display()
    );
    eprintln!(
        "SKIPPED: {} is missing (run `make setup`)",
        componentize.display()
    );
    None
}

fn installed(home: &Path) -> Value {
    serde_json::from_str(&expect(home, &["ext", "list", "--json"], 0)).expect("json")
}

/// The template shows every capability an extension may ask for, read from
/// the capability table itself: a capability added to the table reaches
/// authors without anyone editing the template.
#[test]
fn the_template_lists_every_capability_an_extension_may_ask_for() {
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    expect(home, &["ext", "new", "acme-list", "--dir", "acme-list"], 0);
    let manifest =
        std::fs::read_to_string(home.join("acme-list/toolhost-extension.toml")).expect("manifest");
    let listed: Vec<&str> = manifest
        .lines()
        .find_map(|line| line.strip_prefix("# capabilities = ["))
        .and_then(|list| list.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no list of capabilities in\n{manifest}"))
        .split(", ")
        .map(|name| name.trim_matches('"'))
        .collect();
    let table: Vec<&str> = toolhost_core::Capability::ALL
        .iter()
        .filter(|capability| capability.refused_to_extensions().is_none())
        .map(|capability| capability.name())
        .collect();
    assert_eq!(listed, table, "{manifest}");
    // What it asks for by default is one of them, and the manifest is valid
    // as written (`ext install` reads it the same way).
    toolhost_extensions::Manifest::load(&home.join("acme-list")).expect("a valid manifest");
}

#[test]
fn a_rust_extension_from_the_template_is_built_sealed_installed_granted_and_called() {
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    let crate_dir = home.join("acme-repeat");
    let created = expect(home, &common::NEW_ACME_REPEAT, 0);
    assert!(
        created.contains("cargo build --release --target wasm32-wasip2"),
        "{created}"
    );
    for file in ["Cargo.toml", "src/lib.rs", "toolhost-extension.toml"] {
        assert!(crate_dir.join(file).is_file(), "{file}");
    }
    // A manifest's words reach a terminal: give it an escape sequence that
    // clears the screen, a forged line and a bidi override.
    let manifest = crate_dir.join("toolhost-extension.toml");
    let spoofed = std::fs::read_to_string(&manifest)
        .expect("manifest")
        .replace(
            "description = \"Repeat a text a few times.\"",
            "description = \"Repeat a text.\\u001b[2J\\nFAKE LINE\\u202e\"",
        );
    std::fs::write(&manifest, spoofed).expect("spoofed manifest");
    // An existing crate is never overwritten.
    expect_stderr(
        home,
        &["ext", "new", "acme-repeat", "--dir", "acme-repeat"],
        2,
        "exists and is not empty",
    );
    expect_stderr(
        home,
        &["ext", "new", "acme.repeat"],
        2,
        "cannot name a Cargo package",
    );

    // The build an author runs.
    common::build_template_extension(&crate_dir, "acme-repeat");

    // Unsealed, the manifest's placeholder digest does not match.
    expect_stderr(
        home,
        &["ext", "install", "acme-repeat"],
        2,
        "ext.sha256_mismatch",
    );

    let sealed = expect(home, &["ext", "seal", "acme-repeat"], 0);
    assert!(sealed.contains("sha256"), "{sealed}");
    let install = expect(home, &["ext", "install", "acme-repeat"], 0);
    assert!(
        install.contains("installed acme-repeat 0.1.0 (disabled)"),
        "{install}"
    );
    assert_eq!(installed(home)[0]["grant"], Value::Null);

    // Installed but not granted: not callable, and the catalog says why.
    let not_in_catalog = "no tool `text.repeat` in the catalog";
    expect_stderr(
        home,
        &["call", "text.repeat", r#"{"text":"ab"}"#],
        2,
        not_in_catalog,
    );
    expect_stderr(home, &["tools", "list"], 0, "omitted extension acme-repeat");

    let granted = expect(home, &["ext", "grant", "acme-repeat"], 0);
    assert!(granted.contains("for every profile"), "{granted}");
    let answer = expect(
        home,
        &[
            "call",
            "ext/acme-repeat:text.repeat",
            r#"{"text":"ab","times":3}"#,
        ],
        0,
    );
    assert_eq!(answer.trim(), "ababab");
    // A tool error is exit 1, its text on stdout.
    let refused = expect(
        home,
        &["call", "text.repeat", r#"{"text":"ab","times":"3"}"#],
        1,
    );
    assert!(
        refused.contains("tool.invalid_arguments: times: invalid type"),
        "{refused}"
    );

    let info = expect(home, &["ext", "info", "acme-repeat"], 0);
    assert!(info.contains("tool: ext/acme-repeat:text.repeat"), "{info}");
    assert!(
        info.contains("Repeat a text.\\u{1b}[2J\\nFAKE LINE\\u{202e}"),
        "{info}"
    );
    assert!(
        !info.contains('\u{1b}') && !info.contains('\u{202e}') && !info.contains("\nFAKE LINE"),
        "{info:?}"
    );
    expect(home, &["ext", "revoke", "acme-repeat"], 0);
    expect_stderr(
        home,
        &["call", "text.repeat", r#"{"text":"ab"}"#],
        2,
        not_in_catalog,
    );
    expect(home, &["ext", "remove", "acme-repeat"], 0);
    assert_eq!(installed(home), serde_json::json!([]));
}

#[test]
fn the_python_extension_is_built_installed_granted_and_called() {
    let Some(componentize) = componentize_py() else {
        return;
    };
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    let example = repository().join("examples/extensions/word-count-py");
    let package = home.join("word-count-py");
    std::fs::create_dir_all(&package).expect("dir");
    for file in ["app.py", "build.sh", "toolhost-extension.toml"] {
        std::fs::copy(example.join(file), package.join(file)).expect(file);
    }
    let status = Command::new("sh")
        .arg(package.join("build.sh"))
        .env("COMPONENTIZE_PY", &componentize)
        .env("TOOLHOST_WIT", repository().join("wit"))
        .status()
        .expect("run build.sh");
    assert!(status.success(), "componentize-py builds the component");

    expect(home, &["ext", "seal", "word-count-py"], 0);
    let install = expect(home, &["ext", "install", "word-count-py"], 0);
    assert!(install.contains("imports log; requests log"), "{install}");
    assert!(install.contains("instances 40"), "{install}");
    expect(
        home,
        &["ext", "grant", "word-count-py", "--capability", "log"],
        0,
    );

    let output = expect(
        home,
        &[
            "call",
            "text.word_count",
            r#"{"text":"hello wide world\nsecond line"}"#,
            "--json",
        ],
        0,
    );
    let report: Value = serde_json::from_str(&output).expect("json");
    assert_eq!(
        report["result"]["content"],
        "5 words, 28 characters, 2 lines."
    );
    assert_eq!(
        report["result"]["structured"],
        serde_json::json!({"words": 5, "chars": 28, "lines": 2})
    );
    let refused = expect(
        home,
        &["call", "ext/word-count-py:text.word_count", r#"{"nope":1}"#],
        1,
    );
    assert!(refused.contains("tool.invalid_arguments"), "{refused}");
}

/// A loopback HTTP server answering `GET /hello`; it stops when dropped.
struct Loopback {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Loopback {
    fn start() -> Self {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("address").port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                    line.clear();
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 19\r\nconnection: close\r\n\r\nhello from loopback",
                );
            }
        });
        Self { port, stop }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

#[test]
fn the_python_http_extension_reaches_only_the_hosts_it_was_granted() {
    let Some(componentize) = componentize_py() else {
        return;
    };
    let server = Loopback::start();
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    let example = repository().join("examples/extensions/fetch-py");
    let package = home.join("fetch-py");
    std::fs::create_dir_all(package.join("wit")).expect("dir");
    for file in ["app.py", "build.sh", "wit/world.wit"] {
        std::fs::copy(example.join(file), package.join(file)).expect(file);
    }
    // The example asks for public APIs; this copy asks for the loopback
    // server too, which only a literal address grants.
    let manifest = std::fs::read_to_string(example.join("toolhost-extension.toml"))
        .expect("manifest")
        .replace(
            "allowed-hosts = [",
            "allowed-hosts = [\"http://127.0.0.1:*\", ",
        );
    std::fs::write(package.join("toolhost-extension.toml"), manifest).expect("manifest");
    let status = Command::new("sh")
        .arg(package.join("build.sh"))
        .env("COMPONENTIZE_PY", &componentize)
        .env("TOOLHOST_WIT", repository().join("wit"))
        .status()
        .expect("run build.sh");
    assert!(status.success(), "componentize-py builds the component");

    expect(home, &["ext", "seal", "fetch-py"], 0);
    let install = expect(home, &["ext", "install", "fetch-py"], 0);
    assert!(install.contains("imports log, outbound-http"), "{install}");
    let info = expect(home, &["ext", "info", "fetch-py"], 0);
    assert!(
        info.contains(
            "requests hosts: http://127.0.0.1:*, https://api.github.com, https://*.wikipedia.org"
        ),
        "{info}"
    );
    expect_stderr(
        home,
        &[
            "ext",
            "grant",
            "fetch-py",
            "--allow-host",
            "https://example.com",
        ],
        2,
        "not requested by its manifest",
    );
    let granted_host = format!("http://127.0.0.1:{}", server.port);
    expect(
        home,
        &["ext", "grant", "fetch-py", "--allow-host", &granted_host],
        0,
    );
    let info = expect(home, &["ext", "info", "fetch-py"], 0);
    assert!(
        info.contains(&format!("allowed hosts: {granted_host}")),
        "{info}"
    );

    let url = format!("{granted_host}/hello");
    let output = expect(
        home,
        &[
            "call",
            "web.fetch_text",
            &serde_json::json!({ "url": url }).to_string(),
            "--json",
        ],
        0,
    );
    let report: Value = serde_json::from_str(&output).expect("json");
    assert_eq!(report["result"]["structured"]["status"], 200, "{output}");
    assert_eq!(
        report["result"]["structured"]["text"], "hello from loopback",
        "{output}"
    );
    // The same server on a port the grant does not name, and a public API
    // the manifest asks for but the user did not grant.
    for refused_url in [
        "http://127.0.0.1:1/hello".to_owned(),
        "https://api.github.com/zen".to_owned(),
    ] {
        let refused = expect(
            home,
            &[
                "call",
                "web.fetch_text",
                &serde_json::json!({ "url": refused_url }).to_string(),
            ],
            1,
        );
        assert!(refused.contains("fetch.http_error"), "{refused}");
        assert!(refused.contains("HTTP-request-denied"), "{refused}");
    }
}
