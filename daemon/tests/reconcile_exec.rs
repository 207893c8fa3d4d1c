//! The failover step executor against a real two-member etcd 3.4 on
//! loopback, driven through two daemon apps: bootstrap, the peer lost and
//! fenced (a fence fact as the alert agent delivers it), the survivor forces
//! a one-member cluster keeping its writes and the epoch, the returning node
//! archives its stale data (nothing deleted), joins as a learner and is
//! promoted once etcd says it is in sync. Pacemaker's attribute writes go to
//! a recording fake: the Pacemaker side runs in `tests/integration`'s
//! cluster_failover scenarios.
//!
//! The forced start runs with `failover.force_election_timeout_ms` below the
//! election timeout (etcd must accept the rendered value), and the archive
//! goes to the configured `failover.archive_dir` and shows in `/status` and
//! the report's etcd section.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::free_port;
use etcd_warden::app::{App, Services};
use etcd_warden::config::{self, Settings};
use etcd_warden::pacemaker::{Pacemaker, PcmkError};
use etcd_warden::reconcile::exec::execute;
use etcd_warden::reconcile::local::LocalPaths;
use etcd_warden::reconcile::ports::Ports;
use etcd_warden::supervise::AnySupervisor;
use etcd_warden::supervise::process::ProcessSupervisor;
use warden_failover::{
    ClusterView, DataRecord, EtcdView, Facts, FenceAction, FenceEvent, FenceStatus, LocalData,
    LocalMarkers, MemberInfo, NodeView, PacemakerView, ResourceState, Stamp, StartMode, Step,
    Topology, Trigger,
};

