//! A run's files in the cluster — audit files, model replies, workspace
//! checkpoints — kept create-only in a store that would overwrite: the
//! object store replaces an object of the same name, so each name is first
//! claimed with a KV `create` that records the content's digest. A second
//! writer of other bytes is refused; the same bytes again (a retry after a
//! lost answer, or a put cut off half way) are stored again, which changes
//! nothing.

use async_nats::jetstream::{kv, object_store};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt as _;
use toolhost_journal::sha256_hex;

use crate::{ClusterError, RunKey};

/// Largest file stored or read back.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Longest file name.
const MAX_NAME: usize = 512;
/// Longest wait for one file's bytes (the largest is 64 MiB, read over a
/// connection that carries a run's journal: seconds, not minutes).
const READ_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a file's claim holds.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Claim {
    sha256: String,
    bytes: u64,
}

/// The files of one run.
#[derive(Clone)]
pub struct RunFiles {
    claims: kv::Store,
    store: object_store::ObjectStore,
    run: RunKey,
}

impl RunFiles {
    pub(crate) fn new(claims: kv::Store, store: object_store::ObjectStore, run: RunKey) -> Self {
        Self { claims, store, run }
    }

    /// Store `bytes` as `name` (a relative path of the run directory), once.
    pub async fn create(&self, name: &str, bytes: Bytes) -> Result<(), ClusterError> {
        check_name(name)?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(ClusterError::nats(
                format!("storing {name}"),
                format!("larger than {MAX_FILE_BYTES} bytes"),
            ));
        }
        let claim = Claim {
            sha256: sha256_hex(&bytes),
            bytes: bytes.len() as u64,
        };
        let value = serde_json::to_vec(&claim)
            .map_err(|error| ClusterError::nats("encoding a claim", error))?;
        let key = self.claim_key(name);
        match self.claims.create(&key, Bytes::from(value)).await {
            Ok(_) => {}
            Err(error) if error.kind() == kv::CreateErrorKind::AlreadyExists => {
                let earlier = self.claim(name).await?;
                if earlier
                    .as_ref()
                    .is_none_or(|earlier| earlier.sha256 != claim.sha256)
                {
                    return Err(ClusterError::FileExists {
                        name: format!("{}/{name}", self.run),
                    });
                }
                // The same bytes claimed before. Stored whole already (an
                // object's info is written after its last chunk): nothing
                // to do — and a put again would be worse than nothing: the
                // object store replaces the object and purges its old
                // chunks, so a reader in the middle of them would wait for
                // chunks that are gone. A mirror pushes a blob again
                // whenever a file's time is too fresh to trust. Not whole
                // (a put cut off half way): store them again.
                if self.stored_whole(name, claim.bytes).await? {
                    return Ok(());
                }
            }
            Err(error) => {
                return Err(ClusterError::nats(format!("claiming {name}"), error));
            }
        }
        self.store
            .put(self.object_name(name).as_str(), &mut bytes.as_ref())
            .await
            .map_err(|error| ClusterError::nats(format!("storing {name}"), error))?;
        Ok(())
    }

    /// Which stored copy of `name` the store holds (its object's nuid):
    /// for tests that a file is not stored again.
    #[cfg(feature = "testing")]
    pub async fn stored_copy(&self, name: &str) -> Result<Option<String>, ClusterError> {
        Ok(self.object_info(name).await?.map(|info| info.nuid))
    }

    /// Whether `name`'s object is stored, not deleted, at the claimed size.
    async fn stored_whole(&self, name: &str, bytes: u64) -> Result<bool, ClusterError> {
        Ok(self
            .object_info(name)
            .await?
            .is_some_and(|info| !info.deleted && info.size as u64 == bytes))
    }

    /// What the object store says of `name`'s object, if it has one.
    async fn object_info(
        &self,
        name: &str,
    ) -> Result<Option<object_store::ObjectInfo>, ClusterError> {
        match self.store.info(self.object_name(name)).await {
            Ok(info) => Ok(Some(info)),
            Err(error) if error.kind() == object_store::InfoErrorKind::NotFound => Ok(None),
            Err(error) => Err(ClusterError::nats(format!("looking up {name}"), error)),
        }
    }

    /// The bytes stored as `name`, checked against the digest its claim
    /// recorded; `None` if nothing whole was stored under it. Bounded in
    /// time as in size: the object store's reader waits for chunks with no
    /// limit of its own (one replaced under it never come).
    pub async fn get(&self, name: &str) -> Result<Option<Bytes>, ClusterError> {
        check_name(name)?;
        let Some(claim) = self.claim(name).await? else {
            return Ok(None);
        };
        let read = async {
            let mut object = match self.store.get(self.object_name(name)).await {
                Ok(object) => object,
                Err(error) if error.kind() == object_store::GetErrorKind::NotFound => {
                    return Ok(None);
                }
                Err(error) => return Err(ClusterError::nats(format!("reading {name}"), error)),
            };
            let mut bytes = Vec::new();
            (&mut object)
                .take(MAX_FILE_BYTES + 1)
                .read_to_end(&mut bytes)
                .await
                .map_err(|error| ClusterError::nats(format!("reading {name}"), error))?;
            Ok(Some(bytes))
        };
        let bytes = match tokio::time::timeout(READ_WAIT, read).await {
            Ok(read) => read?,
            Err(_) => {
                return Err(ClusterError::nats(
                    format!("reading {name}"),
                    format!("not read whole within {} s", READ_WAIT.as_secs()),
                ));
            }
        };
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        if sha256_hex(&bytes) != claim.sha256 {
            // A put cut off half way, or damage: not the claimed file.
            return Ok(None);
        }
        Ok(Some(Bytes::from(bytes)))
    }

    /// The names stored under `prefix.` (one level: `checkpoints` lists
    /// `checkpoints.<seq>.<token>`), unordered.
    pub async fn names_under(&self, prefix: &str) -> Result<Vec<String>, ClusterError> {
        use futures_util::TryStreamExt as _;
        check_name(prefix)?;
        let subjects = format!("{}{}.{prefix}.>", self.claims.prefix, self.run.path());
        let listing = |error: String| ClusterError::nats(format!("listing {prefix}"), error);
        let found: Vec<(String, usize)> = self
            .claims
            .stream
            .info_with_subjects(&subjects)
            .await
            .map_err(|error| listing(error.to_string()))?
            .try_collect()
            .await
            .map_err(|error| listing(error.to_string()))?;
        let key_prefix = format!("{}{}.", self.claims.prefix, self.run.path());
        Ok(found
            .into_iter()
            .filter_map(|(subject, _)| subject.strip_prefix(&key_prefix).map(str::to_owned))
            .collect())
    }

    async fn claim(&self, name: &str) -> Result<Option<Claim>, ClusterError> {
        let value = self
            .claims
            .get(self.claim_key(name))
            .await
            .map_err(|error| ClusterError::nats(format!("reading the claim on {name}"), error))?;
        match value {
            None => Ok(None),
            Some(value) => serde_json::from_slice(&value)
                .map(Some)
                .map_err(|error| ClusterError::nats(format!("the claim on {name}"), error)),
        }
    }

    fn claim_key(&self, name: &str) -> String {
        format!("{}.{name}", self.run.path())
    }

    fn object_name(&self, name: &str) -> String {
        format!("{}/{}/{name}", self.run.tenant(), self.run.run())
    }
}

/// A relative path whose parts are plain names, so that it is a valid KV
/// key as it is (KV keys allow `/`, and `.` between non-empty pieces).
fn check_name(name: &str) -> Result<(), ClusterError> {
    let plain_part = |part: &str| {
        !part.is_empty()
            && part.bytes().all(|byte| {
                byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' || byte == b'='
            })
    };
    // Dots only between plain pieces (`round-001.json`): an empty piece
    // would be an empty token of the key's subject.
    let ok = name.len() <= MAX_NAME && name.split(['/', '.']).all(plain_part);
    if ok {
        Ok(())
    } else {
        Err(ClusterError::InvalidName {
            what: "file name",
            value: name.chars().take(MAX_NAME).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::check_name;

    #[test]
    fn only_plain_relative_names_are_files() {
        for good in [
            "tool-results/call_0a.json",
            "model-responses/round-001.json",
            "events.jsonl",
        ] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/abs",
            "a//b",
            "../x",
            "a/./b",
            ".hidden",
            "trailing.",
            "sp ace",
            "star*",
            "gt>",
            &"x".repeat(513),
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
