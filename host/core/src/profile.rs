//! Profiles: what one kind of agent may do. A profile is a versioned JSON file
//! (format and an example of every field: `docs/profiles.md`); it is read and
//! checked once, frozen into the run (`input/resolved_profile.json`) and
//! compiled into one snapshot per invocation. Execution never re-reads it.
//!
//! Every problem names its field (`tools.allow[3]`, `skills.maxReadCharsPerRun`)
//! and carries a dotted code, so a UI can point at the line to fix.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::builtin::{self, TASK_RETURN};
use crate::limits::LimitOverrides;
use crate::{ToolId, ToolProvider};

mod context;
pub use context::{
    ContextPolicy, HistoryCut, Instructions, MAX_HISTORY_MESSAGES, MAX_SYSTEM_PROMPT_CHARS,
    MIN_INPUT_CHARS,
};

pub const PROFILE_SCHEMA_VERSION: u32 = 1;
pub const PROFILE_KIND: &str = "toolhost.agentProfile";

/// The workspace roots a profile may show or make writable, in manifest order.
/// A profile can only narrow this universe.
pub const WORKSPACE_ROOTS: [&str; 5] = ["output", "scratch", "plan", "summaries", "persist"];

const MAX_ID_BYTES: usize = 128;

/// The message body when a profile names none: what a commit without a
/// path publishes and what an auto-publish watches.
pub const DEFAULT_MESSAGE_BODY: &str = "output/main.md";

/// The file, in the message body's root, where the text of a reply without
/// tool calls is kept; a message body may not be this file.
pub const DIRECT_OUTPUT_FILE: &str = "direct_output.md";

/// Longest `tools.toolDescriptions` text, in characters: a description is
/// sent with every model request, so one profile cannot make every request
/// huge.
pub const MAX_TOOL_DESCRIPTION_CHARS: usize = 4096;

/// `profiles/default.json`, built in: the profile a run uses when none is
/// given. It writes replies; `dice.roll` is off, as in the reference.
pub const DEFAULT_PROFILE_JSON: &str = include_str!("../../../profiles/default.json");

/// A profile that failed to load. `field` is a path into the JSON document
/// (empty for the document itself).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("profile is not valid JSON: {0}")]
    Syntax(String),
    #[error(
        "profile schemaVersion {found} is not supported: this toolhost reads version {PROFILE_SCHEMA_VERSION}"
    )]
    UnsupportedVersion { found: Value },
    #[error("profile field `{field}`: {message}")]
    Field {
        field: String,
        code: &'static str,
        message: String,
    },
}

