//! The installed skills: scopes, loading, the effective set and reads.

use std::collections::BTreeMap;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::FileType;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{SkillError, codes};
use crate::front_matter;
use crate::fs::{self, FsProblem};
use crate::path::{
    MAX_DEPTH, SKILL_FILE, check_name, entry_name_ok, is_skill_name, normalize_path, quoted,
};
use crate::policy::SkillPolicy;

/// Most files one skill may hold (hidden files not counted).
pub const MAX_FILES: usize = 1_000;
/// Largest file a skill tool reads (1 MiB); `SKILL.md` included.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Where a skill is installed. Later scopes override earlier ones: a
/// character's skill replaces a profile's, a profile's a preset's, a
/// preset's a global one of the same name (the reference's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Global,
    Preset,
    Profile,
    Character,
}

impl Scope {
    /// Every scope, weakest first.
    pub const ALL: [Scope; 4] = [
        Scope::Global,
        Scope::Preset,
        Scope::Profile,
        Scope::Character,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Preset => "preset",
            Self::Profile => "profile",
            Self::Character => "character",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scope's skills directory: one subdirectory per skill, named like it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSource {
    pub scope: Scope,
    pub dir: PathBuf,
}

impl SkillSource {
    pub fn new(scope: Scope, dir: impl Into<PathBuf>) -> Self {
        Self {
            scope,
            dir: dir.into(),
        }
    }
}

/// A skill as `skill.list` shows it (plus where it comes from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillInfo {
    pub name: String,
    pub description: String,
    pub scope: Scope,
}

/// A file of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFile {
    /// Relative to the skill directory, `/`-separated.
    pub path: String,
    pub bytes: u64,
}

/// A whole text file of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillText {
    /// Normalized (`SKILL.md` for an empty path).
    pub path: String,
    pub text: String,
    /// Lowercase hex sha256 of the file's bytes.
    pub sha256: String,
}

/// Why a skill directory was skipped at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkillProblem {
    /// No `SKILL.md` at the top of the directory.
    MissingSkillMd,
    /// `SKILL.md` is not a UTF-8 text file of at most 1 MiB.
    UnreadableSkillMd,
    /// The front matter is missing, not closed, or lacks `name` or
    /// `description` (or they are not strings).
    InvalidFrontMatter,
    /// The directory or front-matter name is not `[a-z0-9_-]{1,128}`.
    InvalidName,
    /// The front-matter name is not the directory's name.
    NameMismatch,
    /// The skill directory, or something inside it, is a symbolic link or
    /// a special file (fifo, socket, device).
    Link,
    /// More than 1,000 files, or a file deeper than 8 levels.
    TooLarge,
    /// The host could not read it.
    Unreadable,
}

impl SkillProblem {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingSkillMd => "missing_skill_md",
            Self::UnreadableSkillMd => "unreadable_skill_md",
            Self::InvalidFrontMatter => "invalid_front_matter",
            Self::InvalidName => "invalid_name",
            Self::NameMismatch => "name_mismatch",
            Self::Link => "link",
            Self::TooLarge => "too_large",
            Self::Unreadable => "unreadable",
        }
    }
}

/// A skill directory that was skipped, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDiagnostic {
    pub scope: Scope,
    /// The skill directory (or the entry that should have been one).
    pub dir: PathBuf,
    pub problem: SkillProblem,
    pub message: String,
}

impl fmt::Display for SkillDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} skill {}: {} ({})",
            self.scope,
            self.dir.display(),
            self.message,
            self.problem.as_str()
        )
    }
}

struct Root {
    scope: Scope,
    dir: PathBuf,
    fd: OwnedFd,
}

struct Installed {
    info: SkillInfo,
    /// Index into `roots`.
    root: usize,
}

/// The effective skills of one set of sources. Loading reads every skill's
/// file list and `SKILL.md`; later reads go back to the disk beneath the
/// scope directory's descriptor, which is held, never through a link.
pub struct SkillLibrary {
    roots: Vec<Root>,
    skills: BTreeMap<String, Installed>,
    diagnostics: Vec<SkillDiagnostic>,
}

