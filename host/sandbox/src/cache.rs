//! The on-disk cache of compiled components.
//!
//! An entry is keyed by sha256 of the component bytes and a digest of the
//! engine's precompile compatibility hash, so a different wasmtime build or
//! engine configuration never sees another's artifacts. Each file starts
//! with a header that names the key it was written for and the sha256 of
//! that key and the payload together:
//!
//! ```text
//! "toolhost-cwasm2\n" | key length (u32 LE) | key | payload length (u64 LE)
//!                     | sha256(key length | key | payload length | payload) | payload
//! ```
//!
//! So a truncated or corrupt entry, and a valid entry copied over another
//! key's name (which would run another component's native code), are
//! detected before wasmtime sees them, removed, and rebuilt by the caller.
//!
//! Compiled artifacts are native code, so the cache also refuses what
//! someone other than the user could have written: the directory is
//! created `0700` and must be owned by the user and not writable by group or
//! others; an entry must be a regular file with the same owner and mode
//! rule, and is opened with `O_NOFOLLOW`. A process running as the same
//! user can still write a valid-looking entry (it can compute the digest as
//! well as we can); that is outside this threat model, see
//! `docs/sandbox.md`.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const MAGIC: &[u8; 16] = b"toolhost-cwasm2\n";
/// Longest key accepted in a header (a key is two hex digests and a dash).
const MAX_KEY_LEN: usize = 256;
/// Mode bits that would let someone else change a file or directory.
const WRITABLE_BY_OTHERS: u32 = 0o022;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("component cache {path}: {source}", path = path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The directory could be changed by someone other than the user.
    #[error(
        "component cache {path} {problem}: compiled components are native code, so the cache must be the user's alone; fix it (chmod 700) or pass --no-cache",
        path = path.display()
    )]
    Insecure { path: PathBuf, problem: String },
}

/// Why an entry on disk was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    Truncated,
    BadMagic,
    LengthMismatch,
    DigestMismatch,
    /// A valid entry, written for another key (copied or renamed here).
    KeyMismatch,
    /// Not a regular file the user alone could have written.
    Insecure(String),
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => f.write_str("truncated"),
            Self::BadMagic => f.write_str("not a toolhost cache entry"),
            Self::LengthMismatch => f.write_str("payload length does not match its header"),
            Self::DigestMismatch => f.write_str("payload sha256 does not match its header"),
            Self::KeyMismatch => f.write_str("written for another component or engine"),
            Self::Insecure(problem) => write!(f, "{problem}"),
        }
    }
}

pub enum Lookup {
    Hit(Vec<u8>),
    Miss,
    /// The entry was damaged, misplaced or not ours and has been removed.
    Corrupt(Rejected),
}

