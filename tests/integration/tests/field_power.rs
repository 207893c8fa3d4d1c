//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): a node
//! loses power. Its BMC powers it off over IPMI (the node's launcher dies:
//! every process of the node at once); Pacemaker on the survivor fences it
//! through `fence_ipmilan` talking to that BMC over the management network;
//! the survivor takes writes; the node is powered on through IPMI (by the
//! fence's reboot, or by the test when the fence only switched it off),
//! boots, archives its old member data, rejoins and becomes a voter. A
//! writer on both nodes runs throughout, and every acknowledged write is
//! checked at the end.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-cluster.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

use std::time::{Duration, Instant};

use warden_harness::process;

#[test]
fn field_power_cut_fenced_over_ipmi_survivor_writes_node_rejoins() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::wait_all_voters(&c, "node-a", Duration::from_secs(60)).unwrap();
    let w = field_support::writer(&c, "/field-power").unwrap();
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(30))
        .unwrap();
    let fences_before = c.crm_mon("node-a").unwrap().fence_successes("node-b").len();

    // Power cut of node-b, through its BMC.
    let launcher = c.launcher("node-b").unwrap();
    let cut = Instant::now();
    let answer = c.ipmi_power("node-b", "off").unwrap();
    eprintln!("ipmitool power off node-b: {answer}");
    assert!(
        process::wait_gone(&[launcher], Duration::from_secs(10)).is_empty(),
        "node-b's launcher survived the BMC's power off"
    );
    let gone = cut.elapsed();

    // Pacemaker on node-a fences node-b with fence_ipmilan.
    let m = c
        .wait_crm("node-a", "node-b fenced", Duration::from_secs(120), |m| {
            m.fence_successes("node-b").len() > fences_before
        })
        .unwrap();
    let fenced = cut.elapsed();
    let ev = m.fence_successes("node-b")[0].clone();
    assert_eq!(ev.delegate, "node-a", "the survivor runs the fence: {ev:?}");

    // The survivor takes writes.
    let ack = w
        .wait_ack_after(Some("node-a"), cut + fenced, Duration::from_secs(120))
        .unwrap();
    let write_after_fence = ack.at.duration_since(cut);

    // Power on over IPMI if the fence left it off (stonith-action=off), then
    // node-b boots, rejoins, and becomes a voter again.
    process::poll(
        "node-b powered (the fence's reboot, or ours)",
        Duration::from_secs(30),
        Duration::from_millis(500),
        || {
            if c.launcher("node-b").is_some() {
                return Ok(());
            }
            match c.ipmi_power("node-b", "status") {
                Ok(s) if s.ends_with("off") => c
                    .ipmi_power("node-b", "on")
                    .map(|_| ())
                    .map_err(|e| format!("{e:#}")),
                Ok(s) => Err(s),
                Err(e) => Err(format!("{e:#}")),
            }
        },
    )
    .unwrap();
    let state = c.wait_booted("node-b", Duration::from_secs(180)).unwrap();
    let booted = cut.elapsed();
    eprintln!("node-b booted: {state}");
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    field_support::wait_all_voters(&c, "node-a", Duration::from_secs(300)).unwrap();
    let voter = cut.elapsed();

    // node-b's old member directory was archived, not deleted.
    let archives = c
        .node_sh_ok("node-b", "ls /var/lib/etcd.archive")
        .unwrap()
        .stdout;
    assert!(
        !archives.trim().is_empty(),
        "node-b rejoined without archiving its old member directory"
    );
    eprintln!("node-b archives: {}", archives.trim());

    // Both sides write again, then every ack is checked.
    let t = Instant::now();
    w.wait_ack_after(Some("node-b"), t, Duration::from_secs(60))
        .unwrap();
    let n = field_support::check_writes(&c, w, "node-a").unwrap();
    eprintln!(
        "field_power: power off -> launcher gone {:.1} s, fenced {:.1} s, survivor write {:.1} s, \
         booted {:.1} s, voter {:.1} s; {n} acknowledged writes, all present",
        gone.as_secs_f64(),
        fenced.as_secs_f64(),
        write_after_fence.as_secs_f64(),
        booted.as_secs_f64(),
        voter.as_secs_f64()
    );
}
