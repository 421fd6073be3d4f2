//! `toolhost ext new`: a ready-to-build extension from a template.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolhost_core::{Capability, ToolProvider};
use toolhost_extensions::MANIFEST_FILE;

/// The language of a new extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Js,
    Ts,
    Python,
}

impl Lang {
    /// The SDK a template depends on by path, inside a toolhost checkout.
    fn sdk_dir(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Rust => Some(("guest-tools/sdk", "Cargo.toml")),
            Self::Js | Self::Ts => Some(("guest-tools/sdk-js", "package.json")),
            Self::Python => None,
        }
    }

    /// What to run after `ext new`, for its message.
    pub fn next_steps(self, id: &str) -> String {
        let mut steps = format!(
            "toolhost ext install .   # builds, seals, installs\n  toolhost ext grant {id}\n  toolhost call ext/{id}:TOOL '{{...}}'"
        );
        steps.push_str(match self {
            Self::Rust => "\n  cargo test               # the tool's logic, natively",
            Self::Js | Self::Ts => {
                "\n  npm test                 # the built tool, called through toolhost"
            }
            Self::Python => "",
        });
        steps
    }
}

/// The SDK of the checkout this binary was built from, if it is still there.
fn default_sdk_path(lang: Lang) -> Option<PathBuf> {
    let (dir, marker) = lang.sdk_dir()?;
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    sdk.join(marker)
        .is_file()
        .then(|| sdk.canonicalize().ok())
        .flatten()
}

