//! Secrets by reference: a value a user stored once (`toolhost secret set`)
//! that the host writes into an extension's outgoing requests — to one host,
//! in one header — after the request was admitted. The extension names the
//! secret (its manifest's key), the user binds the key to a stored secret
//! (`ext grant --secret KEY=NAME`), and the value never enters the guest,
//! the registry, a run directory or the journal.
//!
//! ```text
//! <ext-dir>/secrets/local/<NAME>            the local use (toolhost run, call, mcp serve)
//! <ext-dir>/secrets/tenant-<tenant>/<NAME>  a `toolhost serve` tenant's own
//! ```
//!
//! Directories are 0700 and files 0600, written atomically; a file others
//! may read, or a link, is refused when read.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolhost_core::allowed_hosts::{HostMatch, HostPattern, PortMatch, Scheme};

/// Most secrets a manifest may ask for, and a grant may bind.
pub const MAX_SECRETS: usize = 16;
/// Largest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 8 * 1024;
/// Longest header format, in characters.
const MAX_FORMAT_CHARS: usize = 256;
const SECRETS_DIR: &str = "secrets";

/// Headers a secret may not be written into: they frame the request or
/// route it, and the host sets them itself.
const FORBIDDEN_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "proxy-connection",
];

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "secret.name_invalid: `{0}`: a secret's name is 1 to 64 of A-Z, a-z, 0-9, `_`, `-`, `.`, not starting with `.` or `-`"
    )]
    NameInvalid(String),
    #[error("secret.tenant_invalid: tenant `{0}` must be 1 to 64 of a-z, 0-9, `-`, `_`")]
    TenantInvalid(String),
    #[error("secret.value_invalid: {0}")]
    ValueInvalid(&'static str),
    #[error(
        "secret.not_set: no secret `{name}` is stored for {owner} (toolhost secret set {name}{flag})"
    )]
    NotSet {
        name: String,
        owner: String,
        flag: String,
    },
    #[error("secret.insecure: {} may be read by others (mode {mode:o}): `chmod 600` it or set it again", path.display())]
    Insecure { path: PathBuf, mode: u32 },
    #[error("secret.io_error: {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SecretError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NameInvalid(_) => "secret.name_invalid",
            Self::TenantInvalid(_) => "secret.tenant_invalid",
            Self::ValueInvalid(_) => "secret.value_invalid",
            Self::NotSet { .. } => "secret.not_set",
            Self::Insecure { .. } => "secret.insecure",
            Self::Io { .. } => "secret.io_error",
        }
    }
}

