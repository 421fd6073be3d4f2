//! `toolhost cluster status` against a real nats-server (installed into
//! .venv by `make setup`): on a NATS no node has set up it fails and makes
//! nothing; then it shows the nodes, their leases, a run leased to a node
//! that stopped and the queue, as a table and as JSON. The server is
//! secured (TLS with client certificates, an nkey user): the status reaches
//! it only with the flags that say how, and a NATS beyond loopback is
//! refused before any connection without a credential and TLS.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use toolhost_cluster::testing::{NatsServer, nats_server_or_skip};
use toolhost_cluster::{Cluster, ClusterSettings, NodeName, NodeRecord, RunKey, RunTicket};

fn status<S: AsRef<std::ffi::OsStr>>(flags: &[S], json: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command.args(["cluster", "status"]).args(flags);
    if json {
        command.arg("--json");
    }
    command.output().expect("toolhost runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_status_shows_nodes_leases_and_the_queue() {
    let Some(binary) = nats_server_or_skip() else {
        return;
    };
    let server = NatsServer::start(&binary).expect("nats-server");
    let flags = server.flags();
    let address = server.address();

    let empty = status(&flags, false);
    assert_eq!(empty.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(stderr.contains("cluster.not_found"), "{stderr}");
    let unreachable = status(&["--cluster", "nats://127.0.0.1:1"], false);
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("cluster.unreachable"));
    // The secured server with its URL alone: no TLS client certificate,
    // no nkey — never in.
    let bare = status(&["--cluster", &server.url()], false);
    assert_eq!(bare.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bare.stderr);
    assert!(
        stderr.contains("cluster.unreachable") || stderr.contains("cluster.unauthorized"),
        "{stderr}"
    );
    // Beyond loopback: refused before connecting, and a password in the
    // URL is neither used nor printed.
    let remote = status(&["--cluster", "nats://192.0.2.1:4222"], false);
    let stderr = String::from_utf8_lossy(&remote.stderr);
    assert!(
        stderr.contains("cluster.access_refused") && stderr.contains("credential"),
        "{stderr}"
    );
    let userinfo = status(&["--cluster", "nats://node:hunter2@127.0.0.1:4222"], false);
    let stderr = String::from_utf8_lossy(&userinfo.stderr);
    assert!(stderr.contains("cluster.access_refused"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");

    let settings = ClusterSettings {
        lease: Duration::from_secs(30),
        ..ClusterSettings::default()
    };
    let a = Cluster::connect(&address, NodeName::new("node-a").unwrap(), settings.clone())
        .await
        .unwrap();
    a.nodes()
        .announce(&NodeRecord {
            node: "node-a".into(),
            listen: "127.0.0.1:7701".into(),
            capacity: 4,
            running: 1,
        })
        .await
        .unwrap();
    let run = RunKey::new("local", "run_a").unwrap();
    a.leases()
        .await
        .unwrap()
        .acquire(&run)
        .await
        .unwrap()
        .unwrap();
    let gone = Cluster::connect(&address, NodeName::new("node-b").unwrap(), settings)
        .await
        .unwrap();
    let orphan = RunKey::new("local", "run_b").unwrap();
    gone.leases()
        .await
        .unwrap()
        .acquire(&orphan)
        .await
        .unwrap()
        .unwrap();
    a.queue()
        .submit(&RunTicket {
            tenant: "local".into(),
            run: "run_c".into(),
            reason: "start".into(),
            request: None,
        })
        .await
        .unwrap();

    let table = status(&flags, false);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("node-a  127.0.0.1:7701  1/4"), "{text}");
    assert!(text.contains("local/run_a  node-a "), "{text}");
    assert!(text.contains("local/run_b  node-b (stopped)"), "{text}");
    assert!(text.contains("1 queued; leases last 30000 ms"), "{text}");

    let json = status(&flags, true);
    let json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["nodes"][0]["node"], "node-a");
    assert_eq!(json["nodes"][0]["runs"][0]["run"], "run_a");
    assert_eq!(json["orphaned"][0]["node"], "node-b");
    assert_eq!(json["queued"], 1);
}
