//! Where a cluster's NATS is and how a node proves itself to it: the URL,
//! checked once with the `url` crate, a credential read from a file, and
//! TLS. Anyone who can publish to the cluster's subjects can read every
//! tenant's journal and queue runs as any tenant, so a NATS beyond this
//! machine is reached only with a credential and TLS, as `toolhost serve`
//! takes tokens and TLS beyond loopback. A URL never carries a secret: the
//! NATS client ignores `user:pass@` (so it would look protected and not
//! be), and a URL ends up in logs and status lines.

use std::fmt;
use std::path::{Path, PathBuf};

use url::{Host, Url};

use crate::ClusterError;

/// Largest credential file read (a `.creds` file is ~1 KiB).
const MAX_SECRET_BYTES: u64 = 64 * 1024;

/// How a node authenticates to NATS, each read from a file its owner alone
/// may read (mode 0600 or stricter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A NATS `.creds` file: a user JWT and its nkey seed (decentralized
    /// auth, `nsc`).
    CredsFile(PathBuf),
    /// A file holding an nkey user seed (`SU…`), for a server's
    /// `authorization { users: [{ nkey: U… }] }`.
    NkeySeedFile(PathBuf),
    /// A file holding the server's `authorization { token: … }`.
    TokenFile(PathBuf),
}

/// TLS to NATS: on with a `tls://` URL or any of these files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificates the server's certificate must chain to (besides the
    /// system's roots).
    pub ca: Option<PathBuf>,
    /// A PEM client certificate and its key, for a server that verifies
    /// clients (`tls { verify: true }`).
    pub client: Option<(PathBuf, PathBuf)>,
}

impl TlsFiles {
    fn any(&self) -> bool {
        self.ca.is_some() || self.client.is_some()
    }
}

/// A checked way to reach a cluster's NATS.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterAddress {
    url: Url,
    credential: Option<Credential>,
    tls: TlsFiles,
}

impl ClusterAddress {
    /// Check `url` (`nats://HOST:PORT` or `tls://HOST:PORT`) with how to
    /// reach it. Beyond loopback both a credential and TLS are required.
    pub fn new(
        url: &str,
        credential: Option<Credential>,
        tls: TlsFiles,
    ) -> Result<Self, ClusterError> {
        let refused = |reason: String| ClusterError::Access { reason };
        let parsed = Url::parse(url.trim())
            .map_err(|error| refused(format!("`{}` is not a URL: {error}", shown(url))))?;
        if !matches!(parsed.scheme(), "nats" | "tls") {
            return Err(refused(format!(
                "`{}` uses {}:, but a cluster is reached with nats:// or tls://",
                shown(url),
                parsed.scheme()
            )));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(refused(format!(
                "`{}` carries a user name or password before its host, which the NATS client ignores; give a credential file instead (--cluster-creds, --cluster-nkey or --cluster-token-file)",
                shown(url)
            )));
        }
        if parsed.host().is_none() || parsed.port().is_none() {
            return Err(refused(format!(
                "`{}` must name a host and a port",
                shown(url)
            )));
        }
        if !matches!(parsed.path(), "" | "/") || parsed.query().is_some() {
            return Err(refused(format!(
                "`{}` must be only a scheme, a host and a port",
                shown(url)
            )));
        }
        let address = Self {
            url: parsed,
            credential,
            tls,
        };
        if !address.is_loopback() {
            if address.credential.is_none() {
                return Err(refused(format!(
                    "NATS at {address} is beyond this machine: a node reaches it only with a credential (--cluster-creds, --cluster-nkey or --cluster-token-file)"
                )));
            }
            if !address.uses_tls() {
                return Err(refused(format!(
                    "NATS at {address} is beyond this machine: a node reaches it only over TLS (a tls:// URL, with --cluster-ca for a private CA)"
                )));
            }
        }
        Ok(address)
    }

