//! An in-memory [`Workspace`](crate::workspace::Workspace) for native unit
//! tests of tools (feature `testing`). It keeps files and records what tools
//! reported as read; it does not enforce the host's compare-and-swap rules,
//! which the host's own tests and the end-to-end tests cover.

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::workspace::{
    Entry, EntryKind, Listing, Patched, Root, TextFile, Workspace, WorkspaceWriter, WriteMode,
    Written,
};
use crate::{Arguments, Output, ToolError};

#[derive(Debug, Default)]
pub struct MemoryWorkspace {
    /// path → bytes (not necessarily UTF-8).
    pub files: RefCell<BTreeMap<String, Vec<u8>>>,
    /// Every `record_read` call: (path, sha256, seen).
    pub reads: RefCell<Vec<(String, String, Option<String>)>>,
}

impl MemoryWorkspace {
    pub fn with(files: &[(&str, &str)]) -> Self {
        let workspace = Self::default();
        for (path, text) in files {
            workspace
                .files
                .borrow_mut()
                .insert((*path).to_owned(), text.as_bytes().to_vec());
        }
        workspace
    }

    pub fn text(&self, path: &str) -> Option<String> {
        self.files
            .borrow()
            .get(path)
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    }
}

/// Not a real digest: tests only compare it for equality.
pub fn fake_sha(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn not_found(path: &str) -> ToolError {
    ToolError::new(
        "workspace.file_not_found",
        format!("workspace file `{path}` does not exist"),
    )
}

impl Workspace for MemoryWorkspace {
    fn roots(&self) -> Vec<Root> {
        ["output", "scratch", "plan", "summaries", "persist"]
            .into_iter()
            .map(|path| Root {
                path: path.to_owned(),
                writable: true,
            })
            .collect()
    }

    fn list(&self, path: &str, _depth: u32, limit: u32) -> Result<Listing, ToolError> {
        let prefix = path.trim_end_matches('/');
        let mut entries: Vec<Entry> = self
            .files
            .borrow()
            .iter()
            .filter(|(file, _)| prefix.is_empty() || file.starts_with(&format!("{prefix}/")))
            .map(|(file, bytes)| Entry {
                path: file.clone(),
                kind: EntryKind::File,
                bytes: bytes.len() as u64,
            })
            .collect();
        let truncated = entries.len() > limit as usize;
        entries.truncate(limit as usize);
        Ok(Listing { entries, truncated })
    }

    fn walk_files(&self, path: &str, depth: u32, max_files: u32) -> Result<Listing, ToolError> {
        self.list(path, depth, max_files)
    }

    fn read_text(&self, path: &str) -> Result<TextFile, ToolError> {
        let files = self.files.borrow();
        let bytes = files.get(path).ok_or_else(|| not_found(path))?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            ToolError::new(
                "workspace.file_not_text",
                format!("workspace file `{path}` is not UTF-8 text"),
            )
        })?;
        Ok(TextFile {
            path: path.to_owned(),
            text,
            sha256: fake_sha(bytes),
        })
    }

    fn record_read(&self, path: &str, sha256: &str, seen: Option<&str>) -> Result<(), ToolError> {
        self.reads
            .borrow_mut()
            .push((path.to_owned(), sha256.to_owned(), seen.map(str::to_owned)));
        Ok(())
    }
}

impl WorkspaceWriter for MemoryWorkspace {
    fn write(&self, path: &str, content: &str, mode: WriteMode) -> Result<Written, ToolError> {
        let mut files = self.files.borrow_mut();
        let created = !files.contains_key(path);
        let file = files.entry(path.to_owned()).or_default();
        match mode {
            WriteMode::Replace => *file = content.as_bytes().to_vec(),
            WriteMode::Append => file.extend_from_slice(content.as_bytes()),
        }
        let metrics = toolhost_text::metrics(content);
        Ok(Written {
            path: path.to_owned(),
            mode,
            sha256: fake_sha(file),
            chars: metrics.chars,
            words: metrics.words,
            created,
        })
    }

