//! Shared by the field tests: the package, the cluster, the writers, the
//! final checks and the power-cut cycle live in `warden_integration::field`
//! (`failover-bench --field` measures the same cycle); here, the scenarios.
//! Each scenario runs on a healthy cluster (it waits for one first), starts
//! a writer of its own, makes its own assertions and checks every write its
//! writer had acknowledged before it returns, so that the scenarios run one
//! after the other on one cluster (`field_suite`, what `make test-field` runs) as
//! well as each on a cluster of its own (the `field_*` test of its name, to
//! debug one).

// Each test binary uses a part of this module.
#![allow(dead_code, unused_imports, clippy::unwrap_used)]

pub mod bmc;
pub mod commands;
pub mod defrag;
pub mod install;
pub mod package;
pub mod reboot;
pub mod release_upgrade;
pub mod replace;
pub mod restart;
pub mod restore;
pub mod restore_archive;
pub mod stop_kill;
pub mod systemd_backend;
pub mod three_node;
pub mod tls;
pub mod upgrade;
pub mod watchdog;

use std::time::{Duration, Instant};

pub use warden_harness::field::{FieldCluster, FieldOptions};
pub use warden_integration::field::*;

/// A scenario's precondition: both nodes online with their fence devices
/// and etcd started, and both etcd members voters.
pub fn ready(c: &FieldCluster) {
    c.wait_cluster_healthy(Duration::from_secs(300)).unwrap();
    wait_all_voters(c, "node-a", Duration::from_secs(120)).unwrap();
}

/// A scenario's start: a healthy cluster ([`ready`]), a writer of its own
/// under `prefix` with a write acknowledged through node-b, and how many
/// fences node-a's history holds (for [`assert_no_new_fence`]).
pub fn begin(c: &FieldCluster, prefix: &str) -> (warden_integration::writer::Writer, usize) {
    ready(c);
    let w = writer(c, prefix).unwrap();
    w.wait_ack_after(Some("node-b"), Instant::now(), Duration::from_secs(30))
        .unwrap();
    let fences = c.crm_mon("node-a").unwrap().fence_history.len();
    (w, fences)
}

/// The longest time, after `start`, between two writes `w` had
/// acknowledged through either node: quorum held whenever it stays short.
pub fn longest_write_gap(w: &warden_integration::writer::Writer, start: Instant) -> Duration {
    let mut at: Vec<Instant> = w
        .acks()
        .iter()
        .filter(|a| a.at > start)
        .map(|a| a.at)
        .collect();
    at.sort();
    at.windows(2)
        .map(|p| p[1].duration_since(p[0]))
        .max()
        .unwrap_or_default()
}

/// Fails when node-a's Pacemaker has recorded a fence since the scenario
/// read `before` entries in its fence history; `what` says what must not
/// have fenced.
pub fn assert_no_new_fence(c: &FieldCluster, before: usize, what: &str) {
    let m = c.crm_mon("node-a").unwrap();
    assert_eq!(
        m.fence_history.len(),
        before,
        "{what}: {:?}",
        m.fence_history
    );
}

/// Fails when node-a's crm_mon lists a failed action (see
/// [`failed_actions`]).
pub fn assert_no_failed_action(c: &FieldCluster) {
    let failures = failed_actions(c, "node-a").unwrap();
    assert!(failures.is_empty(), "failed actions: {failures}");
}

/// Runs one scenario and prints how long it took (setup excluded), for
/// docs/benchmarks.md.
pub fn scenario(name: &str, f: impl FnOnce()) {
    eprintln!("field scenario {name}: start");
    let t = Instant::now();
    f();
    eprintln!(
        "field scenario {name}: passed in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// The power-cut scenario on `suite`'s node image, on a cluster of its own
/// (field_power, field_power_bookworm).
pub fn power_cut(suite: &str) {
    let (c, _work) = cluster_on(suite).unwrap();
    power_cut_on(&c, &format!("field_power ({suite})"), "/field-power");
}

/// The power cut of node-b on a running cluster, with a writer of its own
/// whose every acknowledged write is checked afterwards.
pub fn power_cut_on(c: &FieldCluster, label: &str, prefix: &str) {
    ready(c);
    let w = writer(c, prefix).unwrap();
    let p = power_cycle(c, &w, "node-b").unwrap();
    let n = check_writes(c, w, "node-a").unwrap();
    eprintln!(
        "{label}: power off -> launcher gone {:.1} s, fenced {:.1} s, node dead -> survivor write {:.1} s \
         (fence done -> write {}), power on -> booted {:.1} s, -> voter {:.1} s; \
         {n} acknowledged writes, all present",
        p.gone.as_secs_f64(),
        p.fenced.as_secs_f64(),
        p.crash_to_write.as_secs_f64(),
        p.fence_to_write
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|| "n/a".into()),
        p.on_to_booted.as_secs_f64(),
        p.rejoin_to_voter.as_secs_f64()
    );
}
