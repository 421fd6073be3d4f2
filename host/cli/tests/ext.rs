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
        // What `ext install` builds with: one cargo target directory for
        // every template build, the repository's componentize-py and WIT
        // (the examples' build scripts read it), and none of the test
        // build's own flags.
        .env("CARGO_TARGET_DIR", common::template_target_dir())
        .env(
            "COMPONENTIZE_PY",
            repository().join(".venv/bin/componentize-py"),
        )
        .env("TOOLHOST_WIT", repository().join("wit"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
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
        created.contains("toolhost ext install .")
            && created.contains("toolhost ext grant acme-repeat"),
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
        "cannot name a package",
    );

    // The release flow stays as it was: built by hand, installed as
    // sealed (`--no-build`); unsealed, the placeholder digest does not match.
    common::build_template_extension(&crate_dir, "acme-repeat");
    expect_stderr(
        home,
        &["ext", "install", "--no-build", "acme-repeat"],
        2,
        "ext.sha256_mismatch",
    );
    let sealed = expect(home, &["ext", "seal", "acme-repeat"], 0);
    assert!(sealed.contains("sha256"), "{sealed}");

    // The development flow: `ext install DIR` builds (cargo), seals and
    // installs, and says how to grant it.
    let (install, built) = expect_output(home, &["ext", "install", "acme-repeat"], 0);
    assert!(
        install.contains("installed acme-repeat 0.1.0 (disabled)"),
        "{install}"
    );
    assert!(
        install.contains("authorize it with `toolhost ext grant acme-repeat`"),
        "{install}"
    );
    assert!(
        built.contains("building") && built.contains("sealed"),
        "{built}"
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

/// `ext new --lang python` → `ext install` (componentize-py, seal,
/// install) → `ext grant` → `call`.
#[test]
fn a_python_extension_from_the_template_takes_four_commands() {
    if componentize_py().is_none() {
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    let created = expect(
        home,
        &[
            "ext",
            "new",
            "acme-pick",
            "--lang",
            "python",
            "--tool",
            "text.pick",
        ],
        0,
    );
    assert!(created.contains("toolhost ext install ."), "{created}");
    let install = expect(home, &["ext", "install", "acme-pick"], 0);
    assert!(
        install.contains("imports log, random; requests log, random"),
        "{install}"
    );
    expect(home, &["ext", "grant", "acme-pick"], 0);
    let picked = expect(
        home,
        &[
            "call",
            "ext/acme-pick:text.pick",
            r#"{"options":["red","green","blue"]}"#,
        ],
        0,
    );
    assert!(
        ["red", "green", "blue"].contains(&picked.trim()),
        "{picked}"
    );
    let refused = expect(home, &["call", "text.pick", r#"{"options":[]}"#], 1);
    assert!(refused.contains("tool.invalid_arguments"), "{refused}");
}

/// `command` in `dir`, which must succeed; its stdout.
fn run_in(dir: &Path, command: &mut Command) -> String {
    let output = command.current_dir(dir).output().expect("run");
    assert!(
        output.status.success(),
        "{command:?}\nstdout: {}\nstderr: {}",
        text(&output.stdout),
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// `ext new --lang js|ts` → `ext install` (npm, jco with QuickJS, seal,
/// install) → `ext grant` → `call`; then the scaffold's own test, which
/// calls the built tool through toolhost as the template promises.
#[test]
fn a_js_and_a_ts_extension_from_the_template_take_four_commands() {
    if !common::js_toolchain() {
        return;
    }
    let npm = "npm";
    for lang in ["js", "ts"] {
        let home = tempfile::tempdir().expect("tempdir");
        let home = home.path();
        let id = format!("acme-pick-{lang}");
        expect(
            home,
            &["ext", "new", &id, "--lang", lang, "--tool", "text.pick"],
            0,
        );
        let dir = home.join(&id);
        assert!(dir.join(format!("src/tool.{lang}")).is_file(), "{lang}");
        assert_eq!(dir.join("tsconfig.json").is_file(), lang == "ts");
        let install = expect(home, &["ext", "install", &id], 0);
        assert!(
            install.contains("imports log, random; requests log, random"),
            "{install}"
        );
        expect(home, &["ext", "grant", &id], 0);
        let tool = format!("ext/{id}:text.pick");
        let picked = expect(
            home,
            &["call", &tool, r#"{"options":["red","green","blue"]}"#],
            0,
        );
        assert!(
            ["red", "green", "blue"].contains(&picked.trim()),
            "{picked}"
        );
        let refused = expect(home, &["call", &tool, r#"{"options":["a"],"x":1}"#], 1);
        assert!(
            refused.contains("tool.invalid_arguments: x: is not supported"),
            "{refused}"
        );
        let tested = run_in(
            &dir,
            Command::new(npm)
                .args(["test"])
                .env("TOOLHOST", env!("CARGO_BIN_EXE_toolhost")),
        );
        assert!(tested.contains("# fail 0"), "{tested}");
        if lang == "js" {
            // A build that writes nothing installs nothing: the last
            // build's component is gone before the build runs.
            let package = dir.join("package.json");
            let json = std::fs::read_to_string(&package).expect("package.json");
            let broken = json.replace(
                "\"build\": \"jco componentize",
                "\"build\": \"true || jco componentize",
            );
            assert_ne!(
                json, broken,
                "the build script is where the template puts it"
            );
            std::fs::write(&package, broken).expect("package.json");
            expect_stderr(home, &["ext", "install", &id], 2, "left no component");
        }
        if lang == "ts" {
            // The types an editor reads are jco's of the world, as committed.
            let fresh = home.join("fresh-types");
            run_in(
                &dir,
                Command::new(npm)
                    .args(["run", "types", "--", "-o"])
                    .arg(&fresh),
            );
            for file in ["extension.d.ts", "interfaces/toolhost-host-random.d.ts"] {
                assert_eq!(
                    std::fs::read_to_string(fresh.join(file)).expect("generated"),
                    std::fs::read_to_string(dir.join("types").join(file)).expect("committed"),
                    "types/{file} is not what `jco types` writes: regenerate the template's"
                );
            }
        }
    }
}

/// The JavaScript SDK's own unit tests (node's test runner, no packages).
#[test]
fn the_js_sdk_unit_tests_pass() {
    if !common::js_toolchain() {
        return;
    }
    let out = run_in(
        &repository(),
        Command::new("node").args(["--test", "guest-tools/sdk-js/test/"]),
    );
    let passed = out
        .lines()
        .find_map(|line| line.strip_prefix("# pass "))
        .and_then(|count| count.trim().parse::<u32>().ok());
    assert!(
        out.contains("# fail 0") && passed.is_some_and(|count| count > 20),
        "{out}"
    );
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

#[test]
fn the_python_http_extension_reaches_only_the_hosts_it_was_granted() {
    let Some(componentize) = componentize_py() else {
        return;
    };
    let server = common::loopback::Loopback::start();
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

/// The JavaScript HTTP example, installed in one step, with a stored secret
/// bound to one of two granted servers: that server's requests carry it in
/// the header the manifest names, the other's never do, and nothing the
/// commands printed, logged or wrote holds the value (the secret store
/// aside).
#[test]
fn the_js_http_extension_carries_a_secret_only_to_its_host() {
    if !common::js_toolchain() {
        return;
    }
    let (api, other) = (
        common::loopback::Loopback::start(),
        common::loopback::Loopback::start(),
    );
    let home = tempfile::tempdir().expect("tempdir");
    let home = home.path();
    common::loopback::copy_fetch_js(home);

    let value = format!("thsk-{}", std::process::id() as u64 * 7919 + 1_000_003);
    let set = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .current_dir(home)
            .args(args)
            .env("TOOLHOST_EXT_DIR", home.join("extensions"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("toolhost secret set");
        use std::io::Write;
        writeln!(child.stdin.take().expect("stdin"), "{value}").expect("value");
        let output = child.wait_with_output().expect("done");
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout) + &text(&output.stderr)
    };
    let mut printed = set(&["secret", "set", "api-token"]);
    printed += &set(&["secret", "set", "api-token", "--tenant", "acme"]);
    assert_eq!(expect(home, &["secret", "list"], 0).trim(), "api-token");

    let (install, built) = expect_output(home, &["ext", "install", "fetch-js"], 0);
    assert!(
        install.contains(
            "toolhost ext grant fetch-js --secret TOKEN=fetch-js.TOKEN --for http://127.0.0.1:8000 --header authorization --format 'Bearer {}'"
        ),
        "{install}"
    );
    printed += &install;
    printed += &built;
    let (api_host, other_host) = (
        format!("http://127.0.0.1:{}", api.port),
        format!("http://127.0.0.1:{}", other.port),
    );
    // A host beyond the grant is refused; so is a key the manifest lacks.
    expect_stderr(
        home,
        &[
            "ext",
            "grant",
            "fetch-js",
            "--allow-host",
            &api_host,
            "--secret",
            "TOKEN=api-token",
            "--for",
            &other_host,
        ],
        2,
        "which this grant does not let it reach",
    );
    expect_stderr(
        home,
        &["ext", "grant", "fetch-js", "--secret", "KEY=api-token"],
        2,
        "its manifest asks for no secret `KEY`",
    );
    let granted = expect(
        home,
        &[
            "ext",
            "grant",
            "fetch-js",
            "--allow-host",
            &api_host,
            "--allow-host",
            &other_host,
            "--secret",
            "TOKEN=api-token",
            "--for",
            &api_host,
        ],
        0,
    );
    assert!(
        granted.contains(&format!(
            "(secret api-token as TOKEN into `authorization` of {api_host})"
        )),
        "{granted}"
    );
    printed += &granted;
    for server in [&api_host, &other_host] {
        let output = Command::new(env!("CARGO_BIN_EXE_toolhost"))
            .current_dir(home)
            .args(["--cache-dir"])
            .arg(home.join("cache"))
            .args(["call", "--json", "web.fetch_text"])
            .arg(serde_json::json!({ "url": format!("{server}/hello") }).to_string())
            .env("TOOLHOST_EXT_DIR", home.join("extensions"))
            .env("TOOLHOST_LOG", "debug")
            .output()
            .expect("call");
        let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
        assert!(output.status.success(), "{stdout}{stderr}");
        assert!(stdout.contains("hello from loopback"), "{stdout}");
        printed += &stdout;
        printed += &stderr;
    }
    assert_eq!(api.authorizations(), [Some(format!("Bearer {value}"))]);
    assert_eq!(
        other.authorizations(),
        [None],
        "the other host got no secret"
    );
    assert!(
        printed.contains("stored secret written"),
        "the log names the secret: {printed}"
    );
    assert!(
        !printed.contains(&value),
        "a command printed or logged the secret"
    );
    // Every file but the secret store's own.
    let store = home.join("extensions/secrets");
    let mut checked = 0;
    let mut stack = vec![home.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir").flatten() {
            let path = entry.path();
            let kind = entry.file_type().expect("type");
            if kind.is_symlink() || path.starts_with(&store) {
                continue;
            }
            if kind.is_dir() {
                stack.push(path);
            } else {
                checked += 1;
                let bytes = std::fs::read(&path).expect("read");
                assert!(
                    !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                    "{} holds the secret",
                    path.display()
                );
            }
        }
    }
    assert!(
        checked > 10,
        "the runs, the registry, the build: {checked} files"
    );
    let journal_named = std::fs::read_dir(home.join("runs"))
        .expect("runs")
        .flatten()
        .any(|run| {
            std::fs::read_to_string(run.path().join("events.jsonl"))
                .is_ok_and(|journal| journal.contains("\"secret\":\"api-token\""))
        });
    assert!(journal_named, "a run's journal names the secret it carried");
}