impl fmt::Debug for SkillLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillLibrary")
            .field("skills", &self.skills.keys().collect::<Vec<_>>())
            .field("diagnostics", &self.diagnostics.len())
            .finish()
    }
}

impl SkillLibrary {
    /// No skill installed.
    pub fn empty() -> Self {
        Self {
            roots: Vec::new(),
            skills: BTreeMap::new(),
            diagnostics: Vec::new(),
        }
    }

    /// Load the skills of `sources` and resolve the effective set.
    ///
    /// Sources are taken in scope order (global, preset, profile,
    /// character; sources of one scope in the order given), and a skill
    /// replaces an earlier one of the same name. A missing scope directory
    /// holds no skills. In a scope directory, hidden entries and plain files
    /// are ignored; every subdirectory should be a skill, and one that is
    /// not usable is skipped with a [`SkillDiagnostic`] (see
    /// [`SkillProblem`]): a skill's name must be `[a-z0-9_-]{1,128}` and the
    /// name of its directory.
    ///
    /// Errors (System `skill.io_error`) only for a scope directory that
    /// cannot be opened or listed, and a kernel without `openat2`.
    pub fn load(sources: &[SkillSource]) -> Result<Self, SkillError> {
        let mut ordered: Vec<&SkillSource> = sources.iter().collect();
        ordered.sort_by_key(|source| source.scope);
        let mut library = Self::empty();
        for source in ordered {
            library.load_source(source)?;
        }
        for diagnostic in &library.diagnostics {
            tracing::warn!(%diagnostic, "skipping a skill");
        }
        Ok(library)
    }

    fn load_source(&mut self, source: &SkillSource) -> Result<(), SkillError> {
        let shown = source.dir.display().to_string();
        let fd = match fs::open_root(&source.dir) {
            Ok(Some(fd)) => fd,
            Ok(None) => {
                tracing::debug!(scope = %source.scope, dir = %shown, "no skills directory");
                return Ok(());
            }
            Err(FsProblem::NotDirectory) => {
                return Err(SkillError::io(
                    "open",
                    &format!("{} skills directory {shown}", source.scope),
                    "not a directory",
                ));
            }
            Err(problem) => return Err(root_error(source, &problem)),
        };
        let entries = fs::list_root(fd.as_fd()).map_err(|problem| root_error(source, &problem))?;
        let root = self.roots.len();
        self.roots.push(Root {
            scope: source.scope,
            dir: source.dir.clone(),
            fd,
        });
        for entry in entries {
            if entry.name.starts_with('.') {
                continue;
            }
            let dir = source.dir.join(&entry.name);
            let skip = |problem, message: String| SkillDiagnostic {
                scope: source.scope,
                dir: dir.clone(),
                problem,
                message,
            };
            match entry.kind {
                Some(FileType::Directory) => {}
                Some(FileType::RegularFile) => continue,
                // Gone meanwhile, or a name that is not UTF-8.
                None if entry.utf8 => continue,
                None => {
                    self.diagnostics.push(skip(
                        SkillProblem::InvalidName,
                        "the directory name is not UTF-8".to_owned(),
                    ));
                    continue;
                }
                Some(FileType::Symlink) => {
                    self.diagnostics.push(skip(
                        SkillProblem::Link,
                        "the skill directory is a symbolic link; links are never followed"
                            .to_owned(),
                    ));
                    continue;
                }
                Some(_) => {
                    self.diagnostics.push(skip(
                        SkillProblem::Link,
                        "a special file (fifo, socket, device) where a skill directory should be"
                            .to_owned(),
                    ));
                    continue;
                }
            }
            match self.load_skill(root, &entry.name) {
                Ok(info) => {
                    if let Some(replaced) = self.skills.get(&info.name) {
                        tracing::debug!(
                            skill = %info.name,
                            from = %replaced.info.scope,
                            by = %info.scope,
                            "skill overridden"
                        );
                    }
                    self.skills
                        .insert(info.name.clone(), Installed { info, root });
                }
                Err(Skip::Diagnostic(problem, message)) => {
                    self.diagnostics.push(skip(problem, message));
                }
                Err(Skip::Fatal(error)) => return Err(error),
            }
        }
        Ok(())
    }

