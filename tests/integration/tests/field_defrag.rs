//! `etcd-warden defrag` on both nodes of a live field pair (systemd as PID
//! 1, the .deb, pcs, IPMI fencing), as docs/operations.md shows it. The
//! scenario is in `field_support::defrag`; `field_suite` runs it with the
//! others on one cluster, this test on a cluster of its own.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

use field_support::{defrag, scenario};

#[test]
fn field_defrag_on_both_nodes_of_a_live_pair() {
    let (c, _work) = field_support::cluster().unwrap();
    scenario("defrag", || defrag::defrag(&c));
}
