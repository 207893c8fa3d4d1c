//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): a
//! package upgrade, one node at a time, exactly as docs/operations.md
//! ("Upgrading etcd-warden without losing quorum") says: `pcs node standby`,
//! `etcd-warden status` on the peer, `apt-get install ./NEW.deb`,
//! `systemctl restart etcd-warden`, `pcs node unstandby`, wait for two
//! voters, then the other node. The newer package is the one under test
//! rebuilt with a higher version. A writer on both nodes runs throughout:
//! the cluster never loses quorum (the longest gap between two acknowledged
//! writes, from either node, stays under the bound the procedure documents),
//! nobody is fenced, and every acknowledged write is checked at the end.
//!
//! The scenario itself is in `field_support`; `field_suite` runs it with the
//! other scenarios on one cluster (what `make test-field` runs), this test on a
//! cluster of its own, to debug it alone.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`
//! (its own lock: field nodes share no host path, port or namespace name
//! with the namespace cluster tests).

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_upgrade_one_node_at_a_time_keeps_quorum() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::upgrade::upgrade(&c);
}