    /// A loopback NATS with no credential and no TLS (tests, one machine).
    pub fn plain(url: &str) -> Result<Self, ClusterError> {
        Self::new(url, None, TlsFiles::default())
    }

    /// Whether the parsed host is this machine. (`nats:` is not a scheme
    /// the URL standard knows, so an IPv4 address comes back as a name.)
    pub fn is_loopback(&self) -> bool {
        match self.url.host() {
            Some(Host::Domain(name)) => {
                name.eq_ignore_ascii_case("localhost")
                    || name
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|address| address.is_loopback())
            }
            Some(Host::Ipv4(address)) => address.is_loopback(),
            Some(Host::Ipv6(address)) => {
                address.is_loopback() || address.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
            None => false,
        }
    }

    pub fn uses_tls(&self) -> bool {
        self.url.scheme() == "tls" || self.tls.any()
    }

    pub fn credential(&self) -> Option<&Credential> {
        self.credential.as_ref()
    }

    /// The client's options: credential read and checked now, TLS files
    /// checked now, so a mistake is named before any connection is tried.
    pub(crate) async fn options(&self) -> Result<async_nats::ConnectOptions, ClusterError> {
        let refused = |reason: String| ClusterError::Access { reason };
        let mut options = async_nats::ConnectOptions::new();
        match &self.credential {
            None => {}
            Some(Credential::CredsFile(path)) => {
                let text = read_secret(path)?;
                options = options.credentials(&text).map_err(|error| {
                    refused(format!(
                        "{} is not a NATS credentials file: {error}",
                        path.display()
                    ))
                })?;
            }
            Some(Credential::NkeySeedFile(path)) => {
                let seed = read_secret(path)?.trim().to_owned();
                nkeys::KeyPair::from_seed(&seed).map_err(|error| {
                    refused(format!(
                        "{} does not hold an nkey seed: {error}",
                        path.display()
                    ))
                })?;
                options = options.nkey(seed);
            }
            Some(Credential::TokenFile(path)) => {
                let token = read_secret(path)?.trim().to_owned();
                if token.is_empty() {
                    return Err(refused(format!("{} holds no token", path.display())));
                }
                options = options.token(token);
            }
        }
        if self.uses_tls() {
            options = options.require_tls(true);
        }
        if let Some(ca) = &self.tls.ca {
            readable(ca, "--cluster-ca")?;
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.tls.client {
            readable(cert, "--cluster-cert")?;
            read_secret(key)?;
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        Ok(options)
    }

    /// What the client is given to connect to: the URL, which holds no
    /// secret.
    pub(crate) fn url(&self) -> &str {
        self.url.as_str()
    }
}

impl fmt::Display for ClusterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.url.as_str())
    }
}

/// Never the credential: only where it is read from.
impl fmt::Debug for ClusterAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterAddress")
            .field("url", &self.url.as_str())
            .field("credential", &self.credential)
            .field("tls", &self.tls)
            .finish()
    }
}

/// A URL as it may be shown: whatever stands before an `@` (a password the
/// user put there) replaced.
fn shown(url: &str) -> String {
    let url = url.trim();
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}://…@{}", &url[..scheme_end], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

fn readable(path: &Path, flag: &str) -> Result<(), ClusterError> {
    std::fs::metadata(path)
        .map(drop)
        .map_err(|error| ClusterError::Access {
            reason: format!("{flag} {}: {error}", path.display()),
        })
}

