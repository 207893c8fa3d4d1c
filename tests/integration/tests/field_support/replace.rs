//! docs/operations.md, "Replacing a node", command for command on a
//! running pair with a writer on both nodes: node-b's machine dies (its BMC
//! cuts the power), node-a fences it and goes on alone; a new machine of
//! the same name and addresses takes its place (a blank disk from the node
//! image, the same BMC). Then the runbook: node-b removed from the cluster
//! on node-a, the new machine installed as in section 1, authenticated and
//! added back with pcs. etcd-warden on the blank node joins as a learner
//! and is promoted: two voters, every write acknowledged through either
//! node present on the new machine's etcd, and the dead machine's member
//! gone from the member list.

use std::time::{Duration, Instant};

use warden_harness::field::FieldCluster;
use warden_harness::process;

use warden_harness::field_tls::TLS_DIR;

use super::tls::verifies;
use super::upgrade::{standby, unstandby};
use super::{
    assert_no_new_fence, check_writes, member_id, members, power_off, ready, wait_all_voters,
    wait_fenced, writer,
};

/// The runbook on a running pair. With `wrong_ca_first`, the new machine
/// first gets a CA that did not sign node-a's certificate (section 8's
/// troubleshooting row): it cannot verify node-a's etcd, never joins, and
/// the documented check shows why; then the right CA and a daemon restart,
/// and it joins.
pub fn replace(c: &FieldCluster, wrong_ca_first: bool) {
    ready(c);
    let w = writer(c, "/field-replace").unwrap();
    let t0 = Instant::now();
    for n in ["node-a", "node-b"] {
        w.wait_ack_after(Some(n), t0, Duration::from_secs(30))
            .unwrap();
    }
    let old_member = member_id(c, "node-a", "node-b")
        .unwrap()
        .expect("node-b is a member");
    let fences = c.crm_mon("node-a").unwrap().fence_successes("node-b").len();

    // node-b's machine dies; node-a fences it and takes writes alone.
    let dead = power_off(c, "node-b").unwrap();
    wait_fenced(c, "node-a", "node-b", fences).unwrap();
    let alone = w
        .wait_ack_after(Some("node-a"), dead, Duration::from_secs(120))
        .unwrap();

    // A new machine in its place.
    c.replace_machine("node-b").unwrap();

    // 1. node-a: the dead machine out of the cluster.
    let t_remove = Instant::now();
    let removed = c
        .node_sh_ok(
            "node-a",
            "pcs cluster node remove node-b --skip-offline --force",
        )
        .unwrap();
    eprintln!("{}{}", removed.stdout, removed.stderr);
    w.wait_ack_after(Some("node-a"), t_remove, Duration::from_secs(60))
        .unwrap();

    // 2. The new machine: powered on, installed as in section 1.
    c.ipmi_power("node-b", "on").unwrap();
    c.wait_booted("node-b", Duration::from_secs(180)).unwrap();
    let t_install = Instant::now();
    c.install_node("node-b").unwrap();

    // 3. node-a: the new machine authenticated and added.
    let t_add = Instant::now();
    c.pcs_host_auth("node-a", "node-b").unwrap();
    let added = c
        .node_sh_ok(
            "node-a",
            "pcs cluster node add node-b addr=192.0.2.2 --start --enable",
        )
        .unwrap();
    eprintln!("{}{}", added.stdout, added.stderr);
    if wrong_ca_first {
        wrong_ca_then_fixed(c);
    }
    wait_all_voters(c, "node-a", Duration::from_secs(300)).unwrap();
    let to_voters = t_add.elapsed();
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    let t_up = Instant::now();
    w.wait_ack_after(Some("node-b"), t_up, Duration::from_secs(60))
        .unwrap();

    let now = members(c, "node-a").unwrap();
    assert!(
        now.iter().all(|m| m.id != old_member),
        "the dead machine's member {old_member:x} is still listed: {now:?}"
    );
    let extra = c.crm_mon("node-a").unwrap().fence_successes("node-b").len() - fences;
    assert_eq!(extra, 1, "only the dead machine is fenced");
    let acks = check_writes(c, w, "node-b").unwrap();
    eprintln!(
        "field_replace: node-b dead -> node-a's first write alone {:.1} s; install {:.1} s; \
         pcs node add -> two voters {:.1} s; {acks} acknowledged writes, all present on the \
         new machine's etcd; one fence",
        alone.at.duration_since(dead).as_secs_f64(),
        t_add.duration_since(t_install).as_secs_f64(),
        to_voters.as_secs_f64()
    );
}