    fn patch(
        &self,
        path: &str,
        old: &str,
        new: &str,
        replace_all: bool,
    ) -> Result<Patched, ToolError> {
        let mut files = self.files.borrow_mut();
        let bytes = files.get_mut(path).ok_or_else(|| not_found(path))?;
        let text = String::from_utf8_lossy(bytes).into_owned();
        let count = text.matches(old).count();
        if count == 0 {
            return Err(ToolError::new(
                "workspace.patch_old_string_not_found",
                "old_string was not found",
            ));
        }
        let patched = if replace_all {
            text.replace(old, new)
        } else {
            text.replacen(old, new, 1)
        };
        let old_sha256 = fake_sha(bytes);
        *bytes = patched.as_bytes().to_vec();
        let metrics = toolhost_text::metrics(&patched);
        Ok(Patched {
            path: path.to_owned(),
            replacements: if replace_all { count as u32 } else { 1 },
            old_sha256,
            sha256: fake_sha(bytes),
            chars: metrics.chars,
            words: metrics.words,
        })
    }
}

/// An in-memory chat: every message visible, `(role, name, text)` each.
#[derive(Debug, Default)]
pub struct MemoryChat {
    pub user_name: String,
    pub character_name: String,
    pub messages: Vec<crate::knowledge::ChatMessage>,
    /// `messages` calls made (to check batching).
    pub batches: RefCell<u32>,
}

impl MemoryChat {
    pub fn with(messages: &[(crate::knowledge::Role, &str, &str)]) -> Self {
        Self {
            user_name: "User".into(),
            character_name: "Seraphina".into(),
            messages: messages
                .iter()
                .enumerate()
                .map(
                    |(index, (role, name, text))| crate::knowledge::ChatMessage {
                        index: index as u32,
                        role: *role,
                        name: (*name).to_owned(),
                        send_date: None,
                        text: (*text).to_owned(),
                        swipes: 0,
                    },
                )
                .collect(),
            batches: RefCell::new(0),
        }
    }
}

impl crate::knowledge::Chat for MemoryChat {
    fn info(&self) -> Result<crate::knowledge::ChatInfo, ToolError> {
        Ok(crate::knowledge::ChatInfo {
            user_name: self.user_name.clone(),
            character_name: self.character_name.clone(),
            group: false,
            message_count: self.messages.len() as u32,
        })
    }

    fn messages(
        &self,
        start: u32,
        count: u32,
    ) -> Result<Vec<crate::knowledge::ChatMessage>, ToolError> {
        *self.batches.borrow_mut() += 1;
        let count = count.min(crate::knowledge::MAX_CHAT_BATCH) as usize;
        Ok(self
            .messages
            .iter()
            .skip(start as usize)
            .take(count)
            .cloned()
            .collect())
    }
}

/// An in-memory world-info activation (`None` = the run has none).
#[derive(Debug, Default)]
pub struct MemoryWorldInfo(pub Option<crate::knowledge::Activation>);

impl crate::knowledge::WorldInfo for MemoryWorldInfo {
    fn activation(&self) -> Result<crate::knowledge::Activation, ToolError> {
        self.0.clone().ok_or_else(|| {
            ToolError::new(
                "worldinfo.activation_unavailable",
                "no world info was activated for this run",
            )
        })
    }
}

/// In-memory skills: name → (description, files), with a budget.
#[derive(Debug, Default)]
pub struct MemorySkills {
    pub skills: BTreeMap<String, (String, BTreeMap<String, Vec<u8>>)>,
    pub per_call: u64,
    pub remaining: RefCell<u64>,
}

/// A skill for [`MemorySkills::with`]: name, description, `(path, text)` files.
pub type SkillSpec<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

impl MemorySkills {
    pub fn with(per_call: u64, per_run: u64, skills: &[SkillSpec<'_>]) -> Self {
        Self {
            skills: skills
                .iter()
                .map(|(name, description, files)| {
                    let files = files
                        .iter()
                        .map(|(path, text)| ((*path).to_owned(), text.as_bytes().to_vec()))
                        .collect();
                    ((*name).to_owned(), ((*description).to_owned(), files))
                })
                .collect(),
            per_call,
            remaining: RefCell::new(per_run),
        }
    }

    fn skill(&self, name: &str) -> Result<&(String, BTreeMap<String, Vec<u8>>), ToolError> {
        self.skills.get(name).ok_or_else(|| {
            ToolError::new("skill.not_visible", format!("no visible skill `{name}`"))
        })
    }
}

impl crate::knowledge::Skills for MemorySkills {
    fn list_skills(&self) -> Vec<crate::knowledge::Skill> {
        self.skills
            .iter()
            .map(|(name, (description, _))| crate::knowledge::Skill {
                name: name.clone(),
                description: description.clone(),
                scope: "global".into(),
            })
            .collect()
    }