#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    /// Open (creating it `0700` if missing) a cache directory that only the
    /// user can change.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let dir = dir.into();
        let io = |source| CacheError::Io {
            path: dir.clone(),
            source,
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io)?;
        // A symbolic link the user made to relocate the cache is followed:
        // what must be the user's alone is the directory it leads to.
        let metadata = fs::metadata(&dir).map_err(io)?;
        let insecure = |problem: String| CacheError::Insecure {
            path: dir.clone(),
            problem,
        };
        if !metadata.is_dir() {
            return Err(insecure("is not a directory".into()));
        }
        if let Some(problem) = foreign(&metadata) {
            return Err(insecure(problem));
        }
        Ok(Self { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.cwasm"))
    }

    /// The verified payload of `key`, if present, intact, written for this
    /// key and by this user.
    pub fn get(&self, key: &str) -> Result<Lookup, CacheError> {
        let path = self.entry_path(key);
        let io = |source| CacheError::Io {
            path: path.clone(),
            source,
        };
        let opened = File::options()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path);
        let mut file = match opened {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Lookup::Miss),
            // O_NOFOLLOW on a symbolic link.
            Err(error) if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
                return self.reject(key, Rejected::Insecure("a symbolic link".into()));
            }
            Err(source) => return Err(io(source)),
        };
        let metadata = file.metadata().map_err(io)?;
        if !metadata.is_file() {
            return self.reject(key, Rejected::Insecure("not a regular file".into()));
        }
        if let Some(problem) = foreign(&metadata) {
            return self.reject(key, Rejected::Insecure(problem));
        }
        let mut bytes = Vec::with_capacity(metadata.len() as usize);
        file.read_to_end(&mut bytes).map_err(io)?;
        match verify(&bytes, key) {
            Ok(start) => {
                bytes.drain(..start);
                Ok(Lookup::Hit(bytes))
            }
            Err(reason) => self.reject(key, reason),
        }
    }

    fn reject(&self, key: &str, reason: Rejected) -> Result<Lookup, CacheError> {
        self.remove(key)?;
        Ok(Lookup::Corrupt(reason))
    }

    /// Store `payload` under `key` atomically: readers see the old entry or
    /// the whole new one, never a partial file.
    pub fn put(&self, key: &str, payload: &[u8]) -> Result<(), CacheError> {
        let io_error = |source| CacheError::Io {
            path: self.entry_path(key),
            source,
        };
        // The temp file is created 0600.
        let mut file = tempfile::NamedTempFile::new_in(&self.dir).map_err(io_error)?;
        file.write_all(&header(key, payload)).map_err(io_error)?;
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

/// Why someone other than the user could have written this, if so.
fn foreign(metadata: &fs::Metadata) -> Option<String> {
    let user = rustix::process::geteuid().as_raw();
    if metadata.uid() != user {
        return Some(format!(
            "is owned by uid {}, not by this user (uid {user})",
            metadata.uid()
        ));
    }
    if metadata.mode() & WRITABLE_BY_OTHERS != 0 {
        return Some(format!(
            "is writable by group or others (mode {:o})",
            metadata.mode() & 0o7777
        ));
    }
    None
}

/// The header before `payload` in the entry of `key`.
fn header(key: &str, payload: &[u8]) -> Vec<u8> {
    let key_len = (key.len() as u32).to_le_bytes();
    let payload_len = (payload.len() as u64).to_le_bytes();
    let mut header = Vec::with_capacity(MAGIC.len() + 4 + key.len() + 8 + 32);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&key_len);
    header.extend_from_slice(key.as_bytes());
    header.extend_from_slice(&payload_len);
    header.extend_from_slice(&digest(&key_len, key.as_bytes(), &payload_len, payload));
    header
}

fn digest(key_len: &[u8], key: &[u8], payload_len: &[u8], payload: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(key_len);
    hasher.update(key);
    hasher.update(payload_len);
    hasher.update(payload);
    hasher.finalize().into()
}

