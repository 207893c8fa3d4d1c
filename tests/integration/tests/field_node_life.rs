//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing) over a
//! machine's life: the TLS certificates renewed and the CA replaced, the
//! BMC password rotated on a running pair, then node-b replaced by a new
//! machine of the same name, then node-a's data disk.
//!
//! The scenarios are in `field_support`; `field_suite` runs them with the
//! others on one cluster (what `make test-field` runs), this test on a
//! cluster of its own, to debug them alone.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

use field_support::{bmc, replace, scenario, tls};

#[test]
fn field_node_life_tls_bmc_password_a_replaced_machine_and_disk() {
    let (c, _work) = field_support::cluster().unwrap();
    scenario("TLS certificates renewed", || tls::renew_leaf(&c));
    scenario("TLS CA replaced", || tls::rotate_ca(&c));
    scenario("BMC password rotation", || bmc::rotate(&c));
    scenario("a replaced machine", || replace::replace(&c, true));
    scenario("a replaced data disk", || {
        replace::replace_disk(&c, "node-a")
    });
}
