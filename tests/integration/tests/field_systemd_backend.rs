//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing) with the
//! `systemd` supervision backend: both nodes get `etcd.backend = "systemd"`
//! from a drop-in in `/etc/etcd-warden/config.d/`, as an operator writes it,
//! so that each daemon starts etcd as the transient unit
//! `etcd-warden-etcd.service` through systemd's D-Bus API, from inside the
//! shipped unit's sandbox, under real systemd.
//!
//! The story, with a writer on both nodes throughout whose every
//! acknowledged write is checked at the end:
//! - etcd runs as that unit on both nodes, as the `etcd` user, its log in the
//!   unit's journal;
//! - `systemctl restart etcd-warden` on node-b: the new daemon adopts the
//!   unit as it is (same main PID), no failed action;
//! - etcd crashes on node-b (`systemctl kill -s KILL` of its unit): it is
//!   started again, both nodes take writes again, nobody is fenced;
//! - node-b loses power: fenced over IPMI, the survivor takes writes, node-b
//!   is powered on, archives its old member directory, rejoins as a voter
//!   (the cycle of field_power).
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
fn field_systemd_backend_adopt_crash_power_cut() {
    let (c, _work) = field_support::systemd_backend::cluster(&field_support::suite());
    field_support::systemd_backend::adopt_crash_power_cut(&c);
}
