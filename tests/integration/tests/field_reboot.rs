//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): a
//! graceful `systemctl reboot` of one node. systemd stops Pacemaker before
//! etcd-warden (the unit is ordered `Before=pacemaker.service`), so
//! Pacemaker stops etcd cleanly through the agent: the node leaves the
//! member list and the peer goes on alone with quorum. systemd-nspawn ends
//! with the reboot and the test powers the node on over IPMI (the harness's
//! nodes cannot reset themselves); the node boots, rejoins and
//! becomes a voter, and nobody is fenced: the fence history is unchanged
//! and no action failed. A writer on both nodes runs throughout; every
//! acknowledged write is checked at the end.
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
fn field_graceful_reboot_stops_etcd_cleanly_and_rejoins_without_fencing() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::reboot::reboot(&c);
}
