//! `toolhost ext new`: a ready-to-build extension from a template.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toolhost_core::{Capability, ToolProvider};
use toolhost_extensions::MANIFEST_FILE;

/// The SDK of the checkout this binary was built from, if it is still there.
fn default_sdk_path() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../guest-tools/sdk");
    sdk.join("Cargo.toml")
        .is_file()
        .then(|| sdk.canonicalize().ok())
        .flatten()
}

pub(super) fn new_extension(
    target: &Path,
    id: &str,
    tool: &str,
    sdk_path: Option<&Path>,
) -> Result<()> {
    let provider = ToolProvider::parse(&format!("ext/{id}")).map_err(anyhow::Error::new)?;
    // The id is also the crate's name: Cargo wants a letter first and no dots.
    if !id.starts_with(|c: char| c.is_ascii_lowercase()) || id.contains('.') {
        bail!(
            "`{id}` cannot name a Cargo package: for `ext new`, start the id with a letter and use no `.`"
        );
    }
    provider
        .check_native_name(tool)
        .map_err(anyhow::Error::new)
        .context("pass a valid tool name with --tool")?;
    if target.exists() && std::fs::read_dir(target)?.next().is_some() {
        bail!("{} exists and is not empty", target.display());
    }
    // A path to a checkout only: the SDK is not published, and a crate name
    // on crates.io could be anyone's.
    let Some(sdk) = sdk_path.map(Path::to_owned).or_else(default_sdk_path) else {
        bail!(
            "the toolhost checkout this binary was built from is gone: pass --sdk-path DIR (its guest-tools/sdk)"
        );
    };
    if !sdk.join("Cargo.toml").is_file() {
        bail!("--sdk-path {}: no Cargo.toml there", sdk.display());
    }
    let sdk = sdk.canonicalize().unwrap_or(sdk);
    let sdk = format!("{{ path = {:?} }}", sdk.display().to_string());
    let crate_name = id.replace(['-', '.'], "_");
    let fill = |template: &str| {
        template
            .replace("{{id}}", id)
            .replace("{{tool}}", tool)
            .replace("{{crate}}", &crate_name)
            .replace("{{sdk}}", &sdk)
            .replace("{{host}}", toolhost_sandbox::capability::HOST_VERSION)
            .replace("{{capabilities}}", &extension_capabilities())
    };
    std::fs::create_dir_all(target.join("src"))?;
    for (file, template) in [
        ("Cargo.toml", TEMPLATE_CARGO),
        ("src/lib.rs", TEMPLATE_LIB),
        (MANIFEST_FILE, TEMPLATE_MANIFEST),
        (".gitignore", "/target\n"),
    ] {
        std::fs::write(target.join(file), fill(template))
            .with_context(|| format!("writing {}", target.join(file).display()))?;
    }
    Ok(())
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

const TEMPLATE_CARGO: &str = include_str!("../../templates/extension/Cargo.toml.in");
const TEMPLATE_LIB: &str = include_str!("../../templates/extension/lib.rs.in");
const TEMPLATE_MANIFEST: &str =
    include_str!("../../templates/extension/toolhost-extension.toml.in");
