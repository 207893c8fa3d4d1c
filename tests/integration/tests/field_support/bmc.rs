//! docs/operations.md, "Rotating the BMC password", command for command on
//! a running pair with a writer on both nodes: each fence device checked
//! against its BMC first; the new password written beside the old one on
//! both nodes; the password changed on both BMCs (the harness plays their
//! administrator); the new file moved into place; each device checked
//! again and any monitor that failed in between cleared. The old password
//! must no longer open a session on either BMC. Nobody is fenced, no
//! failed action is left, and every acknowledged write is present. The
//! power cut that ends the suite then fences over IPMI with the new
//! password.

use std::time::{Duration, Instant};

use anyhow::{Result, ensure};
use warden_harness::field::FieldCluster;

use super::{assert_no_failed_action, assert_no_new_fence, begin, check_writes};

const SECRET: &str = "/etc/pacemaker/bmc.secret";

/// The fence device each node runs: the one that fences the other node
/// (a device avoids the node it fences).
fn device_on(c: &FieldCluster, node: &str) -> String {
    let other = c
        .nodes
        .iter()
        .find(|n| n.name != node)
        .map(|n| n.name.clone())
        .unwrap_or_default();
    format!("fence-{other}")
}

/// `stonith_admin --query DEVICE` on every node for the device it runs:
/// the fence agent's status action against the BMC, through Pacemaker.
fn query_devices(c: &FieldCluster) -> Result<()> {
    for n in &c.nodes {
        let d = device_on(c, &n.name);
        let o = c.node_sh(&n.name, &format!("stonith_admin --query {d}"))?;
        ensure!(
            o.status.success(),
            "{d} on {} does not reach its BMC: {}{}",
            n.name,
            o.stdout,
            o.stderr
        );
    }
    Ok(())
}

/// The runbook on a running pair.
pub fn rotate(c: &FieldCluster) {
    let (w, fences) = begin(c, "/field-bmc");
    query_devices(c).unwrap();
    let old = c.bmc_password().unwrap();
    let new = warden_harness::field::random_hex(8).unwrap();
    assert_ne!(new, old);

    // 1. Every node: the new password beside the old one, typed on stdin.
    for n in &c.nodes {
        c.node_cmd_stdin(
            &n.name,
            &["bash", "-c", &format!("(umask 077 && cat > {SECRET}.new)")],
            &format!("{new}\n"),
            Duration::from_secs(20),
        )
        .unwrap()
        .ok()
        .unwrap();
    }
    // 2. Every BMC, by its administrator.
    let t = Instant::now();
    c.rotate_bmc_password(&new).unwrap();
    for n in &c.nodes {
        assert!(
            !c.bmc_accepts(&n.name, &old).unwrap(),
            "{}'s BMC still takes the old password",
            n.name
        );
        assert!(c.bmc_accepts(&n.name, &new).unwrap());
    }
    // 3. Every node, right after.
    for n in &c.nodes {
        c.node_sh_ok(&n.name, &format!("mv {SECRET}.new {SECRET}"))
            .unwrap();
    }
    let gap = t.elapsed();
    // 4. Each device against its BMC with the new password; a monitor that
    // ran in the gap and failed is cleared.
    query_devices(c).unwrap();
    c.node_sh_ok("node-a", "pcs stonith cleanup").unwrap();
    c.wait_cluster_healthy(Duration::from_secs(120)).unwrap();
    for n in &c.nodes {
        let mode = c
            .node_sh_ok(&n.name, &format!("stat -c '%a %U' {SECRET}"))
            .unwrap();
        assert_eq!(mode.stdout.trim(), "600 root", "{SECRET} on {}", n.name);
    }
    assert_no_new_fence(c, fences, "a BMC password rotation must not fence anyone");
    assert_no_failed_action(c);
    let acks = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_bmc: both BMCs changed and both nodes' files moved in {:.1} s; both devices \
         answered before and after, the old password refused; {acks} acknowledged writes, \
         all present; no fence",
        gap.as_secs_f64()
    );
}
