//! The table of builtins, read at build time from the one place each
//! builtin declares itself: `guest-tools/<package>/tool.json`.
//!
//! A guest crate with a `tool.json` beside its `Cargo.toml` is a builtin.
//! The file holds its native name, title, flags and descriptor; its world
//! stays in `[package.metadata.toolhost]` (every guest has one, hostile
//! test guests too). `toolhost-core` includes the rendered table (names,
//! flags, descriptors: no wasm needed), `toolhost-builtins` builds the same
//! packages into components, and the guest's `describe()` returns the same
//! file (`toolhost_guest::builtin_descriptor!`). A malformed file stops the
//! build with a message naming it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The file that makes a guest crate a builtin.
pub const TOOL_FILE: &str = "tool.json";

/// What a builtin may be flagged with in its `tool.json`.
const FLAGS: [&str; 4] = ["terminal", "writesWorkspace", "childExcluded", "endTool"];

/// One builtin as its `tool.json` declares it.
#[derive(Debug, Clone)]
pub struct BuiltinTool {
    /// Its guest crate (the directory's name), e.g. `dice-roll`.
    pub package: String,
    pub tool_file: PathBuf,
    /// Its native name, e.g. `dice.roll`.
    pub name: String,
    pub title: Option<String>,
    /// Ends its invocation's loop: the last call of its round.
    pub terminal: bool,
    /// Changes the workspace (write, patch): a resume checks its intent.
    pub writes_workspace: bool,
    /// A return-mode child does not get it.
    pub child_excluded: bool,
    /// Ends the invocation's work (commit, finish, task return): callable
    /// after the invocation's total call budget is spent, never counted
    /// against it.
    pub end_tool: bool,
    /// Returns an effect only the run loop applies (its annotation
    /// `control`).
    pub control: bool,
}

/// Every builtin under `<workspace_root>/guest-tools`, ordered by package.
/// Tells cargo to rerun the build script when one is added or changed.
pub fn builtin_tools(workspace_root: &Path) -> Vec<BuiltinTool> {
    let guests = workspace_root.join("guest-tools");
    println!("cargo:rerun-if-changed={}", guests.display());
    let entries = std::fs::read_dir(&guests)
        .unwrap_or_else(|error| panic!("cannot list {}: {error}", guests.display()));
    let mut tools: Vec<BuiltinTool> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(TOOL_FILE))
        .filter(|file| file.is_file())
        .map(|file| read_tool(&file))
        .collect();
    tools.sort_by(|a, b| a.package.cmp(&b.package));
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        panic!("two builtins declare the name `{}`", pair[0]);
    }
    tools
}

