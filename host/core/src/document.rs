//! The small versioned JSON documents a user's commands keep (MCP
//! registrations, installed extensions): `{"schemaVersion": 1, "kind": …}`,
//! read with the path of any bad field, replaced atomically and durably (the
//! file and then its directory fsynced) so a crash never leaves half a file
//! nor loses a rename that was reported done, and changed under the
//! directory's lock ([`with_dir_lock`]) so two commands never lose each
//! other's change.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not this kind of document, or a field that does not fit.
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

/// Read the document of `kind` at `path`; `None` when there is no file.
pub fn read<T: DeserializeOwned>(
    path: &Path,
    kind: &str,
    schema_version: u64,
) -> Result<Option<T>, DocumentError> {
    let invalid = |message: String| DocumentError::Invalid {
        path: path.to_owned(),
        message,
    };
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(DocumentError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|error| invalid(error.to_string()))?;
    let found = (value.get("schemaVersion"), value.get("kind"));
    if found.0.and_then(Value::as_u64) != Some(schema_version)
        || found.1.and_then(Value::as_str) != Some(kind)
    {
        let shown = |field: Option<&Value>| field.map_or("nothing".to_owned(), Value::to_string);
        return Err(invalid(format!(
            "expected schemaVersion {schema_version} and kind {kind}, found {} and {}",
            shown(found.0),
            shown(found.1)
        )));
    }
    serde_path_to_error::deserialize(value)
        .map(Some)
        .map_err(|error| invalid(format!("at `{}`: {}", error.path(), error.inner())))
}

/// Write `document` as pretty JSON, atomically.
pub fn write<T: Serialize>(path: &Path, document: &T) -> Result<(), DocumentError> {
    let mut bytes = serde_json::to_vec_pretty(document).map_err(|error| DocumentError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(error),
    })?;
    bytes.push(b'\n');
    write_atomically(path, &bytes).map_err(|source| DocumentError::Io {
        path: path.to_owned(),
        source,
    })
}

/// A temp file beside `path`, fsynced, renamed over it; then the directory
/// is fsynced, so the rename itself survives a power loss.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|error| error.error)?;
    sync_dir(dir)
}

/// fsync a directory (its entries: a rename or a new file in it).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()?;
    DIRECTORY_SYNCS.with(|count| count.set(count.get() + 1));
    Ok(())
}

thread_local! {
    /// Directory fsyncs made on this thread: a counting hook for tests (a
    /// rename that was never made durable cannot be observed otherwise).
    static DIRECTORY_SYNCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many directory fsyncs [`sync_dir`] has made on this thread.
pub fn directory_syncs() -> u64 {
    DIRECTORY_SYNCS.with(std::cell::Cell::get)
}

/// The lock file of a directory of documents.
pub const LOCK_FILE: &str = ".lock";

/// Run `change` holding `<dir>/.lock` exclusively (created, with `dir`, if
/// missing). Every read-modify-write of a document in `dir` goes through
/// here, so two processes changing it at once serialize instead of one
/// overwriting the other's change. The lock is released when `change`
/// returns, whatever it returns.
pub fn with_dir_lock<T, E: From<DocumentError>>(
    dir: &Path,
    change: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| DocumentError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    lock.lock().map_err(io(&lock_path))?;
    let result = change();
    drop(lock);
    result
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Doc {
        schema_version: u64,
        kind: String,
        names: Vec<String>,
    }

    #[test]
    fn round_trips_and_names_what_is_wrong() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("doc.json");
        assert!(read::<Doc>(&path, "t.doc", 1).expect("absent").is_none());
        let doc = Doc {
            schema_version: 1,
            kind: "t.doc".into(),
            names: vec!["a".into()],
        };
        write(&path, &doc).expect("write");
        assert_eq!(read::<Doc>(&path, "t.doc", 1).expect("read"), Some(doc));
        let error = read::<Doc>(&path, "t.other", 1).expect_err("kind");
        assert!(
            error
                .to_string()
                .contains("expected schemaVersion 1 and kind t.other, found 1 and \"t.doc\""),
            "{error}"
        );
        std::fs::write(&path, r#"{"schemaVersion":1,"kind":"t.doc","names":[3]}"#).expect("write");
        let error = read::<Doc>(&path, "t.doc", 1).expect_err("field");
        assert!(error.to_string().contains("at `names[0]`"), "{error}");
    }

    /// The review found the registries renamed into place without syncing
    /// their directory: a reported change could vanish in a power loss.
    #[test]
    fn a_write_syncs_the_file_and_then_its_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("doc.json");
        let before = directory_syncs();
        write(
            &path,
            &Doc {
                schema_version: 1,
                kind: "t.doc".into(),
                names: vec![],
            },
        )
        .expect("write");
        assert_eq!(
            directory_syncs(),
            before + 1,
            "the directory was not fsynced"
        );
    }

    /// Eight threads each add a name under the lock: none is lost. Without
    /// the lock, reads and writes interleave and names go missing.
    #[test]
    fn changes_under_the_lock_are_never_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("doc.json");
        let empty = Doc {
            schema_version: 1,
            kind: "t.doc".into(),
            names: vec![],
        };
        write(&path, &empty).expect("write");
        std::thread::scope(|scope| {
            for thread in 0..8 {
                let (dir, path) = (dir.path(), &path);
                scope.spawn(move || {
                    for round in 0..10 {
                        with_dir_lock(dir, || {
                            let mut doc = read::<Doc>(path, "t.doc", 1)?.expect("doc");
                            doc.names.push(format!("{thread}-{round}"));
                            write(path, &doc)
                        })
                        .expect("change");
                    }
                });
            }
        });
        let doc = read::<Doc>(&path, "t.doc", 1).expect("read").expect("doc");
        assert_eq!(doc.names.len(), 80);
    }
}