    fn files(&self, name: &str) -> Result<Vec<crate::knowledge::SkillFile>, ToolError> {
        Ok(self
            .skill(name)?
            .1
            .iter()
            .map(|(path, bytes)| crate::knowledge::SkillFile {
                path: path.clone(),
                bytes: bytes.len() as u64,
            })
            .collect())
    }

    fn read_text(&self, name: &str, path: &str) -> Result<crate::knowledge::SkillText, ToolError> {
        let path = if path.is_empty() { "SKILL.md" } else { path };
        let bytes = self.skill(name)?.1.get(path).ok_or_else(|| {
            ToolError::new(
                "skill.not_found",
                format!("skill `{name}` has no file `{path}`"),
            )
        })?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            ToolError::new(
                "skill.invalid_request",
                format!("`{path}` is not UTF-8 text"),
            )
        })?;
        Ok(crate::knowledge::SkillText {
            path: path.to_owned(),
            text,
            sha256: fake_sha(bytes),
        })
    }

    fn budget(&self) -> crate::knowledge::Budget {
        crate::knowledge::Budget {
            per_call: self.per_call,
            remaining: *self.remaining.borrow(),
        }
    }

    fn charge(&self, chars: u64) -> Result<(), ToolError> {
        let mut remaining = self.remaining.borrow_mut();
        if chars > *remaining {
            return Err(ToolError::new(
                "skill.read_budget_exhausted",
                "the skill read budget of this run is used up",
            ));
        }
        *remaining -= chars;
        Ok(())
    }
}

/// In-memory `agent-read`: agents with the operations this caller may use.
#[derive(Debug, Clone, Default)]
pub struct MemoryAgents(pub Vec<crate::agents::AgentSummary>);

impl crate::agents::Agents for MemoryAgents {
    fn list_agents(&self, purpose: crate::agents::Purpose) -> Vec<crate::agents::AgentSummary> {
        use crate::agents::Purpose;
        let mut listed: Vec<_> = self
            .0
            .iter()
            .filter(|agent| match purpose {
                Purpose::Any => !agent.operations.is_empty(),
                Purpose::Delegate => agent.operations.iter().any(|op| op == "delegate"),
                Purpose::Handoff => agent.operations.iter().any(|op| op == "handoff"),
            })
            .cloned()
            .collect();
        listed.sort_by(|a, b| a.profile_id.cmp(&b.profile_id));
        listed
    }
}

/// The model's arguments for a call, from JSON.
///
/// # Panics
/// When `value` is not a JSON object: the test's own mistake.
pub fn args(value: serde_json::Value) -> Arguments {
    Arguments::from_value(value).expect("arguments are an object")
}

/// Call a tool's function as its component does — on the model's arguments,
/// a JSON object — against a double of its capability:
/// `call(search_files, &workspace, json!({"query": "x"}))`.
///
/// # Panics
/// When `args` is not a JSON object: the test's own mistake.
pub fn call<C: ?Sized>(
    tool: impl FnOnce(&Arguments, &C) -> Result<Output, ToolError>,
    capability: &C,
    args: serde_json::Value,
) -> Result<Output, ToolError> {
    tool(
        &Arguments::from_value(args).expect("arguments are an object"),
        capability,
    )
}

/// What the model and a program read of a call's answer, one line each:
/// the content, the structured JSON text and the references; or the
/// error's `code: message`. Tests pin it to hold the output byte for byte.
pub fn transcript(answer: &Result<Output, ToolError>) -> String {
    match answer {
        Ok(output) => format!(
            "{}\n{}\n{:?}\n",
            output.content,
            output.structured.as_deref().unwrap_or(""),
            output.resource_refs
        ),
        Err(error) => format!("{error}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo(args: &Arguments, workspace: &MemoryWorkspace) -> Result<Output, ToolError> {
        let path = args.required_str("path")?;
        let text = workspace.text(path).unwrap_or_default();
        Ok(Output::text(text).structured(path).resource_ref(path))
    }

    #[test]
    fn a_call_and_its_transcript() {
        let workspace = MemoryWorkspace::with(&[("a.md", "alpha")]);
        let answer = call(echo, &workspace, serde_json::json!({"path": "a.md"}));
        assert_eq!(transcript(&answer), "alpha\n\"a.md\"\n[\"a.md\"]\n");
        let refused = call(echo, &workspace, serde_json::json!({}));
        assert_eq!(
            transcript(&refused),
            "tool.invalid_arguments: path is required\n"
        );
    }
}
