//! `toolhost cluster status` against a real nats-server (installed into
//! .venv by `make setup`): on a NATS no node has set up it fails and makes
//! nothing; then it shows the nodes, their leases, a run leased to a node
//! that stopped and the queue, as a table and as JSON.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use toolhost_cluster::testing::{NatsServer, nats_server_or_skip};
use toolhost_cluster::{Cluster, ClusterSettings, NodeName, NodeRecord, RunKey, RunTicket};

fn status(url: &str, json: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    command.args(["cluster", "status", "--cluster", url]);
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
    let url = server.url();

    let empty = status(&url, false);
    assert_eq!(empty.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(stderr.contains("cluster.not_found"), "{stderr}");
    let unreachable = status("nats://127.0.0.1:1", false);
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("cluster.unreachable"));

    let settings = ClusterSettings {
        lease: Duration::from_secs(30),
        ..ClusterSettings::default()
    };
    let a = Cluster::connect(&url, NodeName::new("node-a").unwrap(), settings.clone())
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
    let gone = Cluster::connect(&url, NodeName::new("node-b").unwrap(), settings)
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

    let table = status(&url, false);
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

    let json = status(&url, true);
    let json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["nodes"][0]["node"], "node-a");
    assert_eq!(json["nodes"][0]["runs"][0]["run"], "run_a");
    assert_eq!(json["orphaned"][0]["node"], "node-b");
    assert_eq!(json["queued"], 1);
}