pub(super) fn new_extension(
    target: &Path,
    id: &str,
    tool: &str,
    lang: Lang,
    sdk_path: Option<&Path>,
) -> Result<()> {
    let provider = ToolProvider::parse(&format!("ext/{id}")).map_err(anyhow::Error::new)?;
    // The id is also the package's name: Cargo and npm want a letter first
    // and no dots.
    if !id.starts_with(|c: char| c.is_ascii_lowercase()) || id.contains('.') {
        bail!(
            "`{id}` cannot name a package: for `ext new`, start the id with a letter and use no `.`"
        );
    }
    provider
        .check_native_name(tool)
        .map_err(anyhow::Error::new)
        .context("pass a valid tool name with --tool")?;
    if target.exists()
        && std::fs::read_dir(target)
            .with_context(|| format!("{} is not a directory to write into", target.display()))?
            .next()
            .is_some()
    {
        bail!("{} exists and is not empty", target.display());
    }
    // A path to a checkout only: the SDKs are not published, and a package
    // name on a registry could be anyone's.
    let sdk = match lang.sdk_dir() {
        None => String::new(),
        Some((dir, marker)) => {
            let Some(sdk) = sdk_path
                .map(Path::to_owned)
                .or_else(|| default_sdk_path(lang))
            else {
                bail!(
                    "the toolhost checkout this binary was built from is gone: pass --sdk-path DIR (its {dir})"
                );
            };
            if !sdk.join(marker).is_file() {
                bail!("--sdk-path {}: no {marker} there", sdk.display());
            }
            let sdk = sdk.canonicalize().unwrap_or(sdk).display().to_string();
            match lang {
                // A TOML inline table (a debug string is a valid TOML one).
                Lang::Rust => format!("{{ path = {sdk:?} }}"),
                // Inside a JSON string: escaped as JSON escapes it.
                _ => {
                    let quoted = serde_json::to_string(&sdk)?;
                    quoted[1..quoted.len() - 1].to_owned()
                }
            }
        }
    };
    let crate_name = id.replace(['-', '.'], "_");
    let fill = |template: &str| {
        template
            .replace("{{id}}", id)
            .replace("{{tool}}", tool)
            .replace("{{crate}}", &crate_name)
            .replace("{{sdk}}", &sdk)
            .replace("{{host}}", toolhost_sandbox::capability::HOST_VERSION)
            .replace("{{capabilities}}", &extension_capabilities())
            .replace("{{lang}}", if lang == Lang::Ts { "ts" } else { "js" })
    };
    for (file, template) in files(lang) {
        let path = target.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, fill(template))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Every file of a language's template, by its path in the new directory.
fn files(lang: Lang) -> Vec<(&'static str, &'static str)> {
    match lang {
        Lang::Rust => vec![
            ("Cargo.toml", RUST_CARGO),
            ("src/lib.rs", RUST_LIB),
            (MANIFEST_FILE, RUST_MANIFEST),
            (".gitignore", "/target\n"),
        ],
        Lang::Js | Lang::Ts => {
            let mut files = vec![
                ("package.json", JS_PACKAGE),
                (MANIFEST_FILE, JS_MANIFEST),
                ("README.md", JS_README),
                ("test/tool.test.mjs", JS_TEST),
                (".gitignore", JS_GITIGNORE),
            ];
            files.extend_from_slice(JS_TYPES);
            files.extend_from_slice(WIT);
            if lang == Lang::Ts {
                files.push(("src/tool.ts", JS_TOOL_TS));
                files.push(("tsconfig.json", JS_TSCONFIG));
            } else {
                files.push(("src/tool.js", JS_TOOL_JS));
            }
            files
        }
        Lang::Python => {
            let mut files = vec![
                ("app.py", PY_APP),
                (MANIFEST_FILE, PY_MANIFEST),
                (".gitignore", PY_GITIGNORE),
            ];
            files.extend_from_slice(WIT);
            files
        }
    }
}

/// Every capability an extension may ask for, as a TOML array: read from
/// the capability table when the template is filled, so the list an author
/// sees is the one the host checks against.
fn extension_capabilities() -> String {
    let names: Vec<String> = Capability::ALL
        .iter()
        .filter(|capability| capability.refused_to_extensions().is_none())
        .map(|capability| format!("\"{}\"", capability.name()))
        .collect();
    format!("[{}]", names.join(", "))
}

const RUST_CARGO: &str = include_str!("../../templates/extension/Cargo.toml.in");
const RUST_LIB: &str = include_str!("../../templates/extension/lib.rs.in");
const RUST_MANIFEST: &str = include_str!("../../templates/extension/toolhost-extension.toml.in");

const JS_PACKAGE: &str = include_str!("../../templates/extension-js/package.json.in");
const JS_MANIFEST: &str = include_str!("../../templates/extension-js/toolhost-extension.toml.in");
const JS_README: &str = include_str!("../../templates/extension-js/README.md.in");
const JS_TEST: &str = include_str!("../../templates/extension-js/test/tool.test.mjs");
const JS_TOOL_JS: &str = include_str!("../../templates/extension-js/src/tool.js.in");
const JS_TOOL_TS: &str = include_str!("../../templates/extension-js/src/tool.ts.in");
const JS_GITIGNORE: &str = include_str!("../../templates/extension-js/.gitignore");
const JS_TSCONFIG: &str = include_str!("../../templates/extension-js/tsconfig.json");
/// `jco types` of the template's world, committed so an editor shows the
/// API before anything is installed (a test regenerates and compares them).
pub(crate) const JS_TYPES: &[(&str, &str)] = &[
    (
        "types/extension.d.ts",
        include_str!("../../templates/extension-js/types/extension.d.ts"),
    ),
    (
        "types/interfaces/toolhost-host-log.d.ts",
        include_str!("../../templates/extension-js/types/interfaces/toolhost-host-log.d.ts"),
    ),
    (
        "types/interfaces/toolhost-host-random.d.ts",
        include_str!("../../templates/extension-js/types/interfaces/toolhost-host-random.d.ts"),
    ),
    (
        "types/interfaces/toolhost-tool-tool.d.ts",
        include_str!("../../templates/extension-js/types/interfaces/toolhost-tool-tool.d.ts"),
    ),
    (
        "types/interfaces/toolhost-tool-types.d.ts",
        include_str!("../../templates/extension-js/types/interfaces/toolhost-tool-types.d.ts"),
    ),
];

const PY_APP: &str = include_str!("../../templates/extension-py/app.py.in");
const PY_MANIFEST: &str = include_str!("../../templates/extension-py/toolhost-extension.toml.in");
const PY_GITIGNORE: &str = include_str!("../../templates/extension-py/gitignore");

/// The world a JS or Python extension builds against, and the packages it
/// names, from the repository's own `wit/` (the newest `toolhost:host`).
const WIT: &[(&str, &str)] = &[
    (
        "wit/world.wit",
        include_str!("../../templates/extension-js/wit/world.wit.in"),
    ),
    (
        "wit/deps/toolhost-host/capabilities.wit",
        include_str!("../../../../wit/host-0.1.4/capabilities.wit"),
    ),
    (
        "wit/deps/toolhost-host/worlds.wit",
        include_str!("../../../../wit/host-0.1.4/worlds.wit"),
    ),
    (
        "wit/deps/toolhost-tool/tool.wit",
        include_str!("../../../../wit/tool/tool.wit"),
    ),
    (
        "wit/deps/toolhost-clock/clock.wit",
        include_str!("../../../../wit/clock/clock.wit"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The embedded host package is the newest one this host links.
    #[test]
    fn the_templates_wit_is_the_newest_host_package() {
        let worlds = WIT
            .iter()
            .find(|(path, _)| path.ends_with("toolhost-host/worlds.wit"))
            .expect("worlds");
        assert!(
            worlds.1.contains(&format!(
                "package toolhost:host@{};",
                toolhost_sandbox::capability::HOST_VERSION
            )),
            "wit/host-{} is not the package embedded",
            toolhost_sandbox::capability::HOST_VERSION
        );
    }

    /// Every committed type file is embedded, and nothing else is there.
    #[test]
    fn every_committed_type_file_is_embedded() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/extension-js");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.join("types")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("types dir").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let relative = path.strip_prefix(&root).expect("inside");
                    on_disk.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        on_disk.sort();
        let mut embedded: Vec<String> = JS_TYPES
            .iter()
            .map(|(path, _)| (*path).to_owned())
            .collect();
        embedded.sort();
        assert_eq!(on_disk, embedded);
    }
}