/// A secret file's text: refused unless only its owner may read it, and
/// bounded.
fn read_secret(path: &Path) -> Result<String, ClusterError> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let refused = |reason: String| ClusterError::Access { reason };
    let file = std::fs::File::open(path)
        .map_err(|error| refused(format!("{}: {error}", path.display())))?;
    let meta = file
        .metadata()
        .map_err(|error| refused(format!("{}: {error}", path.display())))?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(refused(format!(
            "{} has mode {mode:o}: a cluster credential must be readable by its owner only (chmod 600)",
            path.display()
        )));
    }
    let mut text = String::new();
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| refused(format!("{}: {error}", path.display())))?;
    if text.len() as u64 > MAX_SECRET_BYTES {
        return Err(refused(format!(
            "{} is larger than {MAX_SECRET_BYTES} bytes",
            path.display()
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str, credential: Option<Credential>, tls: TlsFiles) -> String {
        match ClusterAddress::new(url, credential, tls) {
            Err(ClusterError::Access { reason }) => reason,
            other => panic!("{url}: expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn beyond_loopback_needs_a_credential_and_tls() {
        let token = || Some(Credential::TokenFile("/run/secrets/nats-token".into()));
        let reason = refused("nats://10.0.0.5:4222", None, TlsFiles::default());
        assert!(reason.contains("credential"), "{reason}");
        let reason = refused("nats://nats.example:4222", token(), TlsFiles::default());
        assert!(reason.contains("TLS"), "{reason}");
        for ok in ["tls://nats.example:4222", "tls://10.0.0.5:4222"] {
            ClusterAddress::new(ok, token(), TlsFiles::default()).expect(ok);
        }
        let with_ca = TlsFiles {
            ca: Some("/etc/nats/ca.pem".into()),
            client: None,
        };
        let address = ClusterAddress::new("nats://nats.example:4222", token(), with_ca)
            .expect("a CA file turns TLS on");
        assert!(address.uses_tls());
        for loopback in [
            "nats://127.0.0.1:4222",
            "nats://localhost:4222",
            "nats://[::1]:4222",
        ] {
            ClusterAddress::plain(loopback).expect(loopback);
        }
    }

    #[test]
    fn a_url_never_carries_a_secret_and_is_never_shown_with_one() {
        for url in [
            "nats://alice:hunter2@127.0.0.1:4222",
            "tls://hunter2@nats.example:4222",
        ] {
            let reason = refused(url, None, TlsFiles::default());
            assert!(!reason.contains("hunter2"), "{reason}");
            assert!(reason.contains("credential file"), "{reason}");
        }
        // A loopback host hidden behind userinfo is not loopback.
        let reason = refused(
            "nats://127.0.0.1:1@nats.example:4222",
            None,
            TlsFiles::default(),
        );
        assert!(reason.contains("user name or password"), "{reason}");
        for bad in [
            "http://127.0.0.1:4222",
            "nats://127.0.0.1",
            "nats://127.0.0.1:4222/x",
            "127.0.0.1:4222",
        ] {
            refused(bad, None, TlsFiles::default());
        }
    }

    #[tokio::test]
    async fn secret_files_are_checked_before_connecting() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        };
        let address = |credential| {
            ClusterAddress::new(
                "nats://127.0.0.1:4222",
                Some(credential),
                TlsFiles::default(),
            )
            .expect("loopback")
        };
        let open = write("token", "s3cret\n", 0o644);
        let reason = match address(Credential::TokenFile(open)).options().await {
            Err(ClusterError::Access { reason }) => reason,
            other => panic!("expected a refusal: {:?}", other.map(drop)),
        };
        assert!(reason.contains("mode 644"), "{reason}");
        let not_a_seed = write("seed", "SUnot-a-seed\n", 0o600);
        assert!(
            address(Credential::NkeySeedFile(not_a_seed))
                .options()
                .await
                .is_err()
        );
        let empty = write("empty", "\n", 0o600);
        assert!(
            address(Credential::TokenFile(empty))
                .options()
                .await
                .is_err()
        );
        let token = write("good", "s3cret\n", 0o600);
        address(Credential::TokenFile(token.clone()))
            .options()
            .await
            .expect("a private token file");
        let debug = format!("{:?}", address(Credential::TokenFile(token)));
        assert!(!debug.contains("s3cret"), "{debug}");
    }
}
