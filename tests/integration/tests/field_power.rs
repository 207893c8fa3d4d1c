//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): a node
//! loses power. Its BMC powers it off over IPMI (the node's launcher dies:
//! every process of the node at once); Pacemaker on the survivor fences it
//! through `fence_ipmilan` talking to that BMC over the management network;
//! the survivor takes writes; the node is powered on through IPMI (by the
//! fence's reboot, or by the test when the fence only switched it off),
//! boots, archives its old member data, rejoins and becomes a voter. A
//! writer on both nodes runs throughout, and every acknowledged write is
//! checked at the end.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`
//! (its own lock: field nodes share no host path, port or namespace name
//! with the namespace cluster tests).

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_power_cut_fenced_over_ipmi_survivor_writes_node_rejoins() {
    field_support::power_cut(&field_support::suite());
}