    fn load_skill(&self, root: usize, name: &str) -> Result<SkillInfo, Skip> {
        let scope = self.roots[root].scope;
        if !is_skill_name(name) || !entry_name_ok(name) {
            return Err(Skip::Diagnostic(
                SkillProblem::InvalidName,
                format!(
                    "the directory name {} is not a skill name ([a-z0-9_-], 1 to 128)",
                    quoted(name)
                ),
            ));
        }
        let dir =
            fs::open_dir(self.roots[root].fd.as_fd(), name).map_err(|problem| match problem {
                FsProblem::Link => Skip::Diagnostic(
                    SkillProblem::Link,
                    "the skill directory is a symbolic link; links are never followed".to_owned(),
                ),
                other => Skip::load(other, "the skill directory"),
            })?;
        let files = fs::walk(
            dir.try_clone().map_err(|error| {
                Skip::load(
                    FsProblem::Io("open", error.to_string()),
                    "the skill directory",
                )
            })?,
            MAX_DEPTH,
            MAX_FILES,
        )
        .map_err(|problem| Skip::load(problem, "the skill directory"))?;
        if !files.iter().any(|(path, _)| path == SKILL_FILE) {
            let what = match fs::kind_of(dir.as_fd(), SKILL_FILE) {
                Ok(Some(FileType::Directory)) => "SKILL.md is a directory",
                _ => "the directory has no SKILL.md",
            };
            return Err(Skip::Diagnostic(
                SkillProblem::MissingSkillMd,
                what.to_owned(),
            ));
        }
        let bytes =
            fs::read_file(dir.as_fd(), SKILL_FILE, MAX_FILE_BYTES).map_err(
                |problem| match problem {
                    FsProblem::TooLarge(size) => Skip::Diagnostic(
                        SkillProblem::UnreadableSkillMd,
                        format!("SKILL.md is {size} bytes; the limit is {MAX_FILE_BYTES}"),
                    ),
                    other => Skip::load(other, "SKILL.md"),
                },
            )?;
        let text = String::from_utf8(bytes).map_err(|_| {
            Skip::Diagnostic(
                SkillProblem::UnreadableSkillMd,
                "SKILL.md is not UTF-8 text".to_owned(),
            )
        })?;
        let front = front_matter::parse(&text)
            .map_err(|problem| Skip::Diagnostic(SkillProblem::InvalidFrontMatter, problem))?;
        if !is_skill_name(&front.name) {
            return Err(Skip::Diagnostic(
                SkillProblem::InvalidName,
                format!(
                    "the front-matter name {} is not a skill name ([a-z0-9_-], 1 to 128)",
                    quoted(&front.name)
                ),
            ));
        }
        if front.name != name {
            return Err(Skip::Diagnostic(
                SkillProblem::NameMismatch,
                format!(
                    "the front-matter name {} is not the directory's name {}",
                    quoted(&front.name),
                    quoted(name)
                ),
            ));
        }
        Ok(SkillInfo {
            name: front.name,
            description: front.description,
            scope,
        })
    }

    /// The skill directories that were skipped, in load order.
    pub fn diagnostics(&self) -> &[SkillDiagnostic] {
        &self.diagnostics
    }

    /// Every effective skill, by name, whatever a profile says.
    pub fn installed(&self) -> Vec<SkillInfo> {
        self.skills
            .values()
            .map(|skill| skill.info.clone())
            .collect()
    }

    /// Where an effective skill's directory is (for the host's own
    /// messages; tools never see it).
    pub fn skill_dir(&self, name: &str) -> Option<PathBuf> {
        let skill = self.skills.get(name)?;
        Some(self.roots[skill.root].dir.join(name))
    }

