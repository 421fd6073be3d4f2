//! What a resumed run's `run.json` may record, for a tenant. A served run
//! is resumed from its directory — on a cluster node, a directory rebuilt
//! from what NATS held — and its manifest names the chat it commits to and
//! the skills it reads as paths. Those paths must be what a start of this
//! tenant's could have recorded: its own `chats/<name>.jsonl` and
//! `skills/<name>/`, and the run's own id. Anything else — another
//! tenant's chat, a file elsewhere on the host — is refused before the run
//! is opened, whatever wrote the manifest.

use std::path::{Path, PathBuf};

use toolhost_journal::RunManifest;

use crate::error::ApiError;
use crate::tenant::{TenantDirs, is_plain_name};

/// The run's `run.json` at `root`, read and checked with [`check`].
pub(crate) fn read(root: &Path, dirs: &TenantDirs, id: &str) -> Result<RunManifest, ApiError> {
    let record = super::manifest(root).map_err(|error| {
        ApiError::conflict(
            "run.not_resumable",
            format!("the run's run.json cannot be read: {error}"),
        )
    })?;
    check(&record, dirs, id)?;
    Ok(record)
}

/// Refuse a manifest whose run id or inputs are not `tenant`'s run `id`'s.
pub(crate) fn check(manifest: &RunManifest, dirs: &TenantDirs, id: &str) -> Result<(), ApiError> {
    let refused = |what: String| {
        ApiError::conflict(
            "run.foreign_inputs",
            format!("the run's record cannot be resumed: {what}"),
        )
    };
    if manifest.run_id != id {
        return Err(refused(format!(
            "it is the record of run `{}`",
            manifest.run_id
        )));
    }
    if let Some(chat) = &manifest.inputs.chat
        && !is_named_in(Path::new(&chat.path), &dirs.chats(), ".jsonl")
    {
        return Err(refused(format!(
            "its chat `{}` is not one of this tenant's chats",
            chat.path
        )));
    }
    for source in &manifest.inputs.skills {
        if !is_named_in(Path::new(&source.dir), &dirs.skills(), "") {
            return Err(refused(format!(
                "its skills `{}` are not one of this tenant's skills directories",
                source.dir
            )));
        }
    }
    Ok(())
}

/// Refuse the persist directory a resumed run's `input/loop.json` records
/// unless it is the one a start records for its chat, `chat` (from its
/// `run.json`, checked by [`check`]): this tenant's `persist/<name>/`. A
/// finished run copies files into it, so a record naming any other
/// directory is never resumed. None is fine: a run started before served
/// runs had one resumes without.
pub(crate) fn check_persist(
    persist_dir: Option<&Path>,
    chat: Option<&Path>,
    dirs: &TenantDirs,
) -> Result<(), ApiError> {
    let Some(persist_dir) = persist_dir else {
        return Ok(());
    };
    if chat
        .and_then(|chat| dirs.chat_persist_path(chat))
        .as_deref()
        == Some(persist_dir)
    {
        return Ok(());
    }
    Err(ApiError::conflict(
        "run.foreign_inputs",
        format!(
            "the run's record cannot be resumed: its persist directory `{}` is not its chat's",
            persist_dir.display()
        ),
    ))
}

/// Whether `path` is `dir/<plain name><suffix>`, as a start records it
/// (made absolute against the working directory, never resolved).
fn is_named_in(path: &Path, dir: &Path, suffix: &str) -> bool {
    let Ok(dir) = absolute(dir) else {
        return false;
    };
    let (Some(parent), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str()))
    else {
        return false;
    };
    parent == dir && name.ends_with(suffix) && is_plain_name(name)
}

fn absolute(path: &Path) -> std::io::Result<PathBuf> {
    std::path::absolute(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_journal::manifest::{ChatBinding, SkillSourceRef};

    fn manifest(id: &str, chat: &Path, skills: &[&Path]) -> RunManifest {
        let mut manifest = RunManifest::new(id, "default-writer", b"{}", Vec::new());
        manifest.inputs.chat = Some(ChatBinding {
            path: chat.display().to_string(),
            visible_messages: 3,
            prefix_sha256: "0".repeat(64),
            generation_type: None,
            target: None,
        });
        manifest.inputs.skills = skills
            .iter()
            .map(|dir| SkillSourceRef {
                scope: "global".into(),
                dir: dir.display().to_string(),
            })
            .collect();
        manifest
    }

    #[test]
    fn only_the_tenants_own_inputs_and_id_are_resumed() {
        let data = tempfile::tempdir().expect("temp dir");
        let (mine, theirs) = (
            TenantDirs::new(data.path(), "alice"),
            TenantDirs::new(data.path(), "bob"),
        );
        let chat = mine.chats().join("chat-00.jsonl");
        let skills = mine.skills().join("house");
        check(&manifest("run_1", &chat, &[&skills]), &mine, "run_1").expect("alice's own");

        let cases = [
            manifest("run_1", &theirs.chats().join("chat-00.jsonl"), &[]),
            manifest("run_1", Path::new("/etc/passwd"), &[]),
            manifest(
                "run_1",
                &mine.chats().join("../../bob/chats/chat-00.jsonl"),
                &[],
            ),
            manifest("run_1", &mine.chats().join("chat-00.txt"), &[]),
            manifest("run_1", &chat, &[&theirs.skills().join("house")]),
            manifest("run_1", &chat, &[Path::new("/")]),
            manifest("run_2", &chat, &[]),
        ];
        for (index, foreign) in cases.iter().enumerate() {
            let error = check(foreign, &mine, "run_1").expect_err(&format!("case {index}"));
            assert_eq!(
                (error.status, error.code.as_str()),
                (409, "run.foreign_inputs")
            );
        }
    }

    #[test]
    fn only_the_chats_own_persist_directory_is_resumed() {
        let data = tempfile::tempdir().expect("temp dir");
        let (mine, theirs) = (
            TenantDirs::new(data.path(), "alice"),
            TenantDirs::new(data.path(), "bob"),
        );
        let chat = std::path::absolute(mine.chats().join("chat-00.jsonl")).expect("absolute");
        let own = mine.chat_persist_path(&chat).expect("the chat's");
        check_persist(Some(&own), Some(&chat), &mine).expect("its own");
        check_persist(None, Some(&chat), &mine).expect("none recorded");
        let other_chat = mine.chat_persist_path(&mine.chats().join("chat-01.jsonl"));
        for foreign in [
            theirs.persist().join("chat-00"),
            other_chat.expect("another chat's"),
            own.join(".."),
            PathBuf::from("/etc"),
        ] {
            let error = check_persist(Some(&foreign), Some(&chat), &mine)
                .expect_err(&foreign.display().to_string());
            assert_eq!(
                (error.status, error.code.as_str()),
                (409, "run.foreign_inputs")
            );
        }
        // A persist directory without a chat is no start's record.
        assert!(check_persist(Some(&own), None, &mine).is_err());
    }
}
