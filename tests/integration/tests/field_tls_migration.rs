//! Field nodes (systemd as PID 1, the .deb, real pcs, IPMI fencing): a pair
//! installed with http URLs, as before TLS was the default, moved to https
//! by docs/operations.md's runbook while a client writes through both
//! nodes.
//!
//! The scenario is in `field_support::tls`; the Debian 12 field suite runs
//! it on its cluster, this test on a cluster of its own, to debug it alone.
//!
//! Heavy (two booted Debian nodes): run under `flock /tmp/warden-field.lock`.

#![allow(clippy::unwrap_used)]

mod field_support;

use field_support::{FieldOptions, scenario, tls};

#[test]
fn field_tls_migration_from_http_to_https() {
    let mut opts = FieldOptions::new(&field_support::suite(), std::path::Path::new(""));
    opts.tls = false;
    let (c, _work) = field_support::cluster_with(&opts).unwrap();
    scenario("http to https", || tls::http_to_https(&c));
}