/// Check an entry read for `expected_key`; the offset of its payload.
fn verify(bytes: &[u8], expected_key: &str) -> Result<usize, Rejected> {
    let take = |at: usize, len: usize| bytes.get(at..at + len).ok_or(Rejected::Truncated);
    if take(0, MAGIC.len())? != MAGIC {
        return Err(Rejected::BadMagic);
    }
    let mut at = MAGIC.len();
    let key_len_bytes = take(at, 4)?;
    let key_len =
        u32::from_le_bytes(key_len_bytes.try_into().map_err(|_| Rejected::Truncated)?) as usize;
    if key_len > MAX_KEY_LEN {
        return Err(Rejected::BadMagic);
    }
    at += 4;
    let key = take(at, key_len)?;
    at += key_len;
    let payload_len_bytes = take(at, 8)?;
    let payload_len = u64::from_le_bytes(
        payload_len_bytes
            .try_into()
            .map_err(|_| Rejected::Truncated)?,
    );
    at += 8;
    let recorded = take(at, 32)?;
    at += 32;
    let payload = &bytes[at..];
    if payload_len != payload.len() as u64 {
        return Err(Rejected::LengthMismatch);
    }
    if digest(key_len_bytes, key, payload_len_bytes, payload).as_slice() != recorded {
        return Err(Rejected::DigestMismatch);
    }
    // Checked after the digest: a damaged entry says "damaged", an intact
    // one written for another key says so.
    if key != expected_key.as_bytes() {
        return Err(Rejected::KeyMismatch);
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn cache() -> (tempfile::TempDir, ComponentCache) {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ComponentCache::open(dir.path().join("cache")).expect("open");
        (dir, cache)
    }

    fn rejected(cache: &ComponentCache, key: &str) -> Rejected {
        match cache.get(key).expect("get") {
            Lookup::Corrupt(reason) => reason,
            Lookup::Hit(_) => panic!("{key}: expected a rejection, got a hit"),
            Lookup::Miss => panic!("{key}: expected a rejection, got a miss"),
        }
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
    fn a_new_directory_is_private() {
        let (_dir, cache) = cache();
        let mode = fs::metadata(cache.dir()).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn damaged_entries_are_detected_and_removed() {
        let (_dir, cache) = cache();
        type Spoil = fn(&mut Vec<u8>);
        let damage: [(&str, Spoil); 5] = [
            ("truncated header", |bytes| bytes.truncate(10)),
            ("truncated payload", |bytes| {
                bytes.pop();
            }),
            ("flipped payload bit", |bytes| {
                let last = bytes.len() - 1;
                bytes[last] ^= 1;
            }),
            ("flipped key bit", |bytes| bytes[MAGIC.len() + 4] ^= 1),
            ("wrong magic", |bytes| bytes[0] = b'X'),
        ];
        for (what, spoil) in damage {
            cache.put("k", &[7; 1000]).expect("put");
            let path = cache.entry_path("k");
            let mut bytes = fs::read(&path).expect("read");
            spoil(&mut bytes);
            fs::write(&path, bytes).expect("write");
            rejected(&cache, "k");
            assert!(!path.exists(), "{what}: a corrupt entry is removed");
        }
    }

    /// The review's swap: a valid entry copied over another key's name used
    /// to load, running the other component's native code.
    #[test]
    fn a_valid_entry_under_another_keys_name_is_refused() {
        let (_dir, cache) = cache();
        cache.put("component-a", b"code of a").expect("put a");
        cache.put("component-b", b"code of b").expect("put b");
        fs::copy(
            cache.entry_path("component-a"),
            cache.entry_path("component-b"),
        )
        .expect("swap");
        assert_eq!(rejected(&cache, "component-b"), Rejected::KeyMismatch);
        assert!(!cache.entry_path("component-b").exists());
        assert!(matches!(
            cache.get("component-a").expect("get"),
            Lookup::Hit(payload) if payload == b"code of a"
        ));
    }

    #[test]
    fn entries_others_could_have_written_are_refused() {
        let (dir, cache) = cache();
        cache.put("k", b"code").expect("put");
        let path = cache.entry_path("k");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).expect("chmod");
        assert!(
            matches!(rejected(&cache, "k"), Rejected::Insecure(why) if why.contains("writable by group or others"))
        );

        // A symbolic link to a valid entry elsewhere is not followed.
        let elsewhere = ComponentCache::open(dir.path().join("elsewhere")).expect("open");
        elsewhere.put("k", b"code").expect("put");
        std::os::unix::fs::symlink(elsewhere.entry_path("k"), &path).expect("symlink");
        assert!(
            matches!(rejected(&cache, "k"), Rejected::Insecure(why) if why.contains("symbolic link"))
        );
        assert!(
            elsewhere.entry_path("k").exists(),
            "the link's target is left alone"
        );
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = dir.path().join("shared");
        fs::create_dir(&shared).expect("mkdir");
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).expect("chmod");
        let error = ComponentCache::open(&shared).expect_err("world-writable");
        assert!(matches!(error, CacheError::Insecure { .. }), "{error}");
        assert!(error.to_string().contains("--no-cache"), "{error}");
    }
}
