//! The three-node topologies on field nodes (systemd as PID 1, the .deb,
//! real pcs, IPMI BMCs): three Debian 13 nodes, each an etcd voter
//! (`topology = "ha"`), run docs/operations.md's runbooks "When one node of
//! three dies" (node-b, a full node, loses power and comes back) and
//! "Replacing one node of three" (node-c, the arbiter of a 2+1 cluster, is
//! replaced by a new machine of the same name). The scenarios are in
//! `field_support::three_node`.
//!
//! Heavy (three booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

use field_support::{scenario, three_node};

#[test]
fn field_three_node_debian13_lose_one_and_replace_the_arbiter() {
    let t = std::time::Instant::now();
    let (c, _work) = three_node::cluster("trixie");
    scenario("ha: one node of three dies", || {
        three_node::lose_one(&c, "node-b")
    });
    scenario("arbiter: replaced by a new machine", || {
        three_node::replace_one(&c, "node-c")
    });
    eprintln!(
        "field three nodes: setup and scenarios {:.1} s",
        t.elapsed().as_secs_f64()
    );
}
