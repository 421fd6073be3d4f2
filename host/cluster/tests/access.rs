//! Who gets into a cluster's NATS: a real nats-server with authorization
//! and TLS (`testing::NatsServer`), reached with the right credential and
//! certificates, and refused — as a typed error, before any of the
//! cluster's resources is touched — without them.

mod common;

use std::path::PathBuf;

use common::nats;
use toolhost_cluster::testing::{NatsServer, Security, nats_server_or_skip};
use toolhost_cluster::{
    Cluster, ClusterAddress, ClusterError, ClusterSettings, Credential, NodeName, RunTicket,
    TlsFiles,
};

fn name() -> NodeName {
    NodeName::new("node-a").expect("node name")
}

fn settings() -> ClusterSettings {
    ClusterSettings {
        request_timeout: std::time::Duration::from_secs(2),
        ..ClusterSettings::default()
    }
}

async fn connect(address: &ClusterAddress) -> Result<Cluster, ClusterError> {
    Cluster::connect(address, name(), settings()).await
}

/// The file the server's flags give `flag`.
fn flag_file(server: &NatsServer, flag: &str) -> PathBuf {
    let flags = server.flags();
    let at = flags.iter().position(|given| given == flag).expect(flag);
    PathBuf::from(&flags[at + 1])
}

/// A private file holding `text`.
fn secret(dir: &tempfile::TempDir, file: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.path().join(file);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_server_lets_in_only_its_token() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let server = NatsServer::start_with(&binary, Security::TokenTls).expect("nats-server");
    let cluster = connect(&server.address()).await.expect("the right token");
    cluster
        .queue()
        .submit(&RunTicket {
            tenant: "local".into(),
            run: "run_a".into(),
            reason: "start".into(),
            request: None,
        })
        .await
        .expect("a node that got in can queue");
    assert_eq!(cluster.queue().waiting().await.expect("queue"), 1);

    let dir = tempfile::tempdir().expect("temp dir");
    let ca = || TlsFiles {
        ca: Some(flag_file(&server, "--cluster-ca")),
        client: None,
    };
    let wrong = Credential::TokenFile(secret(&dir, "wrong", "not-the-token\n"));
    let error = connect(&ClusterAddress::new(&server.url(), Some(wrong), ca()).expect("address"))
        .await
        .expect_err("a wrong token");
    assert!(
        matches!(error, ClusterError::Unauthorized { .. }),
        "{error}"
    );
    assert!(!error.to_string().contains("not-the-token"), "{error}");
    let error = connect(&ClusterAddress::new(&server.url(), None, ca()).expect("address"))
        .await
        .expect_err("no token");
    assert!(
        matches!(error, ClusterError::Unauthorized { .. }),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_and_an_nkey_are_both_needed() {
    let Some(server) = nats() else { return };
    connect(&server.address())
        .await
        .expect("seed, CA and client certificate");

    let file = |flag: &str| flag_file(&server, flag);
    let seed = || Some(Credential::NkeySeedFile(file("--cluster-nkey")));
    // No client certificate: the TLS handshake is refused.
    let no_cert = TlsFiles {
        ca: Some(file("--cluster-ca")),
        client: None,
    };
    let address = ClusterAddress::new(&server.url(), seed(), no_cert).expect("address");
    let error = connect(&address)
        .await
        .expect_err("in without a client certificate");
    assert!(matches!(error, ClusterError::Unreachable { .. }), "{error}");
    // The server's certificate from a CA the node was not told of.
    let no_ca = TlsFiles {
        ca: None,
        client: Some((file("--cluster-cert"), file("--cluster-key"))),
    };
    let address = ClusterAddress::new(&server.url(), seed(), no_ca).expect("address");
    let error = connect(&address).await.expect_err("trusted an unknown CA");
    assert!(matches!(error, ClusterError::Unreachable { .. }), "{error}");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );
    // Certificates but another user's seed.
    let dir = tempfile::tempdir().expect("temp dir");
    let stranger = nkeys::KeyPair::new_user().seed().expect("seed");
    let full_tls = TlsFiles {
        ca: Some(file("--cluster-ca")),
        client: Some((file("--cluster-cert"), file("--cluster-key"))),
    };
    let address = ClusterAddress::new(
        &server.url(),
        Some(Credential::NkeySeedFile(secret(
            &dir,
            "stranger.nk",
            &stranger,
        ))),
        full_tls.clone(),
    )
    .expect("address");
    let error = connect(&address).await.expect_err("an unknown nkey");
    assert!(
        matches!(error, ClusterError::Unauthorized { .. }),
        "{error}"
    );
    // And no credential at all.
    let address = ClusterAddress::new(&server.url(), None, full_tls).expect("address");
    let error = connect(&address).await.expect_err("no credential");
    assert!(
        matches!(error, ClusterError::Unauthorized { .. }),
        "{error}"
    );
}
