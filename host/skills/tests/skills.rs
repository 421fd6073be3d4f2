//! The skill library against the fixtures in `tests/fixtures/skills/` and
//! against skill directories made (and tampered with) in temp dirs.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tempfile::TempDir;
use toolhost_skills::{
    MAX_FILE_BYTES, Scope, SkillBudget, SkillError, SkillLibrary, SkillPolicy, SkillProblem,
    SkillSource, codes,
};

const SECRET: &str = "TOP-SECRET-OUTSIDE-THE-SKILL";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/skills")
}

fn fixture_sources() -> Vec<SkillSource> {
    vec![
        SkillSource::new(Scope::Global, fixtures().join("global")),
        SkillSource::new(Scope::Character, fixtures().join("character")),
    ]
}

fn all() -> SkillPolicy {
    SkillPolicy::all()
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A writable copy of the global fixtures, plus a secret file outside the
/// skills directory.
struct Scratch {
    _temp: TempDir,
    global: PathBuf,
    secret: PathBuf,
    secret_dir: PathBuf,
}

fn scratch() -> Scratch {
    let temp = TempDir::new().unwrap();
    let global = temp.path().join("skills/global");
    copy_dir(&fixtures().join("global"), &global);
    let secret_dir = temp.path().join("outside");
    fs::create_dir_all(&secret_dir).unwrap();
    let secret = secret_dir.join("secret.md");
    fs::write(
        &secret,
        format!("---\nname: secret\ndescription: {SECRET}\n---\n{SECRET}\n"),
    )
    .unwrap();
    fs::write(
        secret_dir.join("SKILL.md"),
        format!("---\nname: outside\ndescription: {SECRET}\n---\n"),
    )
    .unwrap();
    Scratch {
        _temp: temp,
        global,
        secret,
        secret_dir,
    }
}

fn load_global(dir: &Path) -> SkillLibrary {
    SkillLibrary::load(&[SkillSource::new(Scope::Global, dir)]).unwrap()
}

fn make_skill(root: &Path, dir: &str, skill_md: &str) -> PathBuf {
    let path = root.join(dir);
    fs::create_dir_all(&path).unwrap();
    fs::write(path.join("SKILL.md"), skill_md).unwrap();
    path
}

fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n")
}

fn assert_code(result: Result<impl std::fmt::Debug, SkillError>, code: &str) -> SkillError {
    let error = result.expect_err("expected an error");
    assert_eq!(error.code(), code, "{error}");
    error
}

fn assert_no_secret(error: &SkillError) {
    assert!(!error.message().contains(SECRET), "{error}");
}

// --- scopes and the effective set ---------------------------------------

#[test]
fn fixtures_load_with_the_character_scope_overriding() {
    let library = SkillLibrary::load(&fixture_sources()).unwrap();
    let installed = library.installed();
    let names: Vec<_> = installed
        .iter()
        .map(|s| (s.name.as_str(), s.scope))
        .collect();
    assert_eq!(
        names,
        [
            ("lore-keeper", Scope::Global),
            ("prose-style", Scope::Character)
        ]
    );
    assert!(installed[1].description.starts_with("Mara's voice"));
    let text = library.read_text(&all(), "prose-style", "").unwrap();
    assert!(
        text.text.contains("This character overrides"),
        "{}",
        text.text
    );
    // The overridden global skill's files are gone with it.
    assert_code(
        library.read_text(&all(), "prose-style", "examples/dialogue.md"),
        codes::NOT_FOUND,
    );
}

#[test]
fn global_fixture_descriptions_are_parsed() {
    let library = load_global(&fixtures().join("global"));
    let prose = library.lookup(&all(), "prose-style").unwrap();
    assert_eq!(prose.scope, Scope::Global);
    assert_eq!(
        prose.description,
        "House style for narrative prose: point of view, tense, dialogue tags and pacing. Read before writing or revising a scene."
    );
    let lore = library.lookup(&all(), "lore-keeper").unwrap();
    assert!(
        lore.description
            .starts_with("Canon of the Eldoria setting: dates")
    );
}

