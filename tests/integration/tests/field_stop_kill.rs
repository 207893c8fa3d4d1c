//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): the
//! daemon is killed while the OCF agent's stop is in flight (`pcs node
//! standby`); the agent sends the stop again to the restarted daemon, which
//! finishes it: no failed action, no fence, and the node rejoins as a voter.
//!
//! The scenario itself is in `field_support`; `field_suite` runs it with the
//! other scenarios on one cluster (what `make test-field` runs), this test on
//! a cluster of its own, to debug it alone.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`
//! (its own lock: field nodes share no host path, port or namespace name
//! with the namespace cluster tests).

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_stop_kill_daemon_killed_during_a_stop_is_not_fenced() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::stop_kill::stop_kill(&c);
}
