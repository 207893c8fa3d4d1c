//! The power-cut scenario of field_power on the Debian 12 node image:
//! Pacemaker 2.1.5, Corosync 3.1.7, pcs 0.11, etcd 3.4.23.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`
//! (its own lock: field nodes share no host path, port or namespace name
//! with the namespace cluster tests).

mod field_support;

#[test]
fn field_power_cut_on_debian12() {
    field_support::power_cut("bookworm");
}