#[test]
fn scope_order_decides_not_the_order_of_the_sources() {
    let mut sources = fixture_sources();
    sources.reverse();
    let library = SkillLibrary::load(&sources).unwrap();
    assert_eq!(
        library.lookup(&all(), "prose-style").unwrap().scope,
        Scope::Character
    );
}

#[test]
fn every_scope_overrides_the_ones_before_it() {
    let temp = TempDir::new().unwrap();
    let mut sources = Vec::new();
    for scope in Scope::ALL {
        let dir = temp.path().join(scope.as_str());
        make_skill(
            &dir,
            "shared",
            &skill_md("shared", &format!("from {scope}")),
        );
        make_skill(
            &dir,
            &format!("only-{scope}"),
            &skill_md(&format!("only-{scope}"), "x"),
        );
        sources.push(SkillSource::new(scope, dir));
    }
    for upto in 1..=4 {
        let library = SkillLibrary::load(&sources[..upto]).unwrap();
        let shared = library.lookup(&all(), "shared").unwrap();
        assert_eq!(shared.scope, Scope::ALL[upto - 1]);
        assert_eq!(shared.description, format!("from {}", Scope::ALL[upto - 1]));
        assert_eq!(library.installed().len(), upto + 1);
    }
}

#[test]
fn a_missing_scope_directory_holds_no_skills() {
    let temp = TempDir::new().unwrap();
    let library = SkillLibrary::load(&[
        SkillSource::new(Scope::Preset, temp.path().join("nope")),
        SkillSource::new(Scope::Global, fixtures().join("global")),
    ])
    .unwrap();
    assert_eq!(library.installed().len(), 2);
}

#[test]
fn a_scope_directory_that_is_a_file_fails_the_load() {
    let temp = TempDir::new().unwrap();
    let file = temp.path().join("skills");
    fs::write(&file, "not a dir").unwrap();
    let error = SkillLibrary::load(&[SkillSource::new(Scope::Global, &file)]).unwrap_err();
    assert!(error.is_system());
    assert_eq!(error.code(), codes::IO_ERROR);
}

// --- visibility ---------------------------------------------------------

#[test]
fn visibility_star_names_and_deny() {
    let library = SkillLibrary::load(&fixture_sources()).unwrap();
    let names = |policy: &SkillPolicy| -> Vec<String> {
        library
            .visible(policy)
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    assert_eq!(
        names(&all()),
        ["lore-keeper", "prose-style"],
        "sorted by name"
    );
    assert_eq!(
        names(&SkillPolicy::new(["prose-style"], Vec::<String>::new())),
        ["prose-style"]
    );
    assert_eq!(
        names(&SkillPolicy::new(["*"], ["lore-keeper"])),
        ["prose-style"]
    );
    assert_eq!(
        names(&SkillPolicy::new(
            ["lore-keeper", "prose-style"],
            ["prose-style"]
        )),
        ["lore-keeper"],
        "deny wins over a name"
    );
    assert!(
        names(&SkillPolicy::new(["*"], ["*"])).is_empty(),
        "deny * hides all"
    );
    assert!(names(&SkillPolicy::new(["lore-keeper"], ["*"])).is_empty());
    assert!(names(&SkillPolicy::new(["not-installed"], Vec::<String>::new())).is_empty());
}

#[test]
fn lookups_say_denied_or_not_installed() {
    let library = SkillLibrary::load(&fixture_sources()).unwrap();
    let some = SkillPolicy::new(["prose-style", "ghost"], ["lore-keeper"]);
    assert!(library.lookup(&some, "prose-style").is_ok());
    // Installed but denied, or installed but not listed: the policy's word.
    let denied = assert_code(library.lookup(&some, "lore-keeper"), codes::POLICY_DENIED);
    assert!(denied.is_recoverable());
    let only_prose = SkillPolicy::new(["prose-style"], Vec::<String>::new());
    assert_code(
        library.lookup(&only_prose, "lore-keeper"),
        codes::POLICY_DENIED,
    );
    assert_code(
        library.lookup(&SkillPolicy::new(["*"], ["*"]), "prose-style"),
        codes::POLICY_DENIED,
    );
    // Allowed, but installed in no scope.
    assert_code(library.lookup(&some, "ghost"), codes::NOT_VISIBLE);
    assert_code(library.lookup(&all(), "ghost"), codes::NOT_VISIBLE);
    // A skipped (broken) skill is not installed.
    assert_code(library.lookup(&all(), "broken-notes"), codes::NOT_VISIBLE);
    // Not even a name.
    assert_code(library.lookup(&all(), "../global"), codes::INVALID_REQUEST);
    assert_code(library.lookup(&all(), ""), codes::INVALID_REQUEST);
    // Every entry point applies the same checks.
    assert_code(library.files(&some, "lore-keeper"), codes::POLICY_DENIED);
    assert_code(
        library.read_text(&some, "lore-keeper", ""),
        codes::POLICY_DENIED,
    );
    assert_code(library.files(&some, "ghost"), codes::NOT_VISIBLE);
    assert_code(library.read_text(&some, "ghost", ""), codes::NOT_VISIBLE);
}

// --- diagnostics --------------------------------------------------------

#[test]
fn the_broken_fixture_is_a_diagnostic() {
    let library = load_global(&fixtures().join("global"));
    let diagnostics = library.diagnostics();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].problem, SkillProblem::InvalidFrontMatter);
    assert_eq!(diagnostics[0].scope, Scope::Global);
    assert!(diagnostics[0].dir.ends_with("broken-notes"));
    assert!(
        diagnostics[0].message.contains("front matter"),
        "{}",
        diagnostics[0]
    );
}

