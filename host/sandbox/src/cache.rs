//! The on-disk cache of compiled components.
//!
//! An entry is keyed by sha256 of the component bytes and a digest of the
//! engine's precompile compatibility hash, so a different wasmtime build or
//! engine configuration never sees another's artifacts. Each file carries a
//! header with the payload's length and sha256; a truncated or corrupt entry
//! is detected before wasmtime sees it, removed, and rebuilt by the caller.
//!
//! Compiled artifacts are native code: the cache directory must be writable
//! only by the user running the host. The digest guards against damage, not
//! against someone who can already write there.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 16] = b"toolhost-cwasm1\n";
const HEADER_LEN: usize = MAGIC.len() + 8 + 32;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("component cache {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Why an entry on disk was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    Truncated,
    BadMagic,
    LengthMismatch,
    DigestMismatch,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Truncated => "truncated",
            Self::BadMagic => "not a toolhost cache entry",
            Self::LengthMismatch => "payload length does not match its header",
            Self::DigestMismatch => "payload sha256 does not match its header",
        })
    }
}

pub enum Lookup {
    Hit(Vec<u8>),
    Miss,
    /// The entry was damaged and has been removed.
    Corrupt(Rejected),
}

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| CacheError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.cwasm"))
    }

    /// The verified payload of `key`, if present and intact.
    pub fn get(&self, key: &str) -> Result<Lookup, CacheError> {
        let path = self.entry_path(key);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            Err(source) => return Err(CacheError::Io { path, source }),
        };
        match verify(&bytes) {
            Ok(()) => {
                let mut payload = bytes;
                payload.drain(..HEADER_LEN);
                Ok(Lookup::Hit(payload))
            }
            Err(reason) => {
                self.remove(key)?;
                Ok(Lookup::Corrupt(reason))
            }
        }
    }

    /// Store `payload` under `key` atomically: readers see the old entry or
    /// the whole new one, never a partial file.
    pub fn put(&self, key: &str, payload: &[u8]) -> Result<(), CacheError> {
        let io_error = |source| CacheError::Io {
            path: self.entry_path(key),
            source,
        };
        let mut file = tempfile::NamedTempFile::new_in(&self.dir).map_err(io_error)?;
        file.write_all(MAGIC).map_err(io_error)?;
        file.write_all(&(payload.len() as u64).to_le_bytes())
            .map_err(io_error)?;
        file.write_all(&Sha256::digest(payload)).map_err(io_error)?;
        file.write_all(payload).map_err(io_error)?;
        file.as_file().sync_all().map_err(io_error)?;
        file.persist(self.entry_path(key))
            .map_err(|error| io_error(error.error))?;
        Ok(())
    }

    /// Remove an entry (used when wasmtime itself rejects a verified payload).
    pub fn remove(&self, key: &str) -> Result<(), CacheError> {
        let path = self.entry_path(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(CacheError::Io { path, source }),
        }
    }
}

fn verify(bytes: &[u8]) -> Result<(), Rejected> {
    if bytes.len() < HEADER_LEN {
        return Err(Rejected::Truncated);
    }
    let (magic, rest) = bytes.split_at(MAGIC.len());
    if magic != MAGIC {
        return Err(Rejected::BadMagic);
    }
    let (length, rest) = rest.split_at(8);
    let (digest, payload) = rest.split_at(32);
    let length = u64::from_le_bytes(length.try_into().map_err(|_| Rejected::Truncated)?);
    if length != payload.len() as u64 {
        return Err(Rejected::LengthMismatch);
    }
    if Sha256::digest(payload).as_slice() != digest {
        return Err(Rejected::DigestMismatch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, ComponentCache) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ComponentCache::open(dir.path().join("cache")).expect("open");
        (dir, cache)
    }

    #[test]
    fn round_trips_and_misses() {
        let (_dir, cache) = cache();
        assert!(matches!(cache.get("k").expect("get"), Lookup::Miss));
        cache.put("k", b"compiled code").expect("put");
        match cache.get("k").expect("get") {
            Lookup::Hit(payload) => assert_eq!(payload, b"compiled code"),
            _ => panic!("expected a hit"),
        }
    }

    #[test]
    fn damaged_entries_are_detected_and_removed() {
        let (_dir, cache) = cache();
        type Spoil = fn(&mut Vec<u8>);
        let damage: [(&str, Spoil); 4] = [
            ("truncated header", |bytes| bytes.truncate(10)),
            ("truncated payload", |bytes| {
                bytes.pop();
            }),
            ("flipped payload bit", |bytes| {
                let last = bytes.len() - 1;
                bytes[last] ^= 1;
            }),
            ("wrong magic", |bytes| bytes[0] = b'X'),
        ];
        for (what, spoil) in damage {
            cache.put("k", &[7; 1000]).expect("put");
            let path = cache.entry_path("k");
            let mut bytes = fs::read(&path).expect("read");
            spoil(&mut bytes);
            fs::write(&path, bytes).expect("write");
            assert!(
                matches!(cache.get("k").expect("get"), Lookup::Corrupt(_)),
                "{what}"
            );
            assert!(!path.exists(), "{what}: a corrupt entry is removed");
        }
    }
}