/// docs/operations.md, "Replacing a node's data disk", on a running pair
/// with a writer on both nodes: `node` put in standby (its member leaves,
/// the other node goes on as the only voter), its daemon stopped, its
/// state directory put aside as a disk taken out (the new disk is empty),
/// the daemon started, the node back from standby: a learner, then a voter,
/// every acknowledged write present on its new disk. Nobody is fenced.
pub fn replace_disk(c: &FieldCluster, node: &str) {
    ready(c);
    let other = if node == "node-a" { "node-b" } else { "node-a" };
    let w = writer(c, "/field-disk").unwrap();
    let t0 = Instant::now();
    w.wait_ack_after(Some(node), t0, Duration::from_secs(30))
        .unwrap();
    // node-a's fence history: a machine replaced just before (node-b) learns
    // the cluster's older fences only some time after it joins.
    let fences = c.crm_mon("node-a").unwrap().fence_history.len();

    let t_standby = Instant::now();
    standby(c, node, other);
    let left = t_standby.elapsed();
    c.node_sh_ok(node, "systemctl stop etcd-warden").unwrap();
    // The old disk out, an empty one in: the test moves the directory
    // aside where an operator unmounts one volume and mounts another.
    c.node_sh_ok(
        node,
        "mv /var/lib/etcd-warden /var/lib/etcd-warden.old-disk",
    )
    .unwrap();
    c.node_sh_ok(node, "systemctl start etcd-warden").unwrap();
    let t_back = Instant::now();
    unstandby(c, node, other);
    let to_voters = t_back.elapsed();
    let t_up = Instant::now();
    w.wait_ack_after(Some(node), t_up, Duration::from_secs(60))
        .unwrap();
    assert_no_new_fence(c, fences, "a disk replacement must not fence anyone");
    let acks = check_writes(c, w, node).unwrap();
    eprintln!(
        "field_replace_disk ({node}): standby -> etcd stopped, {other} the only voter {:.1} s; unstandby -> two voters \
         {:.1} s; {acks} acknowledged writes, all present on the new disk; no fence",
        left.as_secs_f64(),
        to_voters.as_secs_f64()
    );
}

/// section 8's check on node-b: does it verify node-a's etcd?
fn verifies_node_a(c: &FieldCluster) -> bool {
    let f = |name: &str| format!("{TLS_DIR}/{name}");
    let addr = &c.node("node-a").map(|n| n.addr.clone()).unwrap_or_default();
    verifies(
        c,
        "node-b",
        addr,
        &f("ca.crt"),
        &f("node.crt"),
        &f("node.key"),
    )
}

/// node-b given a CA of its own: it refuses to join, its reason says that
/// node-a's etcd fails its TLS check, until it has node-a's CA and its
/// daemon is restarted.
fn wrong_ca_then_fixed(c: &FieldCluster) {
    c.node_sh_ok(
        "node-b",
        "set -e
         cd /root/pki
         openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -keyout other-ca.key -out other-ca.crt -days 30 -subj /CN=another-ca
         install -m 0644 other-ca.crt /etc/etcd-warden/tls/ca.crt.new
         mv /etc/etcd-warden/tls/ca.crt.new /etc/etcd-warden/tls/ca.crt",
    )
    .unwrap();
    assert!(
        !verifies_node_a(c),
        "node-b verifies node-a with another CA"
    );
    let held = warden_harness::process::poll(
        "node-b's daemon to refuse",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || {
            let st = c.warden_status("node-b").map_err(|e| format!("{e:#}"))?;
            if st.contains("resolve with") {
                Ok(st)
            } else {
                Err(st.chars().take(300).collect())
            }
        },
    )
    .unwrap();
    assert!(
        held.contains("fails this node's TLS check"),
        "node-b's refusal does not say that node-a's etcd fails its TLS check: {held}"
    );
    assert!(
        members(c, "node-a")
            .unwrap()
            .iter()
            .all(|m| m.name != "node-b"),
        "node-b joined without trusting node-a"
    );
    eprintln!(
        "field_replace: node-b with another CA refuses: {}",
        held.lines()
            .find(|l| l.contains("resolve with"))
            .unwrap_or_default()
            .trim()
    );
    let t = Instant::now();
    c.node_sh_ok(
        "node-b",
        "install -m 0644 /root/pki/ca.crt /etc/etcd-warden/tls/ca.crt.new
         mv /etc/etcd-warden/tls/ca.crt.new /etc/etcd-warden/tls/ca.crt
         systemctl restart etcd-warden",
    )
    .unwrap();
    assert!(
        verifies_node_a(c),
        "node-b does not verify node-a with its CA"
    );
    wait_all_voters(c, "node-a", Duration::from_secs(300)).unwrap();
    eprintln!(
        "field_replace: the right CA and a daemon restart -> two voters {:.1} s",
        t.elapsed().as_secs_f64()
    );
}
