//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): the
//! systemd watchdog. The daemon on one node is stopped with SIGSTOP, so it
//! no longer pings the watchdog; systemd must kill and restart it within
//! `WatchdogSec` (plus `RestartSec`), while etcd keeps serving: both
//! members stay voters, the writers keep getting acknowledgements, and
//! nobody is fenced. Every acknowledged write is checked at the end.
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
fn field_watchdog_restarts_a_stopped_daemon_without_failover() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::watchdog::watchdog(&c);
}