/// A secret's name, or an extension's key for one:
/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}`.
pub fn is_secret_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !name.starts_with(['.', '-'])
}

/// A header a secret may go into, lowercased; or why not. Letters, digits,
/// `-` and `_` only: every real header name fits, and a name that could mean
/// something to a shell or a proxy never reaches a printed command line.
pub fn check_header(name: &str) -> Result<String, String> {
    let lower = name.to_ascii_lowercase();
    let plain = !lower.is_empty()
        && lower.len() <= 64
        && lower
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
    if !plain {
        return Err(format!(
            "header `{}` must be 1 to 64 of A-Z, a-z, 0-9, `-`, `_`",
            escape(name)
        ));
    }
    if FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
        return Err(format!(
            "header `{lower}` frames or routes the request; a secret cannot go into it"
        ));
    }
    Ok(lower)
}

/// The one destination a secret may go to: a scheme, a host and a port,
/// exactly. A wildcard (`*.example.com`, `:*`) would hand the secret to any
/// subdomain or port the guest picks, and plain `http` to whoever answers
/// on the way — except a loopback address, which never leaves the machine.
pub fn check_secret_host(host: &HostPattern) -> Result<(), String> {
    if matches!(host.host, HostMatch::Subdomains(_)) {
        return Err(format!(
            "a secret goes to one host, not to `{host}`: name it (`api.example.com`)"
        ));
    }
    if host.port == PortMatch::Any {
        return Err(format!(
            "a secret goes to one port, not to `{host}`: name it (`{}:443`)",
            host.to_string().trim_end_matches(":*")
        ));
    }
    let loopback = matches!(host.host, HostMatch::Address(address) if address.is_loopback());
    if host.scheme == Scheme::Http && !loopback {
        return Err(format!(
            "a secret is never sent in clear text: `{host}` is plain http (use https, or a loopback IP address such as 127.0.0.1 or [::1])"
        ));
    }
    Ok(())
}

/// A header value's pattern: `{}` once, where the secret goes, and
/// otherwise what a header value may hold.
pub fn check_format(format: &str) -> Result<(), String> {
    if format.matches("{}").count() != 1 {
        return Err(format!(
            "format `{}` must hold `{{}}` exactly once, where the secret goes",
            escape(format)
        ));
    }
    if format.chars().count() > MAX_FORMAT_CHARS
        || !format
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
    {
        return Err(format!(
            "format `{}` must be at most {MAX_FORMAT_CHARS} printable ASCII characters",
            escape(format)
        ));
    }
    Ok(())
}

fn escape(text: &str) -> String {
    text.chars().take(80).flat_map(char::escape_debug).collect()
}

fn default_format() -> String {
    "{}".to_owned()
}

/// What a manifest asks for under one key: which host the secret is for,
/// and the header and format it goes in (what `ext install` proposes; the
/// user's grant decides).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SecretRequest {
    /// What the secret is, for the user (at most 1,000 characters).
    pub description: String,
    pub host: HostPattern,
    pub header: String,
    #[serde(default = "default_format")]
    pub format: String,
}

/// What a grant binds: the extension's key to a stored secret, for requests
/// to one host pattern, written into one header as `format` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretBinding {
    pub key: String,
    /// The stored secret's name (`toolhost secret set NAME`).
    pub secret: String,
    pub host: HostPattern,
    pub header: String,
    pub format: String,
}

impl SecretBinding {
    /// Every part well formed (the header lowercased); whether the key was
    /// requested and the host granted is the registry's check.
    pub fn checked(mut self) -> Result<Self, String> {
        if !is_secret_name(&self.key) {
            return Err(format!(
                "secret key `{}` is not a valid key",
                escape(&self.key)
            ));
        }
        if !is_secret_name(&self.secret) {
            return Err(SecretError::NameInvalid(escape(&self.secret)).to_string());
        }
        self.header = check_header(&self.header)?;
        check_format(&self.format)?;
        check_secret_host(&self.host)?;
        Ok(self)
    }

    /// The header's value with `secret` in its place.
    pub fn header_value(&self, secret: &SecretValue) -> String {
        self.format.replacen("{}", secret.expose(), 1)
    }
}

/// A secret's value. Never printed: its `Debug` says only how long it is.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Checked as a header value may hold it: one trailing newline (a file
    /// or `echo` wrote it) dropped, then 1 to 8 KiB of printable ASCII.
    pub fn new(bytes: &[u8]) -> Result<Self, SecretError> {
        let bytes = bytes
            .strip_suffix(b"\r\n")
            .or_else(|| bytes.strip_suffix(b"\n"))
            .unwrap_or(bytes);
        if bytes.is_empty() {
            return Err(SecretError::ValueInvalid("the value is empty"));
        }
        if bytes.len() > MAX_SECRET_BYTES {
            return Err(SecretError::ValueInvalid("the value is longer than 8 KiB"));
        }
        if !bytes.iter().all(|b| (0x20..0x7f).contains(b)) {
            return Err(SecretError::ValueInvalid(
                "the value must be printable ASCII on one line (it goes into an HTTP header)",
            ));
        }
        Ok(Self(String::from_utf8_lossy(bytes).into_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValue({} bytes)", self.0.len())
    }
}

/// The stored secrets of an extensions directory.
#[derive(Debug, Clone)]
pub struct SecretStore {
    dir: PathBuf,
}

impl SecretStore {
    /// The secrets kept beside the extensions of `ext_dir`.
    pub fn of_registry(ext_dir: &Path) -> Self {
        Self {
            dir: ext_dir.join(SECRETS_DIR),
        }
    }

    /// Whose secrets: the local use, or a served tenant's.
    fn owner_dir(&self, tenant: Option<&str>) -> Result<PathBuf, SecretError> {
        match tenant {
            None => Ok(self.dir.join("local")),
            Some(tenant) if toolhost_core::profile::is_tenant_name(tenant) => {
                Ok(self.dir.join(format!("tenant-{tenant}")))
            }
            Some(tenant) => Err(SecretError::TenantInvalid(escape(tenant))),
        }
    }

    fn path(&self, tenant: Option<&str>, name: &str) -> Result<PathBuf, SecretError> {
        if !is_secret_name(name) {
            return Err(SecretError::NameInvalid(escape(name)));
        }
        Ok(self.owner_dir(tenant)?.join(name))
    }

    /// Store `value` under `name` (replacing it), readable by this user only.
    pub fn set(
        &self,
        tenant: Option<&str>,
        name: &str,
        value: &SecretValue,
    ) -> Result<PathBuf, SecretError> {
        let path = self.path(tenant, name)?;
        let owner = path.parent().unwrap_or(&self.dir).to_owned();
        if let Some(registry) = self.dir.parent() {
            std::fs::create_dir_all(registry).map_err(|source| SecretError::Io {
                path: registry.to_owned(),
                source,
            })?;
        }
        for dir in [&self.dir, &owner] {
            private_dir(dir)?;
        }
        // Not `document::write_atomically`: its temp file is anonymous, and
        // this one is named after the secret, so `remove` can clear the copy
        // a crashed `set` left.
        let temp = owner.join(format!(".{name}.{}.tmp", std::process::id()));
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| SecretError::Io { path, source }
        };
        // What a crashed `set` of the same process id left behind.
        let _ = std::fs::remove_file(&temp);
        let written = (|| {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&temp)?;
            file.write_all(value.expose().as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)?;
            toolhost_core::document::sync_dir(&owner)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written.map_err(io(&path))?;
        Ok(path)
    }

    /// The value stored under `name`.
    pub fn get(&self, tenant: Option<&str>, name: &str) -> Result<SecretValue, SecretError> {
        let path = self.path(tenant, name)?;
        let io = |source| SecretError::Io {
            path: path.clone(),
            source,
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            // Never through a link, and never waiting on a fifo planted there.
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32,
            )
            .open(&path)
        {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(SecretError::NotSet {
                    name: name.to_owned(),
                    owner: match tenant {
                        None => "the local use".to_owned(),
                        Some(tenant) => format!("tenant `{tenant}`"),
                    },
                    flag: tenant
                        .map(|tenant| format!(" --tenant {tenant}"))
                        .unwrap_or_default(),
                });
            }
            Err(error) => return Err(io(error)),
        };
        let metadata = file.metadata().map_err(io)?;
        if !metadata.is_file() {
            return Err(io(std::io::Error::other("not a regular file")));
        }
        // Another user's file, or a second name of a file kept elsewhere
        // (a hard link planted in a shared directory), is not this store's.
        if metadata.uid() != rustix::process::geteuid().as_raw() || metadata.nlink() != 1 {
            return Err(io(std::io::Error::other(
                "not a file this user stored here (another owner, or a hard link)",
            )));
        }
        if metadata.mode() & 0o077 != 0 {
            return Err(SecretError::Insecure {
                path: path.clone(),
                mode: metadata.mode() & 0o777,
            });
        }
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_BYTES as u64 + 3)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        SecretValue::new(&bytes)
    }

    /// Forget `name`; whether it was stored.
    pub fn remove(&self, tenant: Option<&str>, name: &str) -> Result<bool, SecretError> {
        let path = self.path(tenant, name)?;
        // A copy a crashed `set` left behind goes too.
        if let Some(entries) = path.parent().and_then(|dir| std::fs::read_dir(dir).ok()) {
            let prefix = format!(".{name}.");
            for entry in entries.flatten() {
                let file = entry.file_name();
                let file = file.to_string_lossy();
                if file.starts_with(&prefix) && file.ends_with(".tmp") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(SecretError::Io { path, source }),
        }
    }

    /// The names stored for `tenant`, sorted.
    pub fn list(&self, tenant: Option<&str>) -> Result<Vec<String>, SecretError> {
        let dir = self.owner_dir(tenant)?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(SecretError::Io { path: dir, source }),
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| is_secret_name(name))
            .collect();
        names.sort();
        Ok(names)
    }
}

/// A directory only this user may enter, made if missing.
fn private_dir(dir: &Path) -> Result<(), SecretError> {
    let io = |source| SecretError::Io {
        path: dir.to_owned(),
        source,
    };
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(io(error)),
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_stored_private_read_back_and_never_printed() {
        let home = tempfile::tempdir().expect("tempdir");
        // A registry directory not made yet is made.
        let store = SecretStore::of_registry(&home.path().join("not-yet"));
        let value = SecretValue::new(b"sk-live-123\n").expect("value");
        assert_eq!(format!("{value:?}"), "SecretValue(11 bytes)");
        let path = store.set(None, "WEATHER", &value).expect("set");
        assert_eq!(
            std::fs::metadata(&path).expect("file").mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(path.parent().expect("dir"))
                .expect("dir")
                .mode()
                & 0o777,
            0o700
        );
        assert_eq!(
            store.get(None, "WEATHER").expect("get").expose(),
            "sk-live-123"
        );
        // Another owner does not see it.
        let missing = store.get(Some("acme"), "WEATHER").expect_err("not acme's");
        assert_eq!(missing.code(), "secret.not_set");
        assert!(missing.to_string().contains("--tenant acme"), "{missing}");
        assert_eq!(store.list(None).expect("list"), ["WEATHER"]);
        assert!(store.remove(None, "WEATHER").expect("remove"));
        assert_eq!(
            store.get(None, "WEATHER").expect_err("gone").code(),
            "secret.not_set"
        );
    }

    #[test]
    fn hostile_names_values_and_files_are_refused() {
        let home = tempfile::tempdir().expect("tempdir");
        let store = SecretStore::of_registry(home.path());
        let value = SecretValue::new(b"v").expect("value");
        for name in ["", "../x", ".hidden", "-flag", "a/b", &"x".repeat(65)] {
            assert_eq!(
                store.set(None, name, &value).expect_err(name).code(),
                "secret.name_invalid"
            );
        }
        assert_eq!(
            store
                .set(Some("../x"), "A", &value)
                .expect_err("tenant")
                .code(),
            "secret.tenant_invalid"
        );
        for bad in [
            &b""[..],
            b"\n",
            b"a\nb",
            b"a\0",
            "é".as_bytes(),
            &[b'a'; 8193],
        ] {
            assert_eq!(
                SecretValue::new(bad).expect_err("value").code(),
                "secret.value_invalid"
            );
        }
        // A file others may read is refused; so is a link to one.
        let path = store.set(None, "OPEN", &value).expect("set");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(
            store.get(None, "OPEN").expect_err("open").code(),
            "secret.insecure"
        );
        // A second name of a stored file (a hard link planted beside it).
        let kept = store.set(None, "KEPT", &value).expect("set");
        std::fs::hard_link(&kept, kept.with_file_name("TWIN")).expect("hard link");
        assert_eq!(
            store.get(None, "TWIN").expect_err("twin").code(),
            "secret.io_error"
        );
        let elsewhere = home.path().join("elsewhere");
        std::fs::write(&elsewhere, "stolen").expect("write");
        std::os::unix::fs::symlink(&elsewhere, path.with_file_name("LINK")).expect("link");
        assert_eq!(
            store.get(None, "LINK").expect_err("link").code(),
            "secret.io_error"
        );
    }

    #[test]
    fn headers_and_formats_are_checked() {
        assert_eq!(check_header("Authorization").expect("ok"), "authorization");
        assert_eq!(check_header("X-Api-Key").expect("ok"), "x-api-key");
        for bad in [
            "",
            "Host",
            "content-length",
            "Proxy-Authorization",
            "a b",
            "a:b",
            "é",
            "x`rm$IFS-rf`",
            "a|b",
        ] {
            assert!(check_header(bad).is_err(), "{bad}");
        }
        for host in [
            "api.example.com",
            "https://api.example.com:8443",
            "http://127.0.0.1:8080",
            "http://[::1]:9",
        ] {
            check_secret_host(&host.parse().expect("pattern")).expect(host);
        }
        for host in [
            "*.example.com",
            "api.example.com:*",
            "http://api.example.com",
            "http://10.0.0.1:80",
            "http://127.0.0.1:*",
        ] {
            assert!(
                check_secret_host(&host.parse().expect("pattern")).is_err(),
                "{host}"
            );
        }
        check_format("Bearer {}").expect("ok");
        for bad in ["Bearer", "{}{}", "a\r\n{}", "é{}"] {
            assert!(check_format(bad).is_err(), "{bad}");
        }
        let binding = SecretBinding {
            key: "API_KEY".into(),
            secret: "weather".into(),
            host: "api.example.com".parse().expect("pattern"),
            header: "Authorization".into(),
            format: "Bearer {}".into(),
        }
        .checked()
        .expect("checked");
        assert_eq!(binding.header, "authorization");
        let value = SecretValue::new(b"t0k").expect("value");
        assert_eq!(binding.header_value(&value), "Bearer t0k");
    }
}