#[test]
fn broken_skills_are_skipped_with_diagnostics() {
    let temp = TempDir::new().unwrap();
    let root = temp.path().join("skills");
    make_skill(&root, "good", &skill_md("good", "Works."));
    fs::create_dir_all(root.join("no-skill-md/docs")).unwrap();
    fs::write(root.join("no-skill-md/docs/a.md"), "a").unwrap();
    fs::create_dir_all(root.join("skill-md-dir/SKILL.md")).unwrap();
    make_skill(&root, "no-front", "# Just a title\n");
    make_skill(&root, "unclosed", "---\nname: unclosed\ndescription: x\n");
    make_skill(&root, "no-description", "---\nname: no-description\n---\n");
    make_skill(&root, "no-name", "---\ndescription: x\n---\n");
    make_skill(&root, "bad-front-name", &skill_md("Bad Name", "x"));
    make_skill(&root, "Bad_Dir", &skill_md("Bad_Dir", "x"));
    make_skill(&root, "mismatch", &skill_md("other-name", "x"));
    let binary = root.join("binary-md");
    fs::create_dir_all(&binary).unwrap();
    fs::write(
        binary.join("SKILL.md"),
        b"---\nname: binary-md\ndescription: \xff\n---\n",
    )
    .unwrap();
    let huge = make_skill(&root, "huge-md", "");
    let mut text = skill_md("huge-md", "x");
    text.push_str(&"y".repeat(MAX_FILE_BYTES as usize));
    fs::write(huge.join("SKILL.md"), text).unwrap();
    let many = make_skill(&root, "too-many", &skill_md("too-many", "x"));
    for index in 0..1_000 {
        fs::write(many.join(format!("f{index:04}.md")), "x").unwrap();
    }
    let deep = make_skill(&root, "too-deep", &skill_md("too-deep", "x"));
    let nested = deep.join("1/2/3/4/5/6/7/8");
    fs::create_dir_all(&nested).unwrap();
    fs::write(nested.join("nine.md"), "x").unwrap();
    // Depth 8 exactly is fine.
    let ok_deep = make_skill(&root, "deep-ok", &skill_md("deep-ok", "x"));
    fs::create_dir_all(ok_deep.join("1/2/3/4/5/6/7")).unwrap();
    fs::write(ok_deep.join("1/2/3/4/5/6/7/eight.md"), "x").unwrap();
    // Ignored without a diagnostic: hidden entries and plain files.
    make_skill(&root, ".staging", &skill_md("staging", "x"));
    fs::write(root.join("README.md"), "skills live here").unwrap();

    let library = load_global(&root);
    let installed: Vec<_> = library.installed().into_iter().map(|s| s.name).collect();
    assert_eq!(installed, ["deep-ok", "good"]);
    let mut problems: Vec<(String, SkillProblem)> = library
        .diagnostics()
        .iter()
        .map(|d| {
            (
                d.dir.file_name().unwrap().to_string_lossy().into_owned(),
                d.problem,
            )
        })
        .collect();
    problems.sort();
    let mut expected = vec![
        ("Bad_Dir", SkillProblem::InvalidName),
        ("bad-front-name", SkillProblem::InvalidName),
        ("binary-md", SkillProblem::UnreadableSkillMd),
        ("huge-md", SkillProblem::UnreadableSkillMd),
        ("mismatch", SkillProblem::NameMismatch),
        ("no-description", SkillProblem::InvalidFrontMatter),
        ("no-front", SkillProblem::InvalidFrontMatter),
        ("no-name", SkillProblem::InvalidFrontMatter),
        ("no-skill-md", SkillProblem::MissingSkillMd),
        ("skill-md-dir", SkillProblem::MissingSkillMd),
        ("too-deep", SkillProblem::TooLarge),
        ("too-many", SkillProblem::TooLarge),
        ("unclosed", SkillProblem::InvalidFrontMatter),
    ]
    .into_iter()
    .map(|(name, problem)| (name.to_owned(), problem))
    .collect::<Vec<_>>();
    expected.sort();
    assert_eq!(problems, expected);
    for diagnostic in library.diagnostics() {
        assert!(!diagnostic.message.is_empty());
        assert!(!diagnostic.to_string().is_empty());
    }
}

