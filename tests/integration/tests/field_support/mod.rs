//! Shared by the field tests: the package, the cluster, the writers, the
//! final checks and the power-cut cycle live in `warden_integration::field`
//! (`failover-bench --field` measures the same cycle); here, the power-cut
//! scenario the Debian 13 and Debian 12 tests share.

// Each test binary uses a part of this module.
#![allow(dead_code, unused_imports, clippy::unwrap_used)]

use std::time::Duration;

pub use warden_integration::field::*;

/// The power-cut scenario on `suite`'s node image (also run on Debian 12 by
/// field_power_bookworm): see [`power_cycle`].
pub fn power_cut(suite: &str) {
    let (c, _work) = cluster_on(suite).unwrap();
    power_cut_on(&c, &format!("field_power ({suite})"), "/field-power");
}

/// The power cut of node-b on a running cluster, with a writer of its own
/// whose every acknowledged write is checked afterwards.
pub fn power_cut_on(c: &warden_harness::field::FieldCluster, label: &str, prefix: &str) {
    wait_all_voters(c, "node-a", Duration::from_secs(60)).unwrap();
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
