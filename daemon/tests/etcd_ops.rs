//! Live checks and the typed operations for the failover logic against a
//! real two-member etcd 3.4 cluster on loopback: quorum loss seen by a
//! linearizable read while MemberList still answers (etcd 3.4 serves it
//! locally), typed gRPC errors, learner add/promote/remove, and a
//! force-new-cluster restart of the survivor.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::free_port;
use etcd_warden::app::{App, Services};
use etcd_warden::config::{self, Settings};
use etcd_warden::etcd::conf::StartMode;
use etcd_warden::etcd::{Connector, EtcdError, LiveEtcd};
use etcd_warden::reconcile::ports::{EtcdOps, PeerDown, Supervisor};
use etcd_warden::supervise::AnySupervisor;
use etcd_warden::supervise::process::ProcessSupervisor;

struct Peer(Option<Child>);

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    a: Arc<App>,
    b_client: String,
    b_peer: String,
    initial: String,
}

fn cluster_settings(dir: &std::path::Path) -> (Settings, String, String) {
    let (ac, ap, bc, bp) = (free_port(), free_port(), free_port(), free_port());
    let text = format!(
        r#"node_name = "a"
topology = "two-node"
[etcd]
# The daemon's own user: the test's directories are root's.
user = "root"
binary = "{etcd}"
data_dir = "{d}/a"
heartbeat_interval_ms = 50
election_timeout_ms = 500
[api]
socket = "{d}/api.sock"
[paths]
state_dir = "{d}/state"
[timeouts]
stop_grace_ms = 5000
[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:{ap}"]
client_urls = ["http://127.0.0.1:{ac}"]
[[nodes]]
name = "b"
peer_urls = ["http://127.0.0.1:{bp}"]
client_urls = ["http://127.0.0.1:{bc}"]
"#,
        etcd = etcd_bin(),
        d = dir.display()
    );
    let s = config::from_texts(&[(PathBuf::from("test.toml"), text)]).unwrap();
    (
        s,
        format!("http://127.0.0.1:{bc}"),
        format!("http://127.0.0.1:{bp}"),
    )
}

fn etcd_bin() -> String {
    etcd_warden::standalone::find_etcd().display().to_string()
}

fn spawn_b(c: &Cluster, state: &str, initial: &str) -> Peer {
    let log = std::fs::File::create(c.dir.path().join("b.log")).unwrap();
    Peer(Some(
        Command::new(etcd_bin())
            .args(["--name", "b"])
            .arg("--data-dir")
            .arg(c.dir.path().join("b"))
            .args(["--listen-client-urls", &c.b_client])
            .args(["--advertise-client-urls", &c.b_client])
            .args(["--listen-peer-urls", &c.b_peer])
            .args(["--initial-advertise-peer-urls", &c.b_peer])
            .args(["--initial-cluster", initial])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "etcd-warden"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    ))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn new_cluster() -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    let (s, b_client, b_peer) = cluster_settings(dir.path());
    let initial = s
        .nodes
        .iter()
        .map(|n| format!("{}={}", n.name, n.peer_urls[0]))
        .collect::<Vec<_>>()
        .join(",");
    let s = Arc::new(s);
    let a = Arc::new(App::new(Services::new(
        s.clone(),
        AnySupervisor::Process(ProcessSupervisor::new(s)),
    )));
    Cluster {
        dir,
        a,
        b_client,
        b_peer,
        initial,
    }
}

#[test]
fn quorum_loss_is_seen_by_the_linearizable_read_not_by_member_list_and_force_new_cluster_recovers()
{
    let rt = rt();
    let c = new_cluster();
    rt.block_on(async {
        // A fresh two-node cluster: a through the daemon app, b by hand.
        let a_start = {
            let a = c.a.clone();
            tokio::spawn(async move { a.start(StartMode::Normal, Duration::from_secs(30)).await })
        };
        let mut b = spawn_b(&c, "new", &c.initial);
        a_start.await.unwrap().unwrap();
        let d = Duration::from_secs(1);
        let deadline = Instant::now() + Duration::from_secs(20);
        while c.a.etcd.linearizable_read(d).await.is_err() {
            assert!(Instant::now() < deadline, "no quorum");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let members = c.a.etcd.member_list(d).await.unwrap();
        assert_eq!(members.len(), 2);
        assert!(members.iter().all(|m| m.id != 0));

        // The peer dies.
        let version = c.a.etcd.status(d).await.unwrap().version;
        let before = c.a.etcd.linearizable_read(d).await.unwrap();
        if let Some(mut ch) = b.0.take() {
            ch.kill().unwrap();
            ch.wait().unwrap();
        }
        let t = Instant::now();
        let err =
            c.a.etcd
                .linearizable_read(Duration::from_millis(800))
                .await
                .unwrap_err();
        assert!(err.is_unreachable(), "{err}");
        assert!(t.elapsed() < Duration::from_millis(1500));
        // etcd 3.4 still answers MemberList: it is not a quorum check.
        let list = c.a.etcd.member_list(d).await;
        eprintln!("etcd {version}: member list without quorum: {list:?}");
        if version.starts_with("3.4.") {
            assert!(list.is_ok(), "etcd 3.4 serves MemberList locally: {list:?}");
        }
        // The survivor loses its leader within an election timeout or so.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = c.a.etcd.status(d).await.unwrap();
            if !s.has_leader() {
                break;
            }
            assert!(Instant::now() < deadline, "survivor kept a leader");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // Pacemaker confirmed the peer is fenced: force a new cluster, as
        // if the log's tail held 5 entries the peer may have acknowledged.
        let pid =
            c.a.restart_force_new_cluster(
                PeerDown {
                    node: "b".into(),
                    evidence: "test: peer SIGKILLed".into(),
                },
                5,
                Duration::from_secs(30),
            )
            .await
            .unwrap();
        assert!(pid > 0);
        let deadline = Instant::now() + Duration::from_secs(20);
        let after = loop {
            if let Ok(rev) = c.a.etcd.linearizable_read(d).await {
                break rev;
            }
            assert!(
                Instant::now() < deadline,
                "no quorum after force-new-cluster"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The revision moved on by 7 (6 puts and a delete) and everything
        // before is compacted: a watch from the first revision that could
        // have been reused is told so.
        assert!(after >= before + 7, "{before} -> {after}");
        let members = c.a.etcd.member_list(d).await.unwrap();
        let client_url = members[0].client_urls[0].clone();
        let mut client = etcd_client::Client::connect([client_url], None)
            .await
            .unwrap();
        let mut stream = client
            .watch(
                "/",
                Some(
                    etcd_client::WatchOptions::new()
                        .with_prefix()
                        .with_start_revision(after - 1),
                ),
            )
            .await
            .unwrap();
        let compacted = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let r = stream.message().await.unwrap().expect("the watch ended");
                if r.compact_revision() != 0 || r.canceled() {
                    return r.compact_revision();
                }
            }
        })
        .await
        .expect("no compaction answer within 10 s");
        assert_eq!(compacted, after);
        // A forced restart whose revision step was cut off (the daemon
        // died): the next start of that data moves the revision on again.
        // The watch above is still open: etcd 3.5.30 (not 3.4.23, nor 3.5.1)
        // answers SIGTERM by waiting for open gRPC streams for its request
        // timeout (5 s + 2 election timeouts, 6 s here) before it exits, well
        // within this grace.
        c.a.stop_etcd(Duration::from_secs(10)).await.unwrap();
        c.a.start_moving_revision(3, Duration::from_secs(30))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let again = loop {
            if let Ok(rev) = c.a.etcd.linearizable_read(d).await {
                break rev;
            }
            assert!(Instant::now() < deadline, "no quorum after the held start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(again >= after + 5, "{after} -> {again}");
        let kv = client
            .get("/etcd-warden/revision-bump", None)
            .await
            .unwrap();
        assert!(kv.kvs().is_empty(), "the bump's key is deleted");
        assert_eq!(c.a.etcd.member_list(d).await.unwrap().len(), 1);
        let members = c.a.etcd.member_list(d).await.unwrap();
        assert_eq!(members.len(), 1, "{members:?}");
        assert_eq!(members[0].name, "a");
        // The flag does not survive into the next start.
        let conf = std::fs::read_to_string(c.a.settings.etcd_config_path()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&conf).unwrap();
        assert_eq!(v["force-new-cluster"], false);

        // Rejoin b as a learner: add, then promote once it is in sync.
        let b_data = c.dir.path().join("b");
        let archived = c.dir.path().join("b.archived");
        std::fs::rename(&b_data, &archived).unwrap(); // archive, never delete
        let (added, list) = c.a.add_learner(vec![c.b_peer.clone()], d).await.unwrap();
        assert!(list.iter().any(|m| m.id == added.id && m.is_learner));
        // A learner that has not started cannot be promoted: a typed error.
        match c.a.promote(added.id, d).await {
            Err(etcd_warden::reconcile::ports::OpsError::Etcd(EtcdError::FailedPrecondition(
                _,
            ))) => {}
            other => panic!("expected FailedPrecondition, got {other:?}"),
        }
        // A second learner is refused (one at a time on 3.4/3.5).
        let second =
            c.a.add_learner(vec![format!("http://127.0.0.1:{}", free_port())], d)
                .await;
        assert!(second.is_err(), "{second:?}");
        // The leader's raft progress: the unstarted learner is not in sync.
        let p = c.a.etcd.raft_progress(d).await.unwrap();
        assert!(p.is_leader, "{p:?}");
        assert!(p.members.contains_key(&added.id), "{p:?}");
        assert!(!p.in_sync(added.id), "{p:?}");
        let a_peer = c.a.settings.local_node().peer_urls[0].clone();
        let _b2 = spawn_b(&c, "existing", &format!("a={a_peer},b={}", c.b_peer));
        // Once the leader's progress shows it in sync, etcd's own check at
        // promotion agrees at the first try.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !c.a.etcd.raft_progress(d).await.unwrap().in_sync(added.id) {
            assert!(Instant::now() < deadline, "learner never got in sync");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let list = c.a.promote(added.id, d).await.unwrap();
        assert!(list.iter().all(|m| !m.is_learner), "{list:?}");
        // Removing an unknown member is a typed NotFound. On etcd 3.5 the
        // removal goes through raft, and while the promotion's configuration
        // change is still pending the proposal is dropped and the call times
        // out instead: a timeout is retryable, never an answer.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match c.a.remove(12345, Duration::from_secs(3)).await {
                Err(etcd_warden::reconcile::ports::OpsError::Etcd(EtcdError::NotFound(_))) => break,
                Err(etcd_warden::reconcile::ports::OpsError::Etcd(EtcdError::Timeout(_)))
                    if Instant::now() < deadline => {}
                other => panic!("expected NotFound, got {other:?}"),
            }
        }
        c.a.stop(Duration::from_secs(5)).await.unwrap();
    });
}

#[test]
fn a_live_view_of_a_missing_member_times_out_within_its_deadline() {
    let rt = rt();
    rt.block_on(async {
        // A listener that accepts and never answers, like a hung etcd.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let live = LiveEtcd::new(url, Connector::plain());
        let t = Instant::now();
        let e = live.status(Duration::from_millis(500)).await.unwrap_err();
        assert!(e.is_unreachable(), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        drop(l);
    });
}