    /// The effective skills `policy` lets the agent see, by name.
    pub fn visible(&self, policy: &SkillPolicy) -> Vec<SkillInfo> {
        self.skills
            .values()
            .filter(|skill| policy.allows(&skill.info.name))
            .map(|skill| skill.info.clone())
            .collect()
    }

    /// The skill `name` as the agent may use it:
    /// `skill.invalid_request` for a malformed name, `skill.policy_denied`
    /// when the profile denies it or does not list it, `skill.not_visible`
    /// when the profile allows it but no scope has it installed.
    pub fn lookup(&self, policy: &SkillPolicy, name: &str) -> Result<&SkillInfo, SkillError> {
        self.installed_skill(policy, name).map(|skill| &skill.info)
    }

    fn installed_skill(&self, policy: &SkillPolicy, name: &str) -> Result<&Installed, SkillError> {
        check_name(name)?;
        policy.check(name)?;
        self.skills.get(name).ok_or_else(|| {
            SkillError::recoverable(
                codes::NOT_VISIBLE,
                format!("skill `{name}` is not installed; list the skills to see which ones are."),
            )
        })
    }

    fn open_skill(&self, skill: &Installed) -> Result<OwnedFd, SkillError> {
        let name = skill.info.name.as_str();
        let root = &self.roots[skill.root];
        fs::open_dir(root.fd.as_fd(), name).map_err(|problem| match problem {
            FsProblem::Missing | FsProblem::NotDirectory => SkillError::recoverable(
                codes::NOT_FOUND,
                format!("skill `{name}` is no longer installed."),
            ),
            FsProblem::Link => SkillError::invalid(format!(
                "skill `{name}`'s directory has been replaced by a symbolic link; links are never followed."
            )),
            other => system(other, &root.dir.join(name)),
        })
    }

    /// The files of a visible skill, by path (hidden files are not part of
    /// a skill). A link or special file that appeared in it since the load,
    /// or files beyond the limits, are `skill.invalid_request`.
    pub fn files(&self, policy: &SkillPolicy, name: &str) -> Result<Vec<SkillFile>, SkillError> {
        let skill = self.installed_skill(policy, name)?;
        let dir = self.open_skill(skill)?;
        let mut files = fs::walk(dir, MAX_DEPTH, MAX_FILES).map_err(|problem| match problem {
            FsProblem::FoundLink(path, what) => SkillError::invalid(format!(
                "skill `{name}` contains {what} at `{path}`; skill tools never follow links, so its files cannot be listed."
            )),
            FsProblem::TooManyFiles => SkillError::invalid(format!(
                "skill `{name}` holds more than {MAX_FILES} files; skill tools cannot list it."
            )),
            FsProblem::TooDeep(path) => SkillError::invalid(format!(
                "skill `{name}` has `{path}` deeper than {MAX_DEPTH} levels; skill tools cannot list it."
            )),
            other => system(other, &self.roots[skill.root].dir.join(name)),
        })?;
        files.sort();
        Ok(files
            .into_iter()
            .map(|(path, bytes)| SkillFile { path, bytes })
            .collect())
    }