#[test]
fn symlinked_skills_are_skipped_and_never_followed() {
    let scratch = scratch();
    // A skill directory that is a link (to a valid-looking skill outside).
    symlink(&scratch.secret_dir, scratch.global.join("outside")).unwrap();
    // A skill with a linked file, one with a linked directory, one whose
    // SKILL.md is the link.
    let linked_file = make_skill(
        &scratch.global,
        "linked-file",
        &skill_md("linked-file", "x"),
    );
    symlink(&scratch.secret, linked_file.join("notes.md")).unwrap();
    let linked_dir = make_skill(&scratch.global, "linked-dir", &skill_md("linked-dir", "x"));
    fs::create_dir_all(linked_dir.join("docs")).unwrap();
    symlink(&scratch.secret_dir, linked_dir.join("docs/more")).unwrap();
    let linked_md = scratch.global.join("linked-md");
    fs::create_dir_all(&linked_md).unwrap();
    symlink(&scratch.secret, linked_md.join("SKILL.md")).unwrap();
    // A relative link inside the skill, to its own file.
    let inner = make_skill(&scratch.global, "inner-link", &skill_md("inner-link", "x"));
    symlink("SKILL.md", inner.join("again.md")).unwrap();
    // A dangling link is refused the same way.
    let dangling = make_skill(&scratch.global, "dangling", &skill_md("dangling", "x"));
    symlink(scratch.global.join("nowhere"), dangling.join("gone.md")).unwrap();
    // A fifo is a special file: refused too.
    let fifo = make_skill(&scratch.global, "fifo", &skill_md("fifo", "x"));
    make_fifo(&fifo.join("pipe"));

    let library = load_global(&scratch.global);
    let names: Vec<_> = library.installed().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["lore-keeper", "prose-style"]);
    let mut linked: Vec<_> = library
        .diagnostics()
        .iter()
        .filter(|d| d.problem == SkillProblem::Link)
        .map(|d| d.dir.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    linked.sort();
    assert_eq!(
        linked,
        [
            "dangling",
            "fifo",
            "inner-link",
            "linked-dir",
            "linked-file",
            "linked-md",
            "outside"
        ]
    );
    for diagnostic in library.diagnostics() {
        assert!(!diagnostic.message.contains(SECRET));
    }
    assert_code(library.lookup(&all(), "outside"), codes::NOT_VISIBLE);
}

