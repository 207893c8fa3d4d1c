//! Every field scenario, on as few clusters as their preconditions allow:
//! one cluster per node image and backend, each booted and created once
//! (about two minutes of boot, `dpkg -i` and `pcs` each), then the
//! scenarios in order. This is what `make test-field` (and `make
//! test-with-field`) runs; the `field_*` test
//! named after a scenario runs it alone on a cluster of its own.
//!
//! Each scenario waits for a healthy cluster first (both nodes online, fence
//! devices and etcd started, both members voters), runs its own writer, makes
//! its own assertions and checks every acknowledged write of that writer
//! before the next one starts. The order keeps each scenario's
//! preconditions honest:
//! - install first: it checks the first start (`NRestarts=0`);
//! - then the scenarios that must leave no trace in Pacemaker (watchdog,
//!   upgrade, a daemon killed during a stop, reboot: each asserts no fence
//!   and no failed action);
//! - the power cut late: it fences a node, which the others would see; only
//!   the replacements come after it (a machine replaced after its power
//!   cut, which fences it too, and a data disk).
//!
//! The systemd backend gets a cluster of its own: the backend is chosen by a
//! drop-in before the daemon's first start, as an operator installs it; so
//! do the package scenarios, which start from the previous package.
//!
//! Heavy (two booted Debian nodes per test, one test at a time): run under
//! `flock /tmp/warden-field.lock` (its own lock: field nodes share no host
//! path, port or namespace name with the namespace cluster tests).

#![allow(clippy::unwrap_used)]

mod field_support;

use std::time::Instant;

use field_support::{
    bmc, commands, defrag, install, package, reboot, release_upgrade, replace, restart, restore,
    restore_archive, scenario, stop_kill, systemd_backend, tls, upgrade, watchdog,
};

/// Debian 13 (Pacemaker 3.0, etcd 3.5), the `process` backend: install,
/// the commands messages and docs name, `etcd-warden defrag` on both nodes, watchdog, `systemctl restart` (plain, and after a configuration typo),
/// package upgrade, the daemon killed
/// during a stop, graceful reboot, the restore-from-a-snapshot runbook,
/// the TLS certificates renewed and the CA replaced, the BMC password
/// rotated, power cut fenced over IPMI (with the new
/// password), then node-b replaced by a new machine and node-a's data disk
/// replaced, and last an archive restored after both member directories
/// are lost.
#[test]
fn field_suite_debian13_process_backend() {
    let t = Instant::now();
    let (c, _work) = field_support::cluster_on("trixie").unwrap();
    scenario("install", || install::install(&c, "field_install"));
    scenario("commands", || commands::commands(&c));
    scenario("defrag", || defrag::defrag(&c));
    scenario("watchdog", || watchdog::watchdog(&c));
    scenario("systemctl restart, and a typo", || restart::restart(&c));
    scenario("upgrade", || upgrade::upgrade(&c));
    scenario("daemon killed during a stop", || stop_kill::stop_kill(&c));
    scenario("reboot", || reboot::reboot(&c));
    scenario("restore from a snapshot", || restore::restore(&c));
    scenario("TLS certificates renewed", || tls::renew_leaf(&c));
    scenario("TLS CA replaced", || tls::rotate_ca(&c));
    scenario("BMC password rotation", || bmc::rotate(&c));
    scenario("power cut", || {
        field_support::power_cut_on(&c, "field_power (trixie)", "/field-power")
    });
    scenario("a replaced machine", || replace::replace(&c, true));
    scenario("a replaced data disk", || {
        replace::replace_disk(&c, "node-a")
    });
    scenario(
        "an archive restored after both data directories are lost",
        || restore_archive::restore_archive(&c),
    );
    whole("debian13 process backend", t);
}

/// Debian 13, the `systemd` backend: adoption, etcd crash, power cut.
#[test]
fn field_suite_debian13_systemd_backend() {
    let t = Instant::now();
    let (c, _work) = systemd_backend::cluster("trixie");
    scenario("systemd backend", || {
        systemd_backend::adopt_crash_power_cut(&c)
    });
    whole("debian13 systemd backend", t);
}

/// Debian 13, a pair installed from the previous package (etcd's data in
/// /var/lib/etcd/warden): the upgrade that moves the data, `apt-get
/// remove` refused on an active node, `apt-get purge etcd-server` and a
/// reinstall. A cluster of its own: it starts from another package.
#[test]
fn field_suite_debian13_package() {
    let t = Instant::now();
    package::from_previous_package("trixie");
    whole("debian13 package", t);
}

/// Debian 12 (Pacemaker 2.1.5, etcd 3.4.23, pcs 0.11), installed with
/// http URLs as before TLS was the default: install, the commands messages
/// and docs name, the move to https, the restore-from-a-snapshot runbook
/// (with etcd 3.4's etcdctl), power cut, and last the rolling upgrade of
/// the pair to Debian 13.
#[test]
fn field_suite_debian12() {
    let t = Instant::now();
    let mut opts = field_support::FieldOptions::new("bookworm", std::path::Path::new(""));
    opts.tls = false;
    release_upgrade::with_repo(&mut opts).unwrap();
    let (c, _work) = field_support::cluster_with(&opts).unwrap();
    scenario("install (bookworm)", || {
        install::install(&c, "field_install (bookworm)")
    });
    scenario("commands (bookworm)", || commands::commands(&c));
    scenario("http to https (bookworm)", || tls::http_to_https(&c));
    scenario("restore from a snapshot (bookworm)", || {
        restore::restore(&c)
    });
    scenario("power cut (bookworm)", || {
        field_support::power_cut_on(&c, "field_power (bookworm)", "/field-power")
    });
    scenario("Debian 12 to 13, node by node", || {
        release_upgrade::release_upgrade(&c)
    });
    whole("debian12", t);
}

/// Prints a test's time from its start to its last scenario's end (setup
/// included, teardown not), for docs/benchmarks.md.
fn whole(name: &str, since: Instant) {
    eprintln!(
        "field suite {name}: setup and scenarios {:.1} s",
        since.elapsed().as_secs_f64()
    );
}
