//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing):
//! `systemctl restart etcd-warden` leaves etcd serving and the new daemon
//! adopts it; after a configuration typo the daemon exits 78 and stays down
//! while etcd serves on, nobody is fenced, and `etcd-warden status` names
//! the file and the key.
//!
//! The scenario itself is in `field_support`; `field_suite` runs it with the
//! other scenarios on one cluster (what `make test-field` runs), this test on
//! a cluster of its own, to debug it alone.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_restart_and_a_typo_leave_etcd_serving() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::restart::restart(&c);
}