fn make_fifo(path: &Path) {
    let parent = fs::File::open(path.parent().unwrap()).unwrap();
    rustix::fs::mknodat(
        &parent,
        path.file_name().unwrap(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
}

// --- files and reads ----------------------------------------------------

#[test]
fn files_are_relative_sorted_and_sized() {
    let library = load_global(&fixtures().join("global"));
    let files = library.files(&all(), "lore-keeper").unwrap();
    let listed: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        listed,
        ["SKILL.md", "assets/map.png", "reference/timeline.md"]
    );
    let png = fs::metadata(fixtures().join("global/lore-keeper/assets/map.png")).unwrap();
    assert_eq!(files[1].bytes, png.len());
    let prose: Vec<_> = library
        .files(&all(), "prose-style")
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(prose, ["SKILL.md", "examples/dialogue.md"]);
}

#[test]
fn hidden_entries_are_not_part_of_a_skill() {
    let scratch = scratch();
    let skill = scratch.global.join("prose-style");
    fs::create_dir_all(skill.join(".git/objects")).unwrap();
    fs::write(skill.join(".git/objects/blob"), "x").unwrap();
    fs::write(skill.join(".DS_Store"), [0u8, 1, 2]).unwrap();
    // Never entered, so even a link in there is not looked at.
    symlink(&scratch.secret, skill.join(".git/link")).unwrap();
    let library = load_global(&scratch.global);
    let files: Vec<_> = library
        .files(&all(), "prose-style")
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(files, ["SKILL.md", "examples/dialogue.md"]);
    assert_code(
        library.read_text(&all(), "prose-style", ".git/link"),
        codes::INVALID_REQUEST,
    );
    assert_code(
        library.read_text(&all(), "prose-style", ".DS_Store"),
        codes::INVALID_REQUEST,
    );
}

#[test]
fn read_text_defaults_to_skill_md_and_hashes_the_bytes() {
    let library = load_global(&fixtures().join("global"));
    let on_disk = fs::read(fixtures().join("global/prose-style/SKILL.md")).unwrap();
    for path in ["", "SKILL.md", "./SKILL.md"] {
        let text = library.read_text(&all(), "prose-style", path).unwrap();
        assert_eq!(text.path, "SKILL.md");
        assert_eq!(text.text.as_bytes(), on_disk.as_slice());
        assert_eq!(text.sha256, hex::encode(Sha256::digest(&on_disk)));
    }
    let example = library
        .read_text(&all(), "prose-style", "examples//dialogue.md")
        .unwrap();
    assert_eq!(example.path, "examples/dialogue.md");
    assert!(example.text.starts_with("# Dialogue: before and after"));
    let timeline = library
        .read_text(&all(), "lore-keeper", "reference/timeline.md")
        .unwrap();
    assert!(timeline.text.contains("Kestrel Point"));
}

#[test]
fn path_rules() {
    let library = load_global(&fixtures().join("global"));
    for bad in [
        "/etc/passwd",
        "../prose-style/SKILL.md",
        "reference/../../prose-style/SKILL.md",
        "reference\\timeline.md",
        "SKILL.md\0",
        "C:/x",
        "reference/",
        "a/b/c/d/e/f/g/h/i",
    ] {
        let error = assert_code(
            library.read_text(&all(), "lore-keeper", bad),
            codes::INVALID_REQUEST,
        );
        assert!(error.is_recoverable());
    }
    assert_code(
        library.read_text(&all(), "lore-keeper", "reference/nope.md"),
        codes::NOT_FOUND,
    );
    assert_code(
        library.read_text(&all(), "lore-keeper", "nope/timeline.md"),
        codes::NOT_FOUND,
    );
    // A file used as a directory.
    assert_code(
        library.read_text(&all(), "lore-keeper", "SKILL.md/x"),
        codes::NOT_FOUND,
    );
    let directory = assert_code(
        library.read_text(&all(), "lore-keeper", "reference"),
        codes::INVALID_REQUEST,
    );
    assert!(directory.message().contains("directory"), "{directory}");
}

#[test]
fn binary_and_oversize_files_are_invalid_requests() {
    let scratch = scratch();
    let skill = scratch.global.join("lore-keeper");
    fs::write(
        skill.join("big.md"),
        "z".repeat(MAX_FILE_BYTES as usize + 1),
    )
    .unwrap();
    fs::write(skill.join("limit.md"), "z".repeat(MAX_FILE_BYTES as usize)).unwrap();
    let library = load_global(&scratch.global);
    let binary = assert_code(
        library.read_text(&all(), "lore-keeper", "assets/map.png"),
        codes::INVALID_REQUEST,
    );
    assert!(binary.message().contains("not UTF-8"), "{binary}");
    let big = assert_code(
        library.read_text(&all(), "lore-keeper", "big.md"),
        codes::INVALID_REQUEST,
    );
    assert!(big.message().contains("1048576"), "{big}");
    let limit = library
        .read_text(&all(), "lore-keeper", "limit.md")
        .unwrap();
    assert_eq!(limit.text.len(), MAX_FILE_BYTES as usize);
    // Both are still listed, with their sizes.
    let files = library.files(&all(), "lore-keeper").unwrap();
    assert!(
        files
            .iter()
            .any(|f| f.path == "big.md" && f.bytes == MAX_FILE_BYTES + 1)
    );
}

#[test]
fn links_planted_after_load_are_refused() {
    let scratch = scratch();
    let library = load_global(&scratch.global);
    let skill = scratch.global.join("lore-keeper");

    // A file swapped for a link to a file outside.
    fs::remove_file(skill.join("reference/timeline.md")).unwrap();
    symlink(&scratch.secret, skill.join("reference/timeline.md")).unwrap();
    let error = assert_code(
        library.read_text(&all(), "lore-keeper", "reference/timeline.md"),
        codes::INVALID_REQUEST,
    );
    assert!(error.message().contains("symbolic link"), "{error}");
    assert_no_secret(&error);

    // A directory swapped for a link to a directory outside.
    fs::remove_dir_all(skill.join("assets")).unwrap();
    symlink(&scratch.secret_dir, skill.join("assets")).unwrap();
    let error = assert_code(
        library.read_text(&all(), "lore-keeper", "assets/secret.md"),
        codes::INVALID_REQUEST,
    );
    assert_no_secret(&error);

    // A relative link that stays inside the skill is refused all the same.
    symlink("../SKILL.md", skill.join("reference/alias.md")).unwrap();
    let error = assert_code(
        library.read_text(&all(), "lore-keeper", "reference/alias.md"),
        codes::INVALID_REQUEST,
    );
    assert!(error.message().contains("symbolic link"), "{error}");
    fs::create_dir_all(skill.join("real")).unwrap();
    fs::write(skill.join("real/inside.md"), "inside").unwrap();
    symlink("real", skill.join("linked")).unwrap();
    assert_code(
        library.read_text(&all(), "lore-keeper", "linked/inside.md"),
        codes::INVALID_REQUEST,
    );

    // The listing refuses the whole skill rather than skip a link.
    let error = assert_code(library.files(&all(), "lore-keeper"), codes::INVALID_REQUEST);
    assert!(error.message().contains("symbolic link"), "{error}");

    // The skill directory itself swapped for a link to a skill outside.
    let prose = scratch.global.join("prose-style");
    fs::rename(&prose, scratch.global.join(".old-prose")).unwrap();
    symlink(&scratch.secret_dir, &prose).unwrap();
    let error = assert_code(
        library.read_text(&all(), "prose-style", ""),
        codes::INVALID_REQUEST,
    );
    assert_no_secret(&error);
    let error = assert_code(
        library.read_text(&all(), "prose-style", "secret.md"),
        codes::INVALID_REQUEST,
    );
    assert_no_secret(&error);
    assert_code(library.files(&all(), "prose-style"), codes::INVALID_REQUEST);
}

#[test]
fn a_planted_fifo_is_refused_without_blocking() {
    let scratch = scratch();
    let library = load_global(&scratch.global);
    make_fifo(&scratch.global.join("lore-keeper/pipe.md"));
    let error = assert_code(
        library.read_text(&all(), "lore-keeper", "pipe.md"),
        codes::INVALID_REQUEST,
    );
    assert!(error.message().contains("fifo"), "{error}");
    assert_code(library.files(&all(), "lore-keeper"), codes::INVALID_REQUEST);
}

#[test]
fn a_skill_removed_after_load_is_not_found() {
    let scratch = scratch();
    let library = load_global(&scratch.global);
    fs::remove_dir_all(scratch.global.join("prose-style")).unwrap();
    assert_code(
        library.read_text(&all(), "prose-style", ""),
        codes::NOT_FOUND,
    );
    assert_code(library.files(&all(), "prose-style"), codes::NOT_FOUND);
    // Still listed: the effective set is fixed at load.
    assert_eq!(library.visible(&all()).len(), 2);
}

#[test]
fn the_library_is_shared_across_threads() {
    let library = Arc::new(load_global(&fixtures().join("global")));
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let library = Arc::clone(&library);
            std::thread::spawn(move || library.read_text(&all(), "lore-keeper", "").unwrap().sha256)
        })
        .collect();
    let digests: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(digests.windows(2).all(|w| w[0] == w[1]));
}

