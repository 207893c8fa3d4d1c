//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing):
//! install and first start. The unit reaches `active` through
//! `Type=notify`, the journal holds the daemon's logs, `etcd-warden status`
//! answers a member of `haclient` and refuses anyone else, and a writer on
//! both nodes keeps every acknowledged write.
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
fn field_install_first_start_journal_and_socket_access() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::install::install(&c, "field_install");
}