fn read_tool(file: &Path) -> BuiltinTool {
    let shown = file.display();
    let broken = |why: &str| -> ! { panic!("{shown}: {why}") };
    let text = std::fs::read_to_string(file).unwrap_or_else(|error| broken(&error.to_string()));
    let json: Value =
        serde_json::from_str(&text).unwrap_or_else(|error| broken(&error.to_string()));
    let known = [
        "name",
        "title",
        "flags",
        "description",
        "annotations",
        "inputSchema",
        "outputSchema",
    ];
    let Some(fields) = json.as_object() else {
        broken("not a JSON object")
    };
    if let Some(unknown) = fields.keys().find(|key| !known.contains(&key.as_str())) {
        broken(&format!(
            "unknown field `{unknown}` (known: {})",
            known.join(", ")
        ));
    }
    let string = |key: &str| json.get(key).and_then(Value::as_str).map(str::to_owned);
    let name = string("name").unwrap_or_else(|| broken("`name` is missing"));
    let simple = name.split('.').count() >= 2
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        });
    if !simple {
        broken(&format!(
            "`{name}` is not a builtin name (lowercase dotted, e.g. dice.roll)"
        ));
    }
    if string("description").is_none_or(|text| text.trim().is_empty()) {
        broken("`description` is missing or empty");
    }
    let is_object_schema = json
        .get("inputSchema")
        .and_then(|schema| schema.get("type"))
        .is_some_and(|kind| kind == "object");
    if !is_object_schema {
        broken("`inputSchema` must be an object schema (\"type\": \"object\")");
    }
    if json
        .get("outputSchema")
        .is_some_and(|schema| !schema.is_object())
    {
        broken("`outputSchema` must be an object");
    }
    let annotations = json.get("annotations").cloned().unwrap_or(Value::Null);
    if !(annotations.is_object() || annotations.is_null()) {
        broken("`annotations` must be an object");
    }
    let mut flags = Vec::new();
    for flag in json
        .get("flags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match flag.as_str() {
            Some(flag) if FLAGS.contains(&flag) => flags.push(flag.to_owned()),
            _ => broken(&format!(
                "unknown flag {flag} (known: {})",
                FLAGS.join(", ")
            )),
        }
    }
    let package = file
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| broken("not inside a package directory"));
    // The flag and the world say the same thing twice; a write builtin
    // without the flag would be run again after a crash instead of having
    // its intent checked.
    let writes_workspace = flags.iter().any(|flag| flag == "writesWorkspace");
    let world = world_of(file);
    if writes_workspace != (world == "workspace-writer") {
        broken(&format!(
            "flag `writesWorkspace` is {} but the crate's world is `{world}`: a builtin writes the workspace exactly when its world is `workspace-writer`",
            if writes_workspace { "set" } else { "not set" }
        ));
    }
    // Likewise: a control tool changes the run through `toolhost:control`,
    // whose only world is `control-tool`; a control annotation on any other
    // world would promise what its component cannot do.
    let control = annotations
        .get("control")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if control != (world == "control-tool") {
        broken(&format!(
            "annotation `control` is {control} but the crate's world is `{world}`: a builtin is a control tool exactly when its world is `control-tool`"
        ));
    }
    BuiltinTool {
        package,
        tool_file: file.to_path_buf(),
        title: string("title"),
        terminal: flags.iter().any(|flag| flag == "terminal"),
        writes_workspace,
        child_excluded: flags.iter().any(|flag| flag == "childExcluded"),
        end_tool: flags.iter().any(|flag| flag == "endTool"),
        control,
        name,
    }
}

/// `[package.metadata.toolhost] world` of the crate beside `tool_file`.
fn world_of(tool_file: &Path) -> String {
    let manifest = tool_file.with_file_name("Cargo.toml");
    let shown = manifest.display();
    let text =
        std::fs::read_to_string(&manifest).unwrap_or_else(|error| panic!("{shown}: {error}"));
    let parsed: toml::Table =
        toml::from_str(&text).unwrap_or_else(|error| panic!("{shown}: {error}"));
    parsed
        .get("package")
        .and_then(|package| package.get("metadata"))
        .and_then(|metadata| metadata.get("toolhost"))
        .and_then(|toolhost| toolhost.get("world"))
        .and_then(toml::Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{shown}: a builtin declares [package.metadata.toolhost] world"))
}

/// Rust source for `pub static <static_name>: &[Builtin] = &[...];`, one
/// entry per tool (its file via `include_str!`), for a crate that has a
/// `Builtin` type with the fields `name`, `package`, `title`, `terminal`,
/// `writes_workspace`, `child_excluded`, `end_tool`, `control` and
/// `tool_json`.
pub fn render_builtin_table(tools: &[BuiltinTool], static_name: &str) -> String {
    let mut source = format!("pub static {static_name}: &[Builtin] = &[\n");
    for tool in tools {
        let _ = writeln!(
            source,
            "    Builtin {{ name: {:?}, package: {:?}, title: {:?}, terminal: {}, writes_workspace: {}, child_excluded: {}, end_tool: {}, control: {}, tool_json: include_str!({:?}) }},",
            tool.name,
            tool.package,
            tool.title,
            tool.terminal,
            tool.writes_workspace,
            tool.child_excluded,
            tool.end_tool,
            tool.control,
            tool.tool_file.display().to_string(),
        );
    }
    source.push_str("];\n");
    source
}
