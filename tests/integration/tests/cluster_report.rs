//! Live: the report of a real two-node Pacemaker cluster with fencing (the
//! harness's namespaces, real Corosync, Pacemaker and fence agent), before and
//! after a fence and after the node is powered on again; and `etcd-warden
//! health` on each report: Healthy, then Degraded, then Healthy. Root needed.

#![allow(clippy::unwrap_used)] // tests may unwrap

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crm_xml::report::{ConditionStatus, Report};
use warden_harness::crm;
use warden_harness::process::poll;
use warden_harness::{Cluster, ClusterOptions};

const T: Duration = Duration::from_secs(90);

/// kubelet and etcd stand-ins: a clone of heartbeat's Dummy and a promotable
/// clone of Pacemaker's Stateful, told apart by agent like the real ones.
const KUBELET: &str = r#"<clone id="kubelet-clone"><primitive id="kubelet" class="ocf" provider="heartbeat" type="Dummy"><operations><op id="kubelet-mon" name="monitor" interval="5s"/></operations></primitive></clone>"#;
const ETCD: &str = r#"<clone id="etcd-clone"><meta_attributes id="etcd-clone-m"><nvpair id="etcd-clone-p" name="promotable" value="true"/></meta_attributes><primitive id="etcd" class="ocf" provider="pacemaker" type="Stateful"><operations><op id="etcd-mon-p" name="monitor" interval="5s" role="Promoted"/><op id="etcd-mon-u" name="monitor" interval="6s" role="Unpromoted"/></operations></primitive></clone>"#;

struct Ctx<'a> {
    c: &'a Cluster,
    warden: PathBuf,
}

impl Ctx<'_> {
    fn report_path(&self, node: &str) -> PathBuf {
        self.c
            .node_dir(node)
            .unwrap()
            .join("work/pacemakercluster.json")
    }

    /// `etcd-warden collect` inside `node`, as the timer would run it.
    fn collect(&self, node: &str) -> Report {
        let out = self.report_path(node);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let r = self
            .c
            .exec(
                node,
                &[
                    self.warden.to_str().unwrap(),
                    "collect",
                    "--timeout",
                    "20",
                    "--output",
                    out.to_str().unwrap(),
                    "--kubelet-resource-agent",
                    "ocf:heartbeat:Dummy",
                    "--etcd-resource-agent",
                    "ocf:pacemaker:Stateful",
                ],
            )
            .unwrap();
        assert!(r.status.success(), "collect on {node}: {}", r.stderr);
        Report::from_json(&std::fs::read_to_string(&out).unwrap()).unwrap()
    }

    fn health(&self, report: &Path) -> (i32, String) {
        let out = std::process::Command::new(&self.warden)
            .args(["health", "--report", report.to_str().unwrap()])
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Collect and evaluate until health exits with `code`.
    fn wait_health(&self, node: &str, code: i32, what: &str) -> (Report, String) {
        poll(what, T, Duration::from_millis(500), || {
            let r = self.collect(node);
            let (got, text) = self.health(&self.report_path(node));
            if got == code {
                Ok((r, text))
            } else {
                Err(format!("health exit {got}: {text}"))
            }
        })
        .unwrap()
    }
}

fn node_cond(r: &Report, node: &str, kind: &str) -> ConditionStatus {
    r.status
        .nodes
        .iter()
        .find(|n| n.node_name == node)
        .unwrap_or_else(|| panic!("{node} not in status: {:?}", r.pacemaker.omitted_nodes))
        .conditions
        .iter()
        .find(|c| c.kind == kind)
        .unwrap()
        .status
}

#[test]
fn cluster_report_before_and_after_a_fence() {
    let c = Cluster::start(ClusterOptions::new(2)).unwrap();
    let ctx = Ctx {
        c: &c,
        warden: warden_integration::bins::warden().unwrap(),
    };
    c.add_resource("node1", KUBELET).unwrap();
    c.add_resource("node1", ETCD).unwrap();
    // No separate wait for the clones: Healthy below needs both instances
    // of each running on both nodes.

    // Before: both nodes in the status with Corosync's addresses, fencing
    // attributed from the CIB, and health Healthy.
    let (before, text) = ctx.wait_health("node1", 0, "health Healthy before the fence");
    eprintln!("before: {text}");
    for n in ["node1", "node2"] {
        assert_eq!(node_cond(&before, n, "Online"), ConditionStatus::True);
        assert_eq!(
            node_cond(&before, n, "FencingAvailable"),
            ConditionStatus::True
        );
        let s = before
            .status
            .nodes
            .iter()
            .find(|x| x.node_name == n)
            .unwrap();
        assert_eq!(
            s.addresses[0].address,
            c.addr(n).unwrap().to_string(),
            "address from Corosync"
        );
    }
    assert!(before.pacemaker.quorate && before.pacemaker.dc.is_some());
    let online_since = before.status.nodes[1]
        .conditions
        .iter()
        .find(|x| x.kind == "Online")
        .unwrap()
        .last_transition_time
        .clone();

    // Fence node2 through Pacemaker.
    let t = Instant::now();
    c.fence("node2").unwrap();
    c.wait_for(
        "node1",
        crm::fenced("node2").and(crm::node_offline("node2")),
        T,
    )
    .unwrap();
    let (after, text) = ctx.wait_health("node1", 2, "health Degraded after the fence");
    eprintln!(
        "TIMING fence -> report Degraded: {:?}\nafter: {text}",
        t.elapsed()
    );
    assert!(
        text.contains("NodeOffline") && text.contains("node2"),
        "{text}"
    );
    let ev = after
        .pacemaker
        .fence_history
        .iter()
        .find(|e| e.target == "node2" && e.status == "success")
        .expect("the fence event is in the report");
    assert_eq!(ev.action, "reboot");
    assert!(ev.completed.is_some());
    assert_eq!(node_cond(&after, "node2", "Online"), ConditionStatus::False);
    assert_eq!(node_cond(&after, "node1", "Online"), ConditionStatus::True);
    let pm2 = after
        .pacemaker
        .nodes
        .iter()
        .find(|n| n.name == "node2")
        .unwrap();
    assert!(
        !pm2.online && !pm2.unclean,
        "fenced: offline and clean: {pm2:?}"
    );
    let pm1 = after
        .pacemaker
        .nodes
        .iter()
        .find(|n| n.name == "node1")
        .unwrap();
    assert!(pm1.online && pm1.is_dc);

    // Power on: Healthy again; Online of node2 transitioned twice, node1's
    // Online kept its time throughout.
    c.power_on("node2", T).unwrap();
    c.wait_for("node1", crm::all_online(&c.node_names()), T)
        .unwrap();
    let (back, text) = ctx.wait_health("node1", 0, "health Healthy after power-on");
    eprintln!("back: {text}");
    assert_eq!(node_cond(&back, "node2", "Online"), ConditionStatus::True);
    let online2 = back.status.nodes[1]
        .conditions
        .iter()
        .find(|x| x.kind == "Online")
        .unwrap();
    assert!(
        online2.last_transition_time > online_since,
        "{} vs {online_since}",
        online2.last_transition_time
    );
    let online1 = |r: &Report| {
        r.status.nodes[0]
            .conditions
            .iter()
            .find(|x| x.kind == "Online")
            .unwrap()
            .last_transition_time
            .clone()
    };
    assert_eq!(online1(&back), online1(&before));
    assert!(
        back.pacemaker
            .fence_history
            .iter()
            .any(|e| e.target == "node2"),
        "fence history kept"
    );
}