// --- budget -------------------------------------------------------------

#[test]
fn budget_allowance_is_the_smaller_of_call_and_run() {
    let budget = SkillBudget::new(100, 250);
    assert_eq!((budget.per_call(), budget.per_run()), (100, 250));
    assert_eq!((budget.remaining(), budget.call_allowance()), (250, 100));
    budget.charge(60).unwrap();
    assert_eq!((budget.remaining(), budget.call_allowance()), (190, 40));
    budget.begin_call();
    assert_eq!(budget.call_allowance(), 100);
    budget.charge(100).unwrap();
    budget.begin_call();
    budget.charge(50).unwrap();
    // 40 left in the run, 50 in this call.
    assert_eq!((budget.remaining(), budget.call_allowance()), (40, 40));
    assert_eq!(budget.charged(), 210);
}

#[test]
fn budget_per_call_exceeded_charges_nothing() {
    let budget = SkillBudget::new(100, 1_000);
    budget.charge(70).unwrap();
    let error = assert_code(budget.charge(31), codes::READ_BUDGET_EXCEEDED);
    assert!(error.is_recoverable());
    assert_eq!((budget.remaining(), budget.call_allowance()), (930, 30));
    budget.charge(30).unwrap();
    assert_code(budget.charge(1), codes::READ_BUDGET_EXCEEDED);
    budget.begin_call();
    budget.charge(1).unwrap();
    assert_eq!(budget.remaining(), 899);
}

#[test]
fn budget_per_run_exhausted_charges_nothing() {
    let budget = SkillBudget::new(100, 150);
    budget.charge(100).unwrap();
    budget.begin_call();
    // 50 left in the run, 100 in the call: the run binds.
    let error = assert_code(budget.charge(51), codes::READ_BUDGET_EXHAUSTED);
    assert!(error.message().contains("50"), "{error}");
    assert_eq!(budget.remaining(), 50);
    budget.charge(50).unwrap();
    assert_eq!((budget.remaining(), budget.call_allowance()), (0, 0));
    budget.begin_call();
    assert_code(budget.charge(1), codes::READ_BUDGET_EXHAUSTED);
    budget.charge(0).unwrap();
    assert_eq!(budget.charged(), 150);
}

#[test]
fn budget_charges_never_overshoot_across_threads() {
    let budget = Arc::new(SkillBudget::new(1_000, 1_000));
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || (0..100).filter(|_| budget.charge(3).is_ok()).count())
        })
        .collect();
    let granted: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(granted, 333);
    assert_eq!(budget.charged(), 999);
    assert_eq!(budget.remaining(), 1);
}