#[derive(Debug, Default)]
struct Attrs(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Pacemaker for Attrs {
    async fn crm_mon(&self, _d: Duration) -> Result<crm_xml::CrmMon, PcmkError> {
        unreachable!("the executor never reads crm_mon")
    }
    async fn get_attr(
        &self,
        _n: &str,
        _a: &str,
        _d: Duration,
    ) -> Result<Option<String>, PcmkError> {
        Ok(None)
    }
    async fn set_attr(&self, n: &str, a: &str, v: &str, _d: Duration) -> Result<(), PcmkError> {
        self.0.lock().unwrap().push(format!("set {n} {a} {v}"));
        Ok(())
    }
    async fn delete_attr(&self, n: &str, a: &str, _d: Duration) -> Result<(), PcmkError> {
        self.0.lock().unwrap().push(format!("delete {n} {a}"));
        Ok(())
    }
    async fn clear_failed_start(&self, _r: &str, _n: &str, _d: Duration) -> Result<(), PcmkError> {
        Ok(())
    }
}

fn settings(dir: &std::path::Path, me: &str, ports: [u16; 4]) -> Settings {
    let [ac, ap, bc, bp] = ports;
    let text = format!(
        r#"node_name = "{me}"
topology = "two-node"
[etcd]
# The daemon's own user: the test's directories are root's.
user = "root"
binary = "{etcd}"
data_dir = "{d}/{me}/etcd"
heartbeat_interval_ms = 50
election_timeout_ms = 500
[api]
socket = "{d}/{me}/api.sock"
[paths]
state_dir = "{d}/{me}/state"
[timeouts]
stop_grace_ms = 5000
[failover]
archive_dir = "{d}/{me}/archives"
force_election_timeout_ms = 250
[[nodes]]
name = "a"
peer_urls = ["http://127.0.0.1:{ap}"]
client_urls = ["http://127.0.0.1:{ac}"]
[[nodes]]
name = "b"
peer_urls = ["http://127.0.0.1:{bp}"]
client_urls = ["http://127.0.0.1:{bc}"]
"#,
        etcd = etcd_warden::standalone::find_etcd().display(),
        d = dir.display()
    );
    config::from_texts(&[(PathBuf::from("test.toml"), text)]).unwrap()
}

struct Node {
    app: Arc<App>,
    paths: LocalPaths,
}

fn node(dir: &std::path::Path, me: &str, ports: [u16; 4]) -> Node {
    let s = Arc::new(settings(dir, me, ports));
    let paths = LocalPaths {
        data_dir: s.etcd.data_dir.clone(),
        state_file: s.state_dir.join("failover-state.json"),
        run_dir: dir.join(me).join("run"),
        archive_dir: s.failover.archive_dir.clone(),
    };
    let app = Arc::new(App::new(Services::new(
        s.clone(),
        AnySupervisor::Process(ProcessSupervisor::new(s)),
    )));
    Node { app, paths }
}

fn pnode(name: &str, online: bool) -> NodeView {
    NodeView {
        name: name.into(),
        online,
        unclean: false,
        expected_up: online,
        shutdown: false,
        standby: false,
        maintenance: false,
        last_seen: None,
        etcd: if online {
            ResourceState::Started
        } else {
            ResourceState::Unknown
        },
        record: None,
        claim: None,
        start_failed_without_daemon: None,
    }
}

fn facts(me: &str, peer_online: bool, n: &Node) -> Facts {
    Facts {
        node: me.into(),
        boot_id: n.paths.boot_id().unwrap(),
        topology: Topology::TwoNode,
        trigger: Trigger::Reconcile,
        notify: None,
        pacemaker: PacemakerView {
            quorate: true,
            nodes: vec![
                pnode(me, true),
                pnode(if me == "a" { "b" } else { "a" }, peer_online),
            ],
            fence_history: vec![],
            ..Default::default()
        },
        etcd: EtcdView::NotRunning,
        cluster: None,
        data: LocalData::default(),
        local: LocalMarkers {
            in_sync_boot: n.paths.in_sync(),
        },
        alerts: vec![],
    }
}

async fn exec(n: &Node, f: &Facts, steps: &[Step]) -> Result<(), String> {
    let pcmk = Attrs::default();
    let ports = Ports {
        pacemaker: &pcmk,
        etcd: &*n.app,
        supervisor: &*n.app,
        settings: &n.app.settings,
    };
    let r = execute(&ports, &n.paths, f, steps, Duration::from_secs(30)).await;
    // An archive's checksum is written after its move, on its own thread.
    for c in r.checksums {
        c.join()
            .map_err(|_| "the checksum thread panicked".to_string())?;
    }
    match r.failed {
        None => Ok(()),
        Some((s, e)) => Err(format!("{s:?}: {e}")),
    }
}

async fn wait_quorum(n: &Node, limit: Duration) {
    let t = Instant::now();
    while n
        .app
        .etcd
        .linearizable_read(Duration::from_millis(500))
        .await
        .is_err()
    {
        assert!(t.elapsed() < limit, "no quorum within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn put_get(n: &Node, key: &str, value: Option<&str>) -> Option<String> {
    let url = n.app.settings.local_client_url().to_string();
    let mut c = etcd_client::Client::connect([url], None).await.unwrap();
    if let Some(v) = value {
        c.put(key, v, None).await.unwrap();
    }
    let r = c.get(key, None).await.unwrap();
    r.kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
}

#[test]
fn force_archive_rejoin_promote_on_real_etcd() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ports = [free_port(), free_port(), free_port(), free_port()];
    let a = node(dir.path(), "a", ports);
    let b = node(dir.path(), "b", ports);
    rt.block_on(async {
        // the fresh-bootstrap scenario: both start New (no data anywhere) and form one cluster.
        let start = [Step::StartEtcd {
            mode: StartMode::New,
        }];
        // Each daemon has published its record (a bootstrap is decided
        // only then): both derive the same fresh cluster token from them.
        let (mut fa, mut fb) = (facts("a", true, &a), facts("b", true, &b));
        let records = [("a", &a), ("b", &b)].map(|(name, n)| {
            (
                name,
                DataRecord {
                    boot_id: n.paths.boot_id().unwrap(),
                    has_data: false,
                    formed: false,
                    epoch: 0,
                    cluster_id: None,
                    departed: false,
                    archives: 0,
                    bootstrap_token: None,
                    lost_member: None,
                    learner: false,
                    removed: false,
                    joined_without_data: false,
                    pending_epoch: None,
                    voter_ids: Default::default(),
                    state_lost: false,
                    added_by: Default::default(),
                },
            )
        });
        for f in [&mut fa, &mut fb] {
            for v in &mut f.pacemaker.nodes {
                v.record = records
                    .iter()
                    .find(|(name, _)| *name == v.name)
                    .map(|(_, r)| r.clone());
            }
        }
        assert_eq!(
            warden_failover::decide::bootstrap_token(&fa),
            warden_failover::decide::bootstrap_token(&fb)
        );
        let (ra, rb) = tokio::join!(exec(&a, &fa, &start), exec(&b, &fb, &start));
        ra.unwrap();
        rb.unwrap();
        wait_quorum(&a, Duration::from_secs(20)).await;
        // What the daemon's gathering writes from the live view before it
        // decides MarkInSync: the marker names the data it describes.
        let st = a.app.etcd.status(Duration::from_secs(5)).await.unwrap();
        a.paths
            .update_state(|s| {
                s.cluster_id = Some(st.cluster_id);
                s.member_id = Some(st.member_id);
                s.formed = true;
            })
            .unwrap();
        exec(&a, &facts("a", true, &a), &[Step::MarkInSync])
            .await
            .unwrap();
        put_get(&a, "/k", Some("before")).await;

        // The peer is lost: etcd on b stops (its data stays), a loses quorum.
        b.app.stop_etcd(Duration::from_secs(5)).await.unwrap();
        let mut f = facts("a", false, &a);
        f.pacemaker.nodes[1].unclean = true;
        f.pacemaker.nodes[1].expected_up = true;
        f.data.exists = true;
        // Unclean and not fenced: the executor refuses to force.
        let e = exec(&a, &f, &[Step::ForceNewCluster { epoch: 1 }])
            .await
            .unwrap_err();
        assert!(e.contains("not proven safe"), "{e}");
        assert_eq!(a.paths.read_state().unwrap().epoch, 0);

        // Fenced (a fence result as the alert agent posts it): force.
        f.alerts.push(FenceEvent {
            target: "b".into(),
            action: FenceAction::Reboot,
            status: FenceStatus::Success,
            completed: Some(Stamp(200)),
        });
        // Pacemaker recorded the fence against b: its membership ended.
        f.pacemaker.nodes[1].unclean = false;
        f.pacemaker.nodes[1].expected_up = false;
        let t = Instant::now();
        exec(&a, &f, &[Step::ForceNewCluster { epoch: 1 }])
            .await
            .unwrap();
        wait_quorum(&a, Duration::from_secs(20)).await;
        eprintln!("force-new-cluster -> quorum: {:?}", t.elapsed());
        // The new epoch is an intent until the daemon's next look sees this
        // member alone (then it becomes the epoch).
        let st = a.paths.read_state().unwrap();
        assert_eq!((st.epoch, st.pending_epoch), (0, Some(1)));
        assert_eq!(put_get(&a, "/k", None).await.as_deref(), Some("before"));
        let ms = a
            .app
            .etcd
            .member_list(Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(ms.len(), 1, "{ms:?}");
        // The flag does not survive into the next start.
        let conf = std::fs::read_to_string(a.app.settings.etcd_config_path()).unwrap();
        let conf: serde_json::Value = serde_json::from_str(&conf).unwrap();
        assert_eq!(
            conf["force-new-cluster"],
            serde_json::json!(false),
            "{conf}"
        );
        put_get(&a, "/k", Some("after")).await;

        // the stale-data-archived scenario: b returns with stale data: archived, not deleted.
        let old_db = b.paths.member_dir().join("snap/db");
        let old_len = std::fs::metadata(&old_db).unwrap().len();
        exec(
            &b,
            &facts("b", true, &b),
            &[Step::ArchiveDataDir {
                reason: "the cluster has epoch 1".into(),
            }],
        )
        .await
        .unwrap();
        let archives = b.paths.archives();
        assert_eq!(archives.len(), 1);
        assert_eq!(
            std::fs::metadata(archives[0].join("member/snap/db"))
                .unwrap()
                .len(),
            old_len
        );
        assert!(archives[0].join("db.sha256").exists());
        assert!(archives[0].starts_with(dir.path().join("b/archives")));
        assert!(!b.paths.has_data());
        // The nothing-deleted rule: the archive is shown, not only logged: /status ...
        let st = b.app.status_doc(Duration::from_secs(2)).await;
        assert_eq!(
            st.archive_dir.as_deref(),
            Some(dir.path().join("b/archives").as_path())
        );
        assert_eq!(st.archives.len(), 1, "{st:?}");
        assert_eq!(st.archives[0].path, archives[0]);
        assert_eq!(
            st.archives[0].reason.as_deref(),
            Some("the cluster has epoch 1")
        );
        assert!(st.archives[0].made_by_warden);
        assert!(st.archives[0].size_bytes >= old_len, "{st:?}");
        let last = st.last_archive.as_ref().unwrap();
        assert_eq!(last.path, archives[0]);
        let json = serde_json::to_value(&st).unwrap();
        assert_eq!(
            json["archives"][0]["path"],
            serde_json::json!(archives[0].display().to_string())
        );
        assert_eq!(json["node"], "b");
        // ... and the report's etcd section, for this node.
        let (_, _, section) = b.app.etcd_section(Duration::from_secs(2)).await;
        assert_eq!(
            section.nodes["b"].archives,
            vec![archives[0].display().to_string()]
        );

        // a adds b as a learner; b joins with the cluster's epoch.
        exec(
            &a,
            &facts("a", true, &a),
            &[Step::AddLearner { node: "b".into() }],
        )
        .await
        .unwrap();
        let ms = a
            .app
            .etcd
            .member_list(Duration::from_secs(2))
            .await
            .unwrap();
        let learner = ms.iter().find(|m| m.is_learner).unwrap().clone();
        let mut fb = facts("b", true, &b);
        let a_id = ms.iter().find(|m| !m.is_learner).unwrap().id;
        fb.cluster = Some(ClusterView {
            cluster_id: 0,
            epoch: 1,
            members: vec![MemberInfo {
                id: a_id,
                name: "a".into(),
                started: true,
                node: "a".into(),
                is_learner: false,
                in_sync: true,
            }],
            leave_lock: None,
        });
        exec(
            &b,
            &fb,
            &[Step::StartEtcd {
                mode: StartMode::Join { epoch: 1 },
            }],
        )
        .await
        .unwrap();
        assert_eq!(b.paths.read_state().unwrap().epoch, 1);
        // Promote, retried by gRPC code until etcd says the learner is in sync.
        exec(
            &a,
            &facts("a", true, &a),
            &[Step::PromoteLearner {
                id: learner.id,
                node: "b".into(),
            }],
        )
        .await
        .unwrap();
        let ms = a
            .app
            .etcd
            .member_list(Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(ms.iter().filter(|m| !m.is_learner).count(), 2, "{ms:?}");
        wait_quorum(&b, Duration::from_secs(20)).await;
        assert_eq!(put_get(&b, "/k", None).await.as_deref(), Some("after"));

        a.app.stop_etcd(Duration::from_secs(5)).await.unwrap();
        b.app.stop_etcd(Duration::from_secs(5)).await.unwrap();
    });
}