impl ProfileError {
    fn field(field: impl Into<String>, code: &'static str, message: impl Into<String>) -> Self {
        Self::Field {
            field: field.into(),
            code,
            message: message.into(),
        }
    }

    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::field(field, "agent.profile_invalid", message)
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::Syntax(_) | Self::UnsupportedVersion { .. } => "agent.profile_invalid",
            Self::Field { code, .. } => code,
        }
    }

    /// The path of the offending field, when there is one.
    pub fn field_path(&self) -> Option<&str> {
        match self {
            Self::Field { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// One version of a profile as a grant names it: whose profile it is, its
/// id and the sha256 of its resolved content ([`Profile::digest`]). An
/// extension granted to a profile is granted to this version: a changed
/// profile needs a new grant, and the same content sent by another tenant
/// is another profile (content alone is no identity: anyone can send it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileVersion {
    pub id: String,
    pub sha256: String,
    /// The `toolhost serve` tenant whose profile this is; `None`: the local,
    /// single-user use (the CLI), never a served tenant. Grants written
    /// before tenants existed have none, so they stay local.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// A `toolhost serve` tenant's name: 1 to 64 of `a-z`, `0-9`, `-`, `_`
/// (the tokens file's rule, and a grant's).
pub fn is_tenant_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl ProfileVersion {
    /// Whose profile this is, for messages: ``tenant `acme` `` or `the
    /// local use` (a served tenant may be named `local`: never confused).
    pub fn owner(&self) -> String {
        match &self.tenant {
            Some(tenant) => format!("tenant `{tenant}`"),
            None => "the local use".to_owned(),
        }
    }
}

/// A resolved profile: every default filled in, every tool reference a
/// canonical [`ToolId`]. Serializing it gives the frozen form a run stores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    pub schema_version: u32,
    pub kind: String,
    /// `[a-z0-9_-]{1,128}`.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub tools: ToolPolicy,
    #[serde(default)]
    pub workspace: WorkspacePolicy,
    #[serde(default)]
    pub skills: SkillPolicy,
    #[serde(default)]
    pub delegation: DelegationPolicy,
    #[serde(default)]
    pub run: RunPolicy,
    #[serde(default)]
    pub model: ModelSettings,
    #[serde(default)]
    pub sandbox: SandboxPolicy,
    /// Left out of the resolved form while it is the default, so adding it
    /// changed no existing profile's digest (grants are bound to it).
    #[serde(default, skip_serializing_if = "OutputPolicy::is_default")]
    pub output: OutputPolicy,
    /// What of the app's prompt the model reads; left out while default,
    /// like `output`.
    #[serde(default, skip_serializing_if = "ContextPolicy::is_default")]
    pub context: ContextPolicy,
    #[serde(default, skip_serializing_if = "Instructions::is_default")]
    pub instructions: Instructions,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolPolicy {
    /// Tools offered to the model, in the order the provider sees them. A
    /// canonical id (`builtin:dice.roll`, `mcp/<uuid>:search`,
    /// `ext/acme:forecast`) or a builtin's bare native name (`dice.roll`).
    #[serde(deserialize_with = "tool_list")]
    pub allow: Vec<ToolId>,
    /// Never offered, even when allowed: deny wins.
    #[serde(default, deserialize_with = "tool_list")]
    pub deny: Vec<ToolId>,
    /// Model rounds per invocation before `agent.max_tool_rounds_exceeded`.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    /// Tool calls per invocation (the historical name says "run"; every
    /// invocation gets its own budget: the snapshot's `maxCallsPerInvocation`).
    #[serde(default = "default_max_calls")]
    pub max_calls_per_run: u32,
    /// Calls per invocation of one tool, by tool.
    #[serde(default, deserialize_with = "tool_map")]
    pub max_calls_per_tool: BTreeMap<ToolId, u32>,
    /// MCP results longer than this many characters are stored as a readable
    /// view and previewed.
    #[serde(default = "default_mcp_inline_limit")]
    pub mcp_result_inline_char_limit: u32,
    /// This profile's description of a tool, by tool, in place of its
    /// source's: frozen into the snapshot's binding, so the model reads it
    /// and a resumed run keeps it. Each key must be a visible tool. Left
    /// out of the resolved form when empty (digests of profiles without it
    /// stay as they were).
    #[serde(
        default,
        deserialize_with = "tool_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub tool_descriptions: BTreeMap<ToolId, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkspacePolicy {
    #[serde(default = "all_roots")]
    pub visible_roots: Vec<String>,
    #[serde(default = "all_roots")]
    pub writable_roots: Vec<String>,
}

/// What the run's message is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputPolicy {
    /// The message body: the workspace file a commit without a path
    /// publishes and an auto-publish watches. Its root also keeps the text
    /// of a reply without tool calls (`<root>/direct_output.md`). Default
    /// `output/main.md`; when its root is hidden from this profile, the
    /// profile has no message body in view.
    #[serde(default = "default_message_body")]
    pub message_body: String,
}

impl Default for OutputPolicy {
    fn default() -> Self {
        Self {
            message_body: default_message_body(),
        }
    }
}

impl OutputPolicy {
    pub fn is_default(&self) -> bool {
        self.message_body == DEFAULT_MESSAGE_BODY
    }

    /// The root the message body lives in (`output`).
    pub fn message_body_root(&self) -> &str {
        self.message_body
            .split_once('/')
            .map_or(self.message_body.as_str(), |(root, _)| root)
    }

    /// Where drift text is kept: `<message body root>/direct_output.md`.
    pub fn direct_output_path(&self) -> String {
        format!("{}/{DIRECT_OUTPUT_FILE}", self.message_body_root())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillPolicy {
    /// Skill names (`[a-z0-9_-]{1,128}`) or `*` for every installed skill.
    #[serde(default = "everything")]
    pub visible: Vec<String>,
    /// Hidden even when visible; `*` hides every skill.
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default = "default_skill_read_per_call")]
    pub max_read_chars_per_call: u32,
    #[serde(default = "default_skill_read_per_run")]
    pub max_read_chars_per_run: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DelegationPolicy {
    /// May call `agent.delegate` / `agent.await`.
    #[serde(default)]
    pub can_delegate: bool,
    /// May call `agent.handoff`.
    #[serde(default)]
    pub can_handoff: bool,
    /// Other agents may target this profile.
    #[serde(default)]
    pub callable: bool,
    #[serde(default)]
    pub allow_as_subagent: bool,
    #[serde(default)]
    pub allow_as_handoff_target: bool,
    #[serde(default)]
    pub allow_nested_delegation: bool,
    /// Profile ids that may target this one, or `*`.
    #[serde(default = "everything")]
    pub allowed_callers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description_for_agents: Option<String>,
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent_invocations: u32,
    #[serde(default = "default_max_invocations")]
    pub max_invocations_per_run: u32,
    #[serde(default = "default_result_budget")]
    pub result_budget_tokens: u32,
    #[serde(default = "default_max_handoff_depth")]
    pub max_handoff_depth: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Presentation {
    Foreground,
    Background,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunPolicy {
    #[serde(default = "default_presentation")]
    pub presentation: Presentation,
    /// A person can start a run with this profile (otherwise it is only a
    /// delegation or handoff target).
    #[serde(default = "yes")]
    pub direct_runnable: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelSettings {
    /// The provider's model name; the run's `--model-name` wins when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// 0 to 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxPolicy {
    /// Limit overrides by tool, applied over the tool's defaults and lowered
    /// to the host policy cap at every call.
    #[serde(default, deserialize_with = "tool_map")]
    pub limits: BTreeMap<ToolId, LimitOverrides>,
}

fn default_message_body() -> String {
    DEFAULT_MESSAGE_BODY.to_owned()
}
fn default_max_rounds() -> u32 {
    80
}
fn default_max_calls() -> u32 {
    80
}
fn default_mcp_inline_limit() -> u32 {
    50_000
}
fn default_skill_read_per_call() -> u32 {
    20_000
}
fn default_skill_read_per_run() -> u32 {
    80_000
}
fn default_max_concurrent() -> u32 {
    3
}
fn default_max_invocations() -> u32 {
    8
}
fn default_result_budget() -> u32 {
    8_000
}
fn default_max_handoff_depth() -> u32 {
    8
}
fn default_presentation() -> Presentation {
    Presentation::Foreground
}
fn yes() -> bool {
    true
}
fn all_roots() -> Vec<String> {
    WORKSPACE_ROOTS
        .iter()
        .map(|root| root.to_string())
        .collect()
}
fn everything() -> Vec<String> {
    vec!["*".into()]
}

impl Default for WorkspacePolicy {
    fn default() -> Self {
        Self {
            visible_roots: all_roots(),
            writable_roots: all_roots(),
        }
    }
}

impl Default for SkillPolicy {
    fn default() -> Self {
        Self {
            visible: everything(),
            deny: Vec::new(),
            max_read_chars_per_call: default_skill_read_per_call(),
            max_read_chars_per_run: default_skill_read_per_run(),
        }
    }
}

impl Default for DelegationPolicy {
    fn default() -> Self {
        Self {
            can_delegate: false,
            can_handoff: false,
            callable: false,
            allow_as_subagent: false,
            allow_as_handoff_target: false,
            allow_nested_delegation: false,
            allowed_callers: everything(),
            description_for_agents: None,
            max_concurrent_invocations: default_max_concurrent(),
            max_invocations_per_run: default_max_invocations(),
            result_budget_tokens: default_result_budget(),
            max_handoff_depth: default_max_handoff_depth(),
        }
    }
}

impl Default for RunPolicy {
    fn default() -> Self {
        Self {
            presentation: default_presentation(),
            direct_runnable: true,
        }
    }
}

/// Resolve one tool reference of a profile: a canonical id, or a bare name
/// meaning a builtin. A builtin must exist in this version. The message
/// starts with its code (`<code>: <detail>`), the convention serde errors
/// carry codes through.
pub fn resolve_tool_ref(text: &str) -> Result<ToolId, String> {
    let id = if text.contains(':') {
        ToolId::parse(text).map_err(|error| format!("agent.profile_invalid_tool_id: {error}"))?
    } else {
        ToolId::builtin(text).map_err(|error| format!("agent.profile_invalid_tool_id: {error}"))?
    };
    if id.is_builtin() && !builtin::is_builtin(id.native_name()) {
        return Err(format!(
            "agent.profile_unknown_tool: there is no builtin tool `{}`; builtins are {}",
            id.native_name(),
            builtin::names().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(id)
}

fn tool_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<ToolId>, D::Error> {
    // One element at a time so an error's path names the entry (`allow[2]`).
    struct Entry(ToolId);
    impl<'de> Deserialize<'de> for Entry {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let text = String::deserialize(deserializer)?;
            resolve_tool_ref(&text)
                .map(Entry)
                .map_err(serde::de::Error::custom)
        }
    }
    Ok(Vec::<Entry>::deserialize(deserializer)?
        .into_iter()
        .map(|Entry(id)| id)
        .collect())
}

fn tool_map<'de, D, V>(deserializer: D) -> Result<BTreeMap<ToolId, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    let raw = BTreeMap::<String, V>::deserialize(deserializer)?;
    let mut resolved = BTreeMap::new();
    let mut spelled: BTreeMap<ToolId, String> = BTreeMap::new();
    for (key, value) in raw {
        let id = resolve_tool_ref(&key)
            .map_err(|message| serde::de::Error::custom(format!("key `{key}`: {message}")))?;
        if let Some(first) = spelled.insert(id.clone(), key.clone()) {
            return Err(serde::de::Error::custom(format!(
                "agent.profile_invalid: keys `{first}` and `{key}` both name `{id}`"
            )));
        }
        resolved.insert(id, value);
    }
    Ok(resolved)
}

/// Split `"<code>: <detail>"` into its code when the prefix looks like one.
fn split_code(message: &str) -> (&'static str, String) {
    const CODES: [&str; 3] = [
        "agent.profile_invalid_tool_id",
        "agent.profile_unknown_tool",
        "agent.profile_invalid",
    ];
    // The code may follow a "key `x`: " prefix that names the map key.
    for code in CODES {
        if let Some(at) = message.find(&format!("{code}: ")) {
            let detail = format!("{}{}", &message[..at], &message[at + code.len() + 2..]);
            return (code, detail);
        }
    }
    ("agent.profile_invalid", message.to_owned())
}

impl Profile {
    /// Read and check a profile document.
    pub fn from_json(text: &str) -> Result<Self, ProfileError> {
        let document: Value =
            serde_json::from_str(text).map_err(|error| ProfileError::Syntax(error.to_string()))?;
        let Some(object) = document.as_object() else {
            return Err(ProfileError::invalid("", "a profile is a JSON object"));
        };
        // The version decides how to read everything else: check it first.
        match object.get("schemaVersion") {
            None => {
                return Err(ProfileError::invalid(
                    "schemaVersion",
                    format!("missing; this toolhost reads version {PROFILE_SCHEMA_VERSION}"),
                ));
            }
            Some(found) if found.as_u64() != Some(u64::from(PROFILE_SCHEMA_VERSION)) => {
                return Err(ProfileError::UnsupportedVersion {
                    found: found.clone(),
                });
            }
            Some(_) => {}
        }
        let profile: Profile = serde_path_to_error::deserialize(document).map_err(|error| {
            let field = error.path().to_string();
            let (code, message) = split_code(&error.into_inner().to_string());
            ProfileError::Field {
                field: if field == "." { String::new() } else { field },
                code,
                message,
            }
        })?;
        profile.validate()?;
        Ok(profile)
    }

    /// The built-in default profile (a test keeps the shipped file valid).
    pub fn default_writer() -> Result<Self, ProfileError> {
        Self::from_json(DEFAULT_PROFILE_JSON)
    }

    /// A profile offering exactly these tools with default budgets; for
    /// callers that are not agents (`toolhost call` without `--profile`).
    /// Not checked against the builtin list: any catalog tool may be named.
    pub fn for_tools(id: &str, tools: Vec<ToolId>) -> Self {
        let offers = |name: &str| {
            tools
                .iter()
                .any(|tool| tool.is_builtin() && tool.native_name() == name)
        };
        // The delegation flags the offered agent tools require.
        let delegation = DelegationPolicy {
            can_delegate: offers("agent.delegate") || offers("agent.await") || offers("agent.list"),
            can_handoff: offers("agent.handoff"),
            ..DelegationPolicy::default()
        };
        Self {
            schema_version: PROFILE_SCHEMA_VERSION,
            kind: PROFILE_KIND.into(),
            id: id.into(),
            display_name: None,
            description: None,
            tools: ToolPolicy {
                allow: tools,
                deny: Vec::new(),
                max_rounds: default_max_rounds(),
                max_calls_per_run: default_max_calls(),
                max_calls_per_tool: BTreeMap::new(),
                mcp_result_inline_char_limit: default_mcp_inline_limit(),
                tool_descriptions: BTreeMap::new(),
            },
            workspace: WorkspacePolicy::default(),
            skills: SkillPolicy::default(),
            delegation,
            run: RunPolicy::default(),
            model: ModelSettings::default(),
            sandbox: SandboxPolicy::default(),
            output: OutputPolicy::default(),
            context: ContextPolicy::default(),
            instructions: Instructions::default(),
        }
    }

    /// The frozen form a run stores (pretty JSON, defaults filled in).
    pub fn to_resolved_json(&self) -> String {
        // A resolved profile holds only strings, numbers and maps with string
        // keys: serializing it cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Hex sha256 of [`Self::to_resolved_json`]: the profile's content, what
    /// a run records and what a grant to this profile is bound to. Layout
    /// and defaults spelled out do not change it; any change of meaning does.
    pub fn digest(&self) -> String {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(self.to_resolved_json().as_bytes()))
    }

    /// This profile as a grant names it, for the local use (no tenant).
    pub fn version(&self) -> ProfileVersion {
        self.version_for(None)
    }

    /// This profile as a grant names it when `tenant` runs it (`None`: the
    /// local use).
    pub fn version_for(&self, tenant: Option<&str>) -> ProfileVersion {
        ProfileVersion {
            id: self.id.clone(),
            sha256: self.digest(),
            tenant: tenant.map(str::to_owned),
        }
    }

    /// Whether the model may be offered `id`: allowed and not denied.
    pub fn is_visible(&self, id: &ToolId) -> bool {
        self.tools.allow.contains(id) && !self.tools.deny.contains(id)
    }

    /// The visible tools, in allow order.
    pub fn visible_tools(&self) -> impl Iterator<Item = &ToolId> {
        self.tools
            .allow
            .iter()
            .filter(|id| !self.tools.deny.contains(id))
    }

    fn builtin_visible(&self, native_name: &str) -> bool {
        self.visible_tools()
            .any(|id| id.is_builtin() && id.native_name() == native_name)
    }

    /// The rules that span fields. Each error names the field to fix.
    pub fn validate(&self) -> Result<(), ProfileError> {
        if self.kind != PROFILE_KIND {
            return Err(ProfileError::invalid(
                "kind",
                format!("must be `{PROFILE_KIND}`, found `{}`", self.kind),
            ));
        }
        check_segment("id", &self.id)?;
        self.validate_tools()?;
        self.validate_workspace()?;
        self.validate_skills()?;
        self.validate_delegation()?;
        self.validate_model()?;
        self.validate_sandbox()?;
        self.context.validate()?;
        self.instructions.validate()?;
        self.validate_output()
    }

    fn validate_tools(&self) -> Result<(), ProfileError> {
        let tools = &self.tools;
        if tools.allow.is_empty() {
            return Err(ProfileError::invalid(
                "tools.allow",
                "must list at least one tool",
            ));
        }
        let mut seen = BTreeSet::new();
        for (index, id) in tools.allow.iter().enumerate() {
            if !seen.insert(id) {
                return Err(ProfileError::field(
                    format!("tools.allow[{index}]"),
                    "agent.profile_tools_allow_duplicate",
                    format!("`{id}` is listed twice"),
                ));
            }
            if id.is_builtin() && id.native_name() == TASK_RETURN {
                return Err(ProfileError::field(
                    format!("tools.allow[{index}]"),
                    "agent.profile_task_return_not_allowed",
                    "`task.return` is runtime-only: the runtime adds it to return-mode children",
                ));
            }
        }
        for (field, value) in [
            ("tools.maxRounds", tools.max_rounds),
            ("tools.maxCallsPerRun", tools.max_calls_per_run),
            (
                "tools.mcpResultInlineCharLimit",
                tools.mcp_result_inline_char_limit,
            ),
        ] {
            positive(field, value)?;
        }
        for (id, limit) in &tools.max_calls_per_tool {
            let field = format!("tools.maxCallsPerTool.{id}");
            positive(&field, *limit)?;
            self.require_visible(&field, id, "sets a limit for")?;
        }
        for (id, text) in &tools.tool_descriptions {
            let field = format!("tools.toolDescriptions.{id}");
            self.require_visible(&field, id, "describes")?;
            if text.trim().is_empty() {
                return Err(ProfileError::field(
                    field,
                    "agent.profile_tool_description_invalid",
                    "must not be empty: leave the tool out to keep its own description",
                ));
            }
            let chars = text.chars().count();
            if chars > MAX_TOOL_DESCRIPTION_CHARS {
                return Err(ProfileError::field(
                    field,
                    "agent.profile_tool_description_invalid",
                    format!(
                        "is {chars} characters long; at most {MAX_TOOL_DESCRIPTION_CHARS} (it is sent with every model request)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn require_visible(&self, field: &str, id: &ToolId, what: &str) -> Result<(), ProfileError> {
        if self.is_visible(id) {
            return Ok(());
        }
        let why = if self.tools.deny.contains(id) {
            "it is denied by tools.deny"
        } else {
            "it is not in tools.allow"
        };
        Err(ProfileError::field(
            field,
            "agent.profile_tool_not_visible",
            format!("{what} `{id}`, but {why}"),
        ))
    }

    fn validate_workspace(&self) -> Result<(), ProfileError> {
        let workspace = &self.workspace;
        for (field, roots) in [
            ("workspace.visibleRoots", &workspace.visible_roots),
            ("workspace.writableRoots", &workspace.writable_roots),
        ] {
            let mut seen = BTreeSet::new();
            for (index, root) in roots.iter().enumerate() {
                if !WORKSPACE_ROOTS.contains(&root.as_str()) {
                    return Err(ProfileError::invalid(
                        format!("{field}[{index}]"),
                        format!(
                            "`{root}` is not a workspace root; a profile may only narrow {}",
                            WORKSPACE_ROOTS.join(", ")
                        ),
                    ));
                }
                if !seen.insert(root) {
                    return Err(ProfileError::invalid(
                        format!("{field}[{index}]"),
                        format!("`{root}` is listed twice"),
                    ));
                }
            }
        }
        if workspace.visible_roots.is_empty() {
            return Err(ProfileError::invalid(
                "workspace.visibleRoots",
                "must list at least one root",
            ));
        }
        for (index, root) in workspace.writable_roots.iter().enumerate() {
            if !workspace.visible_roots.contains(root) {
                return Err(ProfileError::invalid(
                    format!("workspace.writableRoots[{index}]"),
                    format!("`{root}` is writable but not in workspace.visibleRoots"),
                ));
            }
        }
        Ok(())
    }

    fn validate_skills(&self) -> Result<(), ProfileError> {
        let skills = &self.skills;
        if skills.visible.is_empty() {
            return Err(ProfileError::invalid(
                "skills.visible",
                "must list at least one skill name or `*`",
            ));
        }
        for (field, names) in [
            ("skills.visible", &skills.visible),
            ("skills.deny", &skills.deny),
        ] {
            for (index, name) in names.iter().enumerate() {
                if name != "*" && !is_skill_name(name) {
                    return Err(ProfileError::invalid(
                        format!("{field}[{index}]"),
                        format!("`{name}` is not a skill name ([a-z0-9_-], 1 to 128) or `*`"),
                    ));
                }
            }
        }
        positive("skills.maxReadCharsPerCall", skills.max_read_chars_per_call)?;
        positive("skills.maxReadCharsPerRun", skills.max_read_chars_per_run)?;
        if skills.max_read_chars_per_call > skills.max_read_chars_per_run {
            return Err(ProfileError::invalid(
                "skills.maxReadCharsPerCall",
                format!(
                    "{} is more than skills.maxReadCharsPerRun ({})",
                    skills.max_read_chars_per_call, skills.max_read_chars_per_run
                ),
            ));
        }
        Ok(())
    }

    fn validate_delegation(&self) -> Result<(), ProfileError> {
        let delegation = &self.delegation;
        for name in ["agent.delegate", "agent.await"] {
            if self.builtin_visible(name) && !delegation.can_delegate {
                return Err(ProfileError::field(
                    "delegation.canDelegate",
                    "agent.profile_cannot_delegate",
                    format!("must be true when `{name}` is allowed"),
                ));
            }
        }
        if self.builtin_visible("agent.handoff") && !delegation.can_handoff {
            return Err(ProfileError::field(
                "delegation.canHandoff",
                "agent.profile_cannot_handoff",
                "must be true when `agent.handoff` is allowed",
            ));
        }
        if self.builtin_visible("agent.list")
            && !(delegation.can_delegate || delegation.can_handoff)
        {
            return Err(ProfileError::field(
                "delegation.canDelegate",
                "agent.profile_cannot_delegate",
                "`agent.list` is allowed, so canDelegate or canHandoff must be true",
            ));
        }
        if (delegation.allow_as_subagent || delegation.allow_as_handoff_target)
            && !delegation.callable
        {
            return Err(ProfileError::invalid(
                "delegation.callable",
                "must be true when allowAsSubagent or allowAsHandoffTarget is",
            ));
        }
        if delegation.callable
            && !(delegation.allow_as_subagent || delegation.allow_as_handoff_target)
        {
            return Err(ProfileError::invalid(
                "delegation.callable",
                "a callable profile needs allowAsSubagent or allowAsHandoffTarget",
            ));
        }
        if !self.run.direct_runnable && !delegation.callable {
            return Err(ProfileError::invalid(
                "run.directRunnable",
                "a profile that cannot be run directly must be callable by other agents",
            ));
        }
        if delegation.allowed_callers.is_empty() {
            return Err(ProfileError::invalid(
                "delegation.allowedCallers",
                "must list at least one profile id or `*`",
            ));
        }
        for (index, caller) in delegation.allowed_callers.iter().enumerate() {
            if caller != "*" {
                check_segment(&format!("delegation.allowedCallers[{index}]"), caller)?;
            }
        }
        for (field, value) in [
            (
                "delegation.maxConcurrentInvocations",
                delegation.max_concurrent_invocations,
            ),
            (
                "delegation.maxInvocationsPerRun",
                delegation.max_invocations_per_run,
            ),
            (
                "delegation.resultBudgetTokens",
                delegation.result_budget_tokens,
            ),
            ("delegation.maxHandoffDepth", delegation.max_handoff_depth),
        ] {
            positive(field, value)?;
        }
        Ok(())
    }

    fn validate_model(&self) -> Result<(), ProfileError> {
        if self
            .model
            .id
            .as_deref()
            .is_some_and(|id| id.trim().is_empty())
        {
            return Err(ProfileError::invalid("model.id", "must not be empty"));
        }
        if let Some(temperature) = self.model.temperature
            && !(0.0..=2.0).contains(&temperature)
        {
            return Err(ProfileError::invalid(
                "model.temperature",
                format!("{temperature} is outside 0 to 2"),
            ));
        }
        if let Some(tokens) = self.model.max_output_tokens {
            positive("model.maxOutputTokens", tokens)?;
        }
        Ok(())
    }

    fn validate_sandbox(&self) -> Result<(), ProfileError> {
        for (id, overrides) in &self.sandbox.limits {
            let field = format!("sandbox.limits.{id}");
            if matches!(id.provider(), ToolProvider::Mcp(_)) {
                return Err(ProfileError::invalid(
                    field,
                    "MCP tools run in their server, not in the sandbox: they take no sandbox limits",
                ));
            }
            self.require_visible(&field, id, "sets a limit for")?;
            if let Some(limit) = overrides.zero_limit() {
                return Err(ProfileError::invalid(
                    format!("{field}.{limit}"),
                    "must be greater than zero",
                ));
            }
        }
        Ok(())
    }
}

impl Profile {
    /// `output.messageBody`: a normalized file path strictly inside one of
    /// the workspace roots, not the drift file. A body set explicitly must
    /// be in a visible and writable root (the model is told to write it
    /// there); the default may sit in a hidden one (the profile then has no
    /// message body in view: it commits named files).
    fn validate_output(&self) -> Result<(), ProfileError> {
        const FIELD: &str = "output.messageBody";
        let output = &self.output;
        let body = output.message_body.as_str();
        let segments = crate::model_path::segments(body, crate::model_path::Names::File)
            .map_err(|problem| ProfileError::invalid(FIELD, problem.describe("the workspace")))?;
        if segments.join("/") != body {
            return Err(ProfileError::invalid(
                FIELD,
                format!("write it as `{}`", segments.join("/")),
            ));
        }
        let root = output.message_body_root();
        if segments.len() < 2 || !WORKSPACE_ROOTS.contains(&root) {
            return Err(ProfileError::invalid(
                FIELD,
                format!(
                    "`{body}` is not a file inside a workspace root ({})",
                    WORKSPACE_ROOTS.join(", ")
                ),
            ));
        }
        if body == output.direct_output_path() {
            return Err(ProfileError::invalid(
                FIELD,
                format!("`{body}` is where the text of a reply without tool calls is kept"),
            ));
        }
        if output.is_default() {
            return Ok(());
        }
        if !self.workspace.visible_roots.iter().any(|r| r == root) {
            return Err(ProfileError::invalid(
                FIELD,
                format!("`{root}` is not in workspace.visibleRoots"),
            ));
        }
        if !self.workspace.writable_roots.iter().any(|r| r == root) {
            return Err(ProfileError::invalid(
                FIELD,
                format!(
                    "`{root}` is not in workspace.writableRoots: the model could not write `{body}`"
                ),
            ));
        }
        Ok(())
    }

    /// The message body when this profile can see it: its root is visible.
    pub fn visible_message_body(&self) -> Option<&str> {
        let root = self.output.message_body_root();
        self.workspace
            .visible_roots
            .iter()
            .any(|visible| visible == root)
            .then_some(self.output.message_body.as_str())
    }
}

fn positive(field: &str, value: u32) -> Result<(), ProfileError> {
    if value == 0 {
        return Err(ProfileError::invalid(field, "must be greater than zero"));
    }
    Ok(())
}

/// Ids that become path segments and journal keys: `[a-z0-9_-]{1,128}`.
fn check_segment(field: &str, value: &str) -> Result<(), ProfileError> {
    let valid = !value.is_empty()
        && value.len() <= MAX_ID_BYTES
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ProfileError::invalid(
            field,
            format!("`{value}` is not an id: use 1 to 128 of a-z, 0-9, `_`, `-`"),
        ))
    }
}

fn is_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ID_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests;
