//! The restore-from-a-snapshot runbook alone, on a field cluster of its own
//! (`field_suite` runs it among the other scenarios); see
//! `field_support::restore`.

#![allow(clippy::unwrap_used)]

mod field_support;

#[test]
fn field_restore() {
    let (c, _work) = field_support::cluster().unwrap();
    field_support::restore::restore(&c);
}