    /// A whole UTF-8 text file of a visible skill; `path` is relative to the
    /// skill directory, empty for `SKILL.md`. Nothing is charged: the tool
    /// charges the budget for what it shows.
    ///
    /// `skill.invalid_request`: a bad path, a directory, a file over 1 MiB,
    /// a file that is not UTF-8 (binary), a symbolic link or special file
    /// anywhere on the way (refused by the kernel, never followed);
    /// `skill.not_found`: no such file.
    pub fn read_text(
        &self,
        policy: &SkillPolicy,
        name: &str,
        path: &str,
    ) -> Result<SkillText, SkillError> {
        let skill = self.installed_skill(policy, name)?;
        let path = normalize_path(path)?;
        let dir = self.open_skill(skill)?;
        let bytes = fs::read_file(dir.as_fd(), &path, MAX_FILE_BYTES).map_err(|problem| match problem {
            FsProblem::Missing | FsProblem::NotDirectory => SkillError::recoverable(
                codes::NOT_FOUND,
                format!("skill `{name}` has no file `{path}`; list the skill's files to see which exist."),
            ),
            FsProblem::Link => SkillError::invalid(format!(
                "skill `{name}` file `{path}` is, or passes through, a symbolic link; skill tools never follow links."
            )),
            FsProblem::Special(what) => SkillError::invalid(format!(
                "skill `{name}` file `{path}` is {what}, not a regular file."
            )),
            FsProblem::Directory => SkillError::invalid(format!(
                "skill `{name}` path `{path}` is a directory; list the skill's files and read one of them."
            )),
            FsProblem::TooLarge(size) => SkillError::invalid(format!(
                "skill `{name}` file `{path}` is {size} bytes; skill tools read files of at most {MAX_FILE_BYTES} bytes."
            )),
            other => system(other, &self.roots[skill.root].dir.join(name).join(&path)),
        })?;
        let sha256 = hex::encode(Sha256::digest(&bytes));
        let text = String::from_utf8(bytes).map_err(|_| {
            SkillError::invalid(format!(
                "skill `{name}` file `{path}` is not UTF-8 text (a binary file); skill tools read text files only."
            ))
        })?;
        Ok(SkillText { path, text, sha256 })
    }
}

/// Why `load_skill` gave up on a skill.
enum Skip {
    Diagnostic(SkillProblem, String),
    /// Not the skill's fault: the load fails.
    Fatal(SkillError),
}

impl Skip {
    fn load(problem: FsProblem, what: &str) -> Self {
        match problem {
            FsProblem::FoundLink(path, kind) => Self::Diagnostic(
                SkillProblem::Link,
                format!("`{path}` is {kind}; links and special files are not allowed in a skill"),
            ),
            FsProblem::Link => Self::Diagnostic(
                SkillProblem::Link,
                format!("{what} is, or passes through, a symbolic link; links are never followed"),
            ),
            FsProblem::Special(kind) => Self::Diagnostic(
                SkillProblem::Link,
                format!("{what} is {kind}; special files are not allowed in a skill"),
            ),
            FsProblem::TooManyFiles => Self::Diagnostic(
                SkillProblem::TooLarge,
                format!("the skill holds more than {MAX_FILES} files"),
            ),
            FsProblem::TooDeep(path) => Self::Diagnostic(
                SkillProblem::TooLarge,
                format!("`{path}` is deeper than {MAX_DEPTH} levels"),
            ),
            FsProblem::Unsupported(message) => Self::Fatal(SkillError::io("open", what, message)),
            FsProblem::Missing => Self::Diagnostic(
                SkillProblem::Unreadable,
                format!("{what} disappeared while loading"),
            ),
            FsProblem::Directory => Self::Diagnostic(
                SkillProblem::UnreadableSkillMd,
                format!("{what} is a directory"),
            ),
            FsProblem::NotDirectory => Self::Diagnostic(
                SkillProblem::Unreadable,
                format!("{what} is not a directory"),
            ),
            FsProblem::TooLarge(size) => Self::Diagnostic(
                SkillProblem::UnreadableSkillMd,
                format!("{what} is {size} bytes; the limit is {MAX_FILE_BYTES}"),
            ),
            FsProblem::Io(op, error) => {
                Self::Diagnostic(SkillProblem::Unreadable, format!("{op} {what}: {error}"))
            }
        }
    }
}

fn root_error(source: &SkillSource, problem: &FsProblem) -> SkillError {
    system_message(
        problem,
        &format!("{} skills directory {}", source.scope, source.dir.display()),
    )
}

fn system(problem: FsProblem, path: &Path) -> SkillError {
    system_message(&problem, &path.display().to_string())
}

fn system_message(problem: &FsProblem, what: &str) -> SkillError {
    match problem {
        FsProblem::Io(op, error) => SkillError::io(op, what, error),
        FsProblem::Unsupported(message) => SkillError::io("open", what, message),
        other => SkillError::io("read", what, format!("{other:?}")),
    }
}
