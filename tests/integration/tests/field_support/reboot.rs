//! A graceful `systemctl reboot` of one node. systemd stops Pacemaker
//! before etcd-warden (the unit is ordered `Before=pacemaker.service`), so
//! Pacemaker stops etcd cleanly through the agent: the node leaves the
//! member list and the peer goes on alone with quorum. systemd-nspawn ends
//! with the reboot and the scenario powers the node on over IPMI (the
//! harness's nodes cannot reset themselves); the node boots, rejoins and
//! becomes a voter, and nobody is fenced: the fence history is unchanged
//! and no action failed. A writer of its own on both nodes runs throughout;
//! every acknowledged write is checked at the end.

use std::time::{Duration, Instant};

use warden_harness::field::{FieldCluster, etcd_started_on};
use warden_harness::process;

use super::{
    assert_no_failed_action, assert_no_new_fence, begin, check_writes, power_on, ready,
    wait_all_voters, writer,
};

/// `systemctl reboot` of node-b, then its power on over IPMI, rejoin and
/// voter, with no fence and no failed action.
pub fn reboot(c: &FieldCluster) {
    let (w, fences_before) = begin(c, "/field-reboot");
    let old_pid1 = c.pid1("node-b").unwrap();
    let console_before = c.console("node-b").map(|s| s.len()).unwrap_or(0);

    let reboot = Instant::now();
    // The shell may be cut off by the shutdown; the node's state is what
    // counts.
    let _ = c.node_sh("node-b", "systemctl reboot");

    // Pacemaker sees node-b leave cleanly: etcd stopped there, node-b
    // offline, and node-a's etcd the only voter.
    c.wait_crm(
        "node-a",
        "node-b offline after a clean stop",
        Duration::from_secs(120),
        |m| !etcd_started_on(m, "node-b") && m.node("node-b").is_some_and(|n| !n.online),
    )
    .unwrap();
    let left = reboot.elapsed();
    let ack = w
        .wait_ack_after(Some("node-a"), reboot + left, Duration::from_secs(60))
        .unwrap();
    eprintln!(
        "node-a took a write {:.1} s after the reboot began",
        ack.at.duration_since(reboot).as_secs_f64()
    );

    // The shutdown completes (pcsd alone may take its 90 s stop timeout on
    // a loaded machine) and systemd-nspawn ends: the harness's "hardware"
    // cannot reset itself, so the power button is pressed over IPMI, as an
    // operator's BMC reset would. Nothing here kills a process.
    process::poll(
        "node-b's shutdown to complete",
        Duration::from_secs(240),
        Duration::from_millis(500),
        || match c.launcher("node-b") {
            None => Ok(()),
            Some(_) => Err(format!("pid1 {:?} (was {old_pid1})", c.pid1("node-b"))),
        },
    )
    .unwrap();
    let down = reboot.elapsed();
    // What the shutdown waited for, from the node's console: systemd names
    // every stop job it waits out and every process it has to kill.
    let console = c.console("node-b").unwrap_or_default();
    for l in console
        .get(console_before..)
        .unwrap_or("")
        .lines()
        .filter(|l| {
            ["timed out", "stop job", "Killing", "Failed", "SIGKILL"]
                .iter()
                .any(|w| l.contains(w))
        })
    {
        eprintln!("node-b shutdown: {}", l.trim());
    }
    assert_no_new_fence(c, fences_before, "node-b was fenced during its reboot");
    power_on(c, "node-b").unwrap();
    c.wait_booted("node-b", Duration::from_secs(180)).unwrap();
    let booted = reboot.elapsed();
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    wait_all_voters(c, "node-a", Duration::from_secs(300)).unwrap();
    let voter = reboot.elapsed();

    assert_no_new_fence(c, fences_before, "a graceful reboot must not fence anyone");
    assert_no_failed_action(c);

    // node-a alone kept taking writes: its longest gap is the clean leave.
    let acks = w.acks();
    let at: Vec<Instant> = acks
        .iter()
        .filter(|a| a.node == "node-a" && a.at > reboot)
        .map(|a| a.at)
        .collect();
    let gap = at
        .windows(2)
        .map(|p| p[1].duration_since(p[0]))
        .max()
        .unwrap_or_default();
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(60))
        .unwrap();
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "field_reboot: systemctl reboot -> node-b offline (clean) {:.1} s, shut down {:.1} s, booted {:.1} s, \
         voter {:.1} s; longest write gap on node-a {:.2} s; no fence; {n} acknowledged writes, all present",
        left.as_secs_f64(),
        down.as_secs_f64(),
        booted.as_secs_f64(),
        voter.as_secs_f64(),
        gap.as_secs_f64()
    );
}
