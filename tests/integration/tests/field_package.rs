//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): the
//! package's life on a live pair, each with a writer on both nodes, nothing
//! lost, no fence. The pair is installed from the previous package (etcd's
//! data in /var/lib/etcd/warden) and upgraded to the package under test,
//! which moves the data to /var/lib/etcd-warden/data; then `apt-get remove
//! etcd-warden` on an active node is refused, and `apt-get purge
//! etcd-server` then a reinstall leaves etcd's data as it was. The
//! scenarios are in `field_support::package`.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`
//! (its own lock: field nodes share no host path, port or namespace name
//! with the namespace cluster tests).

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_package_layout_upgrade_remove_refused_purge_reinstall() {
    field_support::package::from_previous_package(&field_support::suite());
}
